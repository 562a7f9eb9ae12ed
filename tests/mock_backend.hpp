// MockBackend: a counting backend for tests that records every allocation and can fail on demand.
#pragma once

#include <clpool/core/backend.hpp>
#include <clpool/backends/host.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace clpool::test {

struct Ledger;

// Every Ledger alive, numbered in the order they were made: after each test case (and each
// subcase pass), tests/ledger_check.cpp checks that the ledgers made during it have no
// allocation live, so every test that uses a MockBackend also checks that nothing leaked.
class LedgerList {
public:
    static LedgerList& instance() {
        static auto* list = new LedgerList;  // never destroyed: a static Ledger may outlive it
        return *list;
    }
    std::uint64_t add(const Ledger* l) {
        std::lock_guard g(m_);
        live_.push_back({l, next_});
        return next_++;
    }
    void remove(const Ledger* l) noexcept {
        std::lock_guard g(m_);
        std::erase_if(live_, [l](const auto& e) { return e.first == l; });
    }
    std::uint64_t next_serial() const {
        std::lock_guard g(m_);
        return next_;
    }
    // f(const Ledger&) for each ledger alive that was made at or after `serial`.
    template <class F>
    void for_each_since(std::uint64_t serial, F f) const {
        std::lock_guard g(m_);
        for (const auto& [l, s] : live_)
            if (s >= serial) f(*l);
    }

private:
    mutable std::mutex m_;
    std::vector<std::pair<const Ledger*, std::uint64_t>> live_;
    std::uint64_t next_ = 0;
};

// Shared between a MockBackend and the test, so the test can check, after the
// pool is gone, that every buffer came back.
struct Ledger {
    std::atomic<long> live{0};            // allocations not yet freed
    std::atomic<long> allocations{0};     // successful allocations
    std::atomic<long> attempts{0};        // allocate() calls
    std::atomic<long> fail_from{-1};      // attempt index from which to fail (-1: never)
    std::atomic<long> fail_count{0};      // how many attempts to fail from there
    std::atomic<long> fail_every{0};      // fail every n-th attempt (0: never)
    std::atomic<long> live_bytes{0};
    std::atomic<long> capacity{-1};       // bytes the "device" has (-1: unlimited)
    std::atomic<bool> fail_as_driver_error{false};  // scripted failures: AllocStatus::failed, not out_of_memory
    // SubAllocated<MockBackend>: what sub_alignment() reports, and whether sub_range() fails.
    std::atomic<std::size_t> sub_alignment{64};
    std::atomic<bool> fail_sub_ranges{false};
    std::atomic<long> sub_ranges{0};  // sub_range() calls
    std::atomic<long> live_views{0};  // views sub_range() made, not yet destroyed (kept idle ones too)
    std::atomic<long> live_views_at_sub_range{0};  // live_views when sub_range() was last called

    Ledger() { LedgerList::instance().add(this); }
    ~Ledger() { LedgerList::instance().remove(this); }
    Ledger(const Ledger&) = delete;
    Ledger& operator=(const Ledger&) = delete;
};

// Host memory that tells the ledger when it is freed.
class MockMemory {
public:
    MockMemory() = default;
    MockMemory(HostMemory m, std::shared_ptr<Ledger> l) : mem_(std::move(m)), ledger_(std::move(l)) {}
    MockMemory(MockMemory&&) noexcept = default;
    MockMemory& operator=(MockMemory&& o) noexcept {
        if (this != &o) {
            reset();
            mem_ = std::move(o.mem_);
            ledger_ = std::move(o.ledger_);
        }
        return *this;
    }
    ~MockMemory() { reset(); }
    std::byte* data() const noexcept { return mem_.data(); }
    std::size_t size() const noexcept { return mem_.size(); }

private:
    void reset() noexcept {
        if (ledger_ && mem_) {
            --ledger_->live;
            ledger_->live_bytes -= static_cast<long>(mem_.size());
        }
        mem_ = HostMemory{};
        ledger_.reset();
    }
    HostMemory mem_;
    std::shared_ptr<Ledger> ledger_;
};

