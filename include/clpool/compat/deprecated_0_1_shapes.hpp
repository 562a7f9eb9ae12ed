// clpool 0.1's spellings of the shape types, kept for one minor version (deprecated_0_1.hpp
// says why). 0.1's paths of the shape headers include this header.
#pragma once

#include <clpool/shapes/shape.hpp>

namespace clpool {

using element_type [[deprecated("use clpool::ElementType")]] = ElementType;
using order [[deprecated("use clpool::Order")]] = Order;

}  // namespace clpool
