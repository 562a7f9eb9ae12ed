#!/usr/bin/env python3
"""Summarises bench_shape_trie's JSON: the target ratios per rank, and throughput by threads.

Targets: a hit at most 2x unordered_map<int64>::find, measured on the
borrowed reader lookup (reader_hit); the descriptor cache at least 2x slower
than the counted intern hit (trie_hit). Misses are flagged with "MISS"."""
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

def has(name):
    return name in med

def flag(ok):
    return "   " if ok else "MISS"

floor = cpu("map_find/int64")
mb = med.get("reader_hit/1", {}).get("membarrier")
print(f"map_find/int64 {floor:.2f} ns; safe_floor (shared lock + ref, no search) {cpu('safe_floor'):.2f} ns; "
      f"map_find_safe {cpu('map_find_safe/int64'):.2f} ns  (CPU time, medians)")
if mb is not None:
    print(f"reader pins: {'membarrier (compiler barrier on the read side)' if mb else 'seq_cst fence fallback'}")
print("rank  reader_ns  scoped_ns  trie_hit_ns  descriptor_ns   reader/map_find(<=2)   scoped/map_find   "
      "hit/map_find   descriptor/hit(>=2)")
misses = 0
for r in range(1, 9):
    h, d = cpu(f"trie_hit/{r}"), cpu(f"descriptor_map/{r}")
    rd = cpu(f"reader_hit/{r}") if has(f"reader_hit/{r}") else float("nan")
    sc = cpu(f"reader_scoped_hit/{r}") if has(f"reader_scoped_hit/{r}") else float("nan")
    ok_r, ok_d = rd / floor <= 2, d / h >= 2
    misses += (not ok_r) + (not ok_d)
    print(f"{r:4d}  {rd:9.2f}  {sc:9.2f}  {h:11.2f}  {d:13.2f}   {rd / floor:16.2f} {flag(ok_r)}  {sc / floor:15.2f}"
          f"  {h / floor:13.2f}   {d / h:15.2f} {flag(ok_d)}")
print(f"targets missed: {misses} of 16" if misses else "targets: all met")
print()
print("throughput, million interns or lookups/s (real time):")
table = {}
for name, b in med.items():
    m = re.match(r"mt/([^/]+)/([^/]+)/real_time/threads:(\d+)", name)
    if m:
        table.setdefault((m.group(2), m.group(1)), {})[int(m.group(3))] = b["items_per_second"] / 1e6
threads = sorted({t for v in table.values() for t in v})
print(f"{'mix/scheme':32s}" + "".join(f"{t:>9d}" for t in threads))
for (mix, scheme), v in sorted(table.items()):
    print(f"{mix + '/' + scheme:32s}" + "".join(f"{v.get(t, float('nan')):9.2f}" for t in threads))
print()
print("vs global_mutex at the same thread count (x faster):")
for mix in sorted({m for m, _ in table}):
    base = table.get((mix, "global_mutex"), {})
    for scheme in ("striped256", "reader256"):
        v = table.get((mix, scheme))
        if v and base:
            print(f"{mix + '/' + scheme:32s}" + "".join(f"{v[t] / base[t]:9.2f}" if t in v and t in base else f"{'nan':>9s}"
                                                        for t in threads))
