// libFuzzer target: ShapeTrie intern/copy/release sequences, checked against a model after every step.
//
// The input picks a stripe count (1, 2 or 256: one stripe forces shared
// prefixes and deep branch nodes) and then a stream of operations on 16
// handle slots: intern with dense strides, intern with explicit strides
// (mismatched counts included), intern a canonical buffer (a held shape's
// own words, or fuzz-made ones), find, copy a handle, release a handle.
// Values mix small extents (so shapes collide and share prefixes) with
// overflowing and negative ones, ranks above the maximum, unknown type and
// order codes. The model checks: an independent validity rule (128-bit
// arithmetic) says exactly when shape_error is thrown; a handle's words are
// the canonical layout of what was asked; equal words <=> the same pointer;
// size() is the number of distinct live shapes; check_invariants() holds;
// a reader finds every held shape's own buffer (explicit strides, and dense
// lookups exactly when its strides are the dense ones) and nothing for an
// invalid shape; a buffer found by a reader stays readable after its last
// handle is released inside the reader; once every handle is dropped the
// trie is empty, nodes and all, and after collect() every entry and node
// allocated is freed.
#include <clpool/shapes/shape_trie.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <set>
#include <vector>

using namespace clpool;
using i64 = std::int64_t;

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
    std::uint8_t byte() { return n ? (--n, *p++) : 0; }
    bool done() const { return n == 0; }
};

i64 value(Input& in) {
    const std::uint8_t b = in.byte();
    switch (b >> 5) {
        case 0:
        case 1:
        case 2:
        case 3: return b % 4;          // small: collisions and shared prefixes
        case 4: return b % 32;
        case 5: return i64{1} << (20 + b % 24);                // big: products overflow
        case 6: return -static_cast<i64>(b % 3) - 1;           // negative
        default: return static_cast<i64>(in.byte()) << 56;     // huge
    }
}

// The rule, written independently of the trie: which shapes are valid, and their words.
bool model_words(const std::vector<i64>& ext, const std::vector<i64>& str, i64 type, i64 ord, std::vector<i64>& out) {
    if (ext.size() > ShapeTrie::max_rank || str.size() != ext.size()) return false;
    __int128 count = 1;
    bool over = false;
    for (i64 e : ext) {
        if (e < 0) return false;
        count *= e;
        if (count > INT64_MAX) over = true;
        if (over) count = INT64_MAX;  // stays "too big" without overflowing 128 bits
    }
    const __int128 sizes[] = {0, 2, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1};
    if (type < 1 || type > 13) return false;
    if (ord != 'c' && ord != 'f') return false;
    // An extent of 0 makes an empty tensor, whatever the others multiply to.
    if (std::find(ext.begin(), ext.end(), i64{0}) != ext.end()) {
        over = false;
        count = 0;
    }
    if (over || count * sizes[type] > INT64_MAX) return false;
    out.clear();
    out.push_back(static_cast<i64>(ext.size()));
    out.insert(out.end(), ext.begin(), ext.end());
    out.insert(out.end(), str.begin(), str.end());
    out.push_back(type);
    out.push_back(ord);
    out.push_back(static_cast<i64>(count));
    return true;
}

std::vector<i64> dense(const std::vector<i64>& ext, i64 ord) {
    std::vector<i64> s(ext.size());
    std::uint64_t acc = 1;
    if (ord == 'f') {
        for (std::size_t i = 0; i < ext.size(); ++i) {
            s[i] = static_cast<i64>(acc);
            acc *= static_cast<std::uint64_t>(ext[i]);
        }
    } else {
        for (std::size_t i = ext.size(); i-- > 0;) {
            s[i] = static_cast<i64>(acc);
            acc *= static_cast<std::uint64_t>(ext[i]);
        }
    }
    return s;
}

struct Slot {
    Shape shape;
    std::vector<i64> words;  // what the model says it must hold
};

