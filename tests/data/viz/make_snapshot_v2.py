#!/usr/bin/env python3
"""Writes snapshot_v2.json beside it: a hand-made clpool snapshot of schema version 2 (history with
call sites, segments, an out-of-memory) for clpool-viz's tests, before the library writes one of
its own. A small model of a bucket pool and of an arena replays a made-up workload, so that the
buffers, the stats, the segments and the history all agree as the library's would.

    python3 make_snapshot_v2.py        (rewrites snapshot_v2.json; the output is deterministic)
"""
import json
import os
import random

rng = random.Random(16)
SITES = ["forward at model.cpp:{}", "attention at layers.cpp:{}", "load_weights at weights.cpp:{}",
         "make_batch at data.cpp:{}", "0x7f3a{:04x} (libengine.so)"]


def frames():
    return [rng.choice(SITES).format(rng.randrange(10, 900)) for _ in range(rng.randrange(1, 4))] + ["main at main.cpp:42"]


class Model:
    """Buffers in use, cached and pending, with the history the library would record."""

    def __init__(self, name, t0, arena=None):
        self.name, self.t, self.arena = name, t0, arena
        self.bufs, self.events, self.next_id, self.seq = {}, [], 0x10000 + rng.randrange(1 << 12) * 64, 0
        self.hits = self.misses = self.evictions = 0
        self.peak_allocated = self.peak_in_use = 0

    def event(self, action, buf=None, requested=0, hit=None, fr=None):
        self.t += rng.randrange(20_000, 400_000)
        e = {"t_ns": self.t, "action": action, "id": buf["id"] if buf else 0, "bytes_requested": requested,
             "bytes_held": buf["bytes_held"] if buf else 0, "bucket_size": buf["bucket_size"] if buf else 0,
             "tag": buf["tag"] or None if buf else None}
        if hit is not None:
            e["hit"] = hit
        if fr:
            e["frames"] = fr
        self.events.append(e)
        held = list(self.bufs.values())
        self.peak_allocated = max(self.peak_allocated, sum(b["bytes_held"] for b in held))
        self.peak_in_use = max(self.peak_in_use, sum(b["bytes_held"] for b in held if b["state"] == "in_use"))

    def bucket(self, n):
        if self.arena:
            return (n + 511) // 512 * 512
        b = 256
        while b < n:
            b *= 2
        return b

    def alloc(self, n, tag=""):
        size = self.bucket(n)
        fr = frames()
        self.seq += 1
        for b in self.bufs.values():
            if b["state"] in ("cached", "pending") and b["bytes_held"] == size:
                b.update(state="in_use", bytes_requested=n, tag=tag, frames=fr, handout_seq=self.seq, uses=b["uses"] + 1)
                self.hits += 1
                self.event("alloc", b, n, True, fr)
                return b
        b = {"id": self.next_id, "state": "in_use", "bucket_size": size, "bytes_requested": n, "bytes_held": size,
             "made_ns": self.t, "handout_seq": self.seq, "handouts_since": 0, "uses": 1, "tag": tag, "frames": fr}
        if self.arena is not None:
            b["offset"] = self.arena.place(b)
        self.next_id += 64
        self.bufs[b["id"]] = b
        self.misses += 1
        self.event("alloc", b, n, False, fr)
        return b

    def free(self, b, pending=False):
        b["state"] = "pending" if pending else "cached"
        b["bytes_requested"] = 0
        self.event("pending" if pending else "free", b)

    def evict(self, b):
        self.evictions += 1
        self.event("evict", b)
        if self.arena is not None:
            self.arena.give(b)
        del self.bufs[b["id"]]

    def pool(self, capacity):
        bufs = sorted(self.bufs.values(), key=lambda b: b["state"] != "in_use")
        for b in bufs:
            b["handouts_since"] = self.seq - b["handout_seq"]
        total = {s: sum(b["bytes_held"] for b in bufs if b["state"] == s) for s in ("in_use", "cached", "pending")}
        buckets = {}
        for b in bufs:
            c = buckets.setdefault(b["bucket_size"], {"bucket_size": b["bucket_size"], "hits": 0, "misses": 0, "evictions": 0,
                                                      "cached_buffers": 0, "in_use_buffers": 0, "pending_buffers": 0})
            c[b["state"] + "_buffers"] += 1
        stats = {"hits": self.hits, "misses": self.misses, "evictions": self.evictions, "driver_frees": self.evictions,
                 "oom_retries": 0, "failed_allocations": 0, "bytes_allocated": sum(total.values()),
                 "bytes_cached": total["cached"], "bytes_in_use": total["in_use"],
                 "bytes_requested": sum(b["bytes_requested"] for b in bufs), "bytes_pending": total["pending"],
                 "peak_bytes_allocated": self.peak_allocated, "peak_bytes_in_use": self.peak_in_use,
                 "buckets": sorted(buckets.values(), key=lambda c: c["bucket_size"])}
        events = self.events[-capacity:]
        out = {"name": self.name, "taken_ns": self.t + 1000, "stats": stats,
               "buffers": [{k: v for k, v in b.items() if k != "offset"} for b in bufs],
               "history": {"capacity": capacity, "recorded": len(self.events), "dropped": len(self.events) - len(events),
                           "events": events}}
        if self.arena is not None:
            out["segments"] = self.arena.segments(self.bufs)
        return out


