#!/usr/bin/env python3
"""clpool-viz on a real snapshot (snapshot_demo's) and on bad input: the report is written, carries
every buffer, and a truncated file or another schema version gets an error naming the line or field.

    test_viz.py SNAPSHOT_DEMO CLPOOL_VIZ OUT_DIR
"""
import json
import os
import re
import subprocess
import sys

demo, viz, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run_viz(src, dst):
    return subprocess.run([sys.executable, viz, src, "-o", dst], capture_output=True, text=True)


snap_path = os.path.join(out, "viz-demo.json")
r = subprocess.run([demo, snap_path], capture_output=True, text=True)
check(r.returncode == 0, f"snapshot_demo writes {snap_path}: {r.stderr.strip()}")
with open(snap_path, encoding="utf-8") as f:
    text = f.read()
snap = json.loads(text)
buffers = sum(len(p["buffers"]) for p in snap["pools"])
check(buffers == 17, f"the demo snapshot holds 17 buffers (found {buffers})")

# Version 2: the history (30 events, oldest first) and each buffer's call site, naming the demo's function.
check(snap["version"] == 2, f"schema version 2 (found {snap['version']})")
pool = snap["pools"][0]
hist = pool.get("history", {})
events = hist.get("events", [])
check(hist.get("capacity") == 64 and hist.get("recorded") == 30 and hist.get("dropped") == 0 and len(events) == 30,
      f"history: capacity 64, 30 recorded, none dropped ({ {k: v for k, v in hist.items() if k != 'events'} })")
check(all(a["t_ns"] <= b["t_ns"] for a, b in zip(events, events[1:])), "history events are oldest first")
check(events and all(e["t_ns"] <= pool["taken_ns"] for e in events), "no event is after the snapshot")
actions = [e["action"] for e in events]
check(actions.count("alloc") == 21 and actions.count("free") == 9, f"21 allocs and 9 frees ({actions})")
hits = sum(1 for e in events if e["action"] == "alloc" and e["hit"])
check(hits == 4, f"4 of the allocs hit the cache (found {hits})")
check(all(("hit" in e) == (e["action"] == "alloc") for e in events), "'hit' is on allocs alone")
check(all(isinstance(e["tag"], (str, type(None))) and e["frames"] for e in events), "every event has a call site")
ids = {b["id"] for b in pool["buffers"]}
check(all(e["id"] in ids for e in events), "every event names a buffer of the snapshot by its id")
first = pool["buffers"][0]["frames"]
check(first and first[0].startswith("snapshot_demo_fill"),
      f"an in-use buffer's innermost frame is the demo's function ({first[:1]})")
check(all(b.get("frames") for b in pool["buffers"]), "every buffer has its holder's call site")

html = os.path.join(out, "viz-demo.html")
r = run_viz(snap_path, html)
check(r.returncode == 0 and r.stderr == "", f"clpool-viz writes the report ({r.stderr.strip()})")
page = open(html, encoding="utf-8").read()
check("http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page,
      "the report loads nothing from the network")
check(page.count('"state":"in_use"') == 12, "the report embeds every in-use buffer")

# Truncated: the error names a line.
trunc = os.path.join(out, "viz-cut.json")
with open(trunc, "w", encoding="utf-8") as f:
    f.write(text[: len(text) * 2 // 3])
r = run_viz(trunc, os.path.join(out, "viz-cut.html"))
check(r.returncode == 2 and re.search(r"line \d+, column \d+: not valid JSON", r.stderr) and "truncated?" in r.stderr,
      f"a truncated snapshot: exit 2 naming the line ({r.stderr.strip()})")
check(not os.path.exists(os.path.join(out, "viz-cut.html")), "no report is written for it")

# Another version: the error names the field.
other = dict(snap, version=3)
bad = os.path.join(out, "viz-v3.json")
json.dump(other, open(bad, "w", encoding="utf-8"))
r = run_viz(bad, os.path.join(out, "viz-v3.html"))
check(r.returncode == 2 and "'version' is 3" in r.stderr, f"version 3: exit 2 naming 'version' ({r.stderr.strip()})")

# A buffer without a field: its path.
broken = json.loads(text)
del broken["pools"][0]["buffers"][3]["bytes_held"]
json.dump(broken, open(bad, "w", encoding="utf-8"))
r = run_viz(bad, os.path.join(out, "viz-broken.html"))
check(r.returncode == 2 and "pools[0].buffers[3].bytes_held: missing" in r.stderr,
      f"a missing field: its path ({r.stderr.strip()})")

# A tag that would close the inline script stays data.
evil = json.loads(text)
evil["pools"][0]["buffers"][0]["tag"] = "</script><script>alert(1)</script>"
json.dump(evil, open(bad, "w", encoding="utf-8"))
r = run_viz(bad, os.path.join(out, "viz-evil.html"))
page = open(os.path.join(out, "viz-evil.html"), encoding="utf-8").read()
check(r.returncode == 0 and page.count("</script>") == 2, "a tag cannot close the page's script")

sys.exit(1 if failures else 0)
