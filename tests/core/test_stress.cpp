// Stress: 8 threads, a million operations or more per pool, every lock policy, on mock, host and OpenCL backends.
//
// Built as its own binary (clpool_stress), not in clpool_tests: ctest runs it
// at CLPOOL_STRESS_SCALE=0.02 (also under ASan and TSan), .ci/steps.d/45-stress.sh
// at full scale. docs/RELIABILITY.md has the numbers and why OpenCL runs fewer.
//
// Counts: 1,000,000 allocations (each with its release: 2M operations) per
// mock and host pool; 500,000 allocations (1M operations) per OpenCL pool,
// where every stamp and check is a driver call (200,000 for SVM and offset blocks).
//
// Two owners of one buffer are caught two ways: every owner claims the
// buffer's identity in a registry (a second claim fails at once), and every
// owner stamps its own token through the buffer and checks it is still there
// just before it releases (a second owner's stamps would overwrite it).
#include "pool_factory.hpp"

#include <clpool/policies/thread_cached.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <vector>

using namespace clpool;
using namespace clpool::test;

namespace {

constexpr int thread_count = 8;
constexpr std::size_t stamp_stride = 4096;  // a token at the head, every 4 KiB, and the tail

// CLPOOL_STRESS_SCALE: a factor on every operation count (1 if unset). A value
// that is not a positive number up to 100 fails the run rather than shrinking it.
double scale() {
    static const double s = [] {
        const char* text = std::getenv("CLPOOL_STRESS_SCALE");
        if (!text) return 1.0;
        char* end = nullptr;
        const double v = std::strtod(text, &end);
        if (end == text || *end != '\0' || !(v > 0.0) || v > 100.0)
            throw std::invalid_argument(std::string("CLPOOL_STRESS_SCALE='") + text + "' is not a number in (0, 100]");
        return v;
    }();
    return s;
}
std::size_t scaled(double n) { return std::max<std::size_t>(thread_count, static_cast<std::size_t>(n * scale())); }

// The buffers currently owned, by identity. claim() fails if someone already
// owns it: the pool handed one buffer to two owners. Sharded so the checker
// does not serialise the threads it is checking.
class OwnerRegistry {
public:
    bool claim(const void* id) {
        auto& s = shard(id);
        std::lock_guard lock(s.mutex);
        return s.live.insert(id).second;
    }
    bool unclaim(const void* id) {
        auto& s = shard(id);
        std::lock_guard lock(s.mutex);
        return s.live.erase(id) == 1;
    }

private:
    struct alignas(64) Shard {
        std::mutex mutex;
        std::unordered_set<const void*> live;
    };
    Shard& shard(const void* id) { return shards_[(reinterpret_cast<std::uintptr_t>(id) >> 6) % shards_.size()]; }
    std::array<Shard, 64> shards_;
};

// Offsets of the stamps in an n-byte region: 0, every stride, and n - 8.
std::vector<std::size_t> stamp_offsets(std::size_t n) {
    std::vector<std::size_t> at;
    if (n < 8) return n ? std::vector<std::size_t>{0} : at;
    for (std::size_t o = 0; o + 8 <= n; o += stamp_stride) at.push_back(o);
    if (at.back() != n - 8) at.push_back(n - 8);
    return at;
}
void stamp_into(std::byte* p, std::size_t n, std::uint64_t token) {
    for (std::size_t o : stamp_offsets(n)) std::memcpy(p + o, &token, std::min<std::size_t>(8, n - o));
}
bool stamped(const std::byte* p, std::size_t n, std::uint64_t token) {
    for (std::size_t o : stamp_offsets(n))
        if (std::memcmp(p + o, &token, std::min<std::size_t>(8, n - o)) != 0) return false;
    return true;
}

// How one thread writes and checks its stamps: straight into host memory.
struct HostAccess {
    template <class M>
    void stamp(const M& m, std::size_t n, std::uint64_t token) {
        stamp_into(m.data(), n, token);
    }
    template <class M>
    bool check(const M& m, std::size_t n, std::uint64_t token) {
        return stamped(m.data(), n, token);
    }
};

#ifdef CLPOOL_HAS_OPENCL
cl::CommandQueue own_queue() {
    auto& env = OpenCLEnv::get();
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(env.context(), env.device(), 0, &err);
    REQUIRE(err == CL_SUCCESS);
    return cl::CommandQueue(q, false);
}

// Device-local buffers: the head and tail tokens by enqueueWrite/ReadBuffer
// on the thread's own in-order queue (the blocking call ends the pair).
struct DeviceAccess {
    cl::CommandQueue queue = own_queue();
    void stamp(const cl::Buffer& b, std::size_t n, std::uint64_t token) {
        if (n == 0) return;
        const std::size_t head = std::min<std::size_t>(8, n);
        cl_int e1 = clEnqueueWriteBuffer(queue(), b(), CL_FALSE, 0, head, &token, 0, nullptr, nullptr);
        cl_int e2 = n >= 16 ? clEnqueueWriteBuffer(queue(), b(), CL_TRUE, n - 8, 8, &token, 0, nullptr, nullptr)
                            : clFinish(queue());
        if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) throw std::runtime_error("stamp write failed");
    }
    bool check(const cl::Buffer& b, std::size_t n, std::uint64_t token) {
        if (n == 0) return true;
        std::uint64_t head = 0, tail = token;
        const std::size_t hn = std::min<std::size_t>(8, n);
        cl_int e1 = clEnqueueReadBuffer(queue(), b(), CL_FALSE, 0, hn, &head, 0, nullptr, nullptr);
        cl_int e2 = n >= 16 ? clEnqueueReadBuffer(queue(), b(), CL_TRUE, n - 8, 8, &tail, 0, nullptr, nullptr)
                            : clFinish(queue());
        if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) throw std::runtime_error("stamp read failed");
        return std::memcmp(&head, &token, hn) == 0 && tail == token;
    }
};

