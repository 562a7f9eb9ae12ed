#!/usr/bin/env python3
"""Converts allocation logs of other allocators to the clpool trace format (docs/TRACE_FORMAT.md).

  convert_trace.py torch SNAPSHOT.pickle [-o OUT]   PyTorch: a pickle of torch.cuda.memory._snapshot()
  convert_trace.py rmm LOG.csv [-o OUT]             RAPIDS RMM: a logging_resource_adaptor CSV log
  convert_trace.py auto FILE [-o OUT]               either, by the file's first bytes

The output replays with `clpool-replay OUT -d sim`, so one trace can be run through clpool
and compared with what the other allocator reserved (written as '#' comments at the top).
Standard library only. Exit codes: 0 ok, 1 the output cannot be written, 2 bad input (the message names the line or event).
"""

import argparse
import csv
import fractions
import io
import math
import pickle
import reprlib
import sys

HEADER = "clpool-trace 1"  # tools/common/trace_format.hpp
FLAGS_READ_WRITE = 0x1  # CL_MEM_READ_WRITE: both sources allocate plain device memory
MAX_T_NS = 2**64 - 1  # a trace's times are decimal nanoseconds in 64 bits (tools/replay/trace.hpp)
MAX_LIVE_BYTES = 2**64 - 1  # clpool-replay counts the bytes live at once in 64 bits, and refuses more


class ConvertError(Exception):
    """Bad input: the message says where and what was expected."""


class _Writer:
    """Assigns ids to live addresses and writes alloc/free lines in order."""

    def __init__(self):
        self.lines = []
        self.live = {}  # (ctx, address) -> (id, bytes)
        self.next_id = 1
        self.last_t = 0
        self.origin = None  # the first event's time: the trace starts at 0
        self.skipped_frees = 0  # frees of addresses allocated before the log began
        self.implied_frees = 0  # an address allocated again without a free in between
        self.allocs = 0
        self.live_bytes = 0
        self.peak_live = 0

    def _time(self, t_ns, where):
        # The format wants times that never decrease; logs from several threads may not.
        if self.origin is None:
            self.origin = int(t_ns)
        t = int(t_ns) - self.origin
        if t > MAX_T_NS:  # clpool-replay would refuse the line
            raise ConvertError(
                f"{where}: more than {MAX_T_NS} ns after the first event; expected times within "
                f"{MAX_T_NS} ns (2^64-1, about 584 years) of it, the trace format's limit"
            )
        self.last_t = max(self.last_t, t)
        return self.last_t

    def alloc(self, t_ns, ctx, address, nbytes, where, event=None):
        """`where` names the input's event or line and its time in an error; `event` (where if
        None) the event or line alone."""
        t = self._time(t_ns, where)
        key = (ctx, address)
        if key in self.live:  # a free the log lost: close the old block first
            self.implied_frees += 1
            self.free(t + self.origin, ctx, address, where)
        if nbytes > MAX_LIVE_BYTES - self.live_bytes:
            raise ConvertError(
                f"{event or where}: size {nbytes} with {self.live_bytes} bytes live takes the live bytes past "
                f"{MAX_LIVE_BYTES} (2^64-1); expected live bytes that fit in 64 bits, the trace format's limit"
            )
        ident = self.next_id
        self.next_id += 1
        self.live[key] = (ident, nbytes)
        self.allocs += 1
        self.live_bytes += nbytes
        self.peak_live = max(self.peak_live, self.live_bytes)
        self.lines.append(f"{t} alloc {ident} 0x{ctx:x} 0x{FLAGS_READ_WRITE:x} {nbytes}")

    def free(self, t_ns, ctx, address, where):
        t = self._time(t_ns, where)
        entry = self.live.pop((ctx, address), None)
        if entry is None:
            self.skipped_frees += 1
            return
        self.live_bytes -= entry[1]
        self.lines.append(f"{t} free {entry[0]}")

    def text(self, comments):
        out = [HEADER]
        out += ["# " + c for c in comments]
        out.append(
            f"# {self.allocs} allocations; peak live {self.peak_live} bytes; {len(self.live)} never freed; "
            f"{self.skipped_frees} frees of blocks allocated before the log began (left out); "
            f"{self.implied_frees} frees implied by an address allocated again"
        )
        out += self.lines
        return "\n".join(out) + "\n"


# ---------------------------------------------------------------- PyTorch


class _Mapped:
    """The byte ranges mapped into expandable segments during the log, per device: what an
    unmap gives back is the part of its range mapped here (the rest was mapped before the log)."""

    def __init__(self):
        self.ranges = {}  # ctx -> [(start, end)], disjoint

    def _cut(self, ctx, start, end):
        kept, overlap = [], 0
        for a, b in self.ranges.get(ctx, []):
            lo, hi = max(a, start), min(b, end)
            if lo >= hi:
                kept.append((a, b))
                continue
            overlap += hi - lo
            if a < lo:
                kept.append((a, lo))
            if hi < b:
                kept.append((hi, b))
        self.ranges[ctx] = kept
        return overlap

    def map(self, ctx, address, size):
        """Returns the bytes newly mapped."""
        again = self._cut(ctx, address, address + size)
        self.ranges[ctx].append((address, address + size))
        return size - again

    def unmap(self, ctx, address, size):
        """Returns the bytes unmapped that were mapped during the log."""
        return self._cut(ctx, address, address + size)


