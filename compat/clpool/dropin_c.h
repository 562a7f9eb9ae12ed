/* clpool 0.1's <clpool/dropin_c.h>, kept for one minor version (CHANGELOG.md, Migrating from 0.1). */
#pragma once
#pragma message( \
    "<clpool/dropin_c.h> is deprecated: include <clpool/interop/dropin_c.h> (CHANGELOG.md, Migrating from 0.1)")

#include <clpool/interop/dropin_c.h>
