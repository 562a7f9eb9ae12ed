#!/usr/bin/env python3
"""Checks a file against the clpool trace format (docs/TRACE_FORMAT.md); exits 1 naming the first bad line.

Usage: check_trace.py TRACE [--min-allocs N] [--all-freed]
"""
import re
import sys

ALLOC = re.compile(r"^(\d+) alloc (\d+) (0x[0-9a-f]+) (0x[0-9a-f]+) (\d+)$")
FREE = re.compile(r"^(\d+) free (\d+)$")


def main(argv):
    path = argv[1]
    min_allocs = int(argv[argv.index("--min-allocs") + 1]) if "--min-allocs" in argv else 1
    all_freed = "--all-freed" in argv
    live, allocs, frees, last_t = {}, 0, 0, -1
    with open(path) as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != "clpool-trace 1":
        return f"{path}:1: the first line must be 'clpool-trace 1'"
    for n, line in enumerate(lines[1:], start=2):
        if line.startswith("#"):
            continue
        m = ALLOC.match(line) or FREE.match(line)
        if not m:
            return f"{path}:{n}: not an event: {line!r}"
        t = int(m.group(1))
        if t < last_t:
            return f"{path}:{n}: time {t} goes backwards (previous {last_t})"
        last_t = t
        ident = int(m.group(2))
        if m.re is ALLOC:
            if ident in live:
                return f"{path}:{n}: id {ident} allocated while still live"
            if int(m.group(5)) == 0:
                return f"{path}:{n}: zero-byte allocation"
            live[ident] = n
            allocs += 1
        else:
            if ident not in live:
                return f"{path}:{n}: free of id {ident}, which is not live"
            del live[ident]
            frees += 1
    if allocs < min_allocs:
        return f"{path}: {allocs} allocations, expected at least {min_allocs}"
    if all_freed and live:
        return f"{path}: ids never freed: {sorted(live)[:10]}"
    print(f"{path}: ok: {allocs} allocs, {frees} frees, {len(live)} live at the end")
    return None


if __name__ == "__main__":
    err = main(sys.argv)
    if err:
        print(err, file=sys.stderr)
        sys.exit(1)
