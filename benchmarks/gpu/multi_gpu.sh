#!/usr/bin/env bash
# Several NVIDIA GPUs in one run, for 1, 2 and 4 GPUs at once (bench_multi_device; docs/DEVICES.md,
# "Several devices"):
#   - host-to-device with one context per device: pinned, staged pageable (default options, and a
#     sweep of copy threads 1/2/4/8 per device x chunk 4/8/16 MiB x staging buffers 3/4), and the
#     driver's own pageable path;
#   - CUDA beside it on the same GPUs: pinned cudaMemcpyAsync and pageable cudaMemcpy (cuda_multi_h2d.cu);
#   - the host's own copy bandwidth (pageable -> pinned) with the same thread counts;
#   - one context over 2 GPUs, a queue and a thread per GPU: in-order vs out-of-order queues,
#     blocking calls vs events, pinned and staged;
#   - the machine (GPUs, PCIe, NUMA nodes and each GPU's node), clpool-info --list on it, and the
#     multi-device test suite on the GPUs.
# Output: $OUT/multi_gpu.tar.gz (everything) and $OUT/multi_gpu_summary.txt (the tables and the
# targets, multi_gpu_summary.py). Budget: 9 minutes wall time; each step gets what is left.
#   multi_gpu.sh            on the GPU machine (writes /etc/OpenCL/vendors/nvidia.icd first)
#   multi_gpu.sh --dry-run  anywhere, on PoCL with four CPU devices and 4 MiB transfers: builds and
#                           runs every CPU-side part (nvcc only if present), touches nothing in /etc
# Needs g++ >= 13, cmake, Boost, doctest, Google Benchmark, CL-HPP, an OpenCL ICD loader; nvcc for
# the CUDA baseline. No network.
#   CLPOOL_BENCH_MAX_BYTES (default 256 MiB per device), CLPOOL_BENCH_ITERS (10), CLPOOL_BENCH_REPS (3)
set -uo pipefail
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
start=$(date +%s)
budget=${MULTI_GPU_BUDGET_S:-510}  # 8.5 min: the rest is margin for packing
cd "$(dirname "$0")/../.."
repo=$PWD
final=${OUT:-$repo/out}
mkdir -p "$final"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/multi_gpu.XXXXXX")
out=$scratch/multi_gpu
mkdir -p "$out"
left() { echo $(( budget - ($(date +%s) - start) )); }
# Seconds for a step: what is left less `reserve` for the steps after it, at least 10.
slice() { local s=$(( $(left) - $1 )); [ "$s" -lt 10 ] && s=10; echo "$s"; }

pack() {
  [ -f "$out/summary.txt" ] && cp "$out/summary.txt" "$final/multi_gpu_summary.txt"
  tar czf "$final/multi_gpu.tar.gz" -C "$scratch" multi_gpu
  echo "wrote $final/multi_gpu.tar.gz ($(du -h "$final/multi_gpu.tar.gz" | cut -f1)) after $(( $(date +%s) - start )) s"
  rm -rf "$scratch"
}
trap pack EXIT

if [ "$dry" = 1 ]; then
  export POCL_DEVICES=${POCL_DEVICES:-"pthread pthread pthread pthread"}
  export CLPOOL_BENCH_MAX_BYTES=${CLPOOL_BENCH_MAX_BYTES:-4194304}
  export CLPOOL_BENCH_ITERS=${CLPOOL_BENCH_ITERS:-2} CLPOOL_BENCH_REPS=${CLPOOL_BENCH_REPS:-1}
  build=${BUILD_DIR:-build/gpu-multi-dry}
  jobs=${JOBS:-1}
  cuda_args="4 2 1"
