// libFuzzer target: pool operation sequences on a counting mock backend, checked against a model after every step.
//
// The input picks a pool type (three lock policies, two bucket policies,
// capped or not) and then a stream of operations: allocate (small, medium,
// near the device limit, huge), release by each path, release with events
// (release_after), completing an event, trim, stats, a misplaced release into
// another pool, a driver failure plan, a device capacity, destroying the pool
// while handles are out. After every step the model checks: no buffer has two
// owners, no buffer comes back before its events completed, owners' bytes are
// intact, size_error exactly above the device limit, stats add up, caps hold,
// and at the end every ledger is empty (nothing leaked).
#include "../mock_backend.hpp"

#include <clpool/core/pool.hpp>
#include <clpool/policies/bucket.hpp>
#include <clpool/policies/flags.hpp>
#include <clpool/policies/limits.hpp>
#include <clpool/policies/locks.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

using namespace clpool;
using namespace clpool::test;

namespace {

#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                     \
        }                                                                                     \
    } while (0)

// An event that completes when the input says so.
struct FuzzEvent {
    std::shared_ptr<bool> done;
};

// Mock memory plus a serial number that is never reused, so a freed buffer's
// address coming back from malloc is not mistaken for the same buffer.
struct FuzzMemory {
    MockMemory mem;
    std::uint64_t serial = 0;
    std::byte* data() const noexcept { return mem.data(); }
};

class FuzzBackend {
public:
    using memory_type = FuzzMemory;
    using event_type = FuzzEvent;
    static constexpr BackendAbilities abilities = BackendAbility::events;
    static constexpr std::size_t max_alloc = std::size_t{1} << 22;

    FuzzBackend(std::shared_ptr<Ledger> ledger, std::shared_ptr<std::uint64_t> serials)
        : mock_(std::move(ledger), max_alloc), serials_(std::move(serials)) {}
    std::size_t max_alloc_size() const noexcept { return mock_.max_alloc_size(); }
    bool unified_memory() const noexcept { return false; }
    const char* name() const noexcept { return "fuzz"; }

    Allocation<FuzzMemory> allocate(std::size_t n, MemoryKind k) noexcept {
        auto r = mock_.allocate(n, k);
        if (r.status != AllocStatus::ok) return {FuzzMemory{}, r.status, r.native_code};
        return {FuzzMemory{std::move(r.memory), ++*serials_}, AllocStatus::ok, 0};
    }
    static bool event_complete(const FuzzEvent& e) noexcept { return !e.done || *e.done; }
    static void wait_for(const FuzzEvent* events, std::size_t count) noexcept {
        for (std::size_t i = 0; i < count; ++i)
            if (events[i].done) *events[i].done = true;
    }

private:
    MockBackend mock_;
    std::shared_ptr<std::uint64_t> serials_;
};
static_assert(Backend<FuzzBackend>);

// Reads the input front to back; past the end, zeros.
struct Input {
    const std::uint8_t* p;
    std::size_t n;
    bool empty() const { return n == 0; }
    std::uint8_t byte() {
        if (!n) return 0;
        --n;
        return *p++;
    }
    std::uint32_t u16() { return byte() | (std::uint32_t(byte()) << 8); }
    std::uint32_t u24() { return u16() | (std::uint32_t(byte()) << 16); }
};

template <class P>
struct Slot {
    typename P::handle h;
    std::uint64_t serial = 0;
    std::uint8_t fill = 0;
    bool orphan = false;  // its pool was destroyed
};

template <class P>
class Model {
public:
    explicit Model(typename P::limit_policy limits) : limits_(limits) { new_pool(); }

    ~Model() {
        slots_.clear();  // orphans free their own buffers
        pool_.reset();
        other_.reset();
        for (const auto& l : ledgers_) {
            FUZZ_CHECK(l->live == 0);
            FUZZ_CHECK(l->live_bytes == 0);
        }
    }

    void step(Input& in) {
        const std::uint8_t op = in.byte() % 12;
        switch (op) {
            case 0:
            case 1:
            case 2: allocate(in); break;
            case 3: release(in, 0); break;
            case 4: release(in, 1); break;
            case 5: release(in, 2); break;
            case 6: release_after(in); break;
            case 7:
                if (!events_.empty()) *events_[in.byte() % events_.size()] = true;
                break;
            case 8: trim(); break;
            case 9: misplaced(in); break;
            case 10: plan_failure(in); break;
            case 11:
                if (in.byte() % 8 == 0) destroy_pool();
                break;
        }
        check();
    }

private:
    using handle = typename P::handle;

