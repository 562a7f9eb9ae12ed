// Extension lookups, passed on: asking for cl_khr_command_buffer makes the core watch the
// driver's count of released buffers.
#include "next.hpp"
#include "state.hpp"

#include <cstring>

namespace clpool::interpose::core {

// The cl_khr_command_buffer entry points record buffers the core never sees:
// once the application asks for one, releases ask the driver's count (let_go).
static void note_extension(State& st, const char* name) noexcept {
    if (name && (std::strstr(name, "CommandBuffer") || std::strncmp(name, "clCommand", 9) == 0))
        st.watch_driver_refs.store(true, std::memory_order_relaxed);
}

void* get_extension_function_address_for_platform(cl_platform_id p, const char* name) {
    core_scope guard;
    note_extension(state(), name);
    return next().clGetExtensionFunctionAddressForPlatform(p, name);
}

void* get_extension_function_address(const char* name) {
    core_scope guard;
    note_extension(state(), name);
    return next().clGetExtensionFunctionAddress(name);
}

}  // namespace clpool::interpose::core
