#!/usr/bin/env bash
# Builds the tools (Release) on a GPU machine and runs them on the GPU into $OUT (default ./out/tools):
# clpool-info's measurements and advice, a full clpool-bandwidth sweep (4 KiB..1 GiB, every mode, CSV,
# JSON and SVG), and clpool-replay of every shipped trace on the device. About 2 minutes.
# Expect on a discrete NVIDIA GPU: pinned-write/read near the transfers benchmark's pinned figures
# (about 55 GB/s on the H200), pageable far below, staged above pageable from 16 MiB, and
# clpool-info recommending BufferPool + MappedPinnedPool (staging).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}/tools
mkdir -p "$OUT"
build=build/gpu-tools

# NVIDIA's OpenCL driver is installed without its ICD file on some images.
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF \
  > "$OUT/configure.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target clpool-info clpool-bandwidth clpool-replay > "$OUT/build.log" 2>&1
bin=$build/tools
device=${CLPOOL_DEVICE:-gpu}

"$bin/clpool-info" --list --json "$OUT/devices.json" | tee "$OUT/devices.txt"
for size in 4KiB 1MiB 64MiB; do
  "$bin/clpool-info" --device "$device" --size $size --reps 9 --json "$OUT/info-$size.json" | tee "$OUT/info-$size.txt"
done
"$bin/clpool-bandwidth" --device "$device" --min 4KiB --max 1GiB --reps 5 --warmup 2 \
  --csv "$OUT/bandwidth.csv" --json "$OUT/bandwidth.json" --svg "$OUT/bandwidth.svg" | tee "$OUT/bandwidth.txt"
for trace in tests/data/traces/*.trace; do
  name=$(basename "$trace" .trace)
  "$bin/clpool-replay" "$trace" --device "$device" --no-buckets --json "$OUT/replay-$name.json" \
    --svg "$OUT/replay-$name.svg" | tee "$OUT/replay-$name.txt"
done
echo "results in $OUT"
