#!/usr/bin/env python3
"""Aggregate host-to-device bandwidth per device count from bench_multi_device's JSON (medians),
and the scaling against one device of the same family, beside the targets (TARGETS)."""
import json
import sys
from collections import defaultdict

TARGETS = {("pinned", 2): 1.9, ("staged", 2): 1.6}


def main(path):
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    gbps = defaultdict(dict)
    for r in runs:
        if r.get("error_occurred"):
            continue
        if r.get("run_type") == "aggregate" and r.get("aggregate_name") != "median":
            continue
        name = r.get("run_name", r["name"]).replace("/real_time", "")
        _, family, devices = name.split("/")[:3]
        if r.get("run_type") == "iteration" and family in gbps and int(devices) in gbps[family]:
            continue  # a median is there (repetitions); single runs only without them
        gbps[family][int(devices)] = r["bytes_per_second"] / 1e9
    print(f"{'family':8} {'devices':>7} {'GB/s':>8} {'x one':>6}  target")
    failed = False
    for family in ("pinned", "staged", "driver"):
        one = gbps[family].get(1)
        for d in sorted(gbps[family]):
            ratio = gbps[family][d] / one if one else float("nan")
            target = TARGETS.get((family, d))
            verdict = ""
            if target:
                ok = ratio >= target
                failed |= not ok
                verdict = f">= {target}: {'met' if ok else 'NOT met'}"
            print(f"{family:8} {d:7} {gbps[family][d]:8.2f} {ratio:6.2f}  {verdict}")
    if not any(2 in v for v in gbps.values()):
        print("one device only: no scaling to report")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
