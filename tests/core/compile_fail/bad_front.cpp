// Must not compile: a Pool whose lock policy's front has one ability wrong, picked by
// CLPOOL_BAD_CASE. tests/CMakeLists.txt builds each case and expects the compiler's output to
// hold the sentence of detail::diagnose_front (core/front.hpp) that names the member.
#include <clpool/backends/host.hpp>
#include <clpool/core/front.hpp>
#include <clpool/core/pool.hpp>
#include <clpool/policies/bucket.hpp>
#include <clpool/policies/flags.hpp>
#include <clpool/policies/limits.hpp>
#include <clpool/policies/locks.hpp>
#if CLPOOL_BAD_CASE == 5 || CLPOOL_BAD_CASE == 6
#include <clpool/diagnostics/diagnostics.hpp>
#endif

#include <cstddef>
#include <utility>

namespace {

// No front's work at all (no_front's), except what a case changes.
template <class Lists>
struct Bad : clpool::no_front {
#if CLPOOL_BAD_CASE == 1  // declares reclaim, has none
    static constexpr clpool::FrontAbilities abilities = clpool::FrontAbility::reclaim;
#elif CLPOOL_BAD_CASE == 2  // has reclaim, does not declare it
    void reclaim(Lists&) noexcept {}
#elif CLPOOL_BAD_CASE == 3  // declares inspect, misspells it
    static constexpr clpool::FrontAbilities abilities = clpool::FrontAbility::inspect;
    template <class F>
    decltype(auto) inspekt(const Lists& lists, F&& f) const {
        return lists.inspect([&](auto s) { return f(std::move(s), [](const auto*) { return false; }); });
    }
#elif CLPOOL_BAD_CASE == 4  // has inspect, does not declare it
    template <class F>
    decltype(auto) inspect(const Lists& lists, F&& f) const {
        return lists.inspect([&](auto s) { return f(std::move(s), [](const auto*) { return false; }); });
    }
#elif CLPOOL_BAD_CASE == 5  // declares history without inspect
    static constexpr clpool::FrontAbilities abilities = clpool::FrontAbility::history;
#elif CLPOOL_BAD_CASE == 6  // declares history and inspect, has no set_history
    static constexpr clpool::FrontAbilities abilities = clpool::FrontAbility::inspect | clpool::FrontAbility::history;
    template <class F>
    decltype(auto) inspect(const Lists& lists, F&& f) const {
        return lists.inspect([&](auto s) { return f(std::move(s), [](const auto*) { return false; }); });
    }
    template <class Events>
    void collect_history(Events&) const {}
#elif CLPOOL_BAD_CASE == 7  // abilities of the wrong type
    static constexpr unsigned abilities = 1;
#elif CLPOOL_BAD_CASE == 8  // no abandon
    void abandon() noexcept = delete;
#endif
};

struct BadLocks {
    using mutex_type = clpool::NullMutex;
    static constexpr std::size_t stripes = 1;
    template <class Lists>
    using front = Bad<Lists>;
};

}  // namespace

int main() {
#if CLPOOL_BAD_CASE == 5 || CLPOOL_BAD_CASE == 6
    clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, BadLocks, clpool::HostBackend,
                 clpool::Diagnostics>
        pool{clpool::HostBackend{}};
#else
    clpool::Pool<clpool::PowerOfTwoBuckets, clpool::DeviceLocal, clpool::Unlimited, BadLocks, clpool::HostBackend> pool{
        clpool::HostBackend{}};
#endif
    pool.allocate(1).release();
}
