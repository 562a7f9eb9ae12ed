// Test helpers for event-ordered tests: a user-event gate that holds commands back, and an event's status.
#pragma once

#include "opencl_env.hpp"

#ifdef CLPOOL_HAS_OPENCL
#include <doctest/doctest.h>

namespace clpool::test {

// A user event that holds back every command made to wait on it.
struct Gate {
    cl::Event event;
    Gate() {
        cl_int err = CL_SUCCESS;
        cl_event e = clCreateUserEvent(OpenCLEnv::get().context(), &err);
        REQUIRE(err == CL_SUCCESS);
        event = cl::Event(e, false);
    }
    Gate(const Gate&) = delete;
    Gate& operator=(const Gate&) = delete;
    void open() { REQUIRE(clSetUserEventStatus(event(), CL_COMPLETE) == CL_SUCCESS); }
    ~Gate() { clSetUserEventStatus(event(), CL_COMPLETE); }  // never leave a queue blocked
};

// CL_COMPLETE (0) once done; above it while queued, submitted or running.
inline cl_int status_of(const cl::Event& e) {
    cl_int s = CL_QUEUED;
    clGetEventInfo(e(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr);
    return s;
}

}  // namespace clpool::test
#endif  // CLPOOL_HAS_OPENCL
