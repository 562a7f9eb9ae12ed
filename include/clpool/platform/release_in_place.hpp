// discard / replace: let go of an owned handle (a cl::Buffer) in code that must not throw.
#pragma once

#include <type_traits>
#include <utility>

namespace clpool::detail {

// CL-HPP's move-assignment releases the object it overwrites and, with
// CL_HPP_ENABLE_EXCEPTIONS, throws cl::Error if that release fails; its
// destructor releases too and never throws. So noexcept code lets go of an
// owned handle by moving it into a local that dies, and assigns only into a
// handle that is empty (a moved-from handle is).

// x's object released; x is empty.
template <class T>
void discard(T& x) noexcept {
    [[maybe_unused]] const T dying(std::move(x));
}

// x's object released, then x takes v's.
template <class T>
void replace(T& x, std::type_identity_t<T>&& v) noexcept {  // v: an rvalue of T, not deduced
    discard(x);
    x = std::move(v);
}

}  // namespace clpool::detail
