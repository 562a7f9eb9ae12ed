#!/usr/bin/env bash
# The interposer on an NVIDIA GPU: its semantics tests (plain, LD_PRELOAD, OpenCL layer,
# out-of-memory over a test layer) and the allocation-churn measurement, plain vs interposed.
# Run from the repo root. Writes $OUT (or ./out)/interposer/{ctest.log,bench.jsonl}.
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
  interposer_protocol_tests >>"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
# Which buffer holders the driver exposes (cl_khr_command_buffer, cl_khr_image2d_from_buffer: each
# keeps a released buffer alive); interpose_holders runs the command-buffer part only if listed.
command -v clinfo >/dev/null && clinfo 2>/dev/null | grep -iE "extensions|image support" >"$out/clinfo.txt"
(cd $build && ctest -R interpose --output-on-failure) >"$out/ctest.log" 2>&1
echo "ctest exit $?" >>"$out/ctest.log"
tail -12 "$out/ctest.log"
lib=$PWD/$build/tools/interposer/libclpool_interpose.so
bench=$build/tools/interposer/interpose_bench
: >"$out/bench.jsonl"
for round in 1 2 3; do  # alternate, so drift hits both alike
  $bench 5000 | tee -a "$out/bench.jsonl"
  LD_PRELOAD=$lib CLPOOL_INTERPOSER=$lib $bench 5000 | sed 's/"interposed"/"preload"/' | tee -a "$out/bench.jsonl"
  OPENCL_LAYERS=$lib CLPOOL_INTERPOSER=$lib $bench 5000 | sed 's/"interposed"/"layer"/' | tee -a "$out/bench.jsonl"
done
