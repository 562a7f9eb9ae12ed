#!/usr/bin/env python3
"""history_summary.py OUT SIDE: the hit pair with the history off / on / on1k / with call sites.

Reads hit_before_after.sh's JSON (OUT/hit-SIDE-<round>.json, every round) and prints, per lock
policy and size, the median over rounds of each run's median ns for the rows
hit/<lock>+history_{off,on,on1k,stacks}/<backend>/<bytes> of bench_hit_latency, with on/off.
"""
import collections
import glob
import json
import statistics
import sys

out, side = sys.argv[1], sys.argv[2]
runs = sorted(glob.glob(f"{out}/hit-{side}-*.json"))
if not runs:
    sys.exit(f"history_summary.py: no {out}/hit-{side}-*.json")
ns = collections.defaultdict(list)
for path in runs:
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median" or "+history_" not in b["run_name"]:
            continue
        parts = b["run_name"].split("/")  # hit, <lock>+history_<mode>, <backend>, <bytes>
        lock, mode = parts[1].split("+history_")
        ns[(lock, parts[3], mode)].append(b["real_time"])
print(f"hit pair with the pool's history off / on (65536 events) / on1k (1024) / on with call sites, "
      f"ns (median of {len(runs)} runs' medians), side {side}")
print(f"{'pool':22}{'bytes':>8}{'off':>9}{'on':>9}{'on1k':>9}{'stacks':>10}{'on/off':>8}")
for lock, size in sorted({(k[0], k[1]) for k in ns}, key=lambda x: (x[0], int(x[1]))):
    m = {mode: statistics.median(ns[(lock, size, mode)]) for mode in ("off", "on", "on1k", "stacks")
         if ns.get((lock, size, mode))}
    if "off" not in m or "on" not in m:
        continue
    print(f"{lock:22}{size:>8}{m['off']:9.2f}{m['on']:9.2f}{m.get('on1k', float('nan')):9.2f}"
          f"{m.get('stacks', float('nan')):10.1f}{m['on'] / m['off']:8.2f}")
