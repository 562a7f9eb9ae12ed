#!/usr/bin/env bash
# The history's cost against a peer's, in one run: clpool's OpenCL hit pair with
# record_history(65536) on and off, and PyTorch's raw_alloc/raw_delete hit with
# _record_memory_history(context=None, max_entries=65536) on and off (bench_peer_torch).
# Needs the CUDA toolkit and PyTorch. Repetitions interleave at random, on one pinned CPU.
#   REPS=10  MIN_TIME=0.2  BENCH_CPU=2  BYTES=4096
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
build=${BUILD:-/tmp/clpool-history-peer}
mkdir -p "$OUT"
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF \
  2>&1 | tee "$OUT/configure.log" | grep -E "clpool benchmarks" || true
cmake --build "$build" -j "$(nproc)" --target bench_peer_torch 2>&1 | tail -2
bin=$build/benchmarks/bench_peer_torch
mt=${MIN_TIME:-0.2}
if "$bin" --benchmark_min_time=0.01s --benchmark_filter=NONE >/dev/null 2>&1; then mt="${mt}s"; fi
{ lscpu | grep -E "Model name"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true; } \
  | tee "$OUT/history_peer.txt"
taskset -c "${BENCH_CPU:-2}" "$bin" \
  --benchmark_filter="(history_on.*|^clpool/(BufferPool|NoLock|ThreadCached)/opencl|^torch/device)/${BYTES:-4096}\$" \
  --benchmark_min_time="$mt" --benchmark_repetitions="${REPS:-10}" --benchmark_enable_random_interleaving=true \
  --benchmark_out="$OUT/history_peer.json" --benchmark_out_format=json 2>&1 | tee -a "$OUT/history_peer.txt" | grep -v "^\s*$" | tail -5
python3 - "$OUT/history_peer.json" <<'PY' | tee "$OUT/history_peer_summary.txt"
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type") == "iteration":
        runs[b["run_name"].replace("+history_on", "")].append((("+history_on" in b["run_name"]), b["real_time"]))
print(f"{'pair':34}{'off best':>10}{'off med':>9}{'on best':>9}{'on med':>8}{'on/off best':>13}{'med':>6}")
for name, rows in sorted(runs.items()):
    off = [t for on, t in rows if not on]
    on = [t for on, t in rows if on]
    if off and on:
        print(f"{name:34}{min(off):10.2f}{statistics.median(off):9.2f}{min(on):9.2f}{statistics.median(on):8.2f}"
              f"{min(on) / min(off):13.2f}{statistics.median(on) / statistics.median(off):6.2f}")
PY
