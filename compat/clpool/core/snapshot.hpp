// clpool 0.2's <clpool/core/snapshot.hpp>, kept for one minor version (CHANGELOG.md, Unreleased):
// the diagnostics left the core for a layer of their own.
#pragma once
#pragma message("<clpool/core/snapshot.hpp> is deprecated: include <clpool/diagnostics/snapshot.hpp>")

#include <clpool/diagnostics/snapshot.hpp>  // IWYU pragma: export
