#!/usr/bin/env bash
# One sitting on the GPU host: the hit pair of an earlier tree against this one (history off), then
# the history's cost on clpool's hit pair beside PyTorch's on its own (bench_peer_torch), so both
# comparisons share a machine and a moment. Writes Google Benchmark JSON to $OUT (seven files).
#   BEFORE=path   the earlier source tree (e.g. `git archive 45cdf40 | tar -x -C .before`)
#   BENCH_CPU=2   the CPU the runs are pinned to
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
BEFORE=${BEFORE:?set BEFORE to the earlier source tree}
cpu=${BENCH_CPU:-2}
mkdir -p "$OUT" /etc/OpenCL/vendors
[ -e /etc/OpenCL/vendors/nvidia.icd ] || echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep "Model name"; } > "$OUT/machine.txt"
opts=(-DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF)
(cmake -S "$BEFORE" -B build/hit-before "${opts[@]}" >/dev/null && cmake --build build/hit-before --target bench_hit_latency -j6 >/dev/null) &
(cmake -S . -B build/hit-after "${opts[@]}" >/dev/null 2>&1 && cmake --build build/hit-after --target bench_hit_latency bench_peer_torch -j10 >/dev/null) &
wait
export CLPOOL_BENCH_MAX_BYTES=4096
filter='^hit/(NoLock|SingleMutex|ThreadCached|BufferPool)/opencl/4096'
for r in 1 2 3; do
  for side in before after; do  # alternated, so drift between runs cannot decide the comparison
    taskset -c "$cpu" "build/hit-$side/benchmarks/bench_hit_latency" --benchmark_filter="$filter" \
      --benchmark_repetitions=5 --benchmark_min_time=0.2s --benchmark_report_aggregates_only=true \
      --benchmark_out="$OUT/hit-$side-$r.json" --benchmark_out_format=json >/dev/null
  done
done
taskset -c "$cpu" build/hit-after/benchmarks/bench_peer_torch \
  --benchmark_filter='(history_on.*|^clpool/(BufferPool|NoLock|ThreadCached)/opencl|^torch/device)/4096$' \
  --benchmark_min_time=0.2s --benchmark_repetitions=8 --benchmark_enable_random_interleaving=true \
  --benchmark_out="$OUT/history_peer.json" --benchmark_out_format=json >/dev/null
