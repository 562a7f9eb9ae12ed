#!/usr/bin/env python3
"""Markdown summary of timed trace replays: clpool-replay --timed JSON and replay_timed_torch JSON.

  replay_timed_summary.py [--machine machine.txt] [--notes notes.txt] [--merged OUT.json]
                          [--floor driver_floor.jsonl]... RESULT.json ...

A RESULT.json is one program's output or a merged list of them (--merged writes one). Each holds {"trace": {"path": ...}, "peak_live_bytes": N, "timed": [{"name", "first_pass", "second_pass",
or "skipped"}]}. Rows are grouped by trace (the trace file's name without .trace). Per trace: ns per
alloc + free pair of the first pass (from cold) and of the second (warm), their whole-pass times, peak held
(PyTorch: reserved) over the live peak, the second pass's allocations with no driver call, and the times as a
fraction of PyTorch's default allocator's. Then the targets for SVMArenaPool and OffsetArenaPool, and, with
--floor (driver_floor's JSON lines, labelled by trace), PyTorch's first pass / 5 beside the driver's own cost of
obtaining the trace's live peak.
Standard library only.
"""

import argparse
import json
import os
import sys

TARGET_POOLS = ("SVMArenaPool", "OffsetArenaPool")
TORCH_DEFAULT = "PyTorch"
# Rows and traces in this order, whatever order the files come in; others after them, by name.
ROW_ORDER = ("BufferPool", "ArenaPool", "OffsetArenaPool", "SVMArenaPool", "SVMPool", "PyTorch")
TRACE_ORDER = ("gpt_training", "gpt_inference")


def ordered(names, order):
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def trace_name(doc):
    base = os.path.basename(doc.get("trace", {}).get("path", "?"))
    for suffix in (".gz", ".trace"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def load(paths):
    traces = {}  # name -> {"peak_live": n, "allocations": n, "rows": [entry], "backends": set}
    docs = []
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"replay_timed_summary: skipping {path}: {e}", file=sys.stderr)
            continue
        for d in doc if isinstance(doc, list) else [doc]:  # a merged results.json is a list of them
            docs.append(d)
            add(traces, d)
    return traces, docs


def add(traces, doc):
    t = traces.setdefault(trace_name(doc), {"peak_live": doc.get("peak_live_bytes", 0),
                                            "allocations": doc.get("trace", {}).get("allocations", 0),
                                            "rows": [], "backends": []})
    if doc.get("backend") and doc["backend"] not in t["backends"]:
        t["backends"].append(doc["backend"])
    for entry in doc.get("timed", []):
        t["rows"].append(entry)


def fmt_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def ratio(a, b):
    return f"{a / b:.3f}" if a is not None and b else "-"


