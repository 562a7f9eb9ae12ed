#!/usr/bin/env bash
# Runs interpose_report_rewait under the interposer with CLPOOL_REPORT=1 and checks that the exit
# report's per-pool hits add up to its total (the program leaves its context open and closes
# none, so every pool has a line). Usage: report_rewait.sh PROGRAM LIBRARY preload|layer
set -euo pipefail
prog=$1 lib=$2 mode=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if [ "$mode" = preload ]; then export LD_PRELOAD=$lib; else export OPENCL_LAYERS=$lib; fi
CLPOOL_INTERPOSER=$lib CLPOOL_REPORT=1 "$prog" 2>"$dir/err"
cat "$dir/err" >&2
python3 - "$dir/err" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
pools = [int(h) for h in re.findall(r"^clpool: ctx 0x[0-9a-f]+ flags 0x[0-9a-f]+: hits (\d+) ", text, re.M)]
total = re.search(r"^clpool: interposer \(\w+\) total: hits (\d+) ", text, re.M)
if not pools or not total:
    sys.exit("no exit report with a pool line and a total")
if sum(pools) != int(total.group(1)):
    sys.exit(f"the pools' hits add up to {sum(pools)}, the total says {total.group(1)}")
print(f"pools' hits {pools} add up to the total {total.group(1)}")
PY
