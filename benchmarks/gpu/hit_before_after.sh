#!/usr/bin/env bash
# The hit pair before and after a change, in one run on one machine: builds bench_hit_latency (Release)
# from a BEFORE tree and from this tree, then runs them alternately (before, after, before, after, ...)
# so drift between runs cannot decide the comparison. Writes Google Benchmark JSON and a summary to $OUT.
#   BEFORE=path      a source tree of the earlier commit (e.g. `git archive a757afd | tar -x -C before`)
#   ROUNDS=3         alternations;  BENCH_REPS=5  repetitions per run;  BENCH_MIN_TIME=0.2
#   CLPOOL_BENCH_MAX_BYTES=65536  the largest size swept (hits cost the same at every size)
#   BENCH_CPU=2      the CPU the runs are pinned to (taskset)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out}
BEFORE=${BEFORE:?set BEFORE to the earlier source tree}
rounds=${ROUNDS:-3}
reps=${BENCH_REPS:-5}
min_time=${BENCH_MIN_TIME:-0.2}
export CLPOOL_BENCH_MAX_BYTES=${CLPOOL_BENCH_MAX_BYTES:-65536}
mkdir -p "$OUT"
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi
jobs=$(nproc)
for side in before after; do
  src=$PWD; [ "$side" = before ] && src=$BEFORE
  cmake -S "$src" -B "build/hit-$side" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
  cmake --build "build/hit-$side" --target bench_hit_latency -j "$jobs" >/dev/null
done
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    taskset -c "${BENCH_CPU:-2}" "build/hit-$side/benchmarks/bench_hit_latency" --benchmark_filter='^hit/' \
      --benchmark_repetitions="$reps" --benchmark_min_time="$min_time" --benchmark_report_aggregates_only=true \
      --benchmark_out="$OUT/hit-$side-$r.json" --benchmark_out_format=json >/dev/null
  done
done
python3 - "$OUT" "$rounds" <<'PY' | tee "$OUT/summary.txt"
import json, sys, statistics, collections
out, rounds = sys.argv[1], int(sys.argv[2])
med = {s: collections.defaultdict(list) for s in ("before", "after")}
for s in med:
    for r in range(1, rounds + 1):
        for b in json.load(open(f"{out}/hit-{s}-{r}.json"))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                pool = b["run_name"].split("/")[1]
                med[s][pool].append(b["real_time"])
print(f"{'pool':28} {'before ns':>10} {'after ns':>10} {'after/before':>13}")
for pool in med["before"]:
    if pool not in med["after"]: continue
    a, b = statistics.median(med["before"][pool]), statistics.median(med["after"][pool])
    print(f"{pool:28} {a:10.2f} {b:10.2f} {b / a:13.3f}")
PY