    void new_pool() {
        ledger_ = std::make_shared<Ledger>();
        ledger_->capacity = 64 << 20;  // keeps the fuzzer's memory bounded; beyond it: out_of_memory
        ledgers_.push_back(ledger_);
        pool_ = std::make_unique<P>(FuzzBackend(ledger_, serials_), limits_);
        calls_ = 0;
        failed_ = 0;
        pending_.clear();
    }

    void destroy_pool() {
        for (auto& s : slots_) {
            if (s.orphan) continue;
            s.orphan = true;
        }
        pool_.reset();
        for (auto& s : slots_)
            if (s.orphan) FUZZ_CHECK(s.h.pool() == nullptr);
        new_pool();
    }

    std::size_t decode_size(Input& in) {
        switch (in.byte() % 6) {
            case 0: return in.byte();                                  // 0..255
            case 1: return in.u16();                                   // up to 64 KiB
            case 2: return in.u24();                                   // up to 16 MiB: some above the limit
            case 3: return FuzzBackend::max_alloc - 2 + in.byte() % 4; // both sides of the device limit
            case 4: return ~std::size_t{0} - in.byte();                // huge
            default: return (std::size_t{1} << (in.byte() % 23)) + (in.byte() % 3) - 1;  // bucket edges
        }
    }

    void allocate(Input& in) {
        const std::size_t n = decode_size(in);
        if (slots_.size() >= 24) return;
        handle h;
        try {
            h = pool_->allocate(n);
        } catch (const size_error& e) {
            FUZZ_CHECK(n > FuzzBackend::max_alloc);
            FUZZ_CHECK(e.requested() == n);
            return;
        } catch (const out_of_memory& e) {
            FUZZ_CHECK(e.requested() == n);
            ++calls_;
            ++failed_;
            return;
        }
        FUZZ_CHECK(n <= FuzzBackend::max_alloc);
        ++calls_;
        FUZZ_CHECK(h);
        FUZZ_CHECK(h.nbytes() == n);
        FUZZ_CHECK(h.bucket_size() >= n);
        FUZZ_CHECK(h.pool() == pool_.get());
        const std::uint64_t serial = h.buffer().serial;
        for (const auto& s : slots_) FUZZ_CHECK(s.serial != serial);  // two owners
        if (auto it = pending_.find(serial); it != pending_.end()) {
            for (const auto& done : it->second) FUZZ_CHECK(*done);    // reused before its events
            pending_.erase(it);
        }
        Slot<P> s{std::move(h), serial, static_cast<std::uint8_t>(++fills_), false};
        std::memset(s.h.buffer().data(), s.fill, std::min<std::size_t>(n, 512));
        slots_.push_back(std::move(s));
    }

    bool intact(const Slot<P>& s) const {
        const std::size_t n = std::min<std::size_t>(s.h.nbytes(), 512);
        for (std::size_t i = 0; i < n; ++i)
            if (s.h.buffer().data()[i] != std::byte{s.fill}) return false;
        return true;
    }

    // Takes slot i out of the model after checking its bytes.
    Slot<P> take(std::size_t i) {
        FUZZ_CHECK(intact(slots_[i]));
        Slot<P> s = std::move(slots_[i]);
        slots_.erase(slots_.begin() + static_cast<std::ptrdiff_t>(i));
        return s;
    }

    void release(Input& in, int how) {
        if (slots_.empty()) return;
        Slot<P> s = take(in.byte() % slots_.size());
        if (how == 0) {
            s.h.release();
            s.h.release();  // double release: harmless
        } else if (how == 1 && !s.orphan) {
            FUZZ_CHECK(pool_->release(s.h));
            FUZZ_CHECK(!s.h);
            FUZZ_CHECK(pool_->release(s.h));  // an empty handle: nothing to do
        } else if (how == 1) {
            FUZZ_CHECK(!pool_->release(s.h));  // an orphan is not the new pool's
            FUZZ_CHECK(s.h);
        } else {
            s.h = handle();  // move-assign releases
        }
    }  // whatever is left releases in the destructor

    void release_after(Input& in) {
        if (slots_.empty()) return;
        Slot<P> s = take(in.byte() % slots_.size());
        const std::size_t count = 1 + in.byte() % 3;
        std::vector<FuzzEvent> events;
        std::vector<std::shared_ptr<bool>> flags;
        for (std::size_t i = 0; i < count; ++i) {
            auto done = std::make_shared<bool>(in.byte() % 4 == 0);  // some already complete
            events.push_back({done});
            flags.push_back(done);
            if (events_.size() < 64) events_.push_back(done);
        }
        if (!s.orphan) pending_[s.serial] = flags;
        s.h.release_after(events.data(), events.size());
        FUZZ_CHECK(!s.h);
    }

