// Bounded<B>: a backend of at most N bytes, as if the device had N bytes: a limit on the total a pool holds.
#pragma once

#include <clpool/core/backend.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace clpool {

namespace detail {

// The bytes a Bounded backend and its copies hold, against their limit.
struct byte_budget {
    explicit byte_budget(std::size_t limit) noexcept : limit(limit) {}
    const std::size_t limit;
    std::atomic<std::size_t> used{0};

    // Takes n bytes if they fit under the limit. Thread-safe, never blocks.
    bool reserve(std::size_t n) noexcept {
        std::size_t now = used.load(std::memory_order_relaxed);
        do {
            if (n > limit - now) return false;  // now <= limit always: no wrap
        } while (!used.compare_exchange_weak(now, now + n, std::memory_order_relaxed));
        return true;
    }
    void give_back(std::size_t n) noexcept { used.fetch_sub(n, std::memory_order_relaxed); }
};

// B's memory, counted against a budget until it is freed. Derived from B's
// memory type, so a handle's buffer() is still one (a Bounded<OpenCLBackend>
// handle's buffer() binds to const cl::Buffer&). Move-only: a copy would
// count the bytes twice.
template <class M>
class bounded_memory : public M {
public:
    bounded_memory() noexcept = default;
    bounded_memory(M m, std::shared_ptr<byte_budget> budget, std::size_t bytes) noexcept
        : M(std::move(m)), budget_(std::move(budget)), bytes_(bytes) {}
    bounded_memory(bounded_memory&& o) noexcept
        : M(std::move(static_cast<M&>(o))), budget_(std::move(o.budget_)), bytes_(std::exchange(o.bytes_, 0)) {}
    bounded_memory& operator=(bounded_memory&& o) noexcept {
        if (this != &o) {
            release();
            static_cast<M&>(*this) = std::move(static_cast<M&>(o));
            budget_ = std::move(o.budget_);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    bounded_memory(const bounded_memory&) = delete;
    bounded_memory& operator=(const bounded_memory&) = delete;
    ~bounded_memory() { release(); }

private:
    // The memory first, then its bytes: the budget never counts less than is held.
    void release() noexcept {
        static_cast<M&>(*this) = M{};
        if (budget_ && bytes_) budget_->give_back(bytes_);
        budget_.reset();
        bytes_ = 0;
    }
    std::shared_ptr<byte_budget> budget_;
    std::size_t bytes_ = 0;
};

// B's event members, where B declares BackendAbility::events.
template <class B, bool = backend_declares<B, BackendAbility::events>>
struct bounded_events {};
template <class B>
struct bounded_events<B, true> {
    using event_type = typename B::event_type;
    static bool event_complete(const event_type& e) noexcept { return B::event_complete(e); }
    static void wait_for(const event_type* events, std::size_t count) noexcept { B::wait_for(events, count); }
};

// B's sub-range members (SubAllocated<Bounded<B>>), where B has them.
template <class B, bool = requires { typename B::sub_memory_type; }>
struct bounded_views {};
template <class B>
struct bounded_views<B, true> {
    using sub_memory_type = typename B::sub_memory_type;
    static constexpr bool views_are_free = [] {
        if constexpr (requires { B::views_are_free; }) return static_cast<bool>(B::views_are_free);
        else return false;
    }();
};

}  // namespace detail

// Wraps a backend B so that the memory it holds at once, in all (a pool's
// buffers in use, cached and pending; an arena's segments), never exceeds
// `limit` bytes: an allocation past it is AllocStatus::out_of_memory, as a
// full device's would be, so the pool gives its cache back, retries once, then
// throws clpool::out_of_memory with its report. A device of `limit` bytes, for
// a hard bound on a pool or for tests of the out-of-memory path.
//
//   clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, clpool::SingleMutex,
//                clpool::Bounded<clpool::OpenCLBackend>>
//       pool(clpool::Bounded(clpool::OpenCLBackend(context), 256 << 20));
//
// An arena bounds its parent: SubAllocated<Bounded<B>> counts whole segments.
// Copies of one Bounded share its limit (and what it holds), so pools made
// from one Bounded value are bounded together; give each pool its own value
// for a limit each. The memory is B's, counted until freed; handle.buffer()
// is B's memory type (derived). Thread-safe as B is.
template <class B>
class Bounded : public detail::bounded_events<B>, public detail::bounded_views<B> {
    static_assert(!backend_declares<B, BackendAbility::sub_allocates>,
                  "clpool::Bounded<SubAllocated<B>>: bound the arena's parent instead, SubAllocated<Bounded<B>>, "
                  "which counts its segments");

public:
    using memory_type = detail::bounded_memory<typename B::memory_type>;
    // B's abilities (events, abandon, free_waits_for_events): each forwarded to B.
    static constexpr BackendAbilities abilities = detail::declared_abilities<B>();
    // The native code of an out-of-memory past the limit: OpenCL's
    // CL_MEM_OBJECT_ALLOCATION_FAILURE, which a full device returns.
    static constexpr int limit_code = -4;

    Bounded(B parent, std::size_t limit)
        : parent_(std::move(parent)), budget_(std::make_shared<detail::byte_budget>(limit)),
          name_(std::string("bounded ") + std::string(parent_.name())) {}

    std::size_t max_alloc_size() const noexcept { return parent_.max_alloc_size(); }
    bool unified_memory() const noexcept { return parent_.unified_memory(); }
    const char* name() const noexcept { return name_.c_str(); }

    Allocation<memory_type> allocate(std::size_t n, MemoryKind kind) noexcept {
        if (!budget_->reserve(n)) return {memory_type(), AllocStatus::out_of_memory, limit_code};
        auto got = parent_.allocate(n, kind);
        if (got.status != AllocStatus::ok) {
            budget_->give_back(n);
            return {memory_type(), got.status, got.native_code};
        }
        return {memory_type(std::move(got.memory), budget_, n), AllocStatus::ok, 0};
    }

    void abandon() noexcept
        requires backend_declares<B, BackendAbility::abandon>
    {
        parent_.abandon();
    }

    // For SubAllocated<Bounded<B>>: B's views of a segment.
    std::size_t sub_alignment() const noexcept
        requires requires { typename B::sub_memory_type; }
    {
        return parent_.sub_alignment();
    }
    auto sub_range(const memory_type& segment, std::size_t offset, std::size_t n) noexcept
        requires requires { typename B::sub_memory_type; }
    {
        return parent_.sub_range(segment, offset, n);
    }
    auto whole_range(const memory_type& m, std::size_t n) noexcept
        requires requires { typename B::sub_memory_type; }
    {
        return parent_.whole_range(m, n);
    }

    // The limit, and the bytes held now by this backend and its copies.
    std::size_t limit() const noexcept { return budget_->limit; }
    std::size_t held() const noexcept { return budget_->used.load(std::memory_order_relaxed); }
    const B& parent() const noexcept { return parent_; }
    B& parent() noexcept { return parent_; }

private:
    B parent_;
    std::shared_ptr<detail::byte_budget> budget_;
    std::string name_;
};

}  // namespace clpool
