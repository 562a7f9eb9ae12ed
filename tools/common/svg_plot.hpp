// LinePlot: writes an SVG line chart (one line per series, legend, axes) with no dependencies.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace clpool::tools {

// A line chart of several named series over one x axis (linear or log2) and a
// linear y axis from 0. Points of a series are drawn in the order given.
// Not thread-safe. Cost: O(points) to write.
class LinePlot {
public:
    using formatter = std::function<std::string(double)>;

    struct Series {
        std::string name;
        std::vector<std::pair<double, double>> points;
    };

    std::string title;
    std::string x_label;
    std::string y_label;
    bool log2_x = false;      // x axis in powers of two (x values must be > 0)
    bool binary_y = false;    // y grid steps in KiB/MiB/GiB multiples (byte axes)
    formatter x_format = [](double v) { return compact(v); };
    formatter y_format = [](double v) { return compact(v); };
    std::vector<Series> series;

    Series& add(std::string name) {
        series.push_back({std::move(name), {}});
        return series.back();
    }

    // Writes the whole SVG document.
    void write(std::ostream& os) const {
        constexpr double W = 900, H = 520, left = 90, right = 200, top = 50, bottom = 60;
        const double pw = W - left - right, ph = H - top - bottom;
        double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymax = 0;
        for (const auto& s : series)
            for (auto [x, y] : s.points) {
                if (log2_x && !(x > 0)) continue;
                const double tx = tx_of(x);
                xmin = std::min(xmin, tx);
                xmax = std::max(xmax, tx);
                if (std::isfinite(y)) ymax = std::max(ymax, y);
            }
        if (!(xmin <= xmax)) xmin = 0, xmax = 1;
        if (xmax == xmin) xmax = xmin + 1;
        double unit = 1;
        if (binary_y)
            while (ymax / unit >= 1024.0) unit *= 1024.0;
        const double ystep = nice_step((ymax > 0 ? ymax : 1.0) / unit) * unit;
        const double ytop = std::max(ystep, std::ceil((ymax > 0 ? ymax : 1.0) / ystep) * ystep);
        auto px = [&](double tx) { return left + (tx - xmin) / (xmax - xmin) * pw; };
        auto py = [&](double y) { return top + ph - std::clamp(y, 0.0, ytop) / ytop * ph; };

        os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
           << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 "
           << W << ' ' << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
           << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
           << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">" << escape(title)
           << "</text>\n";
        // Grid and y ticks.
        for (double y = 0; y <= ytop * 1.0000001; y += ystep) {
            os << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << num(py(y)) << "\" y2=\""
               << num(py(y)) << "\" stroke=\"#ddd\"/>\n"
               << "<text x=\"" << left - 6 << "\" y=\"" << num(py(y) + 4) << "\" text-anchor=\"end\">"
               << escape(y_format(y)) << "</text>\n";
        }
        // x ticks: every power of two that fits (thinned to at most ~12), or nice steps.
        std::vector<double> xt;
        if (log2_x) {
            const int a = static_cast<int>(std::ceil(xmin - 1e-9)), b = static_cast<int>(std::floor(xmax + 1e-9));
            const int stride = std::max(1, (b - a) / 11 + 1);
            for (int e = a; e <= b; e += stride) xt.push_back(e);
        } else {
            const double step = nice_step(xmax - xmin);
            for (double x = std::ceil(xmin / step) * step; x <= xmax * 1.0000001; x += step) xt.push_back(x);
        }
        for (double t : xt) {
            const double v = log2_x ? std::exp2(t) : t;
            os << "<line x1=\"" << num(px(t)) << "\" x2=\"" << num(px(t)) << "\" y1=\"" << top << "\" y2=\"" << top + ph
               << "\" stroke=\"#eee\"/>\n"
               << "<text x=\"" << num(px(t)) << "\" y=\"" << top + ph + 18 << "\" text-anchor=\"middle\">"
               << escape(x_format(v)) << "</text>\n";
        }
        os << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
           << "\" fill=\"none\" stroke=\"#333\"/>\n"
           << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 14 << "\" text-anchor=\"middle\">" << escape(x_label)
           << "</text>\n"
           << "<text transform=\"translate(20," << top + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
           << escape(y_label) << "</text>\n";
        for (std::size_t i = 0; i < series.size(); ++i) {
            const auto& s = series[i];
            const char* color = palette[i % std::size(palette)];
            // Dashes tell apart lines that lie on top of each other.
            const char* dash = i % 3 == 0 ? "none" : i % 3 == 1 ? "8,4" : "2,3";
            os << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" stroke-dasharray=\"" << dash
               << "\" points=\"";
            for (auto [x, y] : s.points) {
                if ((log2_x && !(x > 0)) || !std::isfinite(y)) continue;
                os << num(px(tx_of(x))) << ',' << num(py(y)) << ' ';
            }
            os << "\"/>\n";
            if (s.points.size() <= 64)  // markers where they stay readable
                for (auto [x, y] : s.points) {
                    if ((log2_x && !(x > 0)) || !std::isfinite(y)) continue;
                    os << "<circle cx=\"" << num(px(tx_of(x))) << "\" cy=\"" << num(py(y)) << "\" r=\"3\" fill=\""
                       << color << "\"/>\n";
                }
            const double ly = top + 10 + 20 * static_cast<double>(i);
            os << "<line x1=\"" << left + pw + 12 << "\" x2=\"" << left + pw + 36 << "\" y1=\"" << ly << "\" y2=\""
               << ly << "\" stroke=\"" << color << "\" stroke-width=\"3\" stroke-dasharray=\"" << dash << "\"/>\n"
               << "<text x=\"" << left + pw + 42 << "\" y=\"" << ly + 4 << "\">" << escape(s.name) << "</text>\n";
        }
        os << "</svg>\n";
    }

    // Short numbers for tick labels: 0, 2.5, 1200, 3.1e+09.
    static std::string compact(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g", v);
        return buf;
    }

    static std::string escape(const std::string& s) {
        std::string out;
        for (char c : s) {
            switch (c) {
                case '&': out += "&amp;"; break;
                case '<': out += "&lt;"; break;
                case '>': out += "&gt;"; break;
                case '"': out += "&quot;"; break;
                default: out += c;
            }
        }
        return out;
    }

private:
    static constexpr const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                              "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

    double tx_of(double x) const { return log2_x ? std::log2(x) : x; }

    static std::string num(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }

    // A 1-2-5 step giving about five grid lines up to `range`.
    static double nice_step(double range) {
        const double raw = range / 5.0;
        const double mag = std::pow(10.0, std::floor(std::log10(raw)));
        for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
            if (raw <= m * mag) return m * mag;
        return 10.0 * mag;
    }
};

}  // namespace clpool::tools
