#!/usr/bin/env python3
"""Writes the converter's fixtures in tests/data/convert/: a small PyTorch-like memory snapshot
(plain dicts and lists in the structure of torch.cuda.memory._snapshot(); no torch needed) and an
RMM logging_resource_adaptor CSV log (its documented columns). Rerun after changing them; the
files are committed so the tests need nothing but python3."""

import pickle
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
out = here.parent / "data" / "convert"


def frame(name, line):
    return {"filename": "train.py", "line": line, "name": name}


def ev(action, addr, size, t_us, stream=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t_us,
            "frames": [frame("forward", 10), frame("<module>", 1)]}


S0, S1 = 0x7F0000000000, 0x7F1000000000  # a segment base on each device
device0 = [
    ev("free_completed", S0 - 0x200000, 512, 1),  # a block allocated before the history began
    ev("segment_alloc", S0, 2097152, 5),
    ev("alloc", S0, 4096, 10),
    ev("alloc", S0 + 4096, 1024, 20),
    ev("free_requested", S0, 4096, 30),
    ev("free_completed", S0, 4096, 31),
    ev("alloc", S0, 2048, 40),  # the same address again, after its free
    {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 45, "frames": []},
    ev("segment_alloc", S0 + 0x1000000, 20971520, 50),
    ev("alloc", S0 + 0x1000000, 10485760, 51),
    ev("free_completed", S0 + 0x1000000, 10485760, 70),
    ev("segment_free", S0 + 0x1000000, 20971520, 71),
    {"action": "oom", "addr": 0, "size": 1 << 40, "stream": 0, "time_us": 80, "device_free": 0, "frames": []},
    ev("free_completed", S0 + 4096, 1024, 90),
]
device1 = [
    ev("segment_alloc", S1, 2097152, 15),
    ev("alloc", S1, 512, 25),  # interleaves with device 0 by time
    ev("alloc", S1 + 512, 1536, 60),
]
snapshot = {
    "segments": [{"device": 0, "address": S0, "total_size": 2097152, "allocated_size": 2048,
                  "stream": 0, "segment_type": "small", "blocks": []},
                 {"device": 1, "address": S1, "total_size": 2097152, "allocated_size": 2048,
                  "stream": 0, "segment_type": "small", "blocks": []}],
    "device_traces": [device0, device1],
}

rmm = """Thread,Time,Action,Pointer,Size,Stream
140234,23:59:59.999000,allocate,0x7f5c00000000,1000,0x0
140234,23:59:59.999500,allocate,0x7f5c00000400,256,0x0
140235,23:59:59.999400,free,0x7f5c00000000,1000,0x0
140234,00:00:00.000100,allocate failure,nullptr,1099511627776,0x0
140234,00:00:00.000200,allocate,0x7f5c00000000,4000,0x0
140234,00:00:00.000300,free,0x7f5b00000000,64,0x0
140234,00:00:00.000400,free,0x7f5c00000000,4000,0x0
"""


def main():
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "torch_snapshot.pickle", "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    (out / "rmm_log.csv").write_text(rmm, encoding="utf-8")
    # A pickle that asks for a class: the converter must refuse it without running anything.
    with open(out / "evil.pickle", "wb") as f:
        f.write(b"cos\nsystem\n(S'echo pwned'\ntR.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
