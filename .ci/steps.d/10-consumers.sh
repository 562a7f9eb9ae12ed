# clpool as a dependency: after cmake --install via find_package, by add_subdirectory, by FetchContent;
# each builds and runs the consumer and, with clpool::benchmark, consumer_benchmark.
set -euo pipefail
src=$PWD
work=$PWD/build/consumers
rm -rf "$work"
cmake -S . -B "$work/lib" -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
cmake --build "$work/lib" -j "$(nproc)" >/dev/null  # the compiled C ABI, clpool::dropin_c
cmake --install "$work/lib" --prefix "$work/prefix" >/dev/null
for mode in find_package add_subdirectory fetchcontent; do
  cmake -S tests/consumer -B "$work/$mode" -DCLPOOL_CONSUME=$mode -DCLPOOL_SOURCE_DIR="$src" \
    -DCMAKE_PREFIX_PATH="$work/prefix" -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
  cmake --build "$work/$mode" -j "$(nproc)" >/dev/null
  "$work/$mode/consumer"
  # clpool::benchmark: every family of standard runs is registered and runs.
  "$work/$mode/consumer_benchmark" --benchmark_min_time=0.01 >"$work/$mode/benchmark.txt"
  for family in hit miss raw contention churn; do
    grep -Eq "^$family/EnginePool[/ ]" "$work/$mode/benchmark.txt" || { echo "consumer_benchmark ($mode): no $family/ run" >&2; exit 1; }
  done
done
# A C99 project (project(... C), no C++ compiler enabled) on the installed C ABI, shared and static.
for target in clpool::dropin_c clpool::dropin_c_static; do
  dir=$work/c-${target#clpool::}
  cmake -S tests/consumer/c -B "$dir" -DCMAKE_PREFIX_PATH="$work/prefix" -DCLPOOL_DROPIN_TARGET="$target" >/dev/null
  cmake --build "$dir" -j "$(nproc)" >/dev/null
  "$dir/c_consumer"
done
# The shared library exports the C pair and nothing of clpool's C++.
so=$(find "$work/prefix" -name libclpool_dropin.so | head -n 1)
exported=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sort | tr '\n' ' ')
if [ "$exported" != "clpool_create_buffer clpool_release_buffer " ]; then
  echo "libclpool_dropin.so exports: $exported" >&2
  exit 1
fi
