#!/usr/bin/env python3
"""Tables and target checks for the allocation hit path from alloc.sh's Google Benchmark JSON.

usage: alloc_summary.py <dir>   (a folder holding hit_latency.json, contention.json
                                 and peers.json or peers_reps.json)
Prints median ns per pair (median aggregates where the run has repetitions,
else the single run), the target ratios, and MISS where a target is
not met. Standard library only.
"""
import json
import os
import sys


def load(path):
    """name -> (real ns, cpu ns, items/s) of the median (or only) run."""
    if not os.path.exists(path):
        return {}
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        name = b["name"]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") != "median":
                continue
            name = b["run_name"]
        elif name in out:
            continue
        k = scale[b.get("time_unit", "ns")]
        out[name] = (b["real_time"] * k, b["cpu_time"] * k, b.get("items_per_second", 0.0))
    return out


SIZES = [256 << i for i in range(0, 21, 2)]  # 256 B .. 256 MiB


def size_name(n):
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n >> shift}{unit}"
    return f"{n}"


def main(folder):
    hits = load(os.path.join(folder, "hit_latency.json"))
    peers = load(os.path.join(folder, "peers_reps.json")) or load(os.path.join(folder, "peers.json"))
    cont = load(os.path.join(folder, "contention.json"))
    misses = []

    def row(prefix, label, use_real=False):
        v = [hits.get(f"{prefix}/{n}") for n in SIZES]
        v = [x[0 if use_real else 1] if x else None for x in v]
        cells = " ".join(f"{x:7.1f}" if x else "      -" for x in v)
        print(f"{label:34s} {cells}")
        return [x for x in v if x]

    print("hit pair, CPU ns (median):")
    print(f"{'pool':34s} " + " ".join(f"{size_name(n):>7s}" for n in SIZES))
    rows = {}
    for name in ("NoLock", "SingleMutex", "StdMutex", "Striped16", "ThreadCached", "BufferPool", "PinnedBufferPool",
                 "PersistentBufferPool"):
        rows[name] = row(f"hit/{name}/opencl", name)
    for lim, names in ((50, ("SingleMutex", "BufferPool", "PinnedBufferPool", "PersistentBufferPool")),
                       (25, ("NoLock",))):
        for n in names:
            if rows[n]:
                worst = max(rows[n])
                print(f"  {n}: {min(rows[n]):.1f}-{worst:.1f} ns (target <= {lim})" +
                      ("" if worst <= lim else "  MISS"))
                if worst > lim:
                    misses.append(f"{n} hit {worst:.1f} ns > {lim}")

    print("\ncreate + first use (device) vs BufferPool hit, wall time:")
    for n in SIZES:
        raw = hits.get(f"raw/create_first_use/device/{n}")
        hit = hits.get(f"hit/BufferPool/opencl/{n}")
        hit_sm = hits.get(f"hit/SingleMutex/opencl/{n}")
        if raw and hit:
            r = raw[0] / hit[0]
            r2 = raw[0] / hit_sm[0] if hit_sm else 0
            flag = "" if min(r, r2 or r) >= 1000 else "  MISS"
            if flag:
                misses.append(f"first use / hit {min(r, r2 or r):.0f}x at {size_name(n)}")
            print(f"  {size_name(n):>5s}: {raw[0] / 1e3:8.1f} us / {hit[0]:5.1f} ns = {r:8.0f}x"
                  f"  (SingleMutex row {r2:8.0f}x){flag}")

    if peers:
        print("\npeers, wall ns per pair (median):")
        cols = ["clpool/BufferPool/opencl", "clpool/ThreadCached/opencl", "torch/device",
                "clpool/PinnedBufferPool/opencl", "clpool/PinnedThreadCached/opencl", "clpool/PinnedNoLock/opencl",
                "torch/pinned"]
        print(f"{'size':>6s} " + " ".join(f"{c.split('/')[1][:16]:>16s}" for c in cols) +
              "  dev/BufferPool  pin/PinnedTC  pin/PinnedBufferPool")
        for n in SIZES:
            v = [peers.get(f"{c}/{n}") for c in cols]
            if not all(v):
                continue
            v = [x[0] for x in v]
            dev = v[2] / v[0]
            pin_tc = v[6] / v[4]
            pin_alias = v[6] / v[3]
            flag = ""
            if dev < 5:
                flag += " MISS(device)"
                misses.append(f"torch device / BufferPool {dev:.2f}x at {size_name(n)}")
            if pin_tc < 5:
                flag += " MISS(pinned)"
                misses.append(f"torch pinned / PinnedThreadCached {pin_tc:.2f}x at {size_name(n)}")
            print(f"{size_name(n):>6s} " + " ".join(f"{x:16.1f}" for x in v) +
                  f"  {dev:14.2f}  {pin_tc:12.2f}  {pin_alias:20.2f}{flag}")

    if cont:
        print("\ncontention, aggregate Mpairs/s (real time, median):")
        policies = sorted({k.split("/")[1] for k in cont})
        single16 = cont.get("contention/SingleMutex/real_time/threads:16")
        for p in policies:
            v = {t: cont.get(f"contention/{p}/real_time/threads:{t}") for t in (1, 2, 4, 8, 16)}
            cells = " ".join(f"{v[t][2] / 1e6:8.2f}" if v[t] else "       -" for t in v)
            extra = ""
            if v[1] and v[16]:
                extra = f"  16/1 {v[16][2] / v[1][2]:6.2f}x"
                if single16:
                    extra += f"  16/SingleMutex@16 {v[16][2] / single16[2]:7.1f}x"
            print(f"  {p:28s} {cells}{extra}")
        best = max((p for p in policies if cont.get(f"contention/{p}/real_time/threads:16")),
                   key=lambda p: cont[f"contention/{p}/real_time/threads:16"][2], default=None)
        if best and single16:
            b16 = cont[f"contention/{best}/real_time/threads:16"][2]
            b1 = cont[f"contention/{best}/real_time/threads:1"][2]
            ok = b16 / b1 >= 8 and b16 / single16[2] >= 5
            print(f"  best at 16 threads: {best}: {b16 / b1:.1f}x its 1-thread, "
                  f"{b16 / single16[2]:.0f}x SingleMutex at 16" + ("" if ok else "  MISS"))
            if not ok:
                misses.append("contention targets")

    print("\n" + ("every target met" if not misses else "MISSED: " + "; ".join(misses)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
