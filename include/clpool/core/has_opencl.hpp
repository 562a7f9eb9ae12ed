// Defines CLPOOL_HAS_OPENCL where the OpenCL parts are built (not CLPOOL_NO_OPENCL, and CL-HPP present).
#pragma once

#if !defined(CLPOOL_NO_OPENCL) && __has_include(<CL/opencl.hpp>)
#ifndef CLPOOL_HAS_OPENCL
#define CLPOOL_HAS_OPENCL 1
#endif
#endif
