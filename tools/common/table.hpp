// Table: aligned text columns for the tools' reports.
#pragma once

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace clpool::tools {

// Collects rows of cells and prints them with every column padded to its
// widest cell; the first column is left-aligned, the rest right-aligned
// (numbers). Not thread-safe.
class Table {
public:
    explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}

    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    std::size_t size() const noexcept { return rows_.size() - 1; }

    void print(std::ostream& os, const std::string& indent = "  ") const {
        std::vector<std::size_t> width;
        for (const auto& r : rows_) {
            if (width.size() < r.size()) width.resize(r.size(), 0);
            for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
        }
        for (std::size_t ri = 0; ri < rows_.size(); ++ri) {
            const auto& r = rows_[ri];
            os << indent;
            for (std::size_t i = 0; i < r.size(); ++i) {
                const std::string pad(width[i] - r[i].size(), ' ');
                if (i) os << "  ";
                if (i == 0) os << r[i] << (i + 1 < r.size() ? pad : "");
                else os << pad << r[i];
            }
            os << '\n';
            if (ri == 0) {
                os << indent;
                std::size_t total = 0;
                for (std::size_t i = 0; i < width.size(); ++i) total += width[i] + (i ? 2 : 0);
                os << std::string(total, '-') << '\n';
            }
        }
    }

private:
    std::vector<std::vector<std::string>> rows_;
};

}  // namespace clpool::tools
