#!/usr/bin/env bash
# The SVM and offset pools on a GPU machine, quickly: their test file against the real driver, and
# the bench_arena rows that carry issue targets (hit pairs, carves, streams, raw clSVMAlloc), in one
# run. Compiles the two programs directly (no CMake: a minute, not five). Results into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/svm}
mkdir -p "$OUT"
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "compiler: $(${CXX:-g++} --version | head -1)"
  echo "nvidia driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
  clinfo -l 2>&1
  clinfo 2>/dev/null | grep -E "Platform Version|Device Version|SVM|Coarse|Fine|unified_shared|Alignment of base" 
} > "$OUT/machine.txt" 2>&1
inc="-I include -I backends -I policies -I tests -I . -I benchmarks -I benchmarks/include"
g++ -std=c++20 -O1 -g $inc tests/main.cpp tests/ledger_check.cpp tests/backends/test_svm.cpp \
  -lOpenCL -lpthread -o /tmp/t_svm > "$OUT/build_test.log" 2>&1 &
g++ -std=c++20 -O2 -DNDEBUG $inc benchmarks/bench_arena.cpp -lbenchmark -lOpenCL -lpthread \
  -o /tmp/bench_arena > "$OUT/build_bench.log" 2>&1 &
wait
tail -5 "$OUT/build_test.log" "$OUT/build_bench.log"
timeout 180 /tmp/t_svm > "$OUT/test_svm.txt" 2>&1; echo "test_svm exit $?" >> "$OUT/test_svm.txt"
tail -4 "$OUT/test_svm.txt"
timeout 300 /tmp/bench_arena --benchmark_min_time=0.2s --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_filter='hit|split_miss|stream|raw' \
  --benchmark_out="$OUT/bench_arena.json" --benchmark_out_format=json > "$OUT/bench_arena.txt" 2>&1
grep -E "median|Error|error" "$OUT/bench_arena.txt" | head -80
