// The registry list shutdown() and release_pools() walk: each node linked once, also after a fork parent left it half done.
#include <clpool/runtime/registry_list.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <thread>
#include <vector>

using namespace clpool::detail;

namespace {

std::size_t links_to(const registry_node& node) {
    std::size_t n = 0;
    for (const registry_node* p = registry_head.load(); p; p = p->next) n += p == &node;
    return n;
}

// Made-up registries with nothing to trim or drop: the nodes stay in the
// list for the rest of this process, and shutdown() or release_pools() in it
// would call these.
std::size_t trim_nothing() noexcept { return 0; }

constinit registry_node node_a{&trim_nothing, nullptr};
constinit registry_node node_parent_stalled{&trim_nothing, nullptr};
constinit registry_node node_parent_linked{&trim_nothing, nullptr};
constinit registry_node node_raced{&trim_nothing, nullptr};

constexpr std::uint64_t linked = 1;
std::uint64_t claimed_by(std::uint32_t generation) { return (std::uint64_t{generation} << 2) | 2; }

}  // namespace

TEST_CASE("enroll_registry links a node once, however often it is called") {
    enroll_registry(node_a);
    enroll_registry(node_a);
    CHECK(links_to(node_a) == 1);
    CHECK(node_a.state.load() == linked);
}

TEST_CASE("enroll_registry: many threads enrolling one node link it once") {
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) threads.emplace_back([] { enroll_registry(node_raced); });
    for (auto& t : threads) t.join();
    CHECK(links_to(node_raced) == 1);
    CHECK(node_raced.state.load() == linked);
}

TEST_CASE("enroll_registry takes over an enrolment a fork parent's thread never finished") {
    // As a fork child sees it: a thread of the parent's generation claimed the
    // node and did not live to link it.
    node_parent_stalled.state.store(claimed_by(fork_generation() + 1));
    enroll_registry(node_parent_stalled);
    CHECK(links_to(node_parent_stalled) == 1);
    CHECK(node_parent_stalled.state.load() == linked);

    // The parent's thread linked it but had not yet marked it: not linked twice.
    enroll_registry(node_parent_linked);
    node_parent_linked.state.store(claimed_by(fork_generation() + 1));
    enroll_registry(node_parent_linked);
    CHECK(links_to(node_parent_linked) == 1);
    CHECK(node_parent_linked.state.load() == linked);
}
