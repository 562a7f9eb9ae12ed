#!/usr/bin/env bash
# Hit-pair ablation: pre14 and the current tree with parts of the hit path compiled out (CLPOOL_ABL_*).
set -uo pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd; fi
W=/tmp/w; rm -rf $W; mkdir -p $W/pre14 $W/abl; tar xf pre14.tar -C $W/pre14; tar xf abl.tar -C $W/abl
lscpu | grep -E "Model name|MHz|^CPU\(s\)" > "$OUT/machine.txt"; uname -r >> "$OUT/machine.txt"; command -v perf >> "$OUT/machine.txt" 2>&1
cat > $W/probe.cpp <<'C'
#include <clpool/core/detail/asymmetric_fence.hpp>
#include <cstdio>
int main(){ std::printf("membarrier cheap=%d\n", (int)clpool::detail::asymmetric_fence::cheap()); }
C
g++ -std=c++20 -O2 -I$W/abl/include $W/probe.cpp -o $W/probe && $W/probe >> "$OUT/machine.txt"
declare -A FL=([cur]="" [claim]="-DCLPOOL_ABL_CLAIM" [hist]="-DCLPOOL_ABL_HIST" [proc]="-DCLPOOL_ABL_PROC" [seq]="-DCLPOOL_ABL_SEQ" [lock]="-DCLPOOL_ABL_LOCK" [all]="-DCLPOOL_ABL_CLAIM -DCLPOOL_ABL_HIST -DCLPOOL_ABL_PROC -DCLPOOL_ABL_SEQ -DCLPOOL_ABL_LOCK")
SIDES="pre14 cur claim hist proc seq lock all"
for s in $SIDES; do
  if [ $s = pre14 ]; then src=$W/pre14; fl=""; else src=$W/abl; fl="${FL[$s]}"; fi
  ( cmake -S $src -B $W/b-$s -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF -DCMAKE_CXX_FLAGS="$fl" >/dev/null && cmake --build $W/b-$s --target bench_hit_latency -j 2 >/dev/null 2>$OUT/build-$s.err ) &
done
wait
export CLPOOL_BENCH_MAX_BYTES=4096
F='^hit/(NoLock|SingleMutex|ThreadCached|Striped16|BufferPool)/opencl/'
for r in 1 2 3; do for s in $SIDES; do
  taskset -c 2 $W/b-$s/benchmarks/bench_hit_latency --benchmark_filter="$F" --benchmark_repetitions=5 --benchmark_min_time=0.2 --benchmark_report_aggregates_only=true --benchmark_out=$OUT/hit-$s-$r.json --benchmark_out_format=json >/dev/null 2>>$OUT/run.err
done; done
if command -v perf >/dev/null; then for s in $SIDES; do
  taskset -c 2 perf stat -e cycles,instructions -x, -o $OUT/perf-$s.txt $W/b-$s/benchmarks/bench_hit_latency --benchmark_filter='^hit/SingleMutex/opencl/256' --benchmark_min_time=1 >/dev/null 2>&1
done; fi
python3 - "$OUT" $SIDES <<'PY' | tee "$OUT/summary.txt"
import json, sys, statistics, collections, glob
out, sides = sys.argv[1], sys.argv[2:]
med = {s: collections.defaultdict(list) for s in sides}
for s in sides:
    for f in sorted(glob.glob(f"{out}/hit-{s}-*.json")):
        for b in json.load(open(f))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                med[s]["/".join(b["run_name"].split("/")[1:4])].append(b["real_time"])
print(f"{'pool/size (median of rounds)':34}" + "".join(f"{s:>9}" for s in sides))
for pool in med["cur"]:
    print(f"{pool:34}" + "".join(f"{statistics.median(med[s][pool]) if med[s][pool] else float('nan'):9.2f}" for s in sides))
PY
