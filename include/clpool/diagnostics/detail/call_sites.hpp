// call_sites: raw return addresses taken where a history event happens, named (dladdr, demangled) only when a snapshot is taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#if defined(__has_include)
#if __has_include(<unwind.h>) && __has_include(<dlfcn.h>) && __has_include(<cxxabi.h>)
#define CLPOOL_HAS_CALL_SITES 1
#include <cxxabi.h>
#include <dlfcn.h>
#include <unwind.h>
#endif
#endif

namespace clpool::detail {

// The return addresses of one event, innermost first. Capture walks the
// stack with the unwinder (_Unwind_Backtrace: no allocation, no lock, about a
// microsecond for a dozen frames) and stores addresses only: naming them costs
// far more (dladdr, demangling) and is done when a snapshot is taken.
struct call_site {
    // Enough for clpool's own frames (skipped when named) and the caller's few.
    static constexpr std::size_t max_frames = 12;
    std::uint32_t count = 0;
    void* pc[max_frames];
};

#ifdef CLPOOL_HAS_CALL_SITES
struct call_site_walk {
    call_site* out;
    unsigned skip;
};

inline _Unwind_Reason_Code call_site_step(_Unwind_Context* ctx, void* arg) noexcept {
    auto* w = static_cast<call_site_walk*>(arg);
    const auto pc = _Unwind_GetIP(ctx);
    if (pc == 0) return _URC_END_OF_STACK;
    if (w->skip > 0) {
        --w->skip;
        return _URC_NO_REASON;
    }
    w->out->pc[w->out->count++] = reinterpret_cast<void*>(pc);
    return w->out->count == call_site::max_frames ? _URC_END_OF_STACK : _URC_NO_REASON;
}
#endif

// The calling thread's stack, from the caller of this function outwards,
// less `skip` more frames (a recording function's own: its caller is the
// first frame).
[[gnu::noinline]] inline void capture_call_site(call_site& out, unsigned skip = 0) noexcept {
    out.count = 0;
#ifdef CLPOOL_HAS_CALL_SITES
    call_site_walk w{&out, skip + 1};  // + this function's own frame
    _Unwind_Backtrace(call_site_step, &w);
#else
    (void)skip;
#endif
}

// Names return addresses: "function+0xOFF (module)" where the dynamic symbol
// table knows the function (shared libraries; executables linked with
// -rdynamic), else "0xOFF (module)" with OFF the offset in the module, which
// `addr2line -Cfe module 0xOFF` turns into a function, file and line.
// Leading frames in clpool (clpool::..., or the standard library working on
// clpool's types, such as a vector of handles) are skipped, so the first frame
// is the caller's. Remembers what it named: one per snapshot.
class call_site_names {
public:
    static constexpr std::size_t shown_frames = 8;

    std::vector<std::string> frames(const call_site& site) {
        std::vector<std::string> out;
        bool inside = true;  // still in clpool's frames
        for (std::uint32_t i = 0; i < site.count && out.size() < shown_frames; ++i) {
            const entry& e = name_of(site.pc[i]);
            if (inside && e.in_clpool) continue;
            inside = false;
            out.push_back(e.text);
        }
        return out;
    }

private:
    struct entry {
        std::string text;
        bool in_clpool = false;
    };

    static std::string hex(std::uintptr_t v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
        return buf;
    }

    // "ns::f<T>" of "R ns::f<T>(A) const": a function template's demangled
    // name starts with its return type, and its arguments may name anything.
    static std::string_view qualified_name(std::string_view n) noexcept {
        int depth = 0;
        std::size_t start = 0, end = n.size();
        for (std::size_t i = 0; i < n.size(); ++i) {
            const char c = n[i];
            if (c == '<') ++depth;
            else if (c == '>') --depth;
            else if (c == '(' && depth == 0 && i > 0) {
                end = i;
                break;
            } else if (c == ' ' && depth == 0) {
                start = i + 1;
            }
        }
        return n.substr(start, end - start);
    }

    const entry& name_of(void* pc) {
        auto [it, fresh] = names_.try_emplace(pc);
        if (fresh) it->second = make(pc);
        return it->second;
    }

    static entry make(void* pc) {
        // A return address is just past its call: look up the call itself.
        const auto addr = reinterpret_cast<std::uintptr_t>(pc) - 1;
#ifdef CLPOOL_HAS_CALL_SITES
        Dl_info info{};
        if (dladdr(reinterpret_cast<void*>(addr), &info) != 0) {
            std::string module = info.dli_fname ? info.dli_fname : "?";
            if (const auto slash = module.rfind('/'); slash != std::string::npos) module.erase(0, slash + 1);
            if (info.dli_sname && info.dli_saddr) {
                int status = 0;
                char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
                std::string name = status == 0 && demangled ? demangled : info.dli_sname;
                std::free(demangled);
                const std::string_view f = qualified_name(name);
                const bool in_clpool =
                    f.starts_with("clpool::") || (f.starts_with("std::") && name.find("clpool::") != std::string::npos);
                return {name + "+" + hex(addr - reinterpret_cast<std::uintptr_t>(info.dli_saddr)) + " (" + module + ")",
                        in_clpool};
            }
            return {hex(addr - reinterpret_cast<std::uintptr_t>(info.dli_fbase)) + " (" + module + ")", false};
        }
#endif
        return {hex(addr) + " (?)", false};
    }

    std::unordered_map<void*, entry> names_;
};

}  // namespace clpool::detail
