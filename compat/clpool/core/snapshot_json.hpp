// clpool 0.2's <clpool/core/snapshot_json.hpp>, kept for one minor version (CHANGELOG.md, Unreleased):
// the diagnostics left the core for a layer of their own.
#pragma once
#pragma message("<clpool/core/snapshot_json.hpp> is deprecated: include <clpool/diagnostics/snapshot_json.hpp>")

#include <clpool/diagnostics/snapshot_json.hpp>  // IWYU pragma: export
