// The compiled C ABI of the drop-in pools (clpool::dropin_c): clpool_create_buffer and
// clpool_release_buffer from <clpool/interop/dropin_c.h>, for programs with no C++ file.
#define CLPOOL_DROPIN_IMPLEMENTATION
#include <clpool/interop/dropin.hpp>