    void trim() {
        const auto before = pool_->stats();
        const std::size_t freed = pool_->trim();
        FUZZ_CHECK(freed == before.bytes_cached + before.bytes_pending);
        const auto after = pool_->stats();
        FUZZ_CHECK(after.bytes_cached == 0);
        FUZZ_CHECK(after.bytes_pending == 0);
        FUZZ_CHECK(after.bytes_in_use == before.bytes_in_use);
        pending_.clear();  // those buffers are gone; serials never repeat
    }

    void misplaced(Input& in) {
        if (!other_) other_ = std::make_unique<P>(FuzzBackend(ledger_other_, serials_), limits_);
        auto h = other_->allocate(in.byte());
        FUZZ_CHECK(!pool_->release(h));  // not this pool's: refused, untouched
        FUZZ_CHECK(h);
        FUZZ_CHECK(h.pool() == other_.get());
        FUZZ_CHECK(other_->release(h));
        FUZZ_CHECK(!h);
    }

    void plan_failure(Input& in) {
        const std::uint8_t b = in.byte();
        ledger_->fail_from = ledger_->attempts.load() + (b & 3);
        ledger_->fail_count = (b >> 2) & 3;  // 2 or more: the retry fails too
    }

    void check() {
        const auto s = pool_->stats();
        FUZZ_CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
        FUZZ_CHECK(s.bytes_in_use >= s.bytes_requested);
        FUZZ_CHECK(s.hits + s.misses == calls_);
        FUZZ_CHECK(s.failed_allocations == failed_);
        FUZZ_CHECK(static_cast<std::uint64_t>(ledger_->attempts.load()) == s.misses + s.oom_retries);
        FUZZ_CHECK(s.misses == static_cast<std::uint64_t>(ledger_->allocations.load()) + s.failed_allocations);
        FUZZ_CHECK(s.bytes_allocated == static_cast<std::size_t>(ledger_->live_bytes.load()));
        std::size_t in_use = 0, requested = 0;
        for (const auto& slot : slots_) {
            if (slot.orphan) continue;
            in_use += slot.h.bucket_size();
            requested += slot.h.nbytes();
        }
        FUZZ_CHECK(s.bytes_in_use == in_use);
        FUZZ_CHECK(s.bytes_requested == requested);
        if constexpr (std::derived_from<typename P::limit_policy, Capped>) {
            FUZZ_CHECK(s.bytes_cached + s.bytes_pending <= limits_.max_bytes);
            for (const auto& b : s.buckets) FUZZ_CHECK(b.cached_buffers + b.pending_buffers <= limits_.max_per_bucket);
        }
        for (const auto& slot : slots_) FUZZ_CHECK(intact(slot));
    }

    typename P::limit_policy limits_;
    std::shared_ptr<std::uint64_t> serials_ = std::make_shared<std::uint64_t>(0);
    std::vector<std::shared_ptr<Ledger>> ledgers_;
    std::shared_ptr<Ledger> ledger_;
    std::shared_ptr<Ledger> ledger_other_ = [this] {
        auto l = std::make_shared<Ledger>();
        ledgers_.push_back(l);
        return l;
    }();
    std::vector<Slot<P>> slots_;  // declared after the ledgers: handles go first
    std::unique_ptr<P> pool_;
    std::unique_ptr<P> other_;
    std::map<std::uint64_t, std::vector<std::shared_ptr<bool>>> pending_;  // serial -> its release events
    std::vector<std::shared_ptr<bool>> events_;
    std::uint64_t calls_ = 0, failed_ = 0;
    unsigned fills_ = 0;
};

template <class P>
void run(Input in, typename P::limit_policy limits) {
    Model<P> model(limits);
    for (int steps = 0; !in.empty() && steps < 4096; ++steps) model.step(in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Input in{data, size};
    const std::uint8_t kind = in.byte();
    switch (kind % 4) {
        case 0: run<Pool<PowerOfTwoBuckets, DeviceLocal, Unlimited, NoLock, FuzzBackend>>(in, {}); break;
        case 1: run<Pool<FixedSetBuckets, HostPinned, Unlimited, SingleMutex, FuzzBackend>>(in, {}); break;
        default: {
            // Caps from the input: up to 4 MiB and 0..7 per bucket.
            const std::size_t bytes = std::size_t{in.u16()} << 6, per_bucket = in.byte() % 8;
            if (kind % 4 == 2)
                run<Pool<PowerOfTwoBuckets, DeviceLocal, Capped, Striped<4>, FuzzBackend>>(in,
                                                                                           Capped(bytes, per_bucket));
            else
                run<Pool<FixedSetBuckets, IntegratedAware, Capped, NoLock, FuzzBackend>>(in, Capped(bytes, per_bucket));
        }
    }
    return 0;
}
