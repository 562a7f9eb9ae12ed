#!/usr/bin/env bash
# Runs a program under the interposer with CLPOOL_REPORT=1 and CLPOOL_TRACE, then checks the
# exit report on stderr and the trace file. Usage: report_and_trace.sh PROGRAM LIBRARY preload|layer
set -euo pipefail
prog=$1 lib=$2 mode=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ "$mode" = preload ]; then export LD_PRELOAD=$lib; else export OPENCL_LAYERS=$lib; fi
CLPOOL_INTERPOSER=$lib CLPOOL_REPORT=1 CLPOOL_TRACE=$dir/t.trace "$prog" 2>"$dir/err"
cat "$dir/err" >&2
grep -Eq "^clpool: interposer \($mode\) total: hits [1-9][0-9]* misses [0-9]+ hit_rate [0-9.]+% evictions" "$dir/err" \
  || { echo "no exit report with hits from the $mode front" >&2; exit 1; }
python3 "$(dirname "$0")/check_trace.py" "$dir/t.trace" --min-allocs 10
