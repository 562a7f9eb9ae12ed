#!/usr/bin/env python3
"""The tables of one multi_gpu.sh run: bench_multi_device's JSON (medians) and, if given,
cuda_multi_h2d's output. Aggregate host-to-device GB/s per GPU count and the scaling against one
GPU of the same path; the staging sweep; the host's own copy bandwidth with the same thread
counts; one context over two GPUs against one per device; and the targets (TARGETS).

  multi_gpu_summary.py [--cuda cuda.txt] bench_multi_device.json...  (one JSON per group is fine)

Exit status 1 if a target with a measurement is not met, 0 otherwise."""
import json
import sys
from collections import defaultdict

# (path, GPUs): at least this many times one GPU of the same path.
TARGETS = {("pinned", 2): 1.9, ("staged", 2): 1.6, ("staged", 4): 2.5}
STAGED_ONE_GPU_GBPS = 40.0  # H100/H200
COUNTS = (1, 2, 4)


def load_bench(paths):
    """{name parts tuple: GB/s}, medians where repetitions ran."""
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                runs += json.load(f)["benchmarks"]
        except (OSError, ValueError) as e:
            print(f"skipped {path}: {e}")
    out, from_median = {}, set()
    for r in runs:
        if r.get("error_occurred") or "bytes_per_second" not in r:
            continue
        if r.get("run_type") == "aggregate" and r.get("aggregate_name") != "median":
            continue
        name = r.get("run_name") or r["name"]
        key = tuple(p for p in name.split("/") if ":" not in p and p != "real_time")
        median = r.get("run_type") == "aggregate"
        if key in from_median and not median:
            continue
        out[key] = r["bytes_per_second"] / 1e9
        if median:
            from_median.add(key)
    return out


