#!/usr/bin/env bash
# Multiple devices on a machine with several NVIDIA GPUs: the multi-device tests on the real devices, then
# bench_multi_device (aggregate host-to-device bandwidth to 1, 2, 4, 8 GPUs at once, pinned and
# staged pageable, with the driver's pageable path as the baseline) in one run, and the ratios
# against the targets (2 GPUs: pinned >= 1.9x one GPU, staged >= 1.6x). Writes $OUT/multi_gpu/.
# Needs g++ >= 13, cmake, Boost, doctest, Google Benchmark, CL-HPP, an OpenCL ICD loader.
#   CLPOOL_BENCH_MAX_BYTES=268435456  bytes per device per iteration (default 256 MiB)
#   BENCH_MIN_TIME=0.5  BENCH_REPS=3
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/out}/multi_gpu
mkdir -p "$out"
build=${BUILD_DIR:-build/gpu-multi}
export CLPOOL_BENCH_MAX_BYTES=${CLPOOL_BENCH_MAX_BYTES:-268435456}

if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "nvidia driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
  echo "cpu: $(lscpu 2>/dev/null | grep 'Model name' | sed 's/ \+/ /g')  cores: $(nproc)"
  nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -20
  (clinfo -l 2>&1 || true)
} > "$out/machine.txt"
cat "$out/machine.txt"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TOOLS=OFF -DCLPOOL_BENCH_PEERS=OFF \
  >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target clpool_multi_device_tests bench_multi_device >"$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }

# The multi-device suite on the GPUs' platform (it needs two devices on one platform).
"$build/tests/clpool_multi_device_tests" >"$out/tests.log" 2>&1
echo "multi-device tests exit $?: $(tail -2 "$out/tests.log" | head -1)"

"$build/benchmarks/bench_multi_device" --benchmark_min_time="${BENCH_MIN_TIME:-0.5}" \
  --benchmark_repetitions="${BENCH_REPS:-3}" --benchmark_out_format=json \
  --benchmark_out="$out/bench_multi_device.json" >"$out/bench_multi_device.txt" 2>&1
echo "bench_multi_device exit $?"
python3 benchmarks/gpu/multi_gpu_summary.py "$out/bench_multi_device.json" | tee "$out/summary.txt"
