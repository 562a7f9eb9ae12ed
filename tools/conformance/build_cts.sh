#!/usr/bin/env bash
# Unpacks OpenCL-CTS, OpenCL-Headers and SPIRV-Headers from the third-party archives and builds
# the CTS suites that run_cts.sh runs, against the system ICD loader. Nothing is vendored into
# the repository: the archives live outside it (../shared/third_party/, README.md there).
#
# Usage: build_cts.sh [BUILD_DIR]   (default build/cts; the sources go to BUILD_DIR/src)
# Env: CTS_THIRD_PARTY (the archives' folder, default ../shared/third_party next to the repository),
#      CTS_TARGETS (default the five suites below), JOBS (default nproc).
# Prints the unpack, configure and build times. Re-running reuses the build (an incremental no-op).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build/cts}" && cd "${1:-$root/build/cts}" && pwd)
tp=${CTS_THIRD_PARTY:-$root/../shared/third_party}
targets=${CTS_TARGETS:-test_buffers test_api test_mem_host_flags test_events test_svm}
jobs=${JOBS:-$(nproc)}
for a in OpenCL-CTS OpenCL-Headers SPIRV-Headers; do
  [ -f "$tp/$a.tar.xz" ] || { echo "build_cts: $tp/$a.tar.xz not found (set CTS_THIRD_PARTY)" >&2; exit 1; }
done
t0=$(date +%s)
if [ ! -f "$out/src/.unpacked" ]; then
  rm -rf "$out/src" && mkdir -p "$out/src"
  for a in OpenCL-CTS OpenCL-Headers SPIRV-Headers; do tar -xJf "$tp/$a.tar.xz" -C "$out/src"; done
  # test_conformance/spir is not in the archive (its data zips are not redistributed).
  sed -i 's/^add_subdirectory( *spir *)/# &  (not in the archive)/' "$out/src/OpenCL-CTS/test_conformance/CMakeLists.txt"
  touch "$out/src/.unpacked"
fi
t1=$(date +%s)
cmake -S "$out/src/OpenCL-CTS" -B "$out/build" -DCMAKE_BUILD_TYPE=Release \
  -DCL_INCLUDE_DIR="$out/src/OpenCL-Headers" -DCL_LIB_DIR=/usr/lib/x86_64-linux-gnu -DOPENCL_LIBRARIES=OpenCL \
  -DSPIRV_INCLUDE_DIR="$out/src/SPIRV-Headers" >"$out/configure.log" 2>&1 \
  || { cat "$out/configure.log" >&2; exit 1; }
t2=$(date +%s)
# shellcheck disable=SC2086
cmake --build "$out/build" -j "$jobs" --target $targets >"$out/build.log" 2>&1 || { tail -50 "$out/build.log" >&2; exit 1; }
t3=$(date +%s)
echo "build_cts: unpack $((t1 - t0)) s, configure $((t2 - t1)) s, build $((t3 - t2)) s ($targets, -j$jobs) in $out/build"
