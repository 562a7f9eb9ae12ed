#!/usr/bin/env python3
"""Joins clpool traces (docs/TRACE_FORMAT.md) of several processes into one, one after the other:
times, ids and context tokens of each later file are shifted past the earlier ones. Stops before
--max-bytes (default 2 MiB) and says so in a comment.

Usage: merge_traces.py OUT IN... [--max-bytes N] [--note TEXT]
"""
import sys


def main(argv):
    args = argv[1:]
    max_bytes = 2 * 1024 * 1024
    notes = []
    if "--max-bytes" in args:
        i = args.index("--max-bytes")
        max_bytes = int(args[i + 1])
        del args[i:i + 2]
    while "--note" in args:
        i = args.index("--note")
        notes.append(args[i + 1])
        del args[i:i + 2]
    out_path, inputs = args[0], args[1:]
    lines = ["clpool-trace 1"] + [f"# {n}" for n in notes]
    size = sum(len(l) + 1 for l in lines)
    t_base = id_base = tok_base = 0
    truncated = None
    for path in inputs:
        with open(path) as f:
            content = f.read().split("\n")
        if not content or content[0] != "clpool-trace 1":
            sys.exit(f"{path}: not a clpool trace")
        head = f"# from {path.rsplit('/', 1)[-1]}"
        lines.append(head)
        size += len(head) + 1
        t_max = id_max = tok_max = 0
        for line in content[1:]:
            if not line or line.startswith("#"):
                continue
            f = line.split(" ")
            t = int(f[0]) + t_base
            ident = int(f[2]) + id_base
            if f[1] == "alloc":
                tok = int(f[3], 16)
                tok_max = max(tok_max, tok)
                new = f"{t} alloc {ident} {hex(tok + tok_base if tok else 0)} {f[4]} {f[5]}"
            else:
                new = f"{t} free {ident}"
            if size + len(new) + 1 > max_bytes - 200:
                truncated = path
                break
            lines.append(new)
            size += len(new) + 1
            t_max, id_max = max(t_max, t), max(id_max, ident)
        if truncated:
            lines.append(f"# truncated here (in {path.rsplit('/', 1)[-1]}) to stay under {max_bytes} bytes")
            break
        t_base, id_base, tok_base = t_max + 1, id_max, tok_base + tok_max
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv)
