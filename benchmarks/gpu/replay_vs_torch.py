#!/usr/bin/env python3
"""Replays clpool traces through PyTorch's CUDA caching allocator and through clpool-replay, side by side.

For each trace (plain or .gz, docs/TRACE_FORMAT.md) on the GPU:
  - PyTorch: every alloc is torch.cuda.caching_allocator_alloc(bytes), every free
    caching_allocator_delete(ptr), after empty_cache() and reset_peak_memory_stats(); reported:
    max_memory_reserved, max_memory_allocated, their ratio, and reserved over the trace's live peak
    (max_memory_allocated counts PyTorch's rounded block sizes; the live peak counts the bytes asked);
  - clpool: `clpool-replay TRACE -d sim --json -` (accounting only, same trace), each
    configuration's peak held / peak live and min capacity, plus any --config given here.
The target: clpool's ratio below PyTorch's reserved / allocated.

  python3 benchmarks/gpu/replay_vs_torch.py [TRACE ...] [--replay PATH] [-c SPEC ...] [--json OUT]

Default traces: benchmarks/traces/gpt_*.trace.gz and tests/data/traces/*.trace. Needs torch with
CUDA; builds clpool-replay (Release) into build/gpu-replay unless --replay names one. PyTorch reads
PYTORCH_CUDA_ALLOC_CONF from the environment as usual (e.g. expandable_segments:True): the report
prints it. Contexts in the trace are ignored (one device).
"""

import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

root = Path(__file__).resolve().parents[2]


def read_trace(path):
    data = Path(path).read_bytes()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    lines = data.decode("ascii").splitlines()
    if not lines or lines[0] != "clpool-trace 1":
        sys.exit(f"replay_vs_torch: {path} is not a clpool trace (docs/TRACE_FORMAT.md)")
    events = []
    for line in lines[1:]:
        if not line or line[0] == "#":
            continue
        f = line.split(" ")
        if f[1] == "alloc":
            events.append((True, int(f[2]), int(f[5])))
        else:
            events.append((False, int(f[2]), 0))
    return events, data


def replay_torch(torch, events):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    live, ptrs = 0, {}
    peak_live = 0
    start = time.perf_counter()
    for is_alloc, ident, nbytes in events:
        if is_alloc:
            ptrs[ident] = (torch.cuda.caching_allocator_alloc(nbytes), nbytes)
            live += nbytes
            peak_live = max(peak_live, live)
        else:
            p, n = ptrs.pop(ident)
            torch.cuda.caching_allocator_delete(p)
            live -= n
    seconds = time.perf_counter() - start
    for p, _ in ptrs.values():
        torch.cuda.caching_allocator_delete(p)
    torch.cuda.synchronize()
    out = {
        "peak_live": peak_live,
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "seconds": seconds,
        "num_alloc_retries": torch.cuda.memory_stats().get("num_alloc_retries", 0),
    }
    torch.cuda.empty_cache()
    return out


def build_replay():
    build = root / "build" / "gpu-replay"
    subprocess.run(["cmake", "-S", str(root), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    "-DCLPOOL_BUILD_TESTS=OFF", "-DCLPOOL_BUILD_BENCHMARKS=OFF"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2), "--target", "clpool-replay"],
                   check=True, stdout=subprocess.DEVNULL)
    return str(build / "tools" / "clpool-replay")


def replay_clpool(replay, data, configs):
    with tempfile.NamedTemporaryFile("wb", suffix=".trace", delete=False) as f:
        f.write(data)
        path = f.name
    try:
        cmd = [replay, path, "-d", "sim", "--no-buckets", "--json", "-"]
        for c in configs:
            cmd += ["-c", c]
        r = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    finally:
        os.unlink(path)
    return json.loads(r.stdout)


def gib(v):
    return f"{v / 2**30:.3f} GiB"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="*")
    p.add_argument("--replay", help="a built clpool-replay (default: build it)")
    p.add_argument("-c", "--config", action="append", default=[], help="a clpool-replay --config, repeatable")
    p.add_argument("--json", help="write every figure as JSON to this path")
    a = p.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("replay_vs_torch: needs PyTorch with CUDA (pip install torch)")
    if not torch.cuda.is_available():
        sys.exit("replay_vs_torch: torch.cuda.is_available() is False; run on the GPU machine")
    traces = a.traces or sorted(glob.glob(str(root / "benchmarks/traces/gpt_*.trace.gz"))) + sorted(
        glob.glob(str(root / "tests/data/traces/*.trace")))
    replay = a.replay or build_replay()
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; "
          f"PYTORCH_CUDA_ALLOC_CONF={os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '(unset)')}")
    results = []
    for path in traces:
        events, data = read_trace(path)
        t = replay_torch(torch, events)
        c = replay_clpool(replay, data, a.config)
        name = os.path.basename(path)
        live = c.get("peak_live_bytes", t["peak_live"])
        print(f"\n{name}: {len(events)} events, live peak {gib(live)}")
        print(f"  {'allocator':44} {'reserved/held':>14} {'/ allocated':>12} {'/ live':>8} {'min capacity':>14}")
        ratio_t = t["max_memory_reserved"] / max(t["max_memory_allocated"], 1)
        print(f"  {'PyTorch caching allocator':44} {gib(t['max_memory_reserved']):>14} {ratio_t:>11.2f}x "
              f"{t['max_memory_reserved'] / max(live, 1):>7.2f}x {'':>14}")
        for cfg in c["configurations"][1:]:
            cap = cfg.get("min_capacity_bytes")
            print(f"  {'clpool ' + cfg['name']:44} {gib(cfg['peak_bytes_held']):>14} {'':>12} "
                  f"{cfg['peak_held_over_peak_live']:>7.2f}x {gib(cap) if cap else 'none':>14}")
        results.append({"trace": name, "torch": t, "clpool": c})
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
