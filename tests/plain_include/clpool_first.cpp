// clpool first: it pins the OpenCL target, then the application's own <CL/opencl.hpp>.
#include <clpool/clpool.hpp>
#include <clpool/interop/dropin.hpp>
#include <CL/opencl.hpp>

#include "uses.hpp"
