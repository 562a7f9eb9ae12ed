// First hour, docs/POLICIES.md and docs/BACKENDS.md: pools of one's own composition over OpenCL,
// over host memory, and over a backend written here.
#include <clpool/clpool.hpp>

#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <memory>

namespace {

struct Free {
    void operator()(std::byte* p) const noexcept { std::free(p); }
};

// A backend of one's own: malloc'd memory, counted. No optional abilities.
class CountingBackend {
public:
    using memory_type = std::unique_ptr<std::byte, Free>;
    static constexpr clpool::BackendAbilities abilities = clpool::BackendAbility::none;

    explicit CountingBackend(std::size_t* created) : created_(created) {}
    std::size_t max_alloc_size() const noexcept { return std::size_t{1} << 30; }
    bool unified_memory() const noexcept { return true; }
    const char* name() const noexcept { return "counting"; }
    clpool::Allocation<memory_type> allocate(std::size_t n, clpool::MemoryKind) noexcept {
        memory_type m(static_cast<std::byte*>(std::malloc(n == 0 ? 1 : n)));
        if (!m) return {{}, clpool::AllocStatus::out_of_memory, 0};
        ++*created_;
        return {std::move(m), clpool::AllocStatus::ok, 0};
    }

private:
    std::size_t* created_;
};
static_assert(clpool::Backend<CountingBackend>);

template <class Pool>
bool reuses(Pool& pool, const char* what) {
    { auto a = pool.allocate(3000); }
    auto b = pool.allocate(2500);  // the same 4 KiB bucket: a hit
    const auto s = pool.stats();
    std::cout << "custom_pool " << what << ": " << s << '\n';
    return b && s.hits == 1 && s.misses == 1;
}

}  // namespace

int main() {
    cl::Context context(CL_DEVICE_TYPE_DEFAULT);
    // OpenCL, capped at 64 MiB and 4 idle buffers per bucket, threads on different buckets in parallel.
    clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Capped, clpool::Striped<8>,
                 clpool::OpenCLBackend>
        device(clpool::OpenCLBackend(context), clpool::Capped(64 << 20, 4));
    // Host memory, per-thread magazines in front.
    clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, clpool::ThreadCached<>,
                 clpool::HostBackend>
        host{clpool::HostBackend{}};
    // Our own backend.
    std::size_t created = 0;
    clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, clpool::SingleMutex,
                 CountingBackend>
        mine{CountingBackend(&created)};

    const bool ok = reuses(device, "opencl") && reuses(host, "host") && reuses(mine, "own backend") && created == 1;
    mine.trim();
    return ok && mine.stats().bytes_cached == 0 ? 0 : 1;
}
