#!/usr/bin/env bash
# The hit pair in a plain loop (hit_pair_loop.cpp), built with g++ -O3 from several trees' headers and
# run alternately on one pinned CPU: a steadier figure than Google Benchmark's for small differences.
#   TREES="name=path ..."   earlier source trees (e.g. from `git archive`); this tree is "after"
#   HISTORY="0 65536"      history sizes to run each side with (0: off), default "0"
#   ROUNDS=5  BENCH_CPU=2
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi
sides=""
for tree in ${TREES:-} after=$PWD; do
  side=${tree%%=*}; src=${tree#*=}; sides="$sides $side"
  ${CXX:-g++} -std=c++20 -O3 -DNDEBUG -I"$src/include" -I"$src/policies" -I"$src/backends" \
    benchmarks/gpu/hit_pair_loop.cpp -o "$OUT/hit_pair_loop-$side" -lOpenCL -lpthread &
done
wait
{ lscpu | grep -E "Model name"; ${CXX:-g++} --version | head -1; } | tee "$OUT/hit_pair_loop.txt"
for r in $(seq 1 "${ROUNDS:-5}"); do
  for side in $sides; do
    for h in ${HISTORY:-0}; do taskset -c "${BENCH_CPU:-2}" "$OUT/hit_pair_loop-$side" "$side" "$h"; done
  done
done | tee -a "$OUT/hit_pair_loop.txt"
rm -f "$OUT"/hit_pair_loop-*
