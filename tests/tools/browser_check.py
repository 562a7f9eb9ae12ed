#!/usr/bin/env python3
"""Opens a clpool-viz report in headless Chromium and reads the DOM it rendered: no console
message, no script error, and one drawn block per buffer of the snapshot.

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

if expect_error:
    if problems:
        print("ok: the broken page is caught: " + problems[0])
        sys.exit(0)
    print("FAIL: a page with a script error passed the check", file=sys.stderr)
    sys.exit(1)
if problems:
    print("FAIL: " + "\n      ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"ok: {drawn_blocks} blocks drawn for {buffers} buffers, {holders} holders, no console message")
