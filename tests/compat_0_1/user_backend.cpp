// A backend written to clpool 0.1's README ("The Backend concept"): memory_type,
// max_alloc_size, unified_memory, allocate(n, memory_kind) returning allocation<memory_type>,
// name(); 0.1 had no ability declaration.
#include <clpool/backend.hpp>
#include <clpool/errors.hpp>
#include <clpool/pool.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

struct Free {
    void operator()(void* p) const noexcept { std::free(p); }
};

struct MallocBackend {
    using memory_type = std::unique_ptr<void, Free>;
    std::size_t max_alloc_size() const noexcept { return std::size_t{1} << 30; }
    bool unified_memory() const noexcept { return true; }
    std::string name() const { return "malloc"; }
    clpool::allocation<memory_type> allocate(std::size_t n, clpool::memory_kind) noexcept {
        void* p = std::malloc(n == 0 ? 1 : n);
        if (p == nullptr) return {memory_type{}, clpool::alloc_status::out_of_memory, 1};
        return {memory_type{p}, clpool::alloc_status::ok, 0};
    }
};
static_assert(clpool::Backend<MallocBackend>);

int main() {
    using MallocPool = clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited,
                                    clpool::SingleMutex, MallocBackend>;
    MallocPool pool{MallocBackend{}};
    { auto h = pool.allocate(1000); }
    auto again = pool.allocate(1000);
    try {
        (void)pool.allocate(std::size_t{1} << 31);
        return 1;
    } catch (const clpool::size_error&) {}
    std::printf("user_backend: hits=%zu\n", static_cast<std::size_t>(pool.stats().hits));
    return pool.stats().hits == 1 ? 0 : 1;
}