def load_cuda(path):
    """{(kind, gpus): GB/s} from lines 'cuda <kind> <gpus> <GB/s> <x one>'."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) >= 4 and w[0] == "cuda":
                    out[(w[1], int(w[2]))] = float(w[3])
    except (OSError, ValueError):
        pass
    return out


def cell(v):
    return f"{v:8.2f}" if v is not None else f"{'-':>8}"


def ratio(v, one):
    return f"{v / one:6.2f}x" if v is not None and one else f"{'':7}"


def row(label, values, width=40):
    """values: {gpus: GB/s}; prints GB/s per count and x one GPU."""
    one = values.get(1)
    parts = [f"{label:{width}}"]
    for d in COUNTS:
        v = values.get(d)
        parts.append(cell(v) + (ratio(v, one) if d > 1 else ""))
    print(" ".join(parts))


def header(title, width=40):
    print(f"\n== {title} ==")
    print(f"{'':{width}} " + " ".join(f"{f'{d} GPU' + ('s' if d > 1 else ''):>8}" + ("  x one" if d > 1 else "")
                                      for d in COUNTS))


def main(bench_paths, cuda_path=None):
    g = load_bench(bench_paths)
    cuda = load_cuda(cuda_path) if cuda_path else {}
    fam = defaultdict(dict)
    for key, v in g.items():
        if key[0] == "h2d" and len(key) == 3:
            fam[key[1]][int(key[2])] = v

    # Staging sweep: {(threads, chunk MiB, buffers): {gpus: GB/s}}.
    sweep = defaultdict(dict)
    for key, v in g.items():
        if key[0] == "sweep" and len(key) == 6:
            sweep[(int(key[3][1:]), int(key[4][1:]), int(key[5][1:]))][int(key[2])] = v
    best = {}  # gpus -> (GB/s, config)
    for conf, vals in sweep.items():
        for d, v in vals.items():
            if d not in best or v > best[d][0]:
                best[d] = (v, conf)

    header("host -> device, one context per device: aggregate GB/s")
    row("pinned (PinnedVector)", fam["pinned"])
    row("staged pageable, default options", fam["staged"])
    if best:
        row("staged pageable, best of the sweep", {d: best[d][0] for d in best})
        print("  best configs: " + "; ".join(f"{d} GPU(s): {best[d][1][0]} threads, {best[d][1][1]} MiB chunks, "
                                             f"{best[d][1][2]} buffers" for d in sorted(best)))
    row("driver pageable (clEnqueueWriteBuffer)", fam["driver"])
    if cuda:
        row("CUDA pinned (cudaMemcpyAsync)", {d: v for (k, d), v in cuda.items() if k == "pinned"})
        row("CUDA pageable (cudaMemcpy)", {d: v for (k, d), v in cuda.items() if k == "pageable"})

    failed = False
    print("\ntargets:")

    def verdict(text, ok):
        nonlocal failed
        failed |= not ok
        print(f"  {text}: {'met' if ok else 'NOT met'}")

    for (path, d), target in sorted(TARGETS.items()):
        one, v = fam[path].get(1), fam[path].get(d)
        if one and v:
            verdict(f"{path} {d} GPUs >= {target}x one GPU ({v / one:.2f}x)", v / one >= target)
    if fam["staged"].get(1):
        v = fam["staged"][1]
        verdict(f"staged 1 GPU >= {STAGED_ONE_GPU_GBPS:.0f} GB/s ({v:.1f})", v >= STAGED_ONE_GPU_GBPS)
    for d in COUNTS:
        c, v = cuda.get(("pageable", d)), fam["staged"].get(d)
        if c and v:
            verdict(f"staged {d} GPU(s) >= CUDA pageable cudaMemcpy ({v:.1f} vs {c:.1f} GB/s)", v >= c)

    if sweep:
        print("\n== staged pageable sweep, one context per device: aggregate GB/s ==")
        print(f"{'threads/device':>14} {'chunk MiB':>9} {'buffers':>7} " +
              " ".join(f"{f'{d} GPU(s)':>9}" for d in COUNTS))
        for conf in sorted(sweep):
            vals = sweep[conf]
            print(f"{conf[0]:14} {conf[1]:9} {conf[2]:7} " +
                  " ".join(f"{vals[d]:9.2f}" if d in vals else f"{'-':>9}" for d in COUNTS))

    host = defaultdict(dict)  # (variant, threads) -> {devices: GB/s}
    for key, v in g.items():
        if key[0] == "host" and len(key) == 4:
            host[(key[1], int(key[3][1:]))][int(key[2])] = v
    if host:
        print("\n== host copy alone, pageable -> pinned, T threads per device, D copies at once: aggregate GB/s ==")
        print(f"{'copy':8} {'T':>3} " + " ".join(f"{f'D={d}':>9}" for d in COUNTS))
        for variant, t in sorted(host):
            vals = host[(variant, t)]
            print(f"{variant:8} {t:3} " + " ".join(f"{vals[d]:9.2f}" if d in vals else f"{'-':>9}"
                                                   for d in COUNTS))
        print("  (workers: the staging's own copy, streaming stores; memcpy: plain threads, glibc memcpy)")

    shared = defaultdict(dict)
    for key, v in g.items():
        if key[0] == "shared2" and len(key) == 3:
            shared[key[1]][int(key[2])] = v
    if shared:
        print("\n== one context over 2 GPUs, a queue and a thread per GPU: aggregate GB/s ==")
        print(f"{'':34} {'1 GPU':>8} {'2 GPUs':>8}  x one")
        for label, vals in [("pinned, one context per device", fam["pinned"]),
                            ("staged, one context per device", fam["staged"])] + sorted(shared.items()):
            one, two = vals.get(1), vals.get(2)
            print(f"{label:34} {cell(one)} {cell(two)} {ratio(two, one)}")
        print("  (inorder/ooo: queue order; blocking: upload then clFinish; events: async upload, wait on its event)")
    if not any(2 in v for v in fam.values()):
        print("\none device only: no scaling to report")
    return 1 if failed else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    cuda_file = None
    if len(args) >= 2 and args[0] == "--cuda":
        cuda_file, args = args[1], args[2:]
    if not args:
        sys.exit(__doc__)
    sys.exit(main(args, cuda_file))
