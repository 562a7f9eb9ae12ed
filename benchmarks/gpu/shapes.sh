#!/usr/bin/env bash
# Builds bench_shape_trie (Release flags) and runs it on this machine's CPU into $OUT (default ./out):
# shapes.json (Google Benchmark JSON, 3 repetitions, medians used), shapes_summary.txt (the target
# ratios per rank: reader_hit/map_find <= 2, descriptor/trie_hit >= 2, misses flagged "MISS"; and the
# 1-16 thread throughput table, reader256 included), shapes_machine.txt. Needs a C++20 compiler
# (g++ >= 12) and Google Benchmark (libbenchmark-dev); no GPU, OpenCL or Boost. About 3 minutes.
#   BENCH_MIN_TIME=0.3   seconds per benchmark;  BENCH_REPS=3   repetitions
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
bin=build/gpu-shapes/bench_shape_trie
mkdir -p "$(dirname "$bin")"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "compiler: $(${CXX:-g++} --version | head -1)"
  echo "cpu: $(lscpu 2>/dev/null | grep -m1 'Model name' | sed 's/.*: *//') x $(nproc)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/shapes_machine.txt"
# Header-only: compiled directly (the same flags as CMake's Release), so this needs no configure.
${CXX:-g++} -std=c++20 -O3 -DNDEBUG -Iinclude -Ipolicies -Ibackends benchmarks/bench_shape_trie.cpp \
  -o "$bin" -lbenchmark -pthread
"$bin" --benchmark_min_time="${BENCH_MIN_TIME:-0.3}" --benchmark_repetitions="${BENCH_REPS:-3}" \
  --benchmark_report_aggregates_only=true --benchmark_out="$OUT/shapes.json" --benchmark_out_format=json \
  | tee "$OUT/shapes.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/shapes_machine.txt"
python3 benchmarks/gpu/shapes_summary.py "$OUT/shapes.json" | tee "$OUT/shapes_summary.txt"
