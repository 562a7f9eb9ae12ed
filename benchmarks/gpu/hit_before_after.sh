#!/usr/bin/env bash
# The hit pair before and after a change, in one run on one machine: builds bench_hit_latency (Release)
# from a BEFORE tree and from this tree, then runs them alternately (before, after, before, after, ...)
# so drift between runs cannot decide the comparison. Writes Google Benchmark JSON and a summary to $OUT.
#   BEFORE=path      a source tree of the earlier commit (e.g. `git archive a757afd | tar -x -C before`)
#   TREES="name=path ..."  instead of BEFORE: several earlier trees, compared in order before this one
#   ROUNDS=3         alternations;  BENCH_REPS=5  repetitions per run;  BENCH_MIN_TIME=0.2
#   CLPOOL_BENCH_MAX_BYTES=65536  the largest size swept (hits cost the same at every size)
#   BENCH_CPU=2      the CPU the runs are pinned to (taskset)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
if [ -z "${TREES:-}" ]; then TREES="before=${BEFORE:?set BEFORE (or TREES) to the earlier source tree}"; fi
TREES="$TREES after=$PWD"
sides=""
rounds=${ROUNDS:-3}
reps=${BENCH_REPS:-5}
min_time=${BENCH_MIN_TIME:-0.2}
export CLPOOL_BENCH_MAX_BYTES=${CLPOOL_BENCH_MAX_BYTES:-65536}
mkdir -p "$OUT"
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi
jobs=$(nproc)
for tree in $TREES; do
  side=${tree%%=*}; src=${tree#*=}; sides="$sides $side"
  cmake -S "$src" -B "build/hit-$side" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
  cmake --build "build/hit-$side" --target bench_hit_latency -j "$jobs" >/dev/null
done
for r in $(seq 1 "$rounds"); do
  for side in $sides; do
    taskset -c "${BENCH_CPU:-2}" "build/hit-$side/benchmarks/bench_hit_latency" --benchmark_filter='^hit/' \
      --benchmark_repetitions="$reps" --benchmark_min_time="$min_time" --benchmark_report_aggregates_only=true \
      --benchmark_out="$OUT/hit-$side-$r.json" --benchmark_out_format=json >/dev/null
  done
done
python3 - "$OUT" "$rounds" $sides <<'PY' | tee "$OUT/summary.txt"
import json, sys, statistics, collections
out, rounds, sides = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = {s: collections.defaultdict(list) for s in sides}
for s in sides:
    for r in range(1, rounds + 1):
        for b in json.load(open(f"{out}/hit-{s}-{r}.json"))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                pool = "/".join(b["run_name"].split("/")[1:3])
                med[s][pool].append(b["real_time"])
first, last = sides[0], sides[-1]
print(f"{'pool (median ns)':30}" + "".join(f"{s:>12}" for s in sides) + f"{last + '/' + first:>16}")
for pool in med[first]:
    if any(pool not in med[s] for s in sides): continue
    m = [statistics.median(med[s][pool]) for s in sides]
    print(f"{pool:30}" + "".join(f"{x:12.2f}" for x in m) + f"{m[-1] / m[0]:16.3f}")
PY