else
  mkdir -p /etc/OpenCL/vendors; echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
  export CLPOOL_BENCH_MAX_BYTES=${CLPOOL_BENCH_MAX_BYTES:-268435456}
  build=${BUILD_DIR:-build/gpu-multi}
  jobs=$(nproc)
  cuda_args="$(( CLPOOL_BENCH_MAX_BYTES >> 20 )) 10 3"
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  dry run: $dry"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed paths"
  echo "nvidia driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
  echo "cpu: $(lscpu 2>/dev/null | grep 'Model name' | sed 's/ \+/ /g')  cores: $(nproc)"
  lscpu 2>/dev/null | grep -i numa
  for n in /sys/devices/system/node/node[0-9]*; do
    [ -e "$n/cpulist" ] && echo "$(basename "$n"): cpus $(cat "$n/cpulist")  $(grep MemTotal "$n/meminfo" 2>/dev/null | awk '{print $3, $4, $5}')"
  done
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current \
      --format=csv,noheader 2>&1 | while IFS=, read -r i name bus gen width; do
      bdf=$(echo "$bus" | tr 'A-F' 'a-f' | sed 's/^ *0000\(....:\)/\1/; s/^ *//')
      echo "gpu $i:$name $bdf gen$gen x$width numa_node $(cat "/sys/bus/pci/devices/$bdf/numa_node" 2>/dev/null || echo ?)"
    done
    nvidia-smi topo -m 2>&1 | head -20
  else
    echo "no nvidia-smi"
  fi
  (clinfo -l 2>&1 || true)
} > "$out/machine.txt"
cat "$out/machine.txt"

# The CUDA baseline builds beside the cmake build.
cuda_bin=$scratch/cuda_multi_h2d
nvcc_pid=
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  "$nvcc" -O2 -o "$cuda_bin" benchmarks/gpu/cuda_multi_h2d.cu >"$out/nvcc.log" 2>&1 &
  nvcc_pid=$!
else
  echo "no nvcc: no CUDA baseline" | tee "$out/nvcc.log"
fi

# Configure: the tests and clpool-info if their dependencies are there, else without them.
targets=()
for opts in "ON ON" "OFF ON" "ON OFF" "OFF OFF"; do
  set -- $opts
  rm -rf "$build/CMakeCache.txt"
  if timeout "$(slice 420)" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_TESTS=$1 \
      -DCLPOOL_BUILD_TOOLS=$2 -DCLPOOL_BENCH_PEERS=OFF >>"$out/configure.log" 2>&1; then
    targets=(bench_multi_device)
    [ "$1" = ON ] && targets+=(clpool_multi_device_tests)
    [ "$2" = ON ] && targets+=(clpool-info)
    break
  fi
  echo "configure with tests=$1 tools=$2 failed; trying with less" | tee -a "$out/configure.log"
done
[ ${#targets[@]} -gt 0 ] || { tail -30 "$out/configure.log"; exit 1; }
echo "building ${targets[*]} (-j$jobs)"
timeout "$(slice 240)" cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
[ -n "$nvcc_pid" ] && { wait "$nvcc_pid" && echo "nvcc ok" || { echo "nvcc failed:"; tail -5 "$out/nvcc.log"; }; }
echo "built after $(( $(date +%s) - start )) s"

if [ -x "$build/tools/clpool-info" ]; then
  timeout 60 "$build/tools/clpool-info" --list --json "$out/clpool-info.json" >"$out/clpool-info.txt" 2>&1
  echo "clpool-info exit $?"
fi

if [ "$dry" = 0 ] && [ -x "$cuda_bin" ]; then
  timeout "$(slice 200)" "$cuda_bin" $cuda_args >"$out/cuda.txt" 2>&1
  echo "cuda_multi_h2d exit $?"; cat "$out/cuda.txt"
fi

# The OpenCL families, a process per group so that a group cut short by the budget loses only
# itself; the most wanted first.
jsons=()
for group in h2d shared2 host sweep; do
  timeout "$(slice 45)" "$build/benchmarks/bench_multi_device" --benchmark_filter="^$group/" \
    --benchmark_out_format=json --benchmark_out="$out/bench_$group.json" >"$out/bench_$group.txt" 2>&1
  echo "bench_multi_device $group: exit $? after $(( $(date +%s) - start )) s"
  [ -s "$out/bench_$group.json" ] && jsons+=("$out/bench_$group.json")
done
python3 benchmarks/gpu/multi_gpu_summary.py --cuda "$out/cuda.txt" "${jsons[@]}" >"$out/summary.txt" 2>&1
echo "summary exit $? (1: a target not met)"
{ echo; echo "machine:"; sed 's/^/  /' "$out/machine.txt"; } >>"$out/summary.txt"
cat "$out/summary.txt"

# The multi-device suite on the GPUs' platform, with what time is left.
if [ -x "$build/tests/clpool_multi_device_tests" ]; then
  timeout "$(slice 15)" "$build/tests/clpool_multi_device_tests" >"$out/tests.log" 2>&1
  echo "multi-device tests exit $?: $(tail -2 "$out/tests.log" | head -1)" | tee -a "$out/summary.txt"
fi
