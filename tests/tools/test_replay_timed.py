#!/usr/bin/env python3
"""clpool-replay --timed on the test OpenCL device (PoCL in CI): every pool's result is there with
sane counts (no timing thresholds), and benchmarks/gpu/replay_timed_summary.py tabulates it beside
a PyTorch result written as replay_timed_torch writes one.

    test_replay_timed.py CLPOOL_REPLAY TRACE SUMMARY_SCRIPT OUT_DIR
"""
import json
import os
import re
import subprocess
import sys

replay, trace, summary, out = sys.argv[1:5]
os.makedirs(out, exist_ok=True)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


allocs = sum(1 for line in open(trace) if " alloc " in line)
json_path = os.path.join(out, "replay-timed.json")
r = subprocess.run([replay, trace, "--device", "0:0", "--timed", "--runs", "2", "--json", json_path],
                   capture_output=True, text=True)
print(r.stdout)
check(r.returncode == 0, f"--timed exits 0 (stderr: {r.stderr.strip()})")
check("backend: OpenCL " in r.stdout, "the report names the OpenCL device")
check(re.search(r"configuration +1st pass ns/pair +2nd pass ns/pair", r.stdout) is not None, "the table's header")
check("fast and frugal on this device: clpool::OffsetArenaPool" in r.stdout
      and "with its coarse-grained SVM, clpool::SVMArenaPool" in r.stdout,
      "the fast-and-frugal line names OffsetArenaPool, and SVMArenaPool on a device with SVM")
doc = json.load(open(json_path))
pools = {e["name"]: e for e in doc["timed"]}
check(list(pools) == ["BufferPool", "ArenaPool", "OffsetArenaPool", "SVMArenaPool", "SVMPool"],
      f"the five pools, in order (found {list(pools)})")
live = doc["peak_live_bytes"]
check(live > 0 and doc["trace"]["allocations"] == allocs, f"the trace's {allocs} allocations and its live peak")
for name, e in pools.items():
    check("skipped" not in e, f"{name} ran ({e.get('skipped', '')})")
    if "skipped" in e:
        continue
    check(e["runs"] == 2 and e["pool_type"] == "clpool::" + name, f"{name}: runs and pool type")
    check(re.search(rf"\n{name} +[0-9.]+ +[0-9.]+ ", r.stdout) is not None, f"{name}: a row in the table")
    for which in ("first_pass", "second_pass"):
        p = e[which]
        check(p["allocations"] == allocs and p["failed"] == 0, f"{name} {which}: {allocs} allocations, none failed")
        check(p["seconds"] > 0 and abs(p["ns_per_pair"] - p["seconds"] * 1e9 / allocs) < 1e-6 * p["ns_per_pair"],
              f"{name} {which}: ns_per_pair is the pass's seconds over its allocations")
        check(0.0 <= p["no_driver_call_rate"] <= 1.0, f"{name} {which}: no_driver_call_rate in [0, 1]")
        check(p["peak_bytes_held"] >= live and p["peak_held_over_peak_live"] >= 1.0,
              f"{name} {which}: holds at least the live peak ({p['peak_bytes_held']} >= {live})")
    a, b = e["first_pass"], e["second_pass"]
    check(b["peak_bytes_held"] >= a["peak_bytes_held"], f"{name}: the peak over both passes >= the first's")
    if name in ("BufferPool", "SVMPool"):
        # Unlimited buckets: the warm cache holds what the first pass needed at once, so the same trace hits.
        check(a["driver_calls"] == a["misses"] > 0, f"{name}: first pass misses are its driver calls")
        check(b["driver_calls"] == 0 and b["no_driver_call_rate"] == 1.0, f"{name}: second pass all hits")
    else:
        check(a["segment_allocations"] >= 1, f"{name}: the first pass allocates a segment")
    if name == "ArenaPool":
        check(a["sub_buffers_made"] >= 1 and a["driver_calls"] == a["segment_allocations"] + a["sub_buffers_made"],
              f"{name}: sub-buffers are made and counted as driver calls")
    if name in ("OffsetArenaPool", "SVMArenaPool"):
        check(a["sub_buffers_made"] == 0 and b["sub_buffers_made"] == 0,
              f"{name}: no sub-buffer is made (a block is an offset)")
        check(a["driver_calls"] == a["segment_allocations"], f"{name}: only segments are driver calls")

# Wrong targets and names are refused with the reason.
r = subprocess.run([replay, trace, "--device", "sim", "--timed"], capture_output=True, text=True)
check(r.returncode == 2 and "--timed needs an OpenCL device" in r.stderr, f"--timed -d sim refused: {r.stderr.strip()}")
r = subprocess.run([replay, trace, "--device", "0:0", "--timed", "--pools", "BufferPool,Bogus"],
                   capture_output=True, text=True)