class _PlainUnpickler(pickle.Unpickler):
    """Loads only plain data (dict, list, str, int, float, bool, None): a snapshot needs no class,
    and a pickle that asks for one could run code."""

    def find_class(self, module, name):
        raise ConvertError(
            f"the pickle asks for {module}.{name}; a memory snapshot holds only dicts, lists, strings "
            f"and numbers (torch.cuda.memory._snapshot()), so this file is refused"
        )


def load_torch_snapshot(data):
    try:
        snapshot = _PlainUnpickler(io.BytesIO(data)).load()
    except ConvertError:
        raise
    except Exception as e:  # a truncated or foreign pickle: say so, never a traceback
        raise ConvertError(f"not a readable pickle ({type(e).__name__}: {e})") from None
    if not isinstance(snapshot, dict) or "device_traces" not in snapshot:
        raise ConvertError(
            "the pickle is not a memory snapshot: expected a dict with 'device_traces' "
            "(record with torch.cuda.memory._record_memory_history(), then pickle.dump(torch.cuda.memory._snapshot(), f))"
        )
    traces = snapshot["device_traces"]
    if not isinstance(traces, list):
        raise ConvertError("'device_traces' is not a list (one list of events per device)")
    return snapshot


def convert_torch(data):
    snapshot = load_torch_snapshot(data)
    events = []  # (time_ns, device, order, event)
    order = 0
    any_time = False
    for device, trace in enumerate(snapshot["device_traces"]):
        if not isinstance(trace, list):
            raise ConvertError(f"device_traces[{device}] is not a list of events")
        for k, e in enumerate(trace):
            if not isinstance(e, dict) or "action" not in e:
                raise ConvertError(f"device_traces[{device}][{k}] is not an event (a dict with 'action')")
            action = e["action"]
            if action not in ("alloc", "free_completed", "segment_alloc", "segment_free", "segment_map", "segment_unmap"):
                continue
            for field in ("addr", "size"):
                if not isinstance(e.get(field), int) or isinstance(e.get(field), bool) or e[field] < 0:
                    raise ConvertError(
                        f"device_traces[{device}][{k}] ({action}) has {field}={reprlib.repr(e.get(field))}; "
                        f"expected a non-negative integer"
                    )
            t_us = e.get("time_us")
            if isinstance(t_us, float) and not math.isfinite(t_us):
                raise ConvertError(
                    f"device_traces[{device}][{k}] ({action}) has time_us={t_us!r}; "
                    f"expected a finite number of microseconds"
                )
            any_time = any_time or isinstance(t_us, (int, float))
            events.append((t_us if isinstance(t_us, (int, float)) else None, device, order, e, k))
            order += 1
    # Devices' traces are separate lists: merge them by time when the events carry it.
    if any_time:
        events.sort(key=lambda x: (x[0] if x[0] is not None else 0, x[2]))
    w = _Writer()
    reserved = peak_reserved = 0
    segment_frees_unknown = 0
    unmapped_unknown = 0  # bytes unmapped that were mapped before the log began
    segments = set()
    mapped = _Mapped()
    for i, (t_us, device, _, e, k) in enumerate(events):
        if t_us is None:
            t_ns = i * 1000
        elif isinstance(t_us, float) and not math.isfinite(t_us * 1000):
            t_ns = int(fractions.Fraction(t_us) * 1000)  # exact, where the float product overflows
        else:
            t_ns = int(t_us * 1000)
        ctx = device + 1
        where = f"device_traces[{device}][{k}] ({e['action']}) has time_us={reprlib.repr(t_us)}"
        if e["action"] == "alloc":
            if e["size"] == 0:
                continue
            w.alloc(t_ns, ctx, e["addr"], e["size"], where, f"device_traces[{device}][{k}] (alloc)")
        elif e["action"] == "free_completed":
            w.free(t_ns, ctx, e["addr"], where)
        elif e["action"] == "segment_alloc":
            segments.add((ctx, e["addr"]))
            reserved += e["size"]
            peak_reserved = max(peak_reserved, reserved)
        elif e["action"] == "segment_map":  # expandable segments: memory mapped into a reserved range
            reserved += mapped.map(ctx, e["addr"], e["size"])
            peak_reserved = max(peak_reserved, reserved)
        elif e["action"] == "segment_unmap":
            gone = mapped.unmap(ctx, e["addr"], e["size"])
            reserved -= gone
            unmapped_unknown += e["size"] - gone
        else:  # segment_free
            if (ctx, e["addr"]) in segments:
                segments.discard((ctx, e["addr"]))
                reserved -= e["size"]
            else:
                segment_frees_unknown += 1
    comments = [
        "converted from a PyTorch memory snapshot by tools/convert_trace.py",
        "sizes are PyTorch's block sizes (requests rounded to 512 B), ctx is the CUDA device + 1",
        f"pytorch reserved: peak {peak_reserved} bytes in segments allocated during the log"
        + (f" ({segment_frees_unknown} segments freed that were allocated before it)" if segment_frees_unknown else "")
        + (f" ({unmapped_unknown} bytes unmapped that were mapped before it)" if unmapped_unknown else ""),
    ]
    return w.text(comments)


