#!/usr/bin/env bash
# Runs interpose_svm_bench plain, under LD_PRELOAD and as an OpenCL layer: the three checksums must
# be the same, and the interposed runs must have served clSVMAlloc from the pool (SVM hits).
# Usage: svm_bench_check.sh PROGRAM LIBRARY [ITERATIONS]
set -euo pipefail
prog=$1 lib=$2 iters=${3:-40}
plain=$("$prog" "$iters")
preload=$(LD_PRELOAD=$lib CLPOOL_INTERPOSER=$lib "$prog" "$iters")
layer=$(OPENCL_LAYERS=$lib CLPOOL_INTERPOSER=$lib "$prog" "$iters")
printf '%s\n' "plain:   $plain" "preload: $preload" "layer:   $layer"
field() { sed -n "s/.*\"$2\": \"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" <<<"$1"; }
sum=$(field "$plain" checksum)
[ -n "$sum" ] || { echo "no checksum in the plain run"; exit 1; }
for run in "$preload" "$layer"; do
  [ "$(field "$run" mode)" = interposed ] || { echo "not interposed: $run"; exit 1; }
  [ "$(field "$run" checksum)" = "$sum" ] || { echo "checksum differs from the plain run's $sum: $run"; exit 1; }
  [ "$(field "$run" svm_hits)" -gt 0 ] || { echo "no SVM hits: $run"; exit 1; }
done
echo "checksums match ($sum)"
