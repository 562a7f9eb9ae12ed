#!/usr/bin/env bash
# Compiles a program against clpool's headers outside CMake, with plain -I and -Wall -Wextra -Werror,
# in both include orders: clpool's headers must add no diagnostic at all. With clpool
# first the compiler must say nothing; with <CL/opencl.hpp> first CL-HPP may note its own default
# target version (that is the application's include, not clpool's), and nothing else.
# Usage: check.sh CXX SOURCE_DIR CLHPP_INCLUDE_DIR
set -euo pipefail
cxx=$1 root=$2 clhpp=$3
here=$root/tests/plain_include
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=(-std=c++20 -Wall -Wextra -Werror -I"$root/include" -I"$root/policies" -I"$root/backends" -I"$clhpp")
status=0
for order in clpool_first opencl_first; do
  if ! "$cxx" "${flags[@]}" -c "$here/$order.cpp" -o "$out/$order.o" 2>"$out/$order.log"; then
    echo "$order: does not compile with -Wall -Wextra -Werror:"; cat "$out/$order.log"; status=1; continue
  fi
  # What the compiler said, without CL-HPP's note on the application's own include.
  grep -v -e 'CL_HPP_TARGET_OPENCL_VERSION is not defined' -e "^In file included from" -e '^ *[0-9]* | ' \
    -e '^ *| ' -e '^ *from ' "$out/$order.log" >"$out/$order.rest" || true
  if [ "$order" = clpool_first ] && [ -s "$out/$order.log" ]; then
    echo "$order: the compiler said something:"; cat "$out/$order.log"; status=1
  elif [ -s "$out/$order.rest" ]; then
    echo "$order: diagnostics besides CL-HPP's own note:"; cat "$out/$order.log"; status=1
  else
    echo "$order: clean"
  fi
done
exit $status