// A view of a mock segment that counts itself live in the ledger, so a test
// sees SubAllocated's kept idle views and when they are released.
class MockRange : public HostRange {
public:
    MockRange() noexcept = default;
    MockRange(std::byte* data, std::size_t n, Ledger* ledger) noexcept : HostRange(data, n), ledger_(ledger) {
        if (ledger_) ++ledger_->live_views;
    }
    MockRange(MockRange&& o) noexcept
        : HostRange(std::move(static_cast<HostRange&>(o))), ledger_(std::exchange(o.ledger_, nullptr)) {}
    MockRange& operator=(MockRange&& o) noexcept {
        if (this != &o) {
            drop();
            static_cast<HostRange&>(*this) = std::move(static_cast<HostRange&>(o));
            ledger_ = std::exchange(o.ledger_, nullptr);
        }
        return *this;
    }
    MockRange(const MockRange&) = delete;
    MockRange& operator=(const MockRange&) = delete;
    ~MockRange() { drop(); }

private:
    void drop() noexcept {
        if (ledger_) --ledger_->live_views;
        ledger_ = nullptr;
    }
    Ledger* ledger_ = nullptr;  // the segment's MockMemory keeps the ledger alive past its views
};

class MockBackend {
public:
    using memory_type = MockMemory;
    using sub_memory_type = MockRange;  // SubAllocated<MockBackend>'s blocks
    static constexpr BackendAbilities abilities = BackendAbility::none;
    static constexpr int oom_code = -4;  // CL_MEM_OBJECT_ALLOCATION_FAILURE's value
    static constexpr int failed_code = -61;  // CL_INVALID_BUFFER_SIZE's value

    explicit MockBackend(std::shared_ptr<Ledger> ledger = std::make_shared<Ledger>(),
                         std::size_t max_alloc = std::size_t{1} << 40, bool unified = false)
        : ledger_(ledger ? std::move(ledger) : std::make_shared<Ledger>()), host_(64, max_alloc), unified_(unified) {}

    std::size_t max_alloc_size() const noexcept { return host_.max_alloc_size(); }
    bool unified_memory() const noexcept { return unified_; }
    const char* name() const noexcept { return "mock"; }
    Ledger& ledger() const noexcept { return *ledger_; }

    Allocation<MockMemory> allocate(std::size_t n, MemoryKind k) noexcept {
        const long attempt = ledger_->attempts++;
        const long from = ledger_->fail_from.load();
        const long every = ledger_->fail_every.load();
        const bool scripted = (from >= 0 && attempt >= from && attempt < from + ledger_->fail_count.load()) ||
                              (every > 0 && (attempt + 1) % every == 0);
        if (scripted && ledger_->fail_as_driver_error.load()) return {MockMemory{}, AllocStatus::failed, failed_code};
        if (scripted) return {MockMemory{}, AllocStatus::out_of_memory, oom_code};
        // The capacity is reserved atomically, so threads together never exceed it.
        const long bytes = static_cast<long>(n);
        const long cap = ledger_->capacity.load();
        if (cap >= 0 && ledger_->live_bytes.fetch_add(bytes) + bytes > cap) {
            ledger_->live_bytes -= bytes;
            return {MockMemory{}, AllocStatus::out_of_memory, oom_code};
        }
        auto r = host_.allocate(n, k);
        if (r.status != AllocStatus::ok) {
            if (cap >= 0) ledger_->live_bytes -= bytes;
            return {MockMemory{}, r.status, r.native_code};
        }
        ++ledger_->live;
        ++ledger_->allocations;
        if (cap < 0) ledger_->live_bytes += bytes;
        return {MockMemory{std::move(r.memory), ledger_}, AllocStatus::ok, 0};
    }

    // For SubAllocated: scripted by the ledger (alignment, failing views).
    std::size_t sub_alignment() const noexcept { return ledger_->sub_alignment.load(); }
    Allocation<MockRange> sub_range(const MockMemory& segment, std::size_t offset, std::size_t n) noexcept {
        ++ledger_->sub_ranges;
        ledger_->live_views_at_sub_range = ledger_->live_views.load();
        if (ledger_->fail_sub_ranges.load()) return {MockRange{}, AllocStatus::failed, failed_code};
        return {MockRange(segment.data() + offset, n, ledger_.get()), AllocStatus::ok, 0};
    }
    static MockRange whole_range(const MockMemory& m, std::size_t n) noexcept {
        return MockRange(m.data(), n, nullptr);
    }

private:
    std::shared_ptr<Ledger> ledger_;
    HostBackend host_;
    bool unified_;
};

static_assert(Backend<MockBackend>);

}  // namespace clpool::test