void check_all(const ShapeTrie& trie, const std::vector<Slot>& slots) {
    std::map<std::vector<i64>, const i64*> seen;
    ShapeTrie::reader r(trie);
    for (const auto& s : slots) {
        if (!s.shape) continue;
        FUZZ_CHECK(std::vector<i64>(s.shape.words().begin(), s.shape.words().end()) == s.words);
        const std::vector<i64> ext(s.shape.extents().begin(), s.shape.extents().end());
        const std::vector<i64> str(s.shape.strides().begin(), s.shape.strides().end());
        FUZZ_CHECK(r.find(ext, str, s.shape.type(), s.shape.layout()) == s.shape.data());
        const bool is_dense = dense(ext, static_cast<i64>(s.shape.layout())) == str;
        FUZZ_CHECK((r.find(ext, s.shape.type(), s.shape.layout()) == s.shape.data()) == is_dense);
        auto [it, fresh] = seen.emplace(s.words, s.shape.data());
        FUZZ_CHECK(it->second == s.shape.data());  // equal content, same pointer
        (void)fresh;
    }
    std::set<const i64*> pointers;
    for (const auto& [w, p] : seen) pointers.insert(p);
    FUZZ_CHECK(pointers.size() == seen.size());  // different content, different pointers
    FUZZ_CHECK(trie.size() == seen.size());
    FUZZ_CHECK(trie.check_invariants() == seen.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Input in{data, size};
    ShapeTrie::collect();
    const i64 entries0 = ShapeTrie::live_entries(), nodes0 = ShapeTrie::live_nodes();
    const std::size_t stripes[] = {1, 2, 256};
    {
        ShapeTrie trie(stripes[in.byte() % 3]);
        std::vector<Slot> slots(16);
        for (int step = 0; step < 256 && !in.done(); ++step) {
            const std::uint8_t op = in.byte() % 6;
            Slot& slot = slots[in.byte() % slots.size()];
            if (op <= 2) {
                const std::uint8_t rb = in.byte();
                const std::size_t rank = rb >= 250 ? ShapeTrie::max_rank + 1 + rb % 3 : rb % 9;
                std::vector<i64> ext(rank);
                for (auto& e : ext) e = value(in);
                const std::uint8_t tb = in.byte();
                const i64 type = tb < 240 ? 1 + tb % 13 : tb % 16;  // mostly valid, some not
                const std::uint8_t ob = in.byte();
                const i64 ord = ob < 250 ? (ob % 2 ? 'f' : 'c') : ob;
                std::vector<i64> str = dense(ext, ord);
                if (op == 1) {  // explicit strides, sometimes of the wrong count
                    str.resize(in.byte() % 8 == 0 ? rank + 1 : rank);
                    for (auto& s : str) s = value(in);
                }
                std::vector<i64> want;
                const bool valid = model_words(ext, str, type, ord, want);
                Shape got;
                bool threw = false;
                try {
                    if (op == 0) got = trie.intern(ext, static_cast<ElementType>(type), static_cast<Order>(ord));
                    else if (op == 1)
                        got = trie.intern(ext, str, static_cast<ElementType>(type), static_cast<Order>(ord));
                    else if (valid) got = trie.intern_buffer(want);
                    else got = trie.find(ext, str, static_cast<ElementType>(type), static_cast<Order>(ord));
                } catch (const shape_error&) {
                    threw = true;
                }
                if (!valid) {  // a reader finds nothing for an invalid shape
                    ShapeTrie::reader r(trie);
                    FUZZ_CHECK(r.find(ext, str, static_cast<ElementType>(type), static_cast<Order>(ord)) == nullptr);
                    if (op == 0)
                        FUZZ_CHECK(r.find(ext, static_cast<ElementType>(type), static_cast<Order>(ord)) == nullptr);
                }
                if (op == 2 && !valid) {  // find never inserts; rank above the maximum throws
                    FUZZ_CHECK(!got);
                    FUZZ_CHECK(threw == (rank > ShapeTrie::max_rank));
                    continue;
                }
                FUZZ_CHECK(threw == !valid);
                if (valid) {
                    FUZZ_CHECK(got);
                    slot.shape = std::move(got);
                    slot.words = want;
                }
            } else if (op == 3) {
                Slot& from = slots[in.byte() % slots.size()];
                slot = from;  // copy (self-copy included)
            } else if (op == 4) {
                // Release inside a reader: the buffer it found stays readable until it ends.
                ShapeTrie::reader r(trie);
                const i64* p = slot.shape ? r.find(slot.shape.extents(), slot.shape.strides(), slot.shape.type(),
                                                   slot.shape.layout())
                                          : nullptr;
                FUZZ_CHECK(p == (slot.shape ? slot.shape.data() : nullptr));
                slot.shape.reset();
                if (p) FUZZ_CHECK(std::equal(slot.words.begin(), slot.words.end(), p));
                slot.words.clear();
            } else if (slot.shape) {  // re-intern a held shape's own buffer, and find it
                FUZZ_CHECK(trie.intern_buffer(slot.shape.words()) == slot.shape);
                FUZZ_CHECK(trie.find(slot.shape.extents(), slot.shape.strides(), slot.shape.type(),
                                     slot.shape.layout()) == slot.shape);
            }
            check_all(trie, slots);
        }
        slots.clear();
        FUZZ_CHECK(trie.size() == 0);
        FUZZ_CHECK(trie.node_count() == 0);
        FUZZ_CHECK(trie.check_invariants() == 0);
    }
    ShapeTrie::collect();
    FUZZ_CHECK(ShapeTrie::live_entries() == entries0);
    FUZZ_CHECK(ShapeTrie::live_nodes() == nodes0);
    return 0;
}