// Host-pinned buffers: mapped, every stamp written and checked as on the
// host, unmapped; the unmap is waited for before the buffer changes hands.
struct PinnedAccess {
    cl::CommandQueue queue = own_queue();
    template <class F>
    bool mapped(const cl::Buffer& b, std::size_t n, cl_map_flags flags, F&& f) {
        if (n == 0) return true;
        cl_int err = CL_SUCCESS;
        void* p = clEnqueueMapBuffer(queue(), b(), CL_TRUE, flags, 0, n, 0, nullptr, nullptr, &err);
        if (err != CL_SUCCESS) throw std::runtime_error("map failed: " + std::to_string(err));
        const bool ok = f(static_cast<std::byte*>(p));
        cl_event done = nullptr;
        err = clEnqueueUnmapMemObject(queue(), b(), p, 0, nullptr, &done);
        if (err == CL_SUCCESS) err = clWaitForEvents(1, &done);
        if (done) clReleaseEvent(done);
        if (err != CL_SUCCESS) throw std::runtime_error("unmap failed: " + std::to_string(err));
        return ok;
    }
    void stamp(const cl::Buffer& b, std::size_t n, std::uint64_t token) {
        mapped(b, n, CL_MAP_WRITE, [&](std::byte* p) {
            stamp_into(p, n, token);
            return true;
        });
    }
    bool check(const cl::Buffer& b, std::size_t n, std::uint64_t token) {
        return mapped(b, n, CL_MAP_READ, [&](std::byte* p) { return stamped(p, n, token); });
    }
};

// SVM blocks: head and tail tokens by clEnqueueSVMMemcpy on the thread's own queue.
struct SVMAccess {
    cl::CommandQueue queue = own_queue();
    void stamp(const SVMSpan& m, std::size_t n, std::uint64_t token) {
        if (n == 0) return;
        auto* p = static_cast<char*>(m.get());
        cl_int e1 = clEnqueueSVMMemcpy(queue(), CL_FALSE, p, &token, std::min<std::size_t>(8, n), 0, nullptr, nullptr);
        cl_int e2 = n >= 16 ? clEnqueueSVMMemcpy(queue(), CL_TRUE, p + n - 8, &token, 8, 0, nullptr, nullptr)
                            : clFinish(queue());
        if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) throw std::runtime_error("SVM stamp write failed");
    }
    bool check(const SVMSpan& m, std::size_t n, std::uint64_t token) {
        if (n == 0) return true;
        auto* p = static_cast<char*>(m.get());
        std::uint64_t head = 0, tail = token;
        const std::size_t hn = std::min<std::size_t>(8, n);
        cl_int e1 = clEnqueueSVMMemcpy(queue(), CL_FALSE, &head, p, hn, 0, nullptr, nullptr);
        cl_int e2 = n >= 16 ? clEnqueueSVMMemcpy(queue(), CL_TRUE, &tail, p + n - 8, 8, 0, nullptr, nullptr)
                            : clFinish(queue());
        if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) throw std::runtime_error("SVM stamp read failed");
        return std::memcmp(&head, &token, hn) == 0 && tail == token;
    }
};

