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
SNAPSHOT_V2 = root / "tests" / "data" / "viz" / "snapshot_v2.json"


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


if __name__ == "__main__":
    unittest.main()
