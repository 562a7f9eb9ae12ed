// clpool 0.2's <clpool/core/history.hpp>, kept for one minor version (CHANGELOG.md, Unreleased):
// the diagnostics left the core for a layer of their own.
#pragma once
#pragma message("<clpool/core/history.hpp> is deprecated: include <clpool/diagnostics/history.hpp>")

#include <clpool/diagnostics/history.hpp>  // IWYU pragma: export
