#!/usr/bin/env python3
"""clpool-viz on snapshots that are broken or hostile: a truncated file, one nested too deeply, NaN
or Infinity where JSON has none, a tag that looks like HTML. Each is an error naming where (exit
code 2), or a report whose own script still runs; never a Python traceback, never a blank page.
Run: python3 test_viz_input.py
"""
import importlib.machinery
import importlib.util
import io
import json
import os
import pickle
import re
import tempfile
import unittest
from contextlib import redirect_stderr
from pathlib import Path

root = Path(__file__).resolve().parents[2]


def _load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


viz = _load("clpool_viz", root / "tools" / "viz" / "clpool-viz")
browser_check = _load("browser_check", root / "tests" / "tools" / "browser_check.py")
SNAPSHOT_V2 = root / "tests" / "data" / "viz" / "snapshot_v2.json"
MiB = 1 << 20


def _stats(**bytes_):
    s = {f: 0 for f in viz.STATS_FIELDS}
    s.update(bytes_)
    return s


def _event(t_ns, action, ident, held, requested=None, hit=None):
    e = {"t_ns": t_ns, "action": action, "id": ident, "bytes_requested": held if requested is None else requested,
         "bytes_held": held, "bucket_size": held, "tag": None}
    if action == "alloc":
        e["hit"] = bool(hit)
    return e


def _buffer(ident, state, held):
    return {"id": ident, "state": state, "bucket_size": held, "bytes_requested": held if state == "in_use" else 0,
            "bytes_held": held, "made_ns": 1000, "handout_seq": 1, "handouts_since": 0, "uses": 1, "tag": ""}


def _pool(name, stats, buffers, events, dropped=0):
    return {"name": name, "taken_ns": 9000, "stats": stats, "buffers": buffers,
            "history": {"capacity": 64, "recorded": len(events) + dropped, "dropped": dropped, "events": events}}


def _snapshot(pools, version=2):
    return {"schema": "clpool.snapshot", "version": version, "taken_ns": 9000, "out_of_memory": None, "pools": pools}


class BrokenSnapshots(unittest.TestCase):
    # docs/OBSERVABILITY.md promises the line and column and "truncated?" for a truncated file; a
    # cut in the middle of a multi-byte UTF-8 character (a tag or call site that is not ASCII) is
    # a truncation too, not just "byte N: not UTF-8".
    def test_truncated_inside_a_utf8_character_names_the_line_and_truncation(self):
        snap = json.loads(SNAPSHOT_V2.read_text(encoding="utf-8"))
        snap["pools"][0]["buffers"][0]["tag"] = "kv-cache-\u00fcber"
        data = json.dumps(snap, indent=1, ensure_ascii=False).encode("utf-8")
        cut = data.index("\u00fc".encode("utf-8")) + 1  # half of the two-byte character
        line = data[:cut].count(b"\n") + 1
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "truncated.json")
            with open(path, "wb") as f:
                f.write(data[:cut])
            with self.assertRaises(viz.SnapshotError) as caught:
                viz.load(path)
        message = str(caught.exception)
        self.assertIn(f"line {line}, column ", message)
        self.assertIn("truncated?", message)

    # A deeply nested file must not reach a recursive parser's RecursionError: it is
    # "clpool-viz: FILE: ..." and exit code 2.
    def test_a_deeply_nested_file_is_an_error_not_a_traceback(self):
        for text in ("[" * 100000 + "]" * 100000, '{"a":' * 100000 + "1" + "}" * 100000):
            with tempfile.TemporaryDirectory() as d:
                src = os.path.join(d, "deep.json")
                with open(src, "w", encoding="utf-8") as f:
                    f.write(text)
                err = io.StringIO()
                with redirect_stderr(err):
                    rc = viz.main([src, "-o", os.path.join(d, "report.html")])
            self.assertEqual(rc, 2)
            self.assertIn("nested too deeply", err.getvalue())

    # Python's json reads NaN and Infinity, which JSON has not. In a field the schema does not
    # check, they would go into the report as written and the page's JSON.parse would refuse the
    # whole snapshot (a blank report, exit code 0): they are named by field instead.
    def test_nan_and_infinity_are_named_by_field(self):
        base = json.loads(SNAPSHOT_V2.read_text(encoding="utf-8"))
        for name, value in (("NaN", float("nan")), ("-Infinity", float("-inf"))):
            snap = json.loads(json.dumps(base))
            snap["pools"][0]["extra"] = {"ratio": value}
            where = "pools[0].extra.ratio"
            with self.subTest(where=where, name=name), tempfile.TemporaryDirectory() as d:
                src = os.path.join(d, "snap.json")
                with open(src, "w", encoding="utf-8") as f:
                    json.dump(snap, f)
                err = io.StringIO()
                with redirect_stderr(err):
                    rc = viz.main([src, "-o", os.path.join(d, "report.html")])
                self.assertEqual(rc, 2)
                self.assertIn(f"{where}: {name} is not valid JSON", err.getvalue())


