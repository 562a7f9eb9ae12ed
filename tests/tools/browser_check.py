#!/usr/bin/env python3
"""Opens a clpool-viz report in headless Chromium and reads the DOM it rendered, through the page's
documented hooks only (docs/OBSERVABILITY.md, "The report's hooks"): no console message, no script
error, one drawn block per buffer of the snapshot, one per segment block, a timeline of three
stacked series per pool with history (one point per event, plus its start and the snapshot's
moment), one out-of-memory mark per "oom" event (or for the top-level record), the call sites of
the largest holders, and the timeline's bytes against the pool's own: never below zero, never
above its peak, and, where the history saw every buffer made, starting at zero and reaching the
peak the pool counted.

    browser_check.py REPORT.html SNAPSHOT.json [--expect-error]

--expect-error inverts the verdict: the self-check that a page with a script error fails.
As a module: render(report) -> Page, and problems(page, snap) -> [str].
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser


# Every selector and attribute of the page this check reads: the hooks docs/OBSERVABILITY.md
# documents ("The report's hooks"), which test_viz_input.py holds to that table.
HOOKS = ('body[data-error="1"]', "#errors", "[data-drawn]", "rect.block.<state>[data-id]",
         "rect.segblock.<state>[data-id]", "svg.timeline[data-pool]", "data-peak", "data-start",
         "path.series.<state>", "data-points", "data-max", "data-min", "line.oom-mark", "tr.holder", "td.site",
         "#no-history")


def browser():
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Element:
    def __init__(self, tag, attrs, parent=None):
        self.tag, self.parent = tag, parent
        self.attrs = dict(attrs)
        self.classes = set((self.attrs.get("class") or "").split())
        self.text = ""

    def int(self, name):
        return int(float(self.attrs[name]))


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements, self.open = [], []

    def handle_starttag(self, tag, attrs):
        e = Element(tag, attrs, self.open[-1] if self.open else None)
        self.elements.append(e)
        self.open.append(e)

    def handle_startendtag(self, tag, attrs):
        self.elements.append(Element(tag, attrs, self.open[-1] if self.open else None))

    def handle_endtag(self, tag):
        while self.open:
            if self.open.pop().tag == tag:
                break

    def handle_data(self, data):
        for e in self.open:
            e.text += data


class Page:
    """The rendered DOM: its elements, selected by tag, class and id."""

    def __init__(self, returncode, dom, log):
        self.returncode, self.dom, self.log = returncode, dom, log
        parser = _Collect()
        parser.feed(dom)
        self.elements = parser.elements

    def all(self, tag=None, *classes):
        return [e for e in self.elements if (tag is None or e.tag == tag) and set(classes) <= e.classes]

    def series(self, chart, state):
        """The path.series of one state in an svg.timeline."""
        return next((e for e in self.all("path", "series", state) if e.parent is chart), None)

    def by_id(self, ident):
        return next((e for e in self.elements if e.attrs.get("id") == ident), None)

    def body(self):
        return next((e for e in self.elements if e.tag == "body"), Element("body", {}))


def render(report):
    exe = browser()
    if not exe:
        raise FileNotFoundError("chromium not found (Debian package chromium, .ci/deps.d/viz.txt)")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom",
               "file://" + os.path.abspath(report)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return Page(r.returncode, r.stdout, r.stderr)


def _complete_history(pool):
    """True when the history saw every buffer of the pool made: none dropped, each id's first event
    a miss, and every buffer of the snapshot in it. Then the pool held nothing at its start."""
    hist = pool["history"]
    if hist["dropped"] or hist["recorded"] != len(hist["events"]):
        return False
    first = {}
    for e in hist["events"]:
        if e["action"] in ("alloc", "free", "pending", "evict"):
            first.setdefault(e["id"], e)
    if any(not (e["action"] == "alloc" and not e["hit"]) for e in first.values()):
        return False
    return all(b["id"] in first for b in pool["buffers"])


def timeline_problems(page, snap):
    """The timeline's bytes against the pool's: each series never below zero, the total never
    above the pool's peak_bytes_allocated; with a complete history, 0 at the start and the peak
    reached."""
    out = []
    charts = {e.int("data-pool"): e for e in page.all("svg", "timeline")}
    series = page.all("path", "series")
    for i, pool in enumerate(snap["pools"]):
        if not pool.get("history"):
            continue
        chart = charts.get(i)
        if chart is None:
            out.append(f"pool {i}: no timeline drawn")
            continue
        mine = [s for s in series if s.parent is chart]
        if len(mine) != 3:
            out.append(f"pool {i}: {len(mine)} series in its timeline, expected 3")
        low = [(s.attrs["class"], s.int("data-min")) for s in mine if s.int("data-min") < 0]
        peak, start = chart.int("data-peak"), chart.int("data-start")
        known = pool["stats"].get("peak_bytes_allocated")
        if known is not None and peak > known:
            out.append(f"pool {i}: the timeline reaches {peak} bytes, above the pool's peak {known}")
        if _complete_history(pool):
            if start != 0:
                out.append(f"pool {i}: the timeline starts at {start} bytes before any buffer was made")
            if known is not None and peak != known:
                out.append(f"pool {i}: the timeline's peak is {peak} bytes, the pool's {known}")
        if low:
            out.append(f"pool {i}: a series below zero: {low[:3]}")
    return out


def problems(page, snap):
    out = []
    buffers = sum(len(p["buffers"]) for p in snap["pools"])
    if page.returncode != 0:
        out.append(f"chromium exited {page.returncode}")
    console = [line for line in page.log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    if console:
        out.append("console messages: " + " | ".join(console[:5]))
    body = page.body()
    if body.attrs.get("data-error") == "1":
        errors = page.by_id("errors")
        out.append("the page reported a script error: " + " ".join((errors.text if errors else "").split())[:300])
    drawn_blocks = sum(len(page.all("rect", s, "block")) for s in ("in_use", "cached", "pending"))
    if drawn_blocks != buffers:
        out.append(f"{drawn_blocks} blocks drawn for {buffers} buffers")
    drawn = body.attrs.get("data-drawn")
    if drawn is None or int(drawn) != buffers:
        out.append(f"body data-drawn is {drawn or 'missing'}, expected {buffers}")
    holders = len(page.all("tr", "holder"))
    live = sum(1 for p in snap["pools"] for b in p["buffers"] if b["state"] == "in_use")
    if holders != min(live, 20):
        out.append(f"{holders} rows of largest holders for {live} buffers in use")

    # Version 2: timeline, segments, out-of-memory marks, call sites.
    pools = snap["pools"]
    with_history = [p for p in pools if p.get("history")]
    paths = [e for e in page.all("path", "series") if e.classes & {"in_use", "cached", "pending"}]
    if len(paths) != 3 * len(with_history):
        out.append(f"{len(paths)} timeline series drawn for {len(with_history)} pools with history (3 each)")
    drawn_points = [e.int("data-points") for e in paths]
    want_points = [len(p["history"]["events"]) + 2 for p in with_history for _ in range(3)]
    if drawn_points != want_points:
        out.append(f"timeline points per series {drawn_points[:6]}..., expected {want_points[:6]}... (events + 2)")
    if not with_history and page.by_id("no-history") is None:
        out.append("no history in the snapshot, and the page does not say so")
    seg_blocks = sum(len(s["blocks"]) for p in pools for s in p.get("segments") or [])
    drawn_seg = sum(len(page.all("rect", "segblock", s)) for s in ("in_use", "cached", "pending", "free"))
    if drawn_seg != seg_blocks:
        out.append(f"{drawn_seg} segment blocks drawn for {seg_blocks} in the snapshot")
    want_marks = sum(1 for p in with_history for e in p["history"]["events"] if e["action"] == "oom")
    oom = snap.get("out_of_memory")
    if oom:
        named = [i for i, p in enumerate(pools)
                 if p["name"] == oom["pool"] or p["name"].split(" ")[0].split(":")[-1] == oom["pool"]]
        at = 0 if len(pools) == 1 else (named[0] if named else -1)
        if at >= 0 and pools[at].get("history") and not any(e["action"] == "oom" for e in pools[at]["history"]["events"]):
            want_marks += 1
    drawn_marks = len(page.all("line", "oom-mark"))
    if drawn_marks != want_marks:
        out.append(f"{drawn_marks} out-of-memory marks on the timeline, expected {want_marks}")
    live_sorted = sorted((b for p in pools for b in p["buffers"] if b["state"] == "in_use"), key=lambda b: -b["bytes_held"])
    want_sites = sum(1 for b in live_sorted[:20] if b.get("frames"))
    drawn_sites = len(page.all("td", "site"))
    if drawn_sites != want_sites:
        out.append(f"{drawn_sites} call sites in the largest holders, expected {want_sites}")
    out += timeline_problems(page, snap)
    summary = (f"{drawn_blocks} blocks drawn for {buffers} buffers, {holders} holders, {len(paths)} timeline series "
               f"({sum(drawn_points)} points), {drawn_seg} segment blocks, {drawn_marks} out-of-memory marks, "
               f"{drawn_sites} call sites, no console message")
    return out, summary


def main(argv):
    report, snapshot = argv[1], argv[2]
    expect_error = "--expect-error" in argv[3:]
    if not browser():
        print("browser_check: chromium not found (Debian package chromium, .ci/deps.d/viz.txt)", file=sys.stderr)
        return 1
    with open(snapshot, encoding="utf-8") as f:
        snap = json.load(f)
    found, summary = problems(render(report), snap)
    if expect_error:
        if found:
            print("ok: the broken page is caught: " + found[0])
            return 0
        print("FAIL: a page with a script error passed the check", file=sys.stderr)
        return 1
    if found:
        print("FAIL: " + "\n      ".join(found), file=sys.stderr)
        return 1
    print("ok: " + summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