// OffsetArenaPool's blocks: the same tokens written into the segment at the block's offset.
struct OffsetAccess {
    cl::CommandQueue queue = own_queue();
    void stamp(const Carved<OpenCLOffsetBackend>& m, std::size_t n, std::uint64_t token) {
        if (n == 0) return;
        const std::size_t at = m.offset();
        cl_int e1 = clEnqueueWriteBuffer(queue(), m.segment()(), CL_FALSE, at, std::min<std::size_t>(8, n), &token, 0,
                                         nullptr, nullptr);
        cl_int e2 =
            n >= 16 ? clEnqueueWriteBuffer(queue(), m.segment()(), CL_TRUE, at + n - 8, 8, &token, 0, nullptr, nullptr)
                    : clFinish(queue());
        if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) throw std::runtime_error("offset stamp write failed");
    }
    bool check(const Carved<OpenCLOffsetBackend>& m, std::size_t n, std::uint64_t token) {
        if (n == 0) return true;
        const std::size_t at = m.offset();
        std::uint64_t head = 0, tail = token;
        const std::size_t hn = std::min<std::size_t>(8, n);
        cl_int e1 = clEnqueueReadBuffer(queue(), m.segment()(), CL_FALSE, at, hn, &head, 0, nullptr, nullptr);
        cl_int e2 =
            n >= 16 ? clEnqueueReadBuffer(queue(), m.segment()(), CL_TRUE, at + n - 8, 8, &tail, 0, nullptr, nullptr)
                    : clFinish(queue());
        if (e1 != CL_SUCCESS || e2 != CL_SUCCESS) throw std::runtime_error("offset stamp read failed");
        return std::memcmp(&head, &token, hn) == 0 && tail == token;
    }
};
#endif

// A NoLock pool may be used by one thread at a time: the harness gives it an
// external mutex around every pool call (allocate, release, trim, stats), so
// eight threads still share it and hand buffers to each other. The stamps are
// written outside that lock. Locking pools get no external lock.
template <class P>
class Guard {
public:
    std::unique_lock<std::mutex> lock() {
        if constexpr (std::is_same_v<typename P::lock_policy, NoLock>) return std::unique_lock(mutex_);
        return {};  // owns no mutex
    }

private:
    std::mutex mutex_;
};

struct Failures {
    std::atomic<long> double_owner{0};   // claim() of a buffer someone owns
    std::atomic<long> lost_owner{0};     // unclaim() of a buffer nobody owned
    std::atomic<long> stamp_broken{0};   // a token overwritten while owned
    std::atomic<long> misuse_refused{0}; // pool.release(h) said "not mine" for its own handle
    std::atomic<long> too_small{0};      // bucket_size() < nbytes()
    std::atomic<long> inconsistent{0};   // a stats snapshot that does not add up
    std::atomic<long> over_cap{0};       // a snapshot above the byte or per-bucket cap
    std::atomic<long> exceptions{0};
    std::string first_exception;
    std::mutex m;
};

template <class P>
struct Owned {
    typename P::handle h;
    std::uint64_t token = 0;
};

// Mixed sizes: empty, tiny, both sides of bucket edges of both bucket
// policies, and a few large ones.
constexpr std::size_t sizes[] = {0,    1,    7,    8,     255,   256,   257,   1000,  1024,   1025,
                                 4095, 4096, 4097, 16384, 16385, 65535, 65536, 65537, 100000, 262145};

template <class P>
void check_snapshot(const P& pool, Failures& f) {
    const auto s = pool.stats();
    if (s.bytes_allocated != s.bytes_in_use + s.bytes_cached + s.bytes_pending) ++f.inconsistent;
    if (s.bytes_in_use < s.bytes_requested) ++f.inconsistent;
    if constexpr (std::derived_from<typename P::limit_policy, Capped>) {
        const auto& cap = pool.limits();
        if (s.bytes_cached + s.bytes_pending > cap.max_bytes) ++f.over_cap;
        for (const auto& b : s.buckets)
            if (b.cached_buffers + b.pending_buffers > cap.max_per_bucket) ++f.over_cap;
    }
}

