# libFuzzer (clang, ASan+UBSan): every target in tests/fuzz, 30 s each from its committed corpus.
# FUZZ_SECONDS overrides the time per target. A crash fails the step and leaves the input in build/fuzz/artifacts/.
set -euo pipefail
seconds=${FUZZ_SECONDS:-30}
cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLPOOL_BUILD_FUZZERS=ON \
  -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
cmake --build build/fuzz -j "$(nproc)"
mkdir -p build/fuzz/artifacts
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for src in tests/fuzz/fuzz_*.cpp; do
  name=$(basename "$src" .cpp)
  seeds=tests/fuzz/corpus/$name
  [ -d "$seeds" ] || seeds=tests/fuzz/corpus/${name#fuzz_}  # fuzz_trace's corpus is corpus/trace
  [ -d "$seeds" ] || { echo "no seed corpus tests/fuzz/corpus/$name for $name"; exit 1; }
  work=build/fuzz/corpus/$name  # new inputs go here; the committed corpus is only read
  mkdir -p "$work"
  echo "--- $name: ${seconds}s from $seeds"
  start=$(date +%s)
  timeout $((seconds + 120)) "build/fuzz/tests/fuzz/$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix=build/fuzz/artifacts/"$name"- "$work" "$seeds" 2>&1 | tail -n 25
  echo "$name: $(( $(date +%s) - start )) s"
done
