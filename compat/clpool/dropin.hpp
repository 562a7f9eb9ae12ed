// clpool 0.1's <clpool/dropin.hpp>, kept for one minor version (CHANGELOG.md, Migrating from 0.1).
// It brings what that header brought in 0.1, and 0.1's spellings (compat/deprecated_0_1.hpp).
#pragma once
#pragma message( \
    "<clpool/dropin.hpp> is deprecated: include <clpool/interop/dropin.hpp> (CHANGELOG.md, Migrating from 0.1)")

#include <clpool/interop/dropin.hpp>  // IWYU pragma: export
#include <clpool/core/stats.hpp>  // IWYU pragma: export
#include <clpool/interop/dropin_c.h>  // IWYU pragma: export
#include <clpool/compat/deprecated_0_1.hpp>  // IWYU pragma: export
