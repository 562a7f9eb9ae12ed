#!/usr/bin/env python3
"""Runs interpose_snapshot under the interposer with CLPOOL_SNAPSHOT and checks both snapshots it
leaves: PATH.signal (SIGUSR1, five buffers held) and PATH (at exit, three held, two released):
they exist, parse, are schema clpool.snapshot version 2, and list the program's buffers with the
sizes it asked for. The program itself fails if a SIGUSR1 after the exit snapshot makes another
one or the snapshot thread does not stop. Usage: snapshot_check.py PROGRAM LIBRARY preload|layer
"""
import json
import os
import subprocess
import sys
import tempfile

prog, lib, mode = sys.argv[1:4]
SIZES = [1000, 5000, 70000, 300000, 1 << 20]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "snap.json")
    env = dict(os.environ, CLPOOL_INTERPOSER=lib, CLPOOL_SNAPSHOT=path)
    env["LD_PRELOAD" if mode == "preload" else "OPENCL_LAYERS"] = lib
    r = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"the program passes under the interposer ({mode}): {r.stderr.strip()[-300:]}")
    for name, held, released in ((path + ".signal", SIZES, []), (path, [5000, 70000, 1 << 20], [1000, 300000])):
        if not os.path.exists(name):
            check(False, f"{os.path.basename(name)} exists")
            continue
        try:
            snap = json.load(open(name, encoding="utf-8"))
        except ValueError as e:
            check(False, f"{os.path.basename(name)} parses: {e}")
            continue
        check(snap.get("schema") == "clpool.snapshot" and snap.get("version") == 2,
              f"{os.path.basename(name)}: schema clpool.snapshot version 2")
        pools = [p for p in snap.get("pools", []) if p["name"].startswith("interposer:")]
        check(len(pools) == 1, f"{os.path.basename(name)}: the interposer's pool is listed ({[p['name'] for p in snap.get('pools', [])]})")
        in_use = sorted(b["bytes_requested"] for p in pools for b in p["buffers"] if b["state"] == "in_use")
        check(in_use == sorted(held), f"{os.path.basename(name)}: the buffers held, by size asked: {in_use}")
        idle = sum(1 for p in pools for b in p["buffers"] if b["state"] != "in_use")
        check(idle == len(released), f"{os.path.basename(name)}: {len(released)} released buffers cached ({idle})")
    check(not os.path.exists(path + ".tmp"), "no half-written file is left")
sys.exit(1 if failures else 0)
