#!/usr/bin/env bash
# Trace replays timed against PyTorch on a GPU machine, C++ on both sides, in one run:
#   clpool-replay TRACE -d gpu --timed   BufferPool, ArenaPool (sub-buffer views), OffsetArenaPool (buffer +
#                                        offset), SVMArenaPool and SVMPool on the OpenCL device
#   replay_timed_torch TRACE             PyTorch's raw_alloc / raw_delete, default and with
#                                        PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (separate processes)
# on every benchmarks/traces/*.trace.gz. Each: a first pass from cold (a fresh pool, an emptied cache) and a
# second pass of the same trace over the warm one, as ns per alloc + free pair, peak held (PyTorch: reserved)
# over the trace's live peak, and the second pass's allocations with no driver call.
# Then benchmarks/gpu/driver_floor.cpp once, on the same device, with the traces' live peaks: the driver's own cost
# of obtaining that many bytes (one buffer; 64 MiB segments; coarse-grained SVM), the floor under any first pass
# from cold that holds about the live bytes; and driver_floor_cuda.cu the same through cudaMalloc where nvcc exists.
# Writes into $OUT (default ./out/replay_timed): summary.md (the tables, the targets, the floor), results.json
# (every run's JSON), driver_floor{,_cuda}.{txt,jsonl}, machine.txt, and raw.tar.gz (the per-run JSON and text,
# the build logs).
# Needs g++ >= 13, cmake, Boost, CLI11, nlohmann-json, Google Benchmark, an OpenCL ICD loader and CL-HPP,
# nvcc and PyTorch with CUDA (without Torch the PyTorch rows are missing). About 4-6 minutes on 16 cores.
#   RUNS=3          fresh pools (emptied caches) per configuration; times are medians; a pool gets no
#                   further run once MAX_S=10 seconds have passed on it
#   BUDGET_S=510    the whole script's wall-time budget: replays not started in time are skipped, noted
#   CAP_S=60        the most one replay (a pool, or PyTorch, on a trace) may take; one that runs out is noted
#   DEVICE=gpu      clpool-replay's --device
#   TRACES="a b"    other traces (plain or .gz) instead of benchmarks/traces/*.trace.gz
#   FLOOR_S=45      seconds of BUDGET_S kept for the driver floor after the replays (its cap too)
#   REPLAY_BIN=path, TORCH_BIN=path   use these builds (skips configure and build; for a dry run on PoCL)
#   FLOOR_BIN=path  use this driver_floor (else it is compiled with g++, as is driver_floor_cuda with nvcc)
set -uo pipefail
start=$(date +%s)
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/replay_timed}
mkdir -p "$OUT"
runs=${RUNS:-3}
max_s=${MAX_S:-10}
budget=${BUDGET_S:-510}
cap=${CAP_S:-60}
floor_s=${FLOOR_S:-45}
reserve=0  # seconds timed() leaves for later steps
device=${DEVICE:-gpu}
build=build/gpu-replay-timed
raw=$(mktemp -d)
mkdir -p "$raw/json" "$raw/text"
traces_dir=$(mktemp -d)
trap 'rm -rf "$raw" "$traces_dir"' EXIT

left() { echo $((budget - ($(date +%s) - start))); }
note() { echo "$*" | tee -a "$raw/text/notes.txt"; }

# NVIDIA's OpenCL driver is installed without its ICD file on some images.
if [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi > /dev/null; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd || true
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "compiler: $(${CXX:-g++} --version | head -1)"
  echo "cmake: $(cmake --version | head -1)"
  echo "nvidia driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
  echo "gpu: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1 || echo none)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null || echo none)"
  echo "runs: $runs per configuration (medians)"
} > "$OUT/machine.txt"
cat "$OUT/machine.txt"