check(r.returncode == 2 and "--pools: 'Bogus' is not a timed pool" in r.stderr, f"--pools Bogus refused: {r.stderr.strip()}")
only_path = os.path.join(out, "replay-timed-only.json")
r = subprocess.run([replay, trace, "--device", "0:0", "--timed", "--pools", "SVMArenaPool", "--json", only_path],
                   capture_output=True, text=True)
check(r.returncode == 0 and [e["name"] for e in json.load(open(only_path))["timed"]] == ["SVMArenaPool"],
      "--pools picks the pools timed")

# The report and --suggest name the fast-and-frugal pool: for the device when it is one, else conditionally.
r = subprocess.run([replay, trace, "--device", "0:0", "--no-buckets", "--no-search"], capture_output=True, text=True)
check(r.returncode == 0 and "\nfast and frugal on this device: clpool::OffsetArenaPool" in r.stdout,
      "the OpenCL report names OffsetArenaPool")
small = os.path.join(os.path.dirname(trace), "small.trace")  # a quick --suggest
r = subprocess.run([replay, small, "--device", "sim", "--no-buckets", "--no-search", "--suggest"], capture_output=True,
                   text=True)
check(r.returncode == 0 and r.stdout.count("fast and frugal: clpool::OffsetArenaPool") == 2,
      "the simulated report and --suggest name SVMArenaPool where the device has SVM, OffsetArenaPool elsewhere")

# The summary beside a PyTorch result: its time ratios and the targets follow from the numbers.
svm = pools["SVMArenaPool"]


def torch_pass(ns, held_over_live):
    return {"seconds": ns * allocs / 1e9, "ns_per_pair": ns, "allocations": allocs, "failed": 0, "driver_calls": 3,
            "segment_allocations": 3, "alloc_retries": 0, "no_driver_call_rate": 1 - 3 / allocs,
            "peak_bytes_held": int(held_over_live * live), "peak_held_over_peak_live": held_over_live}


for stem, name, scale, held in (("torch", "PyTorch", 10.0, 1.7), ("torch_expandable",
                                                                   "PyTorch expandable_segments:True", 2.0, 1.0)):
    fake = {"trace": {"path": doc["trace"]["path"], "events": 0, "allocations": allocs}, "backend": "PyTorch test",
            "alloc_conf": "", "peak_live_bytes": live,
            "timed": [{"name": name, "pool_type": "c10::cuda::CUDACachingAllocator", "runs": 1,
                       "first_pass": torch_pass(svm["first_pass"]["ns_per_pair"] * scale, held),
                       "second_pass": torch_pass(svm["second_pass"]["ns_per_pair"] * scale, held)}]}
    json.dump(fake, open(os.path.join(out, f"replay-timed.{stem}.json"), "w"))
merged = os.path.join(out, "replay-timed-merged.json")
r = subprocess.run([sys.executable, summary, "--merged", merged, json_path, os.path.join(out, "replay-timed.torch.json"),
                    os.path.join(out, "replay-timed.torch_expandable.json")], capture_output=True, text=True)
print(r.stdout)
check(r.returncode == 0, f"the summary runs: {r.stderr.strip()}")
stem = os.path.basename(trace).rsplit(".trace", 1)[0]
check(f"### {stem}" in r.stdout, f"a section for {stem}")
row = re.search(r"\n\| SVMArenaPool \|([^\n]*)", r.stdout)
check(row is not None and row.group(1).rstrip().endswith("| 0.100 | 0.100 |"),
      "SVMArenaPool's times over PyTorch's, 1/10 as made")
check("| PyTorch expandable_segments:True |" in r.stdout, "the PyTorch rows")
svm_held = svm["first_pass"]["peak_held_over_peak_live"]
target = re.search(rf"\n\| {re.escape(stem)} \| SVMArenaPool \| ([^\n]*)", r.stdout)
check(target is not None, "a target row for SVMArenaPool")
if target:
    cells = [c.strip() for c in target.group(1).split("|")]
    check(cells[0].endswith("met") and ((svm_held <= 1.05) == ("NOT" not in cells[0])), f"held / live target: {cells[0]}")
    check(cells[1] == ("met" if svm_held <= 1.0 else "NOT met"), f"at or below expandable's 1.0x: {cells[1]}")
    check(cells[3] == "met" and cells[4] == "met", "1/10 of PyTorch's time meets 1/5, both passes")
check(len(json.load(open(merged))) == 3, "the merged JSON holds the three files")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
