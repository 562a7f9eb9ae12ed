// shape_error: a shape the ShapeTrie cannot intern (rank too high, element count overflows, bad values).
#pragma once

#include <clpool/core/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace clpool {

// Thrown by ShapeTrie::intern for input it cannot hold. A usage_error (and so
// a std::logic_error): the caller passed a shape no tensor can have. The
// message names the offending value and the limit; why() returns the reason,
// which tells the cases apart for code.
class shape_error : public usage_error {
public:
    enum class reason : unsigned char {
        rank_too_high,      // rank above ShapeTrie::max_rank
        count_overflow,     // the product of the extents (or its size in bytes) overflows int64
        negative_extent,    // an extent below zero
        strides_mismatch,   // strides given with a length other than the rank
        bad_element_type,   // not one of clpool::ElementType
        bad_order,          // not 'c' or 'f'
        bad_buffer,  // a canonical buffer with a negative rank word, or a length or count word not matching its rank
    };

    shape_error(reason r, const std::string& what) : usage_error("clpool: shape: " + what), reason_(r) {}
    reason why() const noexcept { return reason_; }

    // Values shown by list() before the rest is only counted.
    static constexpr std::size_t list_max = 16;

    // "[2, 3, 4]": for messages. Past list_max values the rest is only
    // counted ("[v0, ..., v15, ... (K more)]"): the input may be any length
    // (a rank far above the maximum) and the message stays short.
    static std::string list(std::span<const std::int64_t> values) {
        std::string s = "[";
        const std::size_t shown = values.size() < list_max ? values.size() : list_max;
        for (std::size_t i = 0; i < shown; ++i) {
            if (i) s += ", ";
            s += std::to_string(values[i]);
        }
        if (shown < values.size()) s += ", ... (" + std::to_string(values.size() - shown) + " more)";
        return s + "]";
    }

private:
    reason reason_;
};

}  // namespace clpool
