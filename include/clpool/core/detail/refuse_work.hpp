// refuse_work: the usage_error a pool throws when the process state forbids it work (fork child, exit, shutdown).
#pragma once

#include <clpool/core/errors.hpp>
#include <clpool/platform/process_state.hpp>

#include <cstdint>
#include <string_view>

namespace clpool::detail {

// Why a pool of `generation` refuses work: the clear error for the caller.
[[noreturn]] inline void refuse_work(std::uint32_t generation, std::string_view pool_name) {
    throw usage_error(refusal_message(generation, pool_name));
}

}  // namespace clpool::detail
