# Builds every benchmark (Release) and runs each for a moment on PoCL so none can rot; plots their
# JSON with benchmarks/plot.py. Numbers are never asserted here. About 3 minutes on 2 cores.
set -euo pipefail
jobs=$(nproc)
build=build/bench-ci
out=$build/out
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF
cmake --build "$build" -j "$jobs"
mkdir -p "$out"
export CLPOOL_BENCH_MAX_BYTES=4096  # 256 B .. 4 KiB: three sizes per family
for prog in "$build"/benchmarks/bench_*; do
  [ -f "$prog" ] && [ -x "$prog" ] || continue
  name=$(basename "$prog")
  echo "=== $name"
  filter=.
  # The peer program needs a GPU; on a CPU-only runner it must at least start and list its benchmarks.
  if [ "$name" = bench_peer_torch ]; then filter='clpool/'; fi
  timeout 120 "$prog" --benchmark_min_time=0.01 --benchmark_filter="$filter" \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json
done
python3 benchmarks/plot.py latency "$out/hit.svg" "$out/bench_hit_latency.json" --filter '^(hit|raw)/'
python3 benchmarks/plot.py threads "$out/contention.svg" "$out/bench_contention.json"
grep -q '<polyline' "$out/hit.svg" && grep -q '<polyline' "$out/contention.svg"
