// clpool 0.1's <clpool/shape_error.hpp>, kept for one minor version (CHANGELOG.md, Migrating from 0.1).
// It brings what that header brought in 0.1, and 0.1's spellings (compat/deprecated_0_1.hpp).
#pragma once
#pragma message( \
    "<clpool/shape_error.hpp> is deprecated: include <clpool/shapes/shape_error.hpp> (CHANGELOG.md, Migrating from 0.1)")

#include <clpool/shapes/shape_error.hpp>  // IWYU pragma: export
#include <clpool/core/errors.hpp>  // IWYU pragma: export
#include <clpool/compat/deprecated_0_1.hpp>  // IWYU pragma: export
