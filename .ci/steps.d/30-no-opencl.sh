# The library built without OpenCL (CLPOOL_WITH_OPENCL=OFF defines CLPOOL_NO_OPENCL):
# the host backend alone must build and pass its tests; OpenCL tests are compiled out. Debug: it
# checks what builds and runs, and -O0 builds in 0.6x the time of the main job's -O2.
set -euo pipefail
jobs=$(nproc)
cmake -S . -B build/no-opencl -DCMAKE_BUILD_TYPE=Debug -DCLPOOL_WITH_OPENCL=OFF -DCLPOOL_WERROR=ON \
  -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF -DCLPOOL_COMPILE_FAIL_TESTS=OFF
cmake --build build/no-opencl -j "$jobs"
# Nothing in this build may link the ICD loader.
if grep -rl "libOpenCL" build/no-opencl/tests/CMakeFiles/*/link.txt 2>/dev/null; then
  echo "no-OpenCL build links libOpenCL" >&2
  exit 1
fi
ctest --test-dir build/no-opencl --output-on-failure -j "$jobs"