// Runs thread_count threads, together `allocations` allocations on `pool`.
// Each thread keeps up to 8 buffers; releases pick a random one, by one of
// the four release paths; 1 in 32 buffers goes to a shared mailbox and is
// released by whichever thread takes it. Thread 0 snapshots the stats every
// 512 steps and trims every 8192.
template <class P, class Access, class MakeAccess>
void hammer(P& pool, std::size_t allocations, MakeAccess make_access, Failures& f) {
    OwnerRegistry owners;
    Guard<P> guard;
    std::mutex mailbox_mutex;
    std::deque<Owned<P>> mailbox;
    const std::size_t per_thread = allocations / thread_count;

    auto body = [&](int t) {
        Access access = make_access();
        std::minstd_rand rng(static_cast<unsigned>(t) * 7919u + 1u);
        std::vector<Owned<P>> held;
        std::uint64_t serial = 0;

        auto give_back = [&](Owned<P>& o) {
            if (!access.check(o.h.buffer(), o.h.nbytes(), o.token)) ++f.stamp_broken;
            if (!owners.unclaim(identity(o.h.buffer()))) ++f.lost_owner;
            auto l = guard.lock();
            switch (rng() % 4) {
                case 0: o.h.release(); break;
                case 1:
                    if (!pool.release(o.h)) {
                        ++f.misuse_refused;
                        o.h.release();
                    }
                    break;
                case 2: o.h = typename P::handle(); break;        // move-assign an empty handle
                default: {
                    auto gone = std::move(o.h);
                } break;   // destructor
            }
        };

        for (std::size_t done = 0; done < per_thread;) {
            const bool can_take = held.size() < 8;
            if (can_take && (held.empty() || rng() % 2)) {
                const std::size_t n = sizes[rng() % std::size(sizes)];
                Owned<P> o;
                {
                    auto l = guard.lock();
                    o.h = pool.allocate(n);
                }
                ++done;
                if (o.h.bucket_size() < n) ++f.too_small;
                if (!owners.claim(identity(o.h.buffer()))) ++f.double_owner;
                o.token = (std::uint64_t(t + 1) << 48) | ++serial;
                access.stamp(o.h.buffer(), n, o.token);
                if (rng() % 32 == 0) {
                    std::lock_guard lock(mailbox_mutex);
                    mailbox.push_back(std::move(o));
                } else {
                    held.push_back(std::move(o));
                }
            } else {
                if (rng() % 16 == 0) {  // adopt a buffer another thread owned
                    std::unique_lock lock(mailbox_mutex);
                    if (!mailbox.empty()) {
                        Owned<P> o = std::move(mailbox.front());
                        mailbox.pop_front();
                        lock.unlock();
                        give_back(o);
                    }
                }
                if (!held.empty()) {
                    const std::size_t i = rng() % held.size();
                    give_back(held[i]);
                    held[i] = std::move(held.back());
                    held.pop_back();
                }
            }
            if (t == 0 && done % 512 == 0) {
                auto l = guard.lock();
                check_snapshot(pool, f);
                if (done % 8192 == 0) pool.trim();
            }
        }
        for (auto& o : held) give_back(o);
    };

    std::vector<std::thread> threads;
    for (int t = 0; t < thread_count; ++t)
        threads.emplace_back([&, t] {
            try {
                body(t);
            } catch (const std::exception& e) {
                ++f.exceptions;
                std::lock_guard lock(f.m);
                f.first_exception = e.what();
            }
        });
    for (auto& th : threads) th.join();

    Access access = make_access();
    for (auto& o : mailbox) {
        if (!access.check(o.h.buffer(), o.h.nbytes(), o.token)) ++f.stamp_broken;
        if (!owners.unclaim(identity(o.h.buffer()))) ++f.lost_owner;
        o.h.release();
    }
    check_snapshot(pool, f);
}

void report(const Failures& f) {
    INFO("first exception: " << f.first_exception);
    CHECK(f.exceptions == 0);
    CHECK(f.double_owner == 0);
    CHECK(f.lost_owner == 0);
    CHECK(f.stamp_broken == 0);
    CHECK(f.misuse_refused == 0);
    CHECK(f.too_small == 0);
    CHECK(f.inconsistent == 0);
    CHECK(f.over_cap == 0);
}

