// Shape: a reference-counted handle to one interned, immutable shape buffer (made by ShapeTrie).
#pragma once

#include <clpool/shapes/detail/shape_entry.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace clpool {

// The element type stored in a shape. Codes are fixed (they are what kernels
// read from the device mirror); 0 is never valid.
enum class ElementType : std::int64_t {
    f16 = 1,
    bf16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    boolean,
};

// Bytes per element; 0 for a value outside the enum.
constexpr std::size_t element_size(ElementType t) noexcept {
    switch (t) {
        case ElementType::i8:
        case ElementType::u8:
        case ElementType::boolean: return 1;
        case ElementType::f16:
        case ElementType::bf16:
        case ElementType::i16:
        case ElementType::u16: return 2;
        case ElementType::f32:
        case ElementType::i32:
        case ElementType::u32: return 4;
        case ElementType::f64:
        case ElementType::i64:
        case ElementType::u64: return 8;
    }
    return 0;
}

// Memory order of the extents: row-major ('c') or column-major ('f'). The
// codes are the characters, as in libnd4j's shape buffers.
enum class Order : std::int64_t { c = 'c', f = 'f' };

// The canonical buffer of a shape of rank r is 2r + 4 int64 words:
//   [0]            r
//   [1 .. r]       extents
//   [r+1 .. 2r]    strides, in elements
//   [2r+1]         ElementType code
//   [2r+2]         order code ('c' or 'f')
//   [2r+3]         element count (the product of the extents)
// Words 1 .. 2r+2 are the trie key; the count is derived.
constexpr std::size_t shape_words(std::size_t rank) noexcept { return 2 * rank + 4; }

// A handle to an interned shape. Copies share one atomic count (like
// std::shared_ptr); the last one released frees the entry and prunes the trie.
// Equal shapes interned in the same trie have the same data() pointer, so
// shapes compare by pointer (operator== does exactly that).
// Thread safety: distinct handles (copies included) may be used and dropped
// from any threads at once; one handle object is not to be mutated from two
// threads at once. Cost: copy is one relaxed atomic add; drop is one atomic
// sub, plus an epoch pin and a stripe's exclusive lock for the last one.
class Shape {
public:
    Shape() noexcept = default;
    Shape(const Shape& other) noexcept : e_(other.e_) {
        if (e_) e_->refs.fetch_add(1, std::memory_order_relaxed);
    }
    Shape(Shape&& other) noexcept : e_(std::exchange(other.e_, nullptr)) {}
    Shape& operator=(const Shape& other) noexcept {
        Shape(other).swap(*this);
        return *this;
    }
    Shape& operator=(Shape&& other) noexcept {
        Shape(std::move(other)).swap(*this);
        return *this;
    }
    ~Shape() { reset(); }

    // Drops this handle's reference now (the entry dies with the last one). Never throws.
    void reset() noexcept {
        if (auto* e = std::exchange(e_, nullptr)) {
            // acq_rel: the last releaser sees every other handle's work done.
            if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) e->on_last_release(e);
        }
    }
    void swap(Shape& other) noexcept { std::swap(e_, other.e_); }

    explicit operator bool() const noexcept { return e_ != nullptr; }

    // The canonical buffer (shape_words(rank()) words, layout above). Valid
    // while any handle to this shape lives; never written after interning.
    const std::int64_t* data() const noexcept { return e_->data(); }
    std::span<const std::int64_t> words() const noexcept { return {e_->data(), e_->words}; }
    std::size_t size_bytes() const noexcept { return std::size_t{e_->words} * sizeof(std::int64_t); }

    std::size_t rank() const noexcept { return static_cast<std::size_t>(e_->data()[0]); }
    std::span<const std::int64_t> extents() const noexcept { return {e_->data() + 1, rank()}; }
    std::span<const std::int64_t> strides() const noexcept { return {e_->data() + 1 + rank(), rank()}; }
    ElementType type() const noexcept { return static_cast<ElementType>(e_->data()[2 * rank() + 1]); }
    clpool::Order layout() const noexcept { return static_cast<clpool::Order>(e_->data()[2 * rank() + 2]); }
    std::int64_t element_count() const noexcept { return e_->data()[2 * rank() + 3]; }

    // Handles now sharing this shape (a snapshot; for tests and diagnostics).
    std::size_t use_count() const noexcept { return e_ ? e_->refs.load(std::memory_order_relaxed) : 0; }

    // Same interned entry (equal content within one trie).
    friend bool operator==(const Shape& a, const Shape& b) noexcept { return a.e_ == b.e_; }

    // For ShapeTrie and ShapeMirror: the entry behind the handle.
    detail::shape_entry* entry() const noexcept { return e_; }
    // Adopts a reference already counted for this handle.
    static Shape adopt(detail::shape_entry* e) noexcept {
        Shape s;
        s.e_ = e;
        return s;
    }

private:
    detail::shape_entry* e_ = nullptr;
};

}  // namespace clpool