# The floor programs are one file each: compiled directly, in the background, beside the replay build.
mkdir -p "$build"
floor=${FLOOR_BIN:-$build/driver_floor}
floor_cuda=
floor_pids=()
if [ -z "${FLOOR_BIN:-}" ]; then
  ${CXX:-g++} -std=c++20 -O2 benchmarks/gpu/driver_floor.cpp -lOpenCL -o "$floor" \
    > "$raw/text/build_floor.log" 2>&1 &
  floor_pids+=($!)
  nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true)
  if [ -n "$nvcc" ]; then
    floor_cuda=$build/driver_floor_cuda
    "$nvcc" -std=c++17 -O2 benchmarks/gpu/driver_floor_cuda.cu -o "$floor_cuda" \
      > "$raw/text/build_floor_cuda.log" 2>&1 &
    floor_pids+=($!)
  fi
fi

if [ -n "${REPLAY_BIN:-}" ]; then
  replay=$REPLAY_BIN
  torch=${TORCH_BIN:-}
else
  prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_TOOLS=ON \
    -DCLPOOL_BUILD_BENCHMARKS=ON -DCLPOOL_BUILD_DROPIN_C=OFF ${prefix:+"-DCMAKE_PREFIX_PATH=$prefix"} \
    > "$raw/text/configure.log" 2>&1 || { tail -30 "$raw/text/configure.log"; echo "configure failed"; }
  grep -E "clpool benchmarks" "$raw/text/configure.log" || true
  targets=(clpool-replay)
  if cmake --build "$build" --target help 2>/dev/null | grep -q "replay_timed_torch"; then
    targets+=(replay_timed_torch)
  else
    note "replay_timed_torch not configured (no usable Torch or CUDA toolkit): no PyTorch rows"
  fi
  # Keep going past a failed target: clpool-replay's rows do not need PyTorch's program, nor the reverse.
  keep=()
  if [ -f "$build/Makefile" ]; then keep=(-- -k); elif [ -f "$build/build.ninja" ]; then keep=(-- -k 0); fi
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" "${keep[@]}" > "$raw/text/build.log" 2>&1 ||
    { tail -40 "$raw/text/build.log"; note "build failed for some of: ${targets[*]}"; }
  tail -2 "$raw/text/build.log"
  replay=$build/tools/clpool-replay
  torch=$build/benchmarks/replay_timed_torch
fi
for pid in "${floor_pids[@]}"; do wait "$pid"; done
[ -x "$floor" ] || { tail -5 "$raw/text/build_floor.log" 2>/dev/null; note "no driver_floor ($floor): no floor"; }
if [ -n "$floor_cuda" ] && [ ! -x "$floor_cuda" ]; then
  tail -5 "$raw/text/build_floor_cuda.log"; note "driver_floor_cuda build failed: no CUDA floor"; floor_cuda=
fi
[ -x "$floor" ] && reserve=$floor_s
echo "built after $(( $(date +%s) - start )) s"

# Each replay gets the time left, at most $cap s; one that runs out is noted, the rest go on.
timed() {  # timed <label> <log> <command...>
  local label=$1 log=$2; shift 2
  local t; t=$(( $(left) - reserve ))
  if [ "$t" -lt 15 ]; then note "$label: skipped, out of time"; return; fi
  [ "$t" -gt "$cap" ] && t=$cap
  local s; s=$(date +%s)
  timeout -k 5 "$t" "$@" > "$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || note "$label: exit $rc after $(( $(date +%s) - s )) s (log: text/$(basename "$log"))"
  grep -E "^(BufferPool|ArenaPool|OffsetArenaPool|SVMArenaPool|SVMPool|PyTorch)|skipped" "$log" || tail -3 "$log"
}

# The GPT traces first (the issue's), then whatever else is there.
if [ -n "${TRACES:-}" ]; then
  read -ra traces <<< "$TRACES"
