#!/usr/bin/env bash
# Transfers on an NVIDIA GPU: the transfer tests on the real device, then bench_transfer (OpenCL:
# driver pageable, pinned pool, staged pipeline, auto) and bench_transfer_cuda (cudaMemcpy pinned and
# pageable) in one run, 4 KiB .. 1 GiB, as Google Benchmark JSON, plus a summary against the targets.
# Run from anywhere; needs g++ >= 13, cmake, Boost, doctest, Google Benchmark, CL-HPP, an OpenCL ICD
# loader, nvcc. Writes $OUT (default ./out)/transfers/. About 5 minutes on 16 cores.
#   CLPOOL_BENCH_MAX_BYTES=1073741824  largest size (default 1 GiB here)
#   BENCH_MIN_TIME=0.2  BENCH_REPS=3   per benchmark; the summary uses medians
#   COPY_THREADS="12 16"  also run the staged/auto families with these copy_threads (one JSON each,
#                         bench_transfer_tN.json; the summary prints their staged checks too)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/out}/transfers
mkdir -p "$out"
build=${BUILD_DIR:-build/gpu-transfers}
export CLPOOL_BENCH_MAX_BYTES=${CLPOOL_BENCH_MAX_BYTES:-1073741824}
min_time=${BENCH_MIN_TIME:-0.2}
reps=${BENCH_REPS:-3}

if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "nvidia driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
  echo "cpu: $(lscpu 2>/dev/null | grep 'Model name' | sed 's/ \+/ /g')  cores: $(nproc)"
  nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1
  (clinfo -l 2>&1 || true)
} > "$out/machine.txt"
cat "$out/machine.txt"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TOOLS=OFF >"$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log"; exit 1; }
grep -E "bench_transfer_cuda|clpool benchmarks" "$out/configure.log"
targets=(clpool_tests bench_transfer)
grep -q bench_transfer_cuda "$build/Makefile" "$build/benchmarks/Makefile" 2>/dev/null && targets+=(bench_transfer_cuda)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }

# Correctness on the real device first (byte-for-byte round trips, release_after under held queues).
"$build/tests/clpool_tests" -sf='*transfer*,*release_after*,*pinned_allocator*,*mapped_pinned*' >"$out/tests.log" 2>&1
echo "tests exit $?: $(tail -2 "$out/tests.log" | head -1)"

common=(--benchmark_min_time="$min_time" --benchmark_repetitions="$reps" --benchmark_out_format=json)
"$build/benchmarks/bench_transfer" "${common[@]}" --benchmark_out="$out/bench_transfer.json" >"$out/bench_transfer.txt" 2>&1
echo "bench_transfer exit $?"
for t in ${COPY_THREADS:-}; do
  CLPOOL_BENCH_COPY_THREADS=$t "$build/benchmarks/bench_transfer" "${common[@]}" --benchmark_filter='/(staged|auto)/' \
    --benchmark_out="$out/bench_transfer_t$t.json" >"$out/bench_transfer_t$t.txt" 2>&1
  echo "bench_transfer copy_threads=$t exit $?"
done
if [ -x "$build/benchmarks/bench_transfer_cuda" ]; then
  "$build/benchmarks/bench_transfer_cuda" "${common[@]}" --benchmark_out="$out/bench_transfer_cuda.json" \
    >"$out/bench_transfer_cuda.txt" 2>&1
  echo "bench_transfer_cuda exit $?"
else
  echo "bench_transfer_cuda was not built (see configure.log)"
fi
python3 benchmarks/gpu/transfers_summary.py "$out" | tee "$out/summary.txt"
