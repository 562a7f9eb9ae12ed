// libFuzzer target: operation sequences on pools over SubAllocated<MockBackend>, checked after every step.
//
// The input picks a pool (three lock and limit combinations, tiny segments so
// that splitting, merging, own segments and segment release all happen within
// a few operations) and then a stream of operations: allocate (small, large,
// above a segment), release, trim, failing sub-ranges on/off, a device
// capacity. After every step: no two live blocks overlap, every block keeps
// the bytes its owner wrote, the segment stats add up, and at the end the
// ledger is empty (nothing leaked).
#include "../mock_backend.hpp"

#include <clpool/backends/sub_allocated.hpp>
#include <clpool/core/pool.hpp>
#include <clpool/policies/arena_buckets.hpp>
#include <clpool/policies/flags.hpp>
#include <clpool/policies/limits.hpp>
#include <clpool/policies/locks.hpp>
#include <clpool/policies/thread_cached.hpp>

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

struct Input {
    const std::uint8_t* p;
    std::size_t n;
    bool empty() const { return n == 0; }
    std::uint8_t byte() {
        if (!n) return 0;
        --n;
        return *p++;
    }
};

ArenaOptions tiny(std::uint8_t b) {
    ArenaOptions o;
    o.granularity = std::size_t{64} << (b % 3);
    o.small_limit = 2048;
    o.small_segment = 8192;
    o.large_segment = 32768;
    o.large_limit = 16384;
    o.large_round = std::size_t{1024} << (b % 4);
    o.min_segment = (b & 16) ? 4096 : 32768;  // with 4096 the growth cap shapes the first segments
    o.growth = (b & 32) ? 0.5 : 0.125;
    o.max_free_fraction = (b & 8) ? 1.0 : 0.125;
    o.release_before_new_peak = (b & 64) == 0;
    return o;
}

template <class P>
void run(Input in, typename P::limit_policy limits) {
    auto ledger = std::make_shared<Ledger>();
    {
        P pool(SubAllocated<MockBackend>(MockBackend(ledger), tiny(in.byte())), limits);
        struct Live {
            typename P::handle h;
            std::uint8_t tag = 0;
        };
        std::vector<Live> live(16);
        std::uint8_t next_tag = 1;
        while (!in.empty()) {
            const std::uint8_t op = in.byte();
            auto& slot = live[in.byte() % live.size()];
            switch (op % 8) {
                case 0:
                case 1:
                case 2: {  // allocate: small, large, above a segment
                    const std::size_t scale = op % 3 == 0 ? 16 : op % 3 == 1 ? 256 : 2048;
                    const std::size_t n = (std::size_t{in.byte()} + 1) * scale / 4 + in.byte();
                    typename P::handle h = pool.try_allocate(n);
                    if (!h) break;  // out of the scripted capacity: nothing else may change
                    FUZZ_CHECK(h.nbytes() == n);
                    FUZZ_CHECK(h.bucket_size() >= n);
                    slot.h = std::move(h);
                    slot.tag = next_tag++;
                    std::memset(slot.h.buffer().data(), slot.tag, n);
                    break;
                }
                case 3: slot.h.release(); break;
                case 4: pool.trim(); break;
                case 5: ledger->fail_sub_ranges = (op & 16) != 0; break;
                case 6: ledger->capacity = (op & 16) ? -1 : static_cast<long>(ledger->live_bytes.load()) + 65536; break;
                default: {
                    const auto s = pool.stats();
                    FUZZ_CHECK(s.bytes_allocated == s.bytes_in_use + s.bytes_cached + s.bytes_pending);
                    break;
                }
            }
            // No two live blocks overlap, and each keeps its owner's bytes.
            std::map<const std::byte*, std::size_t> spans;
            for (const auto& l : live) {
                if (!l.h) continue;
                const auto* d = reinterpret_cast<const std::uint8_t*>(l.h.buffer().data());
                if (l.h.nbytes()) FUZZ_CHECK(d[0] == l.tag && d[l.h.nbytes() - 1] == l.tag);
                FUZZ_CHECK(spans.emplace(l.h.buffer().data(), l.h.bucket_size()).second);
            }
            const std::byte* end = nullptr;
            for (const auto& [p, n] : spans) {
                FUZZ_CHECK(end == nullptr || p >= end);
                end = p + n;
            }
            const auto s = pool.stats();
            FUZZ_CHECK(s.segment_free_bytes <= s.segment_bytes);
            FUZZ_CHECK(s.largest_free_block <= s.segment_free_bytes);
            FUZZ_CHECK(s.peak_segment_bytes >= s.segment_bytes);
            FUZZ_CHECK(s.segment_allocations >= s.segments);
            FUZZ_CHECK(static_cast<std::size_t>(ledger->live_bytes.load()) >= s.segment_bytes);
        }
        live.clear();
        pool.trim();
        const auto s = pool.stats();
        FUZZ_CHECK(s.segments == 0);
        FUZZ_CHECK(s.segment_bytes == 0);
        FUZZ_CHECK(ledger->live == 0);
    }
    FUZZ_CHECK(ledger->live == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Input in{data, size};
    switch (in.byte() % 3) {
        case 0:
            run<Pool<ArenaBuckets, DeviceLocal, Unlimited, SingleMutex, SubAllocated<MockBackend>>>(in, Unlimited{});
            break;
        case 1:
            run<Pool<ArenaBuckets, DeviceLocal, Capped, Striped<4>, SubAllocated<MockBackend>>>(in, Capped(1 << 16, 2));
            break;
        default:
            run<Pool<ArenaBuckets, DeviceLocal, Capped, ThreadCached<4>, SubAllocated<MockBackend>>>(
                in, Capped(1 << 20, 8));
            break;
    }
    return 0;
}