else
  mapfile -t traces < <(ls benchmarks/traces/gpt_training.trace.gz benchmarks/traces/gpt_inference.trace.gz 2>/dev/null;
                        ls benchmarks/traces/*.trace.gz | grep -v '/gpt_\(training\|inference\)\.trace\.gz$')
fi
for src in "${traces[@]}"; do
  stem=$(basename "$src"); stem=${stem%.gz}; stem=${stem%.trace}
  trace=$traces_dir/$stem.trace
  case $src in
    *.gz) gunzip -c "$src" > "$trace" ;;
    *) cp "$src" "$trace" ;;
  esac
  echo "=== $stem ($(( $(date +%s) - start )) s in)"
  # One process per pool: a pool too slow for the cap loses only its own row.
  if [ -x "$replay" ]; then
    for pool in BufferPool ArenaPool OffsetArenaPool SVMArenaPool SVMPool; do
      timed "$stem $pool" "$raw/text/$stem.$pool.txt" "$replay" "$trace" -d "$device" --timed --pools "$pool" \
        --runs "$runs" --max-seconds "$max_s" --json "$raw/json/$stem.$pool.json"
    done
  fi
  if [ -n "$torch" ] && [ -x "$torch" ]; then
    timed "$stem PyTorch" "$raw/text/$stem.torch.txt" \
      env -u PYTORCH_CUDA_ALLOC_CONF "$torch" "$trace" --runs "$runs" --name "PyTorch" \
      --json "$raw/json/$stem.torch.json"
    timed "$stem PyTorch expandable" "$raw/text/$stem.torch_expandable.txt" \
      env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$torch" "$trace" --runs "$runs" \
      --name "PyTorch expandable_segments:True" --json "$raw/json/$stem.torch_expandable.json"
  fi
done

# The driver's floor for the traces' live peaks (from the replays' JSON), on the same device, after the replays.
reserve=0
rm -f "$OUT/driver_floor.jsonl" "$OUT/driver_floor_cuda.jsonl" "$OUT/driver_floor.txt" "$OUT/driver_floor_cuda.txt"
mapfile -t peaks < <(python3 - "$raw"/json/*.json <<'EOF'
import json, os, sys
seen = {}
for path in sys.argv[1:]:
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        continue
    for d in doc if isinstance(doc, list) else [doc]:
        name = os.path.basename(d.get("trace", {}).get("path", ""))
        name = name[: -len(".trace")] if name.endswith(".trace") else name
        if name and d.get("peak_live_bytes"):
            seen.setdefault(name, d["peak_live_bytes"])
for name, n in seen.items():
    print(f"{name}={n}")
EOF
)
if [ ${#peaks[@]} -eq 0 ]; then
  note "driver floor: no live peaks (no replay wrote its JSON)"
elif [ -x "$floor" ]; then
  echo "=== driver floor: ${peaks[*]} ($(( $(date +%s) - start )) s in)"
  cap=$floor_s timed "driver floor" "$OUT/driver_floor.txt" "$floor" -d "$device" --runs 3 --max-seconds 5 \
    --jsonl "$OUT/driver_floor.jsonl" "${peaks[@]}"
  sed -n '/^label/,/^$/p' "$OUT/driver_floor.txt"
  if [ -n "$floor_cuda" ]; then
    cap=$floor_s timed "driver floor CUDA" "$OUT/driver_floor_cuda.txt" "$floor_cuda" --runs 3 --max-seconds 5 \
      --jsonl "$OUT/driver_floor_cuda.jsonl" "${peaks[@]}"
    sed -n '/^label/,/^$/p' "$OUT/driver_floor_cuda.txt"
  fi
fi
cp "$OUT"/driver_floor*.txt "$raw/text/" 2>/dev/null

python3 benchmarks/gpu/replay_timed_summary.py --machine "$OUT/machine.txt" --notes "$raw/text/notes.txt" \
  --floor "$OUT/driver_floor.jsonl" --floor "$OUT/driver_floor_cuda.jsonl" \
  --merged "$OUT/results.json" "$raw"/json/*.json > "$OUT/summary.md" 2> "$raw/text/summary.err" ||
  { echo "summary failed:"; cat "$raw/text/summary.err"; }
cat "$OUT/summary.md"
tar -czf "$OUT/raw.tar.gz" -C "$raw" json text
echo "done in $(( $(date +%s) - start )) s; results in $OUT"
ls -la "$OUT"
