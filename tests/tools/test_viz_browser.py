#!/usr/bin/env python3
"""clpool-viz's reports in headless Chromium (browser_check.py), for ctest: snapshot_demo's snapshot
(bucket map, segment map, no history), its --pending-completed one (a pending buffer that completed
before the snapshot: the timeline's bytes against the pool's peak) and the hand-made version 2 example (timeline, segments,
out-of-memory marks, call sites); and a page with a script error, which the check must catch.
Exit 77 (ctest: skipped) when no chromium is installed (Debian's chromium, .ci/deps.d/viz.txt),
except under CI (CI set), which installs it: there a missing browser is a failure.

    test_viz_browser.py SNAPSHOT_DEMO CLPOOL_VIZ OUT_DIR
"""
import os
import shutil
import subprocess
import sys

demo, viz, out = sys.argv[1:4]
if not (shutil.which("chromium") or shutil.which("chromium-browser")):
    if os.environ.get("CI"):
        print("chromium is not installed, and CI must have it (.ci/deps.d/viz.txt): failed")
        sys.exit(1)
    print("chromium is not installed: skipped (apt-get install chromium)")
    sys.exit(77)
here = os.path.dirname(os.path.abspath(__file__))
check = os.path.join(here, "browser_check.py")
os.makedirs(out, exist_ok=True)
demo_json = os.path.join(out, "browser-demo.json")
subprocess.run([demo, demo_json], check=True, capture_output=True)
# A pending buffer whose event completed before the snapshot: cached, with no event saying so.
pending_json = os.path.join(out, "browser-pending-completed.json")
subprocess.run([demo, "--pending-completed", pending_json], check=True, capture_output=True)
cases = [(demo_json, "browser-demo.html"), (pending_json, "browser-pending-completed.html"),
         (os.path.join(here, "..", "data", "viz", "snapshot_v2.json"), "browser-v2.html")]
failed = False
for snap, page in cases:
    page = os.path.join(out, page)
    subprocess.run([sys.executable, viz, snap, "-o", page], check=True)
    failed |= subprocess.run([sys.executable, check, page, snap]).returncode != 0
    broken = page.replace(".html", "-broken.html")
    with open(page, encoding="utf-8") as f, open(broken, "w", encoding="utf-8") as g:
        g.write(f.read().replace("render(JSON.parse", "render(undefined_function(), JSON.parse"))
    failed |= subprocess.run([sys.executable, check, broken, snap, "--expect-error"]).returncode != 0
sys.exit(1 if failed else 0)
