// The one C++ file of the C program: it emits the C pair's definitions (0.1's docs/DROPIN.md).
#define CLPOOL_DROPIN_IMPLEMENTATION
#include <clpool/dropin.hpp>
