#!/usr/bin/env python3
"""Summarises bench_shape_trie's JSON: the issue's ratios per rank, and throughput by threads."""
import json
import re
import sys

runs = json.load(open(sys.argv[1]))["benchmarks"]
med = {}
for b in runs:  # medians where there were repetitions, else the single run
    if b.get("aggregate_name") == "median" or (b.get("run_type") == "iteration" and b["run_name"] not in med):
        med[b["run_name"]] = b

def cpu(name):
    return med[name]["cpu_time"]

floor = cpu("map_find/int64")
print(f"map_find/int64 {floor:.2f} ns; safe_floor (lock + ref, no search) {cpu('safe_floor'):.2f} ns; "
      f"map_find_safe {cpu('map_find_safe/int64'):.2f} ns  (CPU time, medians)")
print("rank  trie_hit_ns  descriptor_ns  hit/map_find (target <= 2)  descriptor/hit (target >= 2)  hit/map_find_safe")
for r in range(1, 9):
    h, d = cpu(f"trie_hit/{r}"), cpu(f"descriptor_map/{r}")
    print(f"{r:4d}  {h:11.2f}  {d:13.2f}  {h / floor:26.2f}  {d / h:28.2f}  {h / cpu('map_find_safe/int64'):17.2f}")
print()
print("throughput, million interns/s (real time):")
table = {}
for name, b in med.items():
    m = re.match(r"mt/([^/]+)/([^/]+)/real_time/threads:(\d+)", name)
    if m:
        table.setdefault((m.group(2), m.group(1)), {})[int(m.group(3))] = b["items_per_second"] / 1e6
threads = sorted({t for v in table.values() for t in v})
print(f"{'mix/scheme':32s}" + "".join(f"{t:>9d}" for t in threads))
for (mix, scheme), v in sorted(table.items()):
    print(f"{mix + '/' + scheme:32s}" + "".join(f"{v.get(t, float('nan')):9.2f}" for t in threads))
