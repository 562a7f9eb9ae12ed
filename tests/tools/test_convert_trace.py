#!/usr/bin/env python3
"""tools/convert_trace.py on the committed fixtures (tests/data/convert, written by
make_convert_fixtures.py): each converts to its committed clpool trace, ids pair up, times never
decrease, and bad input (sizes, times, values nested too deep, an output that cannot be written) is
refused with a message that says where, never a Python traceback."""

import importlib.util
import io
import os
import pickle
import sys
import tempfile
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

    # A time_us of NaN or Infinity cannot become nanoseconds (int(t_us * 1000) raises): the event
    # is named, and main() exits 2 with the reason, not a traceback.
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

    # The format's times are 64-bit nanoseconds: a finite time_us past them (1e300 would print 304
    # digits that clpool-replay refuses; 1e306 overflows int(t_us * 1000)) is named by event, with
    # the limit.
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

    # A bad field's value is quoted without recursing (repr() would): a size nested 200000 lists
    # deep, which the unpickler builds without recursion, is named like any other bad value.
    def test_a_deeply_nested_bad_field_is_named_not_a_traceback(self):
        depth = 200000
        deep = b"]" * depth + b"a" * (depth - 1)  # a list in a list ... (EMPTY_LIST, APPEND)

        def text(s):
            return b"X" + len(s).to_bytes(4, "little") + s  # BINUNICODE

        data = (b"\x80\x02}" + text(b"device_traces") + b"]]}(" + text(b"action") + text(b"alloc") +
                text(b"addr") + b"K\x10" + text(b"size") + deep + b"uaas.")
        with self.assertRaisesRegex(ct.ConvertError, r"device_traces\[0\]\[0\] \(alloc\) has size=\[\["):
            ct.convert("torch", data)

    # With expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) PyTorch records
    # no segment_alloc or segment_free: memory is mapped into and unmapped from a reserved range
    # (segment_map, segment_unmap), and what it reserved is what is mapped.
    def test_expandable_segments_count_as_reserved(self):
        base, mib = 0x7F0000000000, 1 << 20
        trace = [{"action": "segment_map", "addr": base, "size": 20 * mib, "time_us": 1},
                 {"action": "alloc", "addr": base, "size": 8 * mib, "time_us": 2},
                 {"action": "segment_map", "addr": base + 20 * mib, "size": 4 * mib, "time_us": 3},
                 {"action": "free_completed", "addr": base, "size": 8 * mib, "time_us": 4},
                 {"action": "segment_unmap", "addr": base + 2 * mib, "size": 22 * mib, "time_us": 5},
                 {"action": "segment_map", "addr": base + 2 * mib, "size": 2 * mib, "time_us": 6},
                 # Mapped before the log began: unmapping it frees nothing the log counted.
                 {"action": "segment_unmap", "addr": base + 64 * mib, "size": 2 * mib, "time_us": 7}]
        out = ct.convert("torch", pickle.dumps({"device_traces": [trace]}))
        self.assertIn(f"pytorch reserved: peak {24 * mib} bytes", out)
        self.assertIn(f"{2 * mib} bytes unmapped that were mapped before it", out)
        check_well_formed(self, out)
        bad = pickle.dumps({"device_traces": [[{"action": "segment_map", "addr": base, "size": -1}]]})
        with self.assertRaisesRegex(ct.ConvertError, r"device_traces\[0\]\[0\] \(segment_map\) has size=-1"):
            ct.convert("torch", bad)

    # clpool-replay counts live bytes in 64 bits and refuses a trace whose sizes pass them: the
    # converter names the event instead of writing that trace.
    def test_sizes_past_64_bits_are_named(self):
        for sizes, at in (([2**64], 0), ([2**63, 2**63], 1), ([2**64 - 1], None)):
            trace = [{"action": "alloc", "addr": 16 * (i + 1), "size": n, "time_us": i} for i, n in enumerate(sizes)]
            with self.subTest(sizes=sizes):
                if at is None:
                    self.assertIn(f" alloc 1 0x1 0x1 {2**64 - 1}\n", ct.convert("torch", pickle.dumps({"device_traces": [trace]})))
                    continue
                with self.assertRaisesRegex(ct.ConvertError, rf"device_traces\[0\]\[{at}\] \(alloc\): size {sizes[at]} "
                                                             rf"with {sum(sizes[:at])} bytes live .*{2**64 - 1}"):
                    ct.convert("torch", pickle.dumps({"device_traces": [trace]}))


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

    # A negative Size is bad input like any other: taken as is, an allocate would be dropped as a
    # 0-byte one and its free counted among the frees of blocks allocated before the log began.
    def test_negative_size_is_named_by_line(self):
        head = "Thread,Time,Action,Pointer,Size,Stream\n"
        with self.assertRaisesRegex(ct.ConvertError, "line 2: bad Size '-4096'"):
            ct.convert("rmm", (head + "1,00:00:01.5,allocate,0x10,-4096,0x0\n").encode())
        with self.assertRaisesRegex(ct.ConvertError, "line 3: bad Size '-8'"):
            ct.convert("rmm", (head + "1,00:00:01.5,allocate,0x10,8,0x0\n1,00:00:01.6,free,0x10,-8,0x0\n").encode())

    def test_a_size_past_64_bits_is_named_by_line(self):
        head = "Thread,Time,Action,Pointer,Size,Stream\n"
        with self.assertRaisesRegex(ct.ConvertError, rf"line 2: size {2**64} with 0 bytes live .*{2**64 - 1}"):
            ct.convert("rmm", (head + f"1,00:00:01.5,allocate,0x10,{2**64},0x0\n").encode())


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

    # docs/TOOLS.md: an output file that cannot be written (-o into a missing directory) is exit
    # code 1 with "convert_trace: ...", not a FileNotFoundError traceback.
    def test_unwritable_output_is_an_error_not_a_traceback(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "missing", "out.trace")
            err = io.StringIO()
            with redirect_stderr(err):
                rc = ct.main(["rmm", str(data / "rmm_log.csv"), "-o", out])
        self.assertEqual(rc, 1)
        self.assertIn("convert_trace: cannot write", err.getvalue())
        self.assertIn(out, err.getvalue())


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