# ---------------------------------------------------------------- RMM

RMM_COLUMNS = ["Thread", "Time", "Action", "Pointer", "Size", "Stream"]


def _rmm_time_ns(text, line):
    # spdlog's "%H:%M:%S.%f": hours, minutes, seconds and microseconds.
    try:
        hms, _, frac = text.partition(".")
        h, m, s = (int(x) for x in hms.split(":"))
        us = int(frac) if frac else 0
    except ValueError:
        raise ConvertError(f"line {line}: bad Time '{text}'; expected HH:MM:SS.microseconds") from None
    return ((h * 60 + m) * 60 + s) * 1_000_000_000 + us * 1000


def convert_rmm(text):
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise ConvertError("empty file; expected the header 'Thread,Time,Action,Pointer,Size,Stream'") from None
    header = [h.strip() for h in header]
    missing = [c for c in ("Time", "Action", "Pointer", "Size") if c not in header]
    if missing:
        raise ConvertError(
            f"line 1: the header lacks {', '.join(missing)}; expected RMM's "
            f"'{','.join(RMM_COLUMNS)}': {','.join(header)!r}"
        )
    col = {name: header.index(name) for name in header}
    w = _Writer()
    failures = 0
    day = 0
    previous = None
    for row in reader:
        line = reader.line_num
        if not row or all(not f.strip() for f in row):
            continue
        if len(row) < len(header):
            raise ConvertError(f"line {line}: {len(row)} fields; expected {len(header)} ({','.join(header)})")
        action = row[col["Action"]].strip()
        t = _rmm_time_ns(row[col["Time"]].strip(), line)
        if previous is not None and t + 12 * 3600 * 10**9 < previous:
            day += 1  # the clock passed midnight
        previous = t
        t += day * 86400 * 10**9
        pointer = row[col["Pointer"]].strip()
        try:
            address = int(pointer, 16)
        except ValueError:
            if action.startswith("allocate") and "fail" in action:
                failures += 1
                continue
            raise ConvertError(f"line {line}: bad Pointer '{pointer}'; expected a hex address like 0x7f2a00000000") from None
        try:
            size = int(row[col["Size"]].strip())
            if size < 0:
                raise ValueError
        except ValueError:
            raise ConvertError(f"line {line}: bad Size '{row[col['Size']].strip()}'; expected a byte count") from None
        where = f"line {line}: Time '{row[col['Time']].strip()}'"
        if action == "allocate":
            if size > 0:
                w.alloc(t, 1, address, size, where, f"line {line}")
        elif action == "free":
            w.free(t, 1, address, where)
        elif "fail" in action:
            failures += 1
        else:
            raise ConvertError(f"line {line}: unknown Action '{action}'; expected allocate, free or allocate failure")
    comments = [
        "converted from an RMM logging_resource_adaptor log by tools/convert_trace.py",
        f"{failures} failed allocations left out; all streams share ctx 0x1",
    ]
    return w.text(comments)


# ---------------------------------------------------------------- command line


def convert(kind, data):
    """Returns the clpool trace text for the bytes of a PyTorch snapshot or an RMM log."""
    if kind == "auto":
        kind = "torch" if data[:1] == b"\x80" else "rmm"
    if kind == "torch":
        return convert_torch(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConvertError(f"not a text CSV log (byte {e.start} is not UTF-8)") from None
    return convert_rmm(text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["torch", "rmm", "auto"], help="the input's format")
    p.add_argument("input", help="the snapshot pickle or CSV log ('-': standard input)")
    p.add_argument("-o", "--output", default="-", help="the clpool trace to write ('-': standard output)")
    a = p.parse_args(argv)
    try:
        if a.input == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(a.input, "rb") as f:
                data = f.read()
        out = convert(a.kind, data)
    except OSError as e:
        print(f"convert_trace: cannot read '{a.input}': {e.strerror}", file=sys.stderr)
        return 2
    except ConvertError as e:
        print(f"convert_trace: {a.input}: {e}", file=sys.stderr)
        return 2
    if a.output == "-":
        sys.stdout.write(out)
    else:
        try:
            with open(a.output, "w", encoding="utf-8", newline="\n") as f:
                f.write(out)
        except OSError as e:
            print(f"convert_trace: cannot write '{a.output}': {e.strerror}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
