# clpool as a dependency: after cmake --install via find_package, by add_subdirectory, by FetchContent.
set -euo pipefail
src=$PWD
work=$PWD/build/consumers
rm -rf "$work"
cmake -S . -B "$work/lib" -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
cmake --install "$work/lib" --prefix "$work/prefix" >/dev/null
for mode in find_package add_subdirectory fetchcontent; do
  cmake -S tests/consumer -B "$work/$mode" -DCLPOOL_CONSUME=$mode -DCLPOOL_SOURCE_DIR="$src" \
    -DCMAKE_PREFIX_PATH="$work/prefix" -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
  cmake --build "$work/$mode" -j "$(nproc)" >/dev/null
  "$work/$mode/consumer"
done