class Hooks(unittest.TestCase):
    # A test or script reading the report relies on what docs/OBSERVABILITY.md documents, not on
    # what it finds by inspecting the DOM: every hook browser_check.py reads is in that table, and
    # every class, id and attribute it names is one the page makes.
    def test_every_hook_the_browser_check_reads_is_documented_and_made_by_the_page(self):
        doc = (root / "docs" / "OBSERVABILITY.md").read_text(encoding="utf-8")
        start = doc.index("### The report's hooks")
        table = doc[start:doc.index("\n## ", start)]
        for hook in browser_check.HOOKS:
            with self.subTest(hook=hook):
                self.assertIn(hook, table)
                for name in re.findall(r"[.#\[]([a-z][a-z_-]*)", hook.replace("<state>", "in_use")) or [hook]:
                    # An attribute set through the dataset: body.dataset.drawn = ... is data-drawn.
                    made = name in viz.PAGE or (name.startswith("data-") and re.search(rf"\.{name[5:]} = ", viz.PAGE))
                    self.assertTrue(made, f"the page makes no {name}")


class VersionOne(unittest.TestCase):
    # The report and the PyTorch export read a pool's history and segments in any version: a
    # version 1 file that has them gets them checked as version 2's, so a bad one is exit 2
    # naming the field, and no pickle (not an empty one) is left behind.
    def test_a_bad_segment_in_a_version_1_file_is_named_and_no_pickle_is_written(self):
        snap = json.loads(SNAPSHOT_V2.read_text(encoding="utf-8"))
        snap["version"] = 1
        del snap["pools"][1]["segments"][0]["blocks"][1]["state"]
        with tempfile.TemporaryDirectory() as d:
            src, pt = os.path.join(d, "snap.json"), os.path.join(d, "out.pickle")
            with open(src, "w", encoding="utf-8") as f:
                json.dump(snap, f)
            err = io.StringIO()
            with redirect_stderr(err):
                rc = viz.main([src, "--pytorch", pt])
            self.assertEqual(rc, 2)
            self.assertIn("pools[1].segments[0].blocks[1].state: missing", err.getvalue())
            self.assertFalse(os.path.exists(pt), "a pickle was left behind")

    def test_a_bad_history_event_in_a_version_1_file_is_named(self):
        snap = json.loads(SNAPSHOT_V2.read_text(encoding="utf-8"))
        snap["version"] = 1
        snap["pools"][0]["history"]["events"][2]["bytes_held"] = "many"
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "snap.json")
            with open(src, "w", encoding="utf-8") as f:
                json.dump(snap, f)
            err = io.StringIO()
            with redirect_stderr(err):
                rc = viz.main([src, "-o", os.path.join(d, "r.html"), "--pytorch", os.path.join(d, "out.pickle")])
            self.assertEqual(rc, 2)
            self.assertIn("pools[0].history.events[2].bytes_held: expected an integer", err.getvalue())


class PytorchExport(unittest.TestCase):
    def export(self, snap):
        with tempfile.TemporaryDirectory() as d:
            src, pt = os.path.join(d, "snap.json"), os.path.join(d, "out.pickle")
            with open(src, "w", encoding="utf-8") as f:
                json.dump(snap, f)
            self.assertEqual(viz.main([src, "--pytorch", pt]), 0)
            with open(pt, "rb") as f:
                return pickle.load(f)

    # A pending buffer whose events completed is cached in the snapshot, its block inactive; its
    # free_requested must complete in the trace too (by the snapshot's moment), or PyTorch's
    # viewer keeps it pending to the end while the segments say it is free. One still pending
    # in the snapshot stays requested.
    def test_a_pending_buffer_that_completed_has_its_free_completed(self):
        pools = [_pool("pending-completed", _stats(bytes_allocated=MiB, bytes_cached=MiB), [_buffer(1, "cached", MiB)],
                       [_event(1000, "alloc", 1, MiB, hit=False), _event(2000, "pending", 1, MiB)]),
                 _pool("still-pending", _stats(bytes_allocated=MiB, bytes_pending=MiB), [_buffer(2, "pending", MiB)],
                       [_event(1000, "alloc", 2, MiB, hit=False), _event(2000, "pending", 2, MiB)])]
        data = self.export(_snapshot(pools))
        done, still = data["device_traces"]
        self.assertEqual([e["action"] for e in done],
                         ["segment_alloc", "alloc", "free_requested", "free_completed"])
        self.assertEqual(done[-1]["addr"], done[1]["addr"])
        self.assertEqual(done[-1]["time_us"], 9)  # the snapshot's moment, 9000 ns
        self.assertEqual([e["action"] for e in still], ["segment_alloc", "alloc", "free_requested"])
        states = {s["device"]: [b["state"] for b in s["blocks"]] for s in data["segments"]}
        self.assertEqual(states, {0: ["inactive"], 1: ["active_pending_free"]})


