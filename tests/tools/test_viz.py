#!/usr/bin/env python3
"""clpool-viz on a real snapshot (snapshot_demo's), on the hand-made version 2 example
(tests/data/viz/snapshot_v2.json: history, call sites, segments, an out-of-memory) and on bad
input: the report is written and carries every buffer, the PyTorch pickle loads back with the
structure PyTorch's memory viewer reads, and a truncated file or another schema version gets an
error naming the line or field.

    test_viz.py SNAPSHOT_DEMO CLPOOL_VIZ OUT_DIR
"""
import json
import os
import pickle
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
check(snap["version"] == 2, f"the demo snapshot is version 2 (found {snap['version']})")
check(buffers == 17 + 9, f"the demo snapshot holds 17 + 9 buffers (found {buffers})")
arena = [p for p in snap["pools"] if p.get("segments")]
check(len(arena) == 1, "the demo's arena pool lists its segments")
if arena:
    blocks = [b for s in arena[0]["segments"] for b in s["blocks"]]
    check(sum(b["bytes"] for b in blocks) == sum(s["bytes"] for s in arena[0]["segments"]),
          "its blocks add up to its segments")
    taken = sorted(b["buffer_id"] for b in blocks if b["state"] != "free")
    check(taken == sorted(b["id"] for b in arena[0]["buffers"]), "each of its buffers lies in one block")
    check(any(b["state"] == "free" for b in blocks), "it shows free holes")

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
check(page.count('"state":"in_use"') == 12 + 6 + 6, "the report embeds every in-use buffer (and block)")

# The call sites clpool writes ("function+0xOFF (module)", "0xOFF (module)") become PyTorch
# frames that keep their module and function: "function+0xOFF (module)" must match a pattern
# of the converter, or every such frame would say filename "??".
demo_pt = os.path.join(out, "viz-demo.pickle")
r = subprocess.run([sys.executable, viz, snap_path, "-o", html, "--pytorch", demo_pt], capture_output=True, text=True)
check(r.returncode == 0, f"clpool-viz --pytorch on the demo snapshot ({r.stderr.strip()})")
demo_frames = [f for s in pickle.load(open(demo_pt, "rb"))["segments"] for b in s["blocks"] for f in b["frames"]]
check(demo_frames and all(f["filename"] != "??" for f in demo_frames),
      f"every PyTorch frame of the demo names its module ({[f for f in demo_frames if f['filename'] == '??'][:1]})")
check(any(f["name"].startswith("snapshot_demo_fill") for f in demo_frames),
      "the demo's function is a PyTorch frame's name")

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
check(r.returncode == 2 and "'version' is 3" in r.stderr and "versions 1 and 2" in r.stderr,
      f"version 3: exit 2 naming 'version' ({r.stderr.strip()})")

# Version 1 is still read.
v1 = json.loads(text)
v1["version"] = 1
for p in v1["pools"]:
    p.pop("segments", None)
json.dump(v1, open(bad, "w", encoding="utf-8"))
r = run_viz(bad, os.path.join(out, "viz-v1.html"))
check(r.returncode == 0, f"a version 1 snapshot is read ({r.stderr.strip()})")

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

# ---- Version 2: the hand-made example with history, call sites, segments and an out-of-memory.
v2_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "viz", "snapshot_v2.json")
v2_text = open(v2_path, encoding="utf-8").read()
v2 = json.loads(v2_text)
pt = os.path.join(out, "viz-v2.pickle")
r = subprocess.run([sys.executable, viz, v2_path, "-o", os.path.join(out, "viz-v2.html"), "--pytorch", pt],
                   capture_output=True, text=True)
check(r.returncode == 0 and r.stderr == "", f"clpool-viz reads version 2 and writes both outputs ({r.stderr.strip()})")
page = open(os.path.join(out, "viz-v2.html"), encoding="utf-8").read()
check('"history"' in page and '"segments"' in page and '"frames"' in page, "the report embeds history, segments, frames")


