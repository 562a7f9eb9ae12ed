#!/usr/bin/env python3
"""Defects found in tools/convert_trace.py and tools/viz/clpool-viz, one test each: each fails on
the code before its fix. Run: python3 test_tool_defects.py
"""
import importlib.machinery
import importlib.util
import io
import json
import os
import pickle
import sys
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


ct = _load("convert_trace", root / "tools" / "convert_trace.py")
viz = _load("clpool_viz", root / "tools" / "viz" / "clpool-viz")
RMM_LOG = root / "tests" / "data" / "convert" / "rmm_log.csv"
SNAPSHOT_V2 = root / "tests" / "data" / "viz" / "snapshot_v2.json"


class ConvertTraceDefects(unittest.TestCase):
    # Defect: an output path that cannot be written (-o into a missing directory) raised
    # FileNotFoundError out of main(): a Python traceback instead of "convert_trace: ..." and
    # an exit code (docs/TOOLS.md: an output file that cannot be written is exit code 1).
    def test_unwritable_output_is_an_error_not_a_traceback(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "missing", "out.trace")
            err = io.StringIO()
            with redirect_stderr(err):
                rc = ct.main(["rmm", str(RMM_LOG), "-o", out])
        self.assertEqual(rc, 1)
        self.assertIn("convert_trace: cannot write", err.getvalue())
        self.assertIn(out, err.getvalue())

    # Defect: an RMM row with a negative Size ("-4096") was taken without a word: an allocate was
    # dropped as if it were a 0-byte one, and its later free counted among the "frees of blocks
    # allocated before the log began". Bad input gets an error naming the line and the value.
    def test_negative_size_is_named_by_line(self):
        head = "Thread,Time,Action,Pointer,Size,Stream\n"
        with self.assertRaisesRegex(ct.ConvertError, "line 2: bad Size '-4096'"):
            ct.convert("rmm", (head + "1,00:00:01.5,allocate,0x10,-4096,0x0\n").encode())
        with self.assertRaisesRegex(ct.ConvertError, "line 3: bad Size '-8'"):
            ct.convert("rmm", (head + "1,00:00:01.5,allocate,0x10,8,0x0\n1,00:00:01.6,free,0x10,-8,0x0\n").encode())

    # Defect: a PyTorch snapshot event with time_us NaN or Infinity reached int(t_us * 1000) and
    # raised ValueError / OverflowError out of main(): a Python traceback, no exit code.
    def test_non_finite_time_us_is_named(self):
        for t_us in (float("nan"), float("inf"), float("-inf")):
            snap = {"device_traces": [[{"action": "alloc", "addr": 16, "size": 512, "time_us": t_us}]]}
            with self.subTest(t_us=t_us):
                with self.assertRaisesRegex(ct.ConvertError, r"device_traces\[0\]\[0\] \(alloc\) has time_us="):
                    ct.convert("torch", pickle.dumps(snap))
        nan_event = {"action": "alloc", "addr": 16, "size": 512, "time_us": float("nan")}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "snap.pickle")
            with open(path, "wb") as f:
                pickle.dump({"device_traces": [[nan_event]]}, f)
            err = io.StringIO()
            with redirect_stderr(err):
                rc = ct.main(["torch", path, "-o", os.path.join(d, "out.trace")])
        self.assertEqual(rc, 2)
        self.assertIn("time_us=nan; expected a finite number", err.getvalue())

    # Defect: a huge finite time_us (1e300) was converted into a time of 304 digits, which
    # clpool-replay then refused ("bad time"); 1e306 overflowed int(t_us * 1000), a traceback.
    # A time past the format's 64-bit nanoseconds is named by event, with the limit.
    def test_time_us_past_the_formats_limit_is_named(self):
        limit = str(2**64 - 1)
        # Times count from the first event by time: after -1e300, the event at 0 is the one too late.
        for t_us, late in ((1e300, 1), (1e306, 1), (10**40, 1), (18446744073709552, 1), (-1e300, 0)):
            snap = {"device_traces": [[{"action": "alloc", "addr": 16, "size": 512, "time_us": 0},
                                       {"action": "alloc", "addr": 32, "size": 512, "time_us": t_us}]]}
            with self.subTest(t_us=t_us):
                with self.assertRaisesRegex(ct.ConvertError,
                                            rf"device_traces\[0\]\[{late}\] \(alloc\) has time_us=.*{limit} ns"):
                    ct.convert("torch", pickle.dumps(snap))
        # The largest time the format holds in whole microseconds converts.
        snap = {"device_traces": [[{"action": "alloc", "addr": 16, "size": 512, "time_us": 0},
                                   {"action": "alloc", "addr": 32, "size": 512, "time_us": 18446744073709551}]]}
        self.assertIn("\n18446744073709551000 alloc 2 ", ct.convert("torch", pickle.dumps(snap)))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "snap.pickle")
            with open(path, "wb") as f:
                pickle.dump({"device_traces": [[{"action": "alloc", "addr": 16, "size": 512, "time_us": 0.0},
                                                {"action": "free_completed", "addr": 16, "size": 512,
                                                 "time_us": 1e300}]]}, f)
            err = io.StringIO()
            with redirect_stderr(err):
                rc = ct.main(["torch", path, "-o", os.path.join(d, "out.trace")])
        self.assertEqual(rc, 2)
        self.assertIn("device_traces[0][1] (free_completed) has time_us=1e+300", err.getvalue())
        self.assertIn(f"expected times within {limit} ns", err.getvalue())

    # Defect: a bad field's value was quoted with repr(), which recurses: a size nested 200000 lists
    # deep (the unpickler builds it without recursion) raised RecursionError, a traceback.
    def test_a_deeply_nested_bad_field_is_named_not_a_traceback(self):
        depth = 200000
        deep = b"]" * depth + b"a" * (depth - 1)  # a list in a list ... (EMPTY_LIST, APPEND)

        def text(s):
            return b"X" + len(s).to_bytes(4, "little") + s  # BINUNICODE

        data = (b"\x80\x02}" + text(b"device_traces") + b"]]}(" + text(b"action") + text(b"alloc") +
                text(b"addr") + b"K\x10" + text(b"size") + deep + b"uaas.")
        with self.assertRaisesRegex(ct.ConvertError, r"device_traces\[0\]\[0\] \(alloc\) has size=\[\["):
            ct.convert("torch", data)


class VizDefects(unittest.TestCase):
    # Defect: a snapshot truncated in the middle of a multi-byte UTF-8 character (a tag or call
    # site that is not ASCII) was reported as "byte N: not UTF-8": no line, no column and no word
    # of truncation, where docs/OBSERVABILITY.md promises the line and column and "truncated?".
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

    # Defect: the snapshot is inlined in a <script> with only "</" escaped. A tag (or call site)
    # holding "<!--<script>" puts the HTML parser in the script's "double escaped" state, so the
    # real </script> after the data no longer closes it: the page's own script becomes part of the
    # data block, never runs, and the report is blank with no error (checked in headless Chromium
    # with tests/tools/browser_check.py: 0 blocks drawn for 36 buffers).
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

    # Defect: json.loads recursed into a deeply nested file and raised RecursionError out of
    # main(): a traceback instead of "clpool-viz: FILE: ..." and exit code 2.
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

    # Defect: Python's json reads NaN and Infinity, which JSON has not: in a field the schema does
    # not check they went into the report as written, and the page's JSON.parse refused the whole
    # snapshot (a blank report, exit code 0). They are named by field instead.
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

if __name__ == "__main__":
    unittest.main()