class Arena:
    """Segments of 64 KiB, first fit; the layout only (the model keeps the states)."""
    SEG = 65536

    def __init__(self):
        self.segs = []  # [(id, [(offset, bytes, buffer_id or 0)])]

    def place(self, b):
        for sid, taken in self.segs:
            pos = 0
            for off, n, _ in sorted(taken):
                if off - pos >= b["bytes_held"]:
                    break
                pos = off + n
            if self.SEG - pos >= b["bytes_held"]:
                taken.append((pos, b["bytes_held"], b["id"]))
                b["segment"] = sid
                return pos
        sid = 0x7e0000 + len(self.segs) * 0x1000
        self.segs.append((sid, [(0, b["bytes_held"], b["id"])]))
        b["segment"] = sid
        return 0

    def give(self, b):
        for sid, taken in self.segs:
            taken[:] = [t for t in taken if t[2] != b["id"]]

    def segments(self, bufs):
        out = []
        for sid, taken in self.segs:
            blocks, pos = [], 0
            for off, n, bid in sorted(taken):
                if off > pos:
                    blocks.append({"offset": pos, "bytes": off - pos, "state": "free", "buffer_id": 0})
                blocks.append({"offset": off, "bytes": n, "state": bufs[bid]["state"], "buffer_id": bid})
                pos = off + n
            if pos < self.SEG:
                blocks.append({"offset": pos, "bytes": self.SEG - pos, "state": "free", "buffer_id": 0})
            free = [b["bytes"] for b in blocks if b["state"] == "free"]
            out.append({"id": sid, "bytes": self.SEG, "free_bytes": sum(free), "largest_free": max(free, default=0),
                        "blocks": blocks})
        return out


t0 = 5_000_000_000
# A device pool: a training-like loop, then an out-of-memory.
dev = Model("BufferPool:opencl (context 0x55d0c0, device 0x55d1a0)", t0)
weights = [dev.alloc(rng.choice([3 << 20, 5 << 20, 1 << 20]) + rng.randrange(4096), "weights") for _ in range(4)]
for step in range(6):
    acts = [dev.alloc(rng.randrange(100_000, 900_000), "activations") for _ in range(5)]
    kv = dev.alloc(rng.randrange(1 << 20, 2 << 20), "kv-cache")
    for a in acts[:-1]:
        dev.free(a, pending=(step % 2 == 0 and a is acts[0]))
    if step == 3:
        for b in [b for b in list(dev.bufs.values()) if b["state"] == "cached"][:3]:
            dev.evict(b)
        dev.event("trim")
dev.free(kv, pending=True)  # its kernels still run
dev.event("oom", requested=64 << 20, fr=["grow_cache at engine.cpp:311", "main at main.cpp:42"])
# A host arena: blocks in 64 KiB segments, some freed back (holes), some cached.
host = Model("ArenaPool:host sub-allocated", t0 + 1000, Arena())
held = [host.alloc(rng.randrange(1000, 12000), rng.choice(["staging", "", "readback"])) for _ in range(14)]
for b in held[1::3]:
    host.free(b)
for b in held[2::4]:
    if b["state"] == "cached":
        host.evict(b)
    else:
        host.free(b)
        host.evict(b)
# A pool without history.
plain = Model("host::BufferPool:host", t0 + 2000)
for n in (1000, 5000, 70000):
    plain.alloc(n, "")
plain.free(next(iter(plain.bufs.values())))
quiet = plain.pool(0)
del quiet["history"]
for b in quiet["buffers"]:
    del b["frames"]

pools = [dev.pool(64), host.pool(1000), quiet]
snap = {"schema": "clpool.snapshot", "version": 2, "taken_ns": max(p["taken_ns"] for p in pools),
        "out_of_memory": {"pool": "opencl", "requested": 64 << 20, "bucket_size": 64 << 20,
                          "cached_given_back": 0, "native_code": 4294967292},
        "pools": pools}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshot_v2.json"), "w", encoding="utf-8") as f:
    json.dump(snap, f, indent=1)
    f.write("\n")