template <class P>
void check_end_state(const P& pool, std::size_t allocations) {
    const auto s = pool.stats();
    CHECK(s.bytes_in_use == 0);
    CHECK(s.bytes_requested == 0);
    CHECK(s.bytes_pending == 0);
    CHECK(s.bytes_allocated == s.bytes_cached);
    CHECK(s.hits + s.misses == allocations);
    CHECK(s.failed_allocations == 0);
    CHECK(s.hits > 0);
}

// Caps small enough that releases are evicted all the time.
const Capped stress_caps{1 << 20, 4};

}  // namespace

// The mock backend counts every driver allocation: at the end it must hold
// exactly what the pool says it holds, and nothing once the pool is gone.
TEST_CASE_TEMPLATE("stress: mock backend, capped, 8 threads, 1M allocations" * doctest::timeout(600), Locks, NoLock,
                   SingleMutex, Striped<4>, Striped<16>, ThreadCached<8, SingleMutex>, ThreadCached<4, Striped<4>>) {
    using P = Pool<PowerOfTwoBuckets, DeviceLocal, Capped, Locks, MockBackend>;
    auto ledger = std::make_shared<Ledger>();
    const std::size_t allocations = scaled(1'000'000) / thread_count * thread_count;
    {
        P pool(MockBackend(ledger), stress_caps);
        Failures f;
        hammer<P, HostAccess>(pool, allocations, [] { return HostAccess{}; }, f);
        report(f);
        check_end_state(pool, allocations);
        const auto s = pool.stats();
        CHECK(s.evictions > 0);  // the caps were exercised
        CHECK(s.misses == static_cast<std::uint64_t>(ledger->allocations.load()));
        CHECK(s.bytes_allocated == static_cast<std::size_t>(ledger->live_bytes.load()));
        MESSAGE("mock " << allocations << " allocations: " << s);
    }
    CHECK(ledger->live == 0);
    CHECK(ledger->live_bytes == 0);
}

TEST_CASE_TEMPLATE("stress: host backend, unlimited, 8 threads, 1M allocations" * doctest::timeout(600), Locks, NoLock,
                   SingleMutex, Striped<4>, Striped<16>, ThreadCached<8, SingleMutex>) {
    using P = Pool<FixedSetBuckets, HostPinned, Unlimited, Locks, HostBackend>;
    const std::size_t allocations = scaled(1'000'000) / thread_count * thread_count;
    P pool{HostBackend{}};
    Failures f;
    hammer<P, HostAccess>(pool, allocations, [] { return HostAccess{}; }, f);
    report(f);
    check_end_state(pool, allocations);
    MESSAGE("host " << allocations << " allocations: " << pool.stats());
}

// Blocks carved from segments: stamps at both ends of every block catch two
// blocks that overlap; at the end the driver holds exactly the segments.
TEST_CASE_TEMPLATE("stress: mock sub-allocated, capped, 8 threads" * doctest::timeout(600), Locks, SingleMutex,
                   Striped<4>, ThreadCached<8, SingleMutex>) {
    using P = Pool<ArenaBuckets, DeviceLocal, Capped, Locks, SubAllocated<MockBackend>>;
    auto ledger = std::make_shared<Ledger>();
    const std::size_t allocations = scaled(1'000'000) / thread_count * thread_count;
    {
        P pool(SubAllocated<MockBackend>(MockBackend(ledger)), stress_caps);
        Failures f;
        hammer<P, HostAccess>(pool, allocations, [] { return HostAccess{}; }, f);
        report(f);
        check_end_state(pool, allocations);
        const auto s = pool.stats();
        CHECK(s.segment_allocations == static_cast<std::uint64_t>(ledger->allocations.load()));
        CHECK(s.segment_bytes == static_cast<std::size_t>(ledger->live_bytes.load()));
        CHECK(s.segment_free_bytes + s.bytes_allocated <= s.segment_bytes);
        MESSAGE("mock sub-allocated " << allocations << " allocations: " << s << " segments=" << s.segments);
    }
    CHECK(ledger->live == 0);
    CHECK(ledger->live_bytes == 0);
}

