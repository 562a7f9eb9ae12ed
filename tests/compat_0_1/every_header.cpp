// Every public header at the path clpool 0.1 installed it, in one translation unit: each still
// resolves (with a deprecation message naming today's path) and they compile together.
#include <clpool/aliases.hpp>
#include <clpool/backend.hpp>
#include <clpool/config.hpp>
#include <clpool/device.hpp>
#include <clpool/dropin.hpp>
#include <clpool/dropin_c.h>
#include <clpool/errors.hpp>
#include <clpool/handle.hpp>
#include <clpool/host_registry.hpp>
#include <clpool/lifecycle.hpp>
#include <clpool/memory_kind.hpp>
#include <clpool/opencl.hpp>
#include <clpool/pinned_allocator.hpp>
#include <clpool/pool.hpp>
#include <clpool/registry.hpp>
#include <clpool/shape.hpp>
#include <clpool/shape_error.hpp>
#include <clpool/shape_mirror.hpp>
#include <clpool/shape_trie.hpp>
#include <clpool/stats.hpp>
#include <clpool/transfer.hpp>

int main() { return 0; }
