// clpool 0.1's <clpool/aliases.hpp>, kept for one minor version (CHANGELOG.md, Migrating from 0.1).
// It brings what that header brought in 0.1, and 0.1's spellings (compat/deprecated_0_1.hpp).
#pragma once
#pragma message( \
    "<clpool/aliases.hpp> is deprecated: include <clpool/pools/aliases.hpp> (CHANGELOG.md, Migrating from 0.1)")

#include <clpool/pools/aliases.hpp>  // IWYU pragma: export
#include <clpool/backends/host.hpp>  // IWYU pragma: export
#include <clpool/core/backend.hpp>  // IWYU pragma: export
#include <clpool/core/errors.hpp>  // IWYU pragma: export
#include <clpool/core/handle.hpp>  // IWYU pragma: export
#include <clpool/core/memory_kind.hpp>  // IWYU pragma: export
#include <clpool/core/pool.hpp>  // IWYU pragma: export
#include <clpool/core/stats.hpp>  // IWYU pragma: export
#include <clpool/policies/bucket.hpp>  // IWYU pragma: export
#include <clpool/policies/flags.hpp>  // IWYU pragma: export
#include <clpool/policies/limits.hpp>  // IWYU pragma: export
#include <clpool/policies/locks.hpp>  // IWYU pragma: export
#include <clpool/compat/deprecated_0_1.hpp>  // IWYU pragma: export
