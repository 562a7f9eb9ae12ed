#!/usr/bin/env python3
"""tools/convert_trace.py on the committed fixtures (tests/data/convert, written by
make_convert_fixtures.py): each converts to its committed clpool trace, ids pair up, times never
decrease, and bad input is refused with a message that says where."""

import importlib.util
import io
import pickle
import sys
import unittest
from contextlib import redirect_stderr
from pathlib import Path

root = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("convert_trace", root / "tools" / "convert_trace.py")
ct = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ct)
data = root / "tests" / "data" / "convert"
traces = root / "tests" / "data" / "traces"


def events(text):
    return [line.split() for line in text.splitlines()[1:] if line and not line.startswith("#")]


def check_well_formed(test, text):
    test.assertEqual(text.splitlines()[0], "clpool-trace 1")
    live, last = {}, 0
    for f in events(text):
        t = int(f[0])
        test.assertGreaterEqual(t, last)
        last = t
        if f[1] == "alloc":
            test.assertEqual(len(f), 6)
            test.assertNotIn(f[2], live)
            test.assertGreater(int(f[5]), 0)
            live[f[2]] = int(f[5])
        else:
            test.assertEqual(f[1], "free")
            test.assertIn(f[2], live)
            del live[f[2]]


class TorchSnapshot(unittest.TestCase):
    def setUp(self):
        self.raw = (data / "torch_snapshot.pickle").read_bytes()
        self.out = ct.convert("torch", self.raw)

    def test_matches_the_committed_trace(self):
        self.assertEqual(self.out, (traces / "converted_torch.trace").read_text())
        check_well_formed(self, self.out)

    def test_alloc_and_free_completed_only_devices_merged_by_time(self):
        ev = events(self.out)
        # 6 allocs (segment and snapshot/oom events are not allocations); free_requested is not a free.
        self.assertEqual(sum(1 for e in ev if e[1] == "alloc"), 6)
        self.assertEqual(sum(1 for e in ev if e[1] == "free"), 3)
        # Device 1's 512 B alloc at 25 us lands between device 0's events at 20 and 31 us, as ctx 0x2.
        self.assertEqual(ev[2], ["24000", "alloc", "3", "0x2", "0x1", "512"])
        # The reused address got a new id after its free_completed.
        self.assertEqual(ev[3], ["30000", "free", "1"])
        self.assertEqual(ev[4][:3], ["39000", "alloc", "4"])

    def test_reports_what_pytorch_reserved_and_what_was_left_out(self):
        self.assertIn("pytorch reserved: peak 25165824 bytes", self.out)  # 2 + 2 + 20 MiB of segments
        self.assertIn("1 frees of blocks allocated before the log began", self.out)

    def test_auto_detects_a_pickle(self):
        self.assertEqual(ct.convert("auto", self.raw), self.out)

    def test_a_pickle_that_names_a_class_is_refused_unrun(self):
        with self.assertRaisesRegex(ct.ConvertError, r"asks for os\.system"):
            ct.convert("torch", (data / "evil.pickle").read_bytes())

    def test_not_a_snapshot(self):
        with self.assertRaisesRegex(ct.ConvertError, "expected a dict with 'device_traces'"):
            ct.convert("torch", pickle.dumps([1, 2, 3]))
        with self.assertRaisesRegex(ct.ConvertError, "not a readable pickle"):
            ct.convert("torch", self.raw[:40])
        bad = pickle.dumps({"device_traces": [[{"action": "alloc", "addr": -1, "size": 8}]]})
        with self.assertRaisesRegex(ct.ConvertError, r"device_traces\[0\]\[0\] \(alloc\) has addr=-1"):
            ct.convert("torch", bad)


class RmmLog(unittest.TestCase):
    def setUp(self):
        self.out = ct.convert("rmm", (data / "rmm_log.csv").read_bytes())

    def test_matches_the_committed_trace(self):
        self.assertEqual(self.out, (traces / "converted_rmm.trace").read_text())
        check_well_formed(self, self.out)

    def test_midnight_threads_and_failures(self):
        ev = events(self.out)
        # Past midnight the clock keeps counting up; a thread's earlier time is clamped, not reordered.
        self.assertEqual([e[0] for e in ev], ["0", "500000", "500000", "1200000", "1400000"])
        self.assertIn("1 failed allocations left out", self.out)
        self.assertIn("1 frees of blocks allocated before the log began", self.out)

    def test_bad_rows_are_named_by_line(self):
        head = "Thread,Time,Action,Pointer,Size,Stream\n"
        with self.assertRaisesRegex(ct.ConvertError, "line 2: bad Time 'noon'"):
            ct.convert("rmm", (head + "1,noon,allocate,0x10,8,0x0\n").encode())
        with self.assertRaisesRegex(ct.ConvertError, "line 2: bad Pointer 'here'"):
            ct.convert("rmm", (head + "1,00:00:01.5,allocate,here,8,0x0\n").encode())
        with self.assertRaisesRegex(ct.ConvertError, "line 2: unknown Action 'resize'"):
            ct.convert("rmm", (head + "1,00:00:01.5,resize,0x10,8,0x0\n").encode())
        with self.assertRaisesRegex(ct.ConvertError, "line 1: the header lacks Pointer, Size"):
            ct.convert("rmm", b"Thread,Time,Action\n")
        with self.assertRaisesRegex(ct.ConvertError, "empty file"):
            ct.convert("rmm", b"")


class CommandLine(unittest.TestCase):
    def test_bad_input_exits_2_with_the_file_named(self):
        err = io.StringIO()
        with redirect_stderr(err):
            rc = ct.main(["torch", str(data / "evil.pickle")])
        self.assertEqual(rc, 2)
        self.assertIn("evil.pickle", err.getvalue())
        err = io.StringIO()
        with redirect_stderr(err):
            rc = ct.main(["rmm", str(data / "absent.csv")])
        self.assertEqual(rc, 2)
        self.assertIn("cannot read", err.getvalue())


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
