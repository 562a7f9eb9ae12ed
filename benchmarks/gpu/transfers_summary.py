#!/usr/bin/env python3
"""The transfer targets from bench_transfer(.json) and bench_transfer_cuda(.json) of one run: medians, GB/s.

  pinned  >= 0.97 x cuda_pinned           (16 MiB .. 1 GiB, H2D and D2H)
  staged  >= 2 x driver_pageable and >= cuda_pageable   (16 MiB .. 1 GiB)
  auto    no slower than direct            (4 KiB .. 256 KiB): from the interleaved small_ab rows,
          auto_over_direct <= 1.05 (median over repetitions); runs without them compare
          the separate auto and driver_pageable rows (>= 0.95)
Usage: transfers_summary.py DIR   (prints a table; exit 0 even when a target is missed)
"""
import json, os, sys
from collections import defaultdict

def load(path):
    """{(family, size): median GB/s over the repetitions' iteration runs}."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    runs = defaultdict(list)
    for b in data.get("benchmarks", []):
        if b.get("error_occurred") or b.get("run_type") == "aggregate" or "bytes_per_second" not in b:
            continue
        fam, size = b.get("run_name", b["name"]).replace("/real_time", "").rsplit("/", 1)
        runs[(fam, int(size))].append(b["bytes_per_second"])
    return {k: sorted(v)[len(v) // 2] / 1e9 for k, v in runs.items()}

d = sys.argv[1]
r = load(os.path.join(d, "bench_transfer.json"))
r.update(load(os.path.join(d, "bench_transfer_cuda.json")))
sizes = sorted({s for (f, s) in r if f.startswith(("h2d/", "d2h/")) and "small_ab" not in f})
has_ab = any(f.endswith("/small_ab") for (f, s) in r)  # not host_copy's thread counts
def g(f, s): return r.get((f, s))
def fmt(x): return "   -  " if x is None else f"{x:6.2f}"
ok_all = True
for dirn in ("h2d", "d2h"):
    print(f"\n{dirn.upper()}  GB/s   size | driver_pageable pinned staged auto | cuda_pinned cuda_pageable | checks")
    for s in sizes:
        row = [g(f"{dirn}/{f}", s) for f in ("driver_pageable", "pinned", "staged", "auto", "cuda_pinned", "cuda_pageable")]
        dp, pin, stg, aut, cp, cpg = row
        checks = []
        if s >= 16 << 20:
            if pin and cp: checks.append(("pinned/cuda_pinned", pin / cp, 0.97))
            if stg and dp: checks.append(("staged/driver", stg / dp, 2.0))
            if stg and cpg: checks.append(("staged/cuda_pageable", stg / cpg, 1.0))
        if s <= 256 << 10 and aut and dp and not has_ab:
            checks.append(("auto/driver", aut / dp, 0.95))  # 5% for noise at microsecond sizes
        elif s <= 256 << 10 and aut and dp:
            checks.append(("auto/driver(separate runs, informative)", aut / dp, 0.0))
        txt = " ".join(f"{n}={v:.2f}{'' if v >= t else '(MISS<' + str(t) + ')'}" for n, v, t in checks)
        ok_all &= all(v >= t for _, v, t in checks)
        size = f"{s >> 20}M" if s >= 1 << 20 else f"{s >> 10}K"
        print(f"{size:>12} | " + " ".join(fmt(x) for x in row[:4]) + " | " + " ".join(fmt(x) for x in row[4:]) + " | " + txt)

# Small sizes, interleaved (small_ab): each iteration times a direct and an auto transfer back to back.
def load_ab(path):
    """{(family, size): (auto_over_direct, auto_us, direct_us) of the repetition with the median ratio}."""
    if not os.path.exists(path):
        return {}
    runs = defaultdict(list)
    for b in json.load(open(path)).get("benchmarks", []):
        if b.get("error_occurred") or b.get("run_type") == "aggregate" or "auto_over_direct" not in b:
            continue
        fam, size = b.get("run_name", b["name"]).replace("/real_time", "").rsplit("/", 1)
        runs[(fam, int(size))].append((b["auto_over_direct"], b["auto_us"], b["direct_us"]))
    return {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
ab = load_ab(os.path.join(d, "bench_transfer.json"))
if ab:
    print("\nsmall transfers, interleaved (auto and direct alternately in one loop; target auto/direct <= 1.05):")
    for dirn in ("h2d", "d2h"):
        cells = []
        for (f, s), (v, a_us, d_us) in sorted(ab.items()):
            if f != f"{dirn}/small_ab":
                continue
            cells.append(f"{s >> 10}K {a_us:.1f}/{d_us:.1f} us={v:.2f}{'' if v <= 1.05 else '(MISS>1.05)'}")
            ok_all &= v <= 1.05
        print(f"  {dirn.upper()}: " + "  ".join(cells))
print("\nall targets met" if ok_all else "\nsome targets missed (MISS above)")

# The staging memcpy alone (bench_transfer host_copy/{to,from}_pinned/THREADS, 16 MiB): what bounds staged.
hc = sorted((f, t, v) for (f, t), v in r.items() if f.startswith("host_copy/"))
if hc:
    print("\nhost copy alone (16 MiB, GB/s) by copy threads:")
    for fam in ("host_copy/to_pinned", "host_copy/from_pinned"):
        print(f"  {fam.split('/')[1]:>12}: " + "  ".join(f"{t}t={v:.1f}" for f, t, v in hc if f == fam))

# Extra runs with other copy_threads (transfers.sh COPY_THREADS=...): staged checks against this run's driver.
import glob
for path in sorted(glob.glob(os.path.join(d, "bench_transfer_t*.json"))):
    t = os.path.basename(path)[len("bench_transfer_t"):-len(".json")]
    x = load(path)
    print(f"\ncopy_threads={t} (not part of the verdict above):")
    for dirn in ("h2d", "d2h"):
        cells = []
        for s in sizes:
            stg, dp = x.get((f"{dirn}/staged", s)), g(f"{dirn}/driver_pageable", s)
            if s >= 16 << 20 and stg and dp:
                cells.append(f"{s >> 20}M {stg:.1f}={stg / dp:.2f}x{'' if stg / dp >= 2.0 else '(MISS<2.0)'}")
        print(f"  {dirn.upper()} staged: " + "  ".join(cells))
