#!/usr/bin/env bash
# Builds every benchmark (Release) on a GPU machine and runs hit latency, contention, peers and memory
# into $OUT (default ./out) as Google Benchmark JSON, with SVG plots and the machine's description.
# Run from anywhere; needs g++ >= 13 (or clang), cmake, Boost, Google Benchmark, an OpenCL ICD loader
# and CL-HPP; nvcc/CUDA and PyTorch for bench_peer_torch. Takes about 5 minutes on 16 cores.
#   BENCH_MIN_TIME=0.2   seconds per benchmark (Google Benchmark's --benchmark_min_time)
#   BENCH_REPS=3         repetitions of the hit and contention runs (medians are plotted)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
min_time=${BENCH_MIN_TIME:-0.2}
reps=${BENCH_REPS:-3}
build=build/gpu-bench

# NVIDIA's OpenCL driver is installed without its ICD file on some images.
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "compiler: $(${CXX:-g++} --version | head -1)"
  echo "cmake: $(cmake --version | head -1)"
  echo "nvidia driver: $(cat /proc/driver/nvidia/version 2>/dev/null | head -1 || echo none)"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null || echo none)"
} > "$OUT/machine.txt"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1 || true
lscpu > "$OUT/lscpu.txt" 2>&1 || true
(clinfo 2>&1 || echo "clinfo not installed") > "$OUT/clinfo.txt"
cat "$OUT/machine.txt"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF \
  2>&1 | tee "$OUT/configure.log" | grep -E "clpool benchmarks|Error|error" || true
targets=(bench_hit_latency bench_contention bench_memory)
if grep -q "bench_peer_torch" "$build/Makefile" "$build/build.ninja" 2>/dev/null; then targets+=(bench_peer_torch); fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" 2>&1 | tail -3

bin=$build/benchmarks
# Google Benchmark >= 1.8 wants a unit on --benchmark_min_time; 1.7 refuses one.
mt="$min_time"
if "$bin/bench_memory" --benchmark_min_time=0.01s --benchmark_filter=NONE >/dev/null 2>&1; then mt="${min_time}s"; fi

run() {  # run <program> <json name> [flags...]
  local prog=$1 name=$2; shift 2
  echo "=== $prog -> $OUT/$name.json"
  "$bin/$prog" --benchmark_out="$OUT/$name.json" --benchmark_out_format=json "$@" 2>&1 | tee "$OUT/$name.txt" | tail -60
}
run bench_hit_latency hit_latency --benchmark_min_time="$mt" --benchmark_repetitions="$reps" \
  --benchmark_report_aggregates_only=true
run bench_contention contention --benchmark_min_time="$mt" --benchmark_repetitions="$reps" \
  --benchmark_report_aggregates_only=true
run bench_memory memory --benchmark_min_time="$mt"
if [ -x "$bin/bench_peer_torch" ]; then
  run bench_peer_torch peers --benchmark_min_time="$mt" --benchmark_repetitions="$reps" \
    --benchmark_report_aggregates_only=true
else
  echo "bench_peer_torch not built (no CUDA toolkit found)" | tee "$OUT/peers.txt"
fi

plot=benchmarks/plot.py
python3 $plot latency "$OUT/hit_latency.svg" "$OUT/hit_latency.json" --filter '^hit/' --title "clpool hit pair vs size (CPU time)"
python3 $plot latency "$OUT/hit_vs_raw.svg" "$OUT/hit_latency.json" --filter '^(hit/(SingleMutex|NoLock|ThreadCached)/|raw/)' \
  --time real_time --title "clpool hit pair vs raw clCreateBuffer (+ first use)"
python3 $plot threads "$OUT/contention.svg" "$OUT/contention.json" --title "Aggregate pairs/s vs threads, per lock policy"
if [ -s "$OUT/peers.json" ]; then
  python3 $plot latency "$OUT/peers.svg" "$OUT/peers.json" --time real_time --title "clpool vs PyTorch caching allocators vs CUDA"
fi
python3 benchmarks/gpu/alloc_summary.py "$OUT" | tee "$OUT/summary.txt"
ls -la "$OUT"
