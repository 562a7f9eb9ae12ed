#!/usr/bin/env bash
# The interposer on an NVIDIA GPU: its semantics tests (plain, LD_PRELOAD, OpenCL layer,
# out-of-memory over a test layer) and the allocation-churn measurements, plain vs interposed:
# clCreateBuffer churn (bench.jsonl) and clSVMAlloc/clSVMFree churn, 4 KiB .. 64 MiB (svm_bench.jsonl).
# Run from the repo root. Writes $OUT (or ./out)/interposer/{ctest.log,bench.jsonl,svm_bench.jsonl}.
set -uo pipefail
out=${OUT:-./out}/interposer
mkdir -p "$out"
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 >/dev/null 2>&1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 >/etc/OpenCL/vendors/nvidia.icd
fi
build=build/gpu-interposer
cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DCLPOOL_BUILD_BENCHMARKS=OFF >"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
cmake --build $build -j"$(nproc)" --target clpool_interpose interpose_semantics interpose_fences interpose_holders \
  interpose_conformance interpose_bad_alloc interpose_oom clpool_fake_oom_layer interpose_bench interpose_slice_bench \
  interpose_svm_bench interposer_protocol_tests >>"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
# Which buffer holders the driver exposes (cl_khr_command_buffer, cl_khr_image2d_from_buffer: each
# keeps a released buffer alive); interpose_holders runs the command-buffer part only if listed.
command -v clinfo >/dev/null && clinfo 2>/dev/null | grep -iE "extensions|image support" >"$out/clinfo.txt"
(cd $build && ctest -R interpose --output-on-failure) >"$out/ctest.log" 2>&1
echo "ctest exit $?" >>"$out/ctest.log"
tail -12 "$out/ctest.log"
lib=$PWD/$build/tools/interposer/libclpool_interpose.so
bench=$build/tools/interposer/interpose_bench
svm_bench=$build/tools/interposer/interpose_svm_bench
: >"$out/bench.jsonl"
: >"$out/svm_bench.jsonl"
for round in 1 2 3; do  # alternate, so drift hits both alike
  $bench 5000 | tee -a "$out/bench.jsonl"
  LD_PRELOAD=$lib CLPOOL_INTERPOSER=$lib $bench 5000 | sed 's/"interposed"/"preload"/' | tee -a "$out/bench.jsonl"
  OPENCL_LAYERS=$lib CLPOOL_INTERPOSER=$lib $bench 5000 | sed 's/"interposed"/"layer"/' | tee -a "$out/bench.jsonl"
  $svm_bench 2000 | tee -a "$out/svm_bench.jsonl"
  LD_PRELOAD=$lib CLPOOL_INTERPOSER=$lib $svm_bench 2000 | sed 's/"interposed"/"preload"/' | tee -a "$out/svm_bench.jsonl"
  OPENCL_LAYERS=$lib CLPOOL_INTERPOSER=$lib $svm_bench 2000 | sed 's/"interposed"/"layer"/' | tee -a "$out/svm_bench.jsonl"
done
# SVM churn: the median of the three rounds per mode, and whether every run read back the same.
python3 - "$out/svm_bench.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
us = {m: [r["us_per_alloc_write_free"] for r in runs if r["mode"] == m] for m in ("plain", "preload", "layer")}
if not us["plain"] or not us["preload"]:
    sys.exit("svm_bench: missing plain or preload runs (no device with coarse-grained SVM?)")
med = {m: statistics.median(v) for m, v in us.items() if v}
sums = {r["checksum"] for r in runs}
inner = {m: statistics.median(r["us_in_alloc_free"] for r in runs if r["mode"] == m) for m in med}
layer = f", layer {med['layer']:.2f} us ({med['plain'] / med['layer']:.1f}x)" if "layer" in med else ""
print(f"svm_bench: median us/iter plain {med['plain']:.2f}, preload {med['preload']:.2f}, "
      f"ratio {med['plain'] / med['preload']:.1f}x{layer}; checksums {'match' if len(sums) == 1 else 'DIFFER'} "
      f"({len(runs)} runs); inside clSVMAlloc+clSVMFree plain {inner['plain']:.2f} us, preload {inner['preload']:.2f} us")
PY
