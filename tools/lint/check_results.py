#!/usr/bin/env python3
"""Check that docs/results and the documents that cite it agree.

Every `docs/results/...` or `results/YYYY-...` path named in README.md, docs/**/*.md and
benchmarks/gpu/* must exist, and every file under docs/results must be cited, by its own
path or by a folder above it (docs/results/README.md, the folder's own guide, excepted).
Also prints the share of the repository's tracked bytes that docs/results takes; the rule
is at most 10%.

usage: python3 tools/lint/check_results.py   (from the repository root; exit status 1 on a problem)
"""
import os
import re
import subprocess
import sys

CITE = re.compile(r"(?:docs/)?results/(20\d\d-\d\d-\d\d[A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_.\-]+)*/?)")
MAX_SHARE = 0.10


def tracked(paths=()):
    out = subprocess.run(["git", "ls-files", "-z", "--", *paths], check=True,
                         capture_output=True).stdout.decode()
    return [p for p in out.split("\0") if p and os.path.isfile(p)]


def main():
    sources = [p for p in tracked(["README.md", "docs", "benchmarks/gpu"])
               if p.startswith("benchmarks/gpu/") or p.endswith(".md")]
    cited = {}
    for src in sources:
        with open(src, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                for m in CITE.finditer(line):
                    path = "docs/results/" + m.group(1).rstrip(".")
                    cited.setdefault(path, f"{src}:{lineno}")

    problems = []
    for path, where in sorted(cited.items()):
        if not os.path.exists(path.rstrip("/")):
            problems.append(f"{where}: cites {path}, which does not exist")

    results = tracked(["docs/results"])
    folders = tuple(p.rstrip("/") + "/" for p in cited)
    for f in results:
        if f == "docs/results/README.md" or f in cited or f.startswith(folders):
            continue
        problems.append(f"{f}: no document cites it (nor a folder above it)")

    def size(files):
        return sum(os.path.getsize(p) for p in files)

    total, part = size(tracked()), size(results)
    share = part / total if total else 0.0
    print(f"docs/results: {part} of {total} tracked bytes ({share:.1%}); "
          f"{len(results)} files, {len(cited)} citations")
    if share > MAX_SHARE:
        problems.append(f"docs/results is {share:.1%} of the tracked bytes (at most {MAX_SHARE:.0%})")

    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