def table(name, t):
    rows = t["rows"]
    torch = next((r for r in rows if r.get("name") == TORCH_DEFAULT and "first_pass" in r), None)
    live = t["peak_live"]
    out = [f"### {name}", "",
           f"{t['allocations']} allocations, live peak {fmt_bytes(live)}; " + "; ".join(t["backends"]), "",
           "| configuration | 1st pass ns/pair | 2nd pass ns/pair | 1st pass ms | 2nd pass ms | held / live "
           "| 2nd pass: no driver call | driver calls 1st / 2nd | 1st / PyTorch's 1st | 2nd / PyTorch's 2nd |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    skipped = []
    for r in rows:
        if "first_pass" not in r:
            skipped.append(f"- {r.get('name')}: skipped: {r.get('skipped', 'no result')}")
            continue
        a, b = r["first_pass"], r["second_pass"]
        out.append(
            f"| {r['name']} | {a['ns_per_pair']:.1f} | {b['ns_per_pair']:.1f} | {a['seconds'] * 1e3:.2f} "
            f"| {b['seconds'] * 1e3:.2f} | {a['peak_held_over_peak_live']:.3f}x "
            f"| {100 * b['no_driver_call_rate']:.2f}% | {a['driver_calls']} / {b['driver_calls']} "
            f"| {ratio(a['ns_per_pair'], torch and torch['first_pass']['ns_per_pair'])} "
            f"| {ratio(b['ns_per_pair'], torch and torch['second_pass']['ns_per_pair'])} |")
        if a.get("failed") or b.get("failed"):
            skipped.append(f"- {r['name']}: {a.get('failed', 0)} / {b.get('failed', 0)} allocations failed "
                           "in the 1st / 2nd pass: its times are not comparable")
    return out + ([""] + skipped if skipped else []) + [""]


def targets(traces):
    """The targets for the fast-and-frugal pools, per trace: met, NOT met, or - (a row is missing)."""
    out = ["## Targets (SVMArenaPool, OffsetArenaPool)", "",
           "held / live <= 1.05x and <= PyTorch expandable_segments:True's; >= 99% of the 2nd pass with no driver "
           "call; 1st and 2nd pass ns/pair <= 1/5 of PyTorch's default allocator's.", "",
           "| trace | pool | held / live | <= expandable's | no driver call | 1st <= 1/5 | 2nd <= 1/5 |",
           "|---|---|---|---|---|---|---|"]
    for name, t in traces.items():
        by = {r.get("name"): r for r in t["rows"] if "first_pass" in r}
        torch = by.get(TORCH_DEFAULT)
        expandable = next((r for n, r in by.items() if n and "expandable" in n), None)
        for pool in TARGET_POOLS:
            r = by.get(pool)
            if not r:
                continue
            a, b = r["first_pass"], r["second_pass"]
            hl = a["peak_held_over_peak_live"]
            mark = lambda ok: "-" if ok is None else ("met" if ok else "NOT met")
            vs_exp = None if not expandable else hl <= expandable["first_pass"]["peak_held_over_peak_live"]
            first = None if not torch else a["ns_per_pair"] <= torch["first_pass"]["ns_per_pair"] / 5
            second = None if not torch else b["ns_per_pair"] <= torch["second_pass"]["ns_per_pair"] / 5
            out.append(f"| {name} | {pool} | {hl:.3f}x {mark(hl <= 1.05)} | {mark(vs_exp)} "
                       f"| {100 * b['no_driver_call_rate']:.2f}% {mark(b['no_driver_call_rate'] >= 0.99)} "
                       f"| {mark(first)} | {mark(second)} |")
    return out + [""]


def load_floor(paths):
    """driver_floor JSON lines: {(label, api, way): line}."""
    floor = {}
    for path in paths or []:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for text in f:
                try:
                    d = json.loads(text)
                except ValueError:
                    continue
                floor[(d.get("label"), d.get("api"), d.get("way"))] = d
    return floor


def floor_section(traces, floor):
    """Per trace: PyTorch's 1st pass / 5 (the target's bound for the whole pass) beside the driver's cost of
    obtaining the live peak; a pool that holds about the live bytes pays at least that in its 1st pass."""
    out = ["## The driver's floor under the 1st-pass target", "",
           "driver_floor (benchmarks/gpu/driver_floor.cpp) on the same device: the median ms to obtain the "
           "trace's live peak from the driver and use it once (create, a 1-byte fill, finish; nothing else). "
           "(a) one buffer (above the device's largest allocation, the fewest of that size); (b) 64 MiB "
           "segments; (c) one coarse-grained SVM allocation; CUDA: cudaMalloc and a 1-byte cudaMemset. A 1st "
           "pass that holds <= 1.05x the live bytes from a cold pool obtains at least the live peak, so where "
           "PyTorch's 1st pass / 5 is below (a), no buffer pool can meet the 1st-pass target on this driver, "
           "and where it is below (c), no SVM pool can.", "",
           "| trace | live peak | PyTorch 1st pass ms | / 5 | (a) one buffer ms | (b) 64 MiB segments ms "
           "| (c) SVM ms | CUDA cudaMalloc ms | 1/5 below (a) | 1/5 below (c) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]

    def cell(d):
        if not d:
            return "-"
        if "total_ms" not in d:
            return "skipped" if "skipped" in d else "-"
        note = f" ({d['pieces']} pieces)" if d.get("way") != "b_segments" and d.get("pieces", 1) > 1 else ""
        return f"{d['total_ms']:.3f}{note}"

    notes = []
    for name, t in traces.items():
        torch = next((r for r in t["rows"] if r.get("name") == TORCH_DEFAULT and "first_pass" in r), None)
        fifth = torch["first_pass"]["seconds"] * 1e3 / 5 if torch else None
        a = floor.get((name, "opencl", "a_one_buffer"))
        b, svm = floor.get((name, "opencl", "b_segments")), floor.get((name, "opencl", "c_svm"))

        def below(d):
            return "-" if fifth is None or not d or "total_ms" not in d else ("yes" if fifth < d["total_ms"] else "no")

        cuda = floor.get((name, "cuda", "a_one_buffer"))
        out.append(f"| {name} | {fmt_bytes(t['peak_live'])} "
                   f"| {'-' if not torch else f'{fifth * 5:.2f}'} | {'-' if fifth is None else f'{fifth:.3f}'} "
                   f"| {cell(a)} | {cell(b)} | {cell(svm)} | {cell(cuda)} | {below(a)} | {below(svm)} |")
        for d in (a, b, svm, cuda):
            if d and ("skipped" in d or "note" in d):
                notes.append(f"- {name} {d.get('api')} {d.get('way')}: {d.get('skipped') or d.get('note')}")
    device = next((d.get("device") for d in floor.values() if d.get("api") == "opencl"), None)
    if device:
        notes.insert(0, f"- driver_floor's device: {device}")
    return out + ([""] + notes if notes else []) + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*")
    ap.add_argument("--machine", help="machine.txt, quoted at the top")
    ap.add_argument("--notes", help="notes.txt (skipped or failed runs), quoted at the end")
    ap.add_argument("--merged", help="also write every result file's JSON, in one list, to this path")
    ap.add_argument("--floor", action="append",
                    help="a driver_floor JSON lines file (repeatable; a missing one is ignored)")
    args = ap.parse_args()
    traces, docs = load(args.results)
    out = ["# Trace replays timed: clpool's pools against PyTorch's caching allocator, C++ on both sides", ""]
    if args.machine and os.path.exists(args.machine):
        out += ["```"] + open(args.machine).read().rstrip().splitlines() + ["```", ""]
    out += ["ns/pair: a pass's wall time over its allocations (every alloc with its free; what the trace never "
            "frees is freed at the end of the pass). 1st pass: a fresh pool or an emptied cache; 2nd pass: the same "
            "trace again, warm. held / live: peak bytes held from the driver (PyTorch: reserved) during the 1st pass "
            "over the trace's live peak. No driver call: 1 - driver calls / allocations of the 2nd pass (a driver "
            "call: a bucketed pool's miss, an arena's segment or sub-buffer made, PyTorch's device allocation). "
            "The last two columns: the time per pair over PyTorch's default allocator's (below 0.2 meets the "
            "target).", ""]
    if not traces:
        out += ["No results.", ""]
    traces = {name: traces[name] for name in ordered(traces, TRACE_ORDER)}
    for t in traces.values():
        by_name = {}
        for r in t["rows"]:
            by_name.setdefault(r.get("name") or "?", []).append(r)
        t["rows"] = [r for n in ordered(by_name, ROW_ORDER) for r in by_name[n]]
    for name, t in traces.items():
        out += table(name, t)
    if traces:
        out += targets(traces)
    floor = load_floor(args.floor)
    if traces and floor:
        out += floor_section(traces, floor)
    if args.notes and os.path.exists(args.notes) and os.path.getsize(args.notes):
        out += ["## Notes", "", "```"] + open(args.notes).read().rstrip().splitlines() + ["```", ""]
    print("\n".join(out))
    if args.merged:
        with open(args.merged, "w") as f:
            json.dump(docs, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
