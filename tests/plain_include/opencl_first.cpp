// The README's drop-in diff order: the application's own <CL/opencl.hpp> first, no macros set.
#include <CL/opencl.hpp>
#include <clpool/clpool.hpp>
#include <clpool/interop/dropin.hpp>

#include "uses.hpp"