def bad_v2(mutate, what, expect):
    doc = json.loads(v2_text)
    mutate(doc)
    path = os.path.join(out, "viz-bad-v2.json")
    json.dump(doc, open(path, "w", encoding="utf-8"))
    r = run_viz(path, os.path.join(out, "viz-bad-v2.html"))
    check(r.returncode == 2 and expect in r.stderr, f"{what}: exit 2 naming {expect!r} ({r.stderr.strip()})")


bad_v2(lambda d: d["pools"][0]["history"]["events"][3].update(action="explode"), "an unknown action",
       "pools[0].history.events[3].action")
bad_v2(lambda d: d["pools"][1]["segments"][0]["blocks"][1].pop("bytes"), "a block without bytes",
       "pools[1].segments[0].blocks[1].bytes: missing")
bad_v2(lambda d: d["pools"][0]["buffers"][2].update(frames=[7]), "a frame that is not a string",
       "pools[0].buffers[2].frames[0]")

# The PyTorch pickle: torch.cuda.memory._snapshot()'s structure, checked as _memory_viz reads it.
data = pickle.load(open(pt, "rb"))
check(isinstance(data, dict) and set(data) >= {"segments", "device_traces"}, "the pickle is a dict of segments and traces")
segs, traces = data.get("segments", []), data.get("device_traces", [])
check(len(traces) == len(v2["pools"]), "one device trace per pool")
SEG_KEYS = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
            "segment_type", "blocks"}
BLOCK_STATES = {"active_allocated", "inactive", "active_pending_free"}
seg_ok = frame_ok = True
ranges = []
for seg in segs:
    seg_ok &= SEG_KEYS <= set(seg) and seg["segment_type"] in ("small", "large")
    addr, allocated, active, internal, external = seg["address"], 0, 0, 0, 0
    for b in seg["blocks"]:
        seg_ok &= {"address", "size", "requested_size", "state", "frames"} <= set(b) and b["state"] in BLOCK_STATES
        seg_ok &= b["address"] == addr  # contiguous, in address order
        addr += b["size"]
        if b["state"] == "active_allocated":  # as _memory_viz.segsum counts
            allocated += b["requested_size"]
            internal += b["size"] - b["requested_size"]
            seg_ok &= b["requested_size"] <= b["size"]
        else:
            external += b["size"]
        for f in b["frames"]:
            frame_ok &= set(f) == {"filename", "line", "name"} and isinstance(f["line"], int)
    seg_ok &= addr == seg["address"] + seg["total_size"]
    seg_ok &= allocated + internal + external == seg["total_size"]  # segsum's assertion
    seg_ok &= seg["allocated_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
    ranges.append((seg["address"], seg["address"] + seg["total_size"]))
ranges.sort()
check(seg_ok, "every segment has the fields and blocks that tile it, and passes segsum's sum")
check(frame_ok, "every frame is {filename, line, name}")
check(all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), "no two segments overlap")
for i, pool in enumerate(v2["pools"]):
    mine = [s for s in segs if s["device"] == i]
    in_use = sum(1 for s in mine for b in s["blocks"] if b["state"] == "active_allocated")
    pending = sum(1 for s in mine for b in s["blocks"] if b["state"] == "active_pending_free")
    check(in_use == sum(1 for b in pool["buffers"] if b["state"] == "in_use") and
          pending == sum(1 for b in pool["buffers"] if b["state"] == "pending"),
          f"pool {i}: its in-use and pending buffers are active blocks of device {i}")
    events = (pool.get("history") or {}).get("events", [])
    trace = traces[i] if i < len(traces) else []
    actions = [e["action"] for e in trace]
    check(actions.count("alloc") == sum(1 for e in events if e["action"] == "alloc"),
          f"pool {i}: one trace alloc per history alloc")
    check(actions.count("oom") == sum(1 for e in events if e["action"] == "oom"), f"pool {i}: the oom is in its trace")
    check(all({"action", "size", "stream", "frames", "time_us"} <= set(e) and
              ("device_free" in e if e["action"] == "oom" else "addr" in e) for e in trace),
          f"pool {i}: every trace entry has the fields _memory_viz.trace reads")
    requested, ordered = set(), True
    for e in trace:
        if e["action"] == "free_requested":
            requested.add(e["addr"])
        elif e["action"] == "free_completed":
            ordered &= e["addr"] in requested
            requested.discard(e["addr"])
    check(ordered, f"pool {i}: each free is requested before it completes")