#ifdef CLPOOL_HAS_OPENCL
// Sub-buffers of shared segments: a block that overlapped another would lose its stamps.
TEST_CASE_TEMPLATE("stress: OpenCL sub-allocated, 8 threads" * doctest::timeout(600), Locks, SingleMutex, Striped<4>) {
    using P = Pool<ArenaBuckets, DeviceLocal, Capped, Locks, SubAllocated<OpenCLBackend>>;
    const std::size_t allocations = scaled(500'000) / thread_count * thread_count;
    P pool(SubAllocated<OpenCLBackend>(OpenCLBackend(OpenCLEnv::get().context)), stress_caps);
    Failures f;
    hammer<P, DeviceAccess>(pool, allocations, [] { return DeviceAccess{}; }, f);
    report(f);
    check_end_state(pool, allocations);
    MESSAGE("opencl sub-allocated " << allocations << " allocations: " << pool.stats());
}

// SVM blocks carved by pointer arithmetic, and (segment, offset) blocks: no view guards
// them, so two blocks that overlapped would lose each other's stamps.
// 200,000 allocations each: the arena and the pool are the sub-allocated case's above; only the
// blocks' kind differs.
TEST_CASE_TEMPLATE("stress: SVM sub-allocated, 8 threads" * doctest::timeout(600), Locks, Striped<4>) {
    using P = Pool<ArenaBuckets, DeviceLocal, Capped, Locks, SubAllocated<SVMBackend>>;
    const std::size_t allocations = scaled(200'000) / thread_count * thread_count;
    P pool(SubAllocated<SVMBackend>(SVMBackend(OpenCLEnv::get().context)), stress_caps);
    Failures f;
    hammer<P, SVMAccess>(pool, allocations, [] { return SVMAccess{}; }, f);
    report(f);
    check_end_state(pool, allocations);
    CHECK(pool.stats().sub_buffers_made == 0);
    MESSAGE("svm sub-allocated " << allocations << " allocations: " << pool.stats());
}

TEST_CASE_TEMPLATE("stress: OpenCL offset blocks, 8 threads" * doctest::timeout(600), Locks,
                   ThreadCached<8, SingleMutex>) {
    using P = Pool<ArenaBuckets, DeviceLocal, Capped, Locks, SubAllocated<OpenCLOffsetBackend>>;
    const std::size_t allocations = scaled(200'000) / thread_count * thread_count;
    P pool(SubAllocated<OpenCLOffsetBackend>(OpenCLOffsetBackend(OpenCLEnv::get().context)), stress_caps);
    Failures f;
    hammer<P, OffsetAccess>(pool, allocations, [] { return OffsetAccess{}; }, f);
    report(f);
    check_end_state(pool, allocations);
    CHECK(pool.stats().sub_buffers_made == 0);
    MESSAGE("opencl offset blocks " << allocations << " allocations: " << pool.stats());
}

// Device-local pools: stamps by enqueueWrite/ReadBuffer (head and tail only).
TEST_CASE_TEMPLATE("stress: OpenCL device-local, capped, 8 threads" * doctest::timeout(600), Locks, NoLock, Striped<16>,
                   ThreadCached<8, SingleMutex>) {
    using P = Pool<PowerOfTwoBuckets, DeviceLocal, Capped, Locks, OpenCLBackend>;
    const std::size_t allocations = scaled(500'000) / thread_count * thread_count;
    P pool(OpenCLBackend(OpenCLEnv::get().context), stress_caps);
    Failures f;
    hammer<P, DeviceAccess>(pool, allocations, [] { return DeviceAccess{}; }, f);
    report(f);
    check_end_state(pool, allocations);
    MESSAGE("opencl device-local " << allocations << " allocations: " << pool.stats());
}

// Host-pinned pools: mapped, every stamp written and checked.
TEST_CASE_TEMPLATE("stress: OpenCL host-pinned, unlimited, 8 threads" * doctest::timeout(600), Locks, SingleMutex,
                   Striped<4>) {
    using P = Pool<PowerOfTwoBuckets, HostPinned, Unlimited, Locks, OpenCLBackend>;
    const std::size_t allocations = scaled(500'000) / thread_count * thread_count;
    P pool{OpenCLBackend(OpenCLEnv::get().context)};
    Failures f;
    hammer<P, PinnedAccess>(pool, allocations, [] { return PinnedAccess{}; }, f);
    report(f);
    check_end_state(pool, allocations);
    MESSAGE("opencl host-pinned " << allocations << " allocations: " << pool.stats());
}
#endif