class HostileTags(unittest.TestCase):
    # The snapshot is inlined in a <script>. Escaping "</" alone is not enough: a tag (or call
    # site) holding "<!--<script>" puts the HTML parser in the script's "double escaped" state, so
    # the real </script> after the data no longer closes it, the page's own script becomes part of
    # the data block and never runs, and the report is blank with no error (in headless Chromium,
    # tests/tools/browser_check.py: 0 blocks drawn for 36 buffers).
    def test_a_tag_with_html_comment_and_script_text_keeps_the_page_script(self):
        snap = json.loads(SNAPSHOT_V2.read_text(encoding="utf-8"))
        snap["pools"][0]["buffers"][0]["tag"] = "<!--<script>"
        with tempfile.TemporaryDirectory() as d:
            src, dst = os.path.join(d, "snap.json"), os.path.join(d, "report.html")
            with open(src, "w", encoding="utf-8") as f:
                json.dump(snap, f)
            self.assertEqual(viz.main([src, "-o", dst]), 0)
            with open(dst, encoding="utf-8") as f:
                page = f.read()
        start = page.index('id="snapshot">') + len('id="snapshot">')
        data = page[start:page.index("</script>", start)]
        self.assertFalse("<!--" in data, "'<!--' in the inlined snapshot")
        self.assertFalse("<script" in data.lower(), "'<script' in the inlined snapshot")
        self.assertEqual(json.loads(data), snap)


@unittest.skipUnless(browser_check.browser() or os.environ.get("CI"), "chromium is not installed (apt-get install chromium)")
class Timeline(unittest.TestCase):
    """The page's timeline, rendered in headless Chromium and read through its documented hooks
    (svg.timeline data-peak and data-start, path.series data-max and data-min)."""

    @classmethod
    def setUpClass(cls):
        pools = [
            # allocate 1 MiB, release_after an event, the event completes, snapshot: the snapshot's
            # look at the pending list moved the buffer to the cache, and no event says so.
            _pool("pending-completed", _stats(bytes_allocated=MiB, bytes_cached=MiB, peak_bytes_allocated=MiB,
                                              peak_bytes_in_use=MiB),
                  [_buffer(1, "cached", MiB)],
                  [_event(1000, "alloc", 1, MiB, hit=False), _event(2000, "pending", 1, MiB)]),
            # The ring dropped the allocate of a buffer in use; the pool then refused its release
            # (a cap): an evict with the bytes its holder asked for.
            _pool("evicted-in-use", _stats(peak_bytes_allocated=4096, peak_bytes_in_use=4096), [],
                  [_event(3000, "evict", 2, 4096, requested=3000)], dropped=1),
        ]
        cls.snap = _snapshot(pools)
        with tempfile.TemporaryDirectory() as d:
            src, dst = os.path.join(d, "snap.json"), os.path.join(d, "report.html")
            with open(src, "w", encoding="utf-8") as f:
                json.dump(cls.snap, f)
            assert viz.main([src, "-o", dst]) == 0
            cls.page = browser_check.render(dst)
        cls.charts = {e.int("data-pool"): e for e in cls.page.all("svg", "timeline")}
        cls.series = {(i, k): cls.page.series(cls.charts[i], k) for i in range(len(pools)) for k in viz.STATES}

    # The page undid the history from each buffer's last-seen state (pending), while the snapshot
    # holds it cached: 2 MiB drawn at the peak of a pool that held 1 MiB, and 1 MiB cached before
    # the buffer was made.
    def test_a_pending_buffer_that_completed_before_the_snapshot_is_counted_once(self):
        chart = self.charts[0]
        self.assertEqual(chart.int("data-peak"), MiB)
        self.assertEqual(chart.int("data-start"), 0)
        for k in viz.STATES:
            self.assertGreaterEqual(self.series[0, k].int("data-min"), 0, k)
        self.assertEqual(self.series[0, "pending"].int("data-max"), MiB)
        self.assertEqual(self.series[0, "cached"].int("data-max"), MiB)
        self.assertEqual(browser_check.timeline_problems(self.page, self.snap)[:1], [])

    # An evict the history never saw the buffer before: with bytes asked for, the buffer was in
    # use (a release the pool did not keep), not cached.
    def test_an_evict_of_an_unseen_buffer_in_use_was_in_use_before(self):
        self.assertEqual(self.series[1, "in_use"].int("data-max"), 4096)
        self.assertEqual(self.series[1, "cached"].int("data-max"), 0)
        self.assertEqual(self.charts[1].int("data-start"), 4096)


if __name__ == "__main__":
    unittest.main()