# A release the pool does not keep (an evict of a buffer in use: a cap refused it, or a
# sub-allocating pool's exact-size block went back to its arena) frees the allocation in the
# PyTorch trace before its segment goes: with only segment_free (or, for an arena, nothing)
# the allocation would stay live to the end of the trace.
def evict_pool(segments):
    stats = {f: 0 for f in ("hits", "misses", "evictions", "driver_frees", "oom_retries", "failed_allocations",
                            "bytes_allocated", "bytes_cached", "bytes_in_use", "bytes_requested", "bytes_pending",
                            "peak_bytes_allocated", "peak_bytes_in_use")}
    stats["buckets"] = []
    pool = {"name": "review", "taken_ns": 5_000_000, "stats": stats, "buffers": [],
            "history": {"capacity": 8, "recorded": 4, "dropped": 0, "events": [
                {"t_ns": 1_000_000, "action": "alloc", "hit": False, "id": 77, "bytes_requested": 1_500_000,
                 "bytes_held": 1_500_160, "bucket_size": 0, "tag": None},
                {"t_ns": 2_000_000, "action": "evict", "id": 77, "bytes_requested": 1_500_000,
                 "bytes_held": 1_500_160, "bucket_size": 0, "tag": None},
                {"t_ns": 3_000_000, "action": "alloc", "hit": False, "id": 78, "bytes_requested": 100,
                 "bytes_held": 512, "bucket_size": 512, "tag": None},
                {"t_ns": 3_000_000, "action": "free", "id": 78, "bytes_requested": 100,
                 "bytes_held": 512, "bucket_size": 512, "tag": None}]}}
    if segments:
        pool["segments"] = [{"id": 1, "bytes": 2 << 20, "free_bytes": 2 << 20, "largest_free": 2 << 20,
                             "blocks": [{"offset": 0, "bytes": 2 << 20, "state": "free", "buffer_id": 0}]}]
    return {"schema": "clpool.snapshot", "version": 2, "taken_ns": 5_000_000, "out_of_memory": None,
            "pools": [pool]}


