#!/usr/bin/env python3
"""Opens a clpool-viz report in headless Chromium and reads the DOM it rendered: no console
message, no script error, one drawn block per buffer of the snapshot, one per segment block, a
timeline of three stacked series per pool with history (one point per event, plus its start and
the snapshot's moment), one out-of-memory mark per "oom" event (or for the top-level record), and
the call sites of the largest holders.

    browser_check.py REPORT.html SNAPSHOT.json [--expect-error]

--expect-error inverts the verdict: the self-check that a page with a script error fails.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

report, snapshot = sys.argv[1], sys.argv[2]
expect_error = "--expect-error" in sys.argv[3:]
browser = shutil.which("chromium") or shutil.which("chromium-browser")
if not browser:
    print("browser_check: chromium not found (Debian package chromium, .ci/deps.d/viz.txt)", file=sys.stderr)
    sys.exit(1)
snap = json.load(open(snapshot, encoding="utf-8"))
buffers = sum(len(p["buffers"]) for p in snap["pools"])

with tempfile.TemporaryDirectory() as profile:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom",
           "file://" + os.path.abspath(report)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
dom, log = r.stdout, r.stderr
problems = []
if r.returncode != 0:
    problems.append(f"chromium exited {r.returncode}")
console = [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
if console:
    problems.append("console messages: " + " | ".join(console[:5]))
body = re.search(r"<body([^>]*)>", dom)
attrs = body.group(1) if body else ""
if 'data-error="1"' in attrs:
    problems.append("the page reported a script error: " + re.sub(r"\s+", " ", re.search(r'<div id="errors"[^>]*>(.*?)</div>', dom, re.S).group(1))[:300])
drawn_blocks = len(re.findall(r'class="(?:in_use|cached|pending) block"', dom))
if drawn_blocks != buffers:
    problems.append(f"{drawn_blocks} blocks drawn for {buffers} buffers")
m = re.search(r'data-drawn="(\d+)"', attrs)
if not m or int(m.group(1)) != buffers:
    problems.append(f"body data-drawn is {m.group(1) if m else 'missing'}, expected {buffers}")
holders = len(re.findall(r'<tr class="holder"', dom))
live = sum(1 for p in snap["pools"] for b in p["buffers"] if b["state"] == "in_use")
if holders != min(live, 20):
    problems.append(f"{holders} rows of largest holders for {live} buffers in use")


# Version 2: timeline, segments, out-of-memory marks, call sites.
pools = snap["pools"]
with_history = [p for p in pools if p.get("history")]
paths = re.findall(r'<path [^>]*class="series (in_use|cached|pending)"[^>]*>', dom)
if len(paths) != 3 * len(with_history):
    problems.append(f"{len(paths)} timeline series drawn for {len(with_history)} pools with history (3 each)")
drawn_points = [int(x) for x in re.findall(r'<path [^>]*class="series [a-z_]+"[^>]*data-points="(\d+)"', dom)]
want_points = [len(p["history"]["events"]) + 2 for p in with_history for _ in range(3)]
if drawn_points != want_points:
    problems.append(f"timeline points per series {drawn_points[:6]}..., expected {want_points[:6]}... (events + 2)")
if not with_history and 'id="no-history"' not in dom:
    problems.append("no history in the snapshot, and the page does not say so")
seg_blocks = sum(len(s["blocks"]) for p in pools for s in p.get("segments") or [])
drawn_seg = len(re.findall(r'class="segblock (?:in_use|cached|pending|free)"', dom))
if drawn_seg != seg_blocks:
    problems.append(f"{drawn_seg} segment blocks drawn for {seg_blocks} in the snapshot")
want_marks = sum(1 for p in with_history for e in p["history"]["events"] if e["action"] == "oom")
oom = snap.get("out_of_memory")
if oom:
    named = [i for i, p in enumerate(pools) if p["name"] == oom["pool"] or p["name"].split(" ")[0].split(":")[-1] == oom["pool"]]
    at = 0 if len(pools) == 1 else (named[0] if named else -1)
    if at >= 0 and pools[at].get("history") and not any(e["action"] == "oom" for e in pools[at]["history"]["events"]):
        want_marks += 1
drawn_marks = len(re.findall(r'class="oom-mark"', dom))
if drawn_marks != want_marks:
    problems.append(f"{drawn_marks} out-of-memory marks on the timeline, expected {want_marks}")
live_sorted = sorted((b for p in pools for b in p["buffers"] if b["state"] == "in_use"), key=lambda b: -b["bytes_held"])
want_sites = sum(1 for b in live_sorted[:20] if b.get("frames"))
drawn_sites = len(re.findall(r'<td class="l site"', dom))
if drawn_sites != want_sites:
    problems.append(f"{drawn_sites} call sites in the largest holders, expected {want_sites}")

if expect_error:
    if problems:
        print("ok: the broken page is caught: " + problems[0])
        sys.exit(0)
    print("FAIL: a page with a script error passed the check", file=sys.stderr)
    sys.exit(1)
if problems:
    print("FAIL: " + "\n      ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"ok: {drawn_blocks} blocks drawn for {buffers} buffers, {holders} holders, {len(paths)} timeline series "
      f"({sum(drawn_points)} points), {drawn_seg} segment blocks, {drawn_marks} out-of-memory marks, "
      f"{drawn_sites} call sites, no console message")
