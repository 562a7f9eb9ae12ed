#!/usr/bin/env bash
# The sub-allocating pools on a GPU machine (docs/ARENA.md): builds bench_arena and
# bench_memory (Release) and runs them into $OUT (default ./out/arena), all in one run:
#   arena/hit/{BufferPool,ArenaPool}/opencl   hit pair, the arena beside BufferPool (target <= 40 ns)
#   arena/split_miss/opencl                   a miss carved from a held segment + its release (target <= 2 us),
#                                             its sub-buffer a kept one
#   arena/split_miss_new_view/opencl          the same, every carve making its sub-buffer (cached_views 0)
#   raw/sub_buffer/opencl                     clCreateSubBuffer + release alone, no pool (the driver's share)
#   arena/stream/{whole,sub}                  a kernel streaming through whole buffers and through
#                                             sub-allocated blocks, alternated (target: sub >= 98% of whole)
#   arena/hit/{SVMPool,SVMArenaPool}/svm, arena/hit/OffsetArenaPool/opencl
#                                             the fast-and-frugal pools' hit pairs (target <= 25 ns)
#   arena/split_miss/{svm,offsets}            a carve with no driver call and its release
#   arena/stream/{svm_whole,svm_arena}        a kernel through SVM pointers: whole allocations, and arena
#                                             blocks at interior offsets (target: svm_arena >= 98% of whole)
#   arena/stream/{offsets_whole,offsets}      a kernel given (buffer, offset): whole buffers, arena blocks
#   raw/svm_alloc                             clSVMAlloc + first use + clSVMFree, no pool (the baseline)
#   memory/*                                  peak held / peak live per bucket scheme and the arena
# Then prints the ratios. Needs what benchmarks/gpu/alloc.sh needs (no CUDA or Torch).
#   BENCH_MIN_TIME=0.2   seconds per benchmark
#   BENCH_REPS=5         repetitions (medians are reported)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/arena}
mkdir -p "$OUT"
min_time=${BENCH_MIN_TIME:-0.2}
reps=${BENCH_REPS:-5}
build=build/gpu-bench

if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "compiler: $(${CXX:-g++} --version | head -1)"
  echo "nvidia driver: $(cat /proc/driver/nvidia/version 2>/dev/null | head -1 || echo none)"
} > "$OUT/machine.txt"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
cat "$OUT/machine.txt"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=OFF \
  -DCLPOOL_BENCH_PEERS=OFF 2>&1 | tee "$OUT/configure.log" | grep -E "Error|error" || true
cmake --build "$build" -j "$(nproc)" --target bench_arena bench_memory 2>&1 | tail -3
bin=$build/benchmarks
mt="$min_time"
if "$bin/bench_memory" --benchmark_min_time=0.01s --benchmark_filter=NONE >/dev/null 2>&1; then mt="${min_time}s"; fi

"$bin/bench_arena" --benchmark_min_time="$mt" --benchmark_repetitions="$reps" \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/arena.json" --benchmark_out_format=json 2>&1 | tee "$OUT/arena.txt" | tail -40
"$bin/bench_memory" --benchmark_min_time="$mt" --benchmark_out="$OUT/memory.json" \
  --benchmark_out_format=json 2>&1 | tee "$OUT/memory.txt" | tail -12

python3 - "$OUT/arena.json" "$OUT/memory.json" <<'PY' | tee "$OUT/summary.txt"
import json, sys
arena = json.load(open(sys.argv[1]))["benchmarks"]
med = {b["run_name"]: b for b in arena if b.get("aggregate_name") == "median"}
def t(name):
    b = med.get(name)
    return None if b is None else b["real_time"] if "stream" in name else b["cpu_time"]
print("median times (same run):")
for name in sorted(med):
    print(f"  {name:55s} {t(name):12.3f} {med[name]['time_unit']}")
for n in ("4096", "1048576"):
    a, b = t(f"arena/hit/ArenaPool/opencl/{n}"), t(f"arena/hit/BufferPool/opencl/{n}")
    if a and b:
        print(f"hit pair {n} B: ArenaPool {a:.1f} ns, BufferPool {b:.1f} ns ({a/b:.2f}x); target <= 40 ns: {'met' if a <= 40 else 'NOT met'}")
for n in ("4096", "1048576", "8388608"):
    raw = t(f"raw/sub_buffer/opencl/{n}")
    for kind, what in (("split_miss", "kept sub-buffer"), ("split_miss_new_view", "new sub-buffer")):
        m = t(f"arena/{kind}/opencl/{n}")
        if m is not None:
            base = f", raw clCreateSubBuffer + release {raw:.2f} us" if raw is not None else ""
            print(f"split miss {n} B ({what}): {m:.2f} us{base}; target <= 2 us: {'met' if m <= 2 else 'NOT met'}")
for n in ("8388608", "268435456"):
    w, s = t(f"arena/stream/whole/{n}/real_time"), t(f"arena/stream/sub/{n}/real_time")
    if w and s:
        print(f"stream {n} B: sub-allocated at {100*w/s:.1f}% of whole-buffer speed; target >= 98%: {'met' if w/s >= 0.98 else 'NOT met'}")
for n in ("4096", "1048576"):
    for pool, backend in (("SVMPool", "svm"), ("SVMArenaPool", "svm"), ("OffsetArenaPool", "opencl")):
        h = t(f"arena/hit/{pool}/{backend}/{n}")
        if h:
            print(f"hit pair {n} B: {pool} {h:.1f} ns; target <= 25 ns: {'met' if h <= 25 else 'NOT met'}")
for n in ("4096", "1048576", "8388608"):
    raw = t(f"raw/svm_alloc/{n}")
    for kind in ("svm", "offsets"):
        m = t(f"arena/split_miss/{kind}/{n}")
        if m is not None:
            base = f"; raw clSVMAlloc + first use + clSVMFree {raw:.1f} us" if raw is not None and kind == "svm" else ""
            print(f"split miss {n} B ({kind}, no driver call): {m:.3f} us{base}")
for n in ("8388608", "268435456"):
    cl = t(f"arena/stream/whole/{n}/real_time")
    for whole, carved in (("svm_whole", "svm_arena"), ("offsets_whole", "offsets")):
        w, s = t(f"arena/stream/{whole}/{n}/real_time"), t(f"arena/stream/{carved}/{n}/real_time")
        if w and s:
            vs_cl = f", {100*cl/s:.1f}% of a whole cl_mem" if cl else ""
            print(f"stream {n} B: {carved} at {100*w/s:.1f}% of {whole}{vs_cl}; target >= 98%: {'met' if cl and cl/s >= 0.98 else 'NOT met'}")
mem = json.load(open(sys.argv[2]))["benchmarks"]
print("peak held / peak live (bench_memory churn), held / live with the mix live at once:")
for b in mem:
    print(f"  {b['name']:32s} peak_ratio {b.get('peak_ratio', 0):.3f} held_ratio {b.get('held_ratio', 0):.3f}"
          f" churn without driver allocation {b.get('churn_driver_free_pct', 0):.2f}%")
PY
echo "results in $OUT"