for segments in (False, True):
    kind = "an arena" if segments else "a bucket pool"
    src = os.path.join(out, f"viz-evict-{int(segments)}.json")
    with open(src, "w", encoding="utf-8") as f:
        json.dump(evict_pool(segments), f)
    dst = os.path.join(out, f"viz-evict-{int(segments)}.pickle")
    r = subprocess.run([sys.executable, viz, src, "-o", dst + ".html", "--pytorch", dst], capture_output=True, text=True)
    check(r.returncode == 0, f"clpool-viz --pytorch on {kind} with an evict ({r.stderr.strip()})")
    trace = pickle.load(open(dst, "rb"))["device_traces"][0]
    live = {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = live.get(e["addr"], 0) + 1
        elif e["action"] == "free_completed":
            live[e["addr"]] = live.get(e["addr"], 0) - 1
    check(all(n == 0 for n in live.values()),
          f"{kind}: a buffer released and evicted is freed in the PyTorch trace ({[e['action'] for e in trace]})")

# An arena's fallback block (a whole buffer where the sub-buffer failed) lies in no segment: the
# PyTorch export shows it as a segment of its own, so its in-use bytes agree with the snapshot's.
# Exporting only the segments' blocks would leave the fallback out.
fb_doc = json.loads(v2_text)
fb_pool = fb_doc["pools"][1]
fb_pool["buffers"].insert(0, {"state": "in_use", "bucket_size": 0, "bytes_requested": 2900, "bytes_held": 3072,
                              "made_ns": fb_pool["taken_ns"] - 1, "handout_seq": 1, "handouts_since": 0, "uses": 1,
                              "tag": "", "id": 999936, "frames": []})
for field, add in (("bytes_allocated", 3072), ("bytes_in_use", 3072), ("bytes_requested", 2900)):
    fb_pool["stats"][field] += add
# Its hand-out, a miss, is in the history; so is an earlier buffer of the same id that lay in a
# segment and was evicted (a node's address reused), which is no driver allocation.
fb_events = fb_pool["history"]["events"]
fb_t = fb_events[-1]["t_ns"]
fb_events[0:0] = [{"t_ns": fb_events[0]["t_ns"] - 2, "action": "alloc", "id": 999936, "bytes_requested": 500,
                   "bytes_held": 512, "bucket_size": 512, "tag": "", "hit": False, "frames": []},
                  {"t_ns": fb_events[0]["t_ns"] - 1, "action": "evict", "id": 999936, "bytes_requested": 500,
                   "bytes_held": 512, "bucket_size": 512, "tag": "", "frames": []}]
fb_events.append({"t_ns": fb_t + 1, "action": "alloc", "id": 999936, "bytes_requested": 2900, "bytes_held": 3072,
                  "bucket_size": 0, "tag": "", "hit": False, "frames": []})
for field in ("recorded",):
    fb_pool["history"][field] += 3
fb_src, fb_pt = os.path.join(out, "viz-fallback.json"), os.path.join(out, "viz-fallback.pickle")
json.dump(fb_doc, open(fb_src, "w", encoding="utf-8"))
r = subprocess.run([sys.executable, viz, fb_src, "-o", fb_src + ".html", "--pytorch", fb_pt], capture_output=True,
                   text=True)
check(r.returncode == 0, f"clpool-viz --pytorch on an arena with a fallback block ({r.stderr.strip()})")
fb_segs = [seg for seg in pickle.load(open(fb_pt, "rb"))["segments"] if seg["device"] == 1]
fb_active = [b for seg in fb_segs for b in seg["blocks"] if b["state"] == "active_allocated"]
check(len(fb_active) == sum(1 for b in fb_pool["buffers"] if b["state"] == "in_use"),
      f"the arena's in-use buffers, its fallback too, are active blocks ({len(fb_active)})")
check(sum(b["size"] for b in fb_active) == fb_pool["stats"]["bytes_in_use"] and
      sum(b["requested_size"] for b in fb_active) == fb_pool["stats"]["bytes_requested"],
      f"the export's in-use and requested bytes are the snapshot's ({sum(b['size'] for b in fb_active)} of "
      f"{fb_pool['stats']['bytes_in_use']})")
check(any(seg["total_size"] == 3072 and len(seg["blocks"]) == 1 for seg in fb_segs),
      "the fallback is a segment of its own")
# The trace agrees with the segments: the fallback's miss is a segment_alloc at its segment's
# address before its alloc, as a bucket pool's miss is; the carved blocks' misses are none.
fb_trace = pickle.load(open(fb_pt, "rb"))["device_traces"][1]
fb_seg = next((seg for seg in fb_segs if seg["total_size"] == 3072 and len(seg["blocks"]) == 1), None)
seg_allocs = [(e["addr"], e["size"]) for e in fb_trace if e["action"] == "segment_alloc"]
check(fb_seg is not None and seg_allocs == [(fb_seg["address"], 3072)],
      f"the fallback's miss, and only it, is a segment_alloc at its segment ({seg_allocs})")
fb_acts = [(e["action"], e["addr"]) for e in fb_trace]
check(fb_seg is not None and ("segment_alloc", fb_seg["address"]) in fb_acts and
      fb_acts.index(("segment_alloc", fb_seg["address"])) + 1 == fb_acts.index(("alloc", fb_seg["address"])),
      "the segment_alloc comes right before the fallback's alloc")
check(not any(e["action"] == "segment_free" for e in fb_trace),
      "the evict of the carved block of the same id is no segment_free")

sys.exit(1 if failures else 0)
