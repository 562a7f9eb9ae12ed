#!/usr/bin/env python3
"""run_tidy.py: clang-tidy (.clang-tidy) over every public header, each checked as the main file.

Input: a build tree configured with CMAKE_EXPORT_COMPILE_COMMANDS=ON and the header check
(tests/header_check: one generated unit per header, `#include <clpool/...>` and nothing else).
Each unit's compile command is reused with the header itself as the file to check (-x c++-header):
misc-include-cleaner only looks at the main file, so run over the units it would report each
unit's one include as unused and never look inside the header; with the header as the main file
every check sees the header's own code once, and nothing is reported twice from shared includes.

Writes <build>/tidy-headers/compile_commands.json, runs run-clang-tidy (-j), writes every finding
to <build>/tidy-findings.txt (file:line:col: message [check], sorted, once each) and prints the
count per check and the time. Exit status: 1 if there is any finding (or clang-tidy failed).

  python3 tools/lint/run_tidy.py build/tidy -j 2 [--clang-tidy clang-tidy-19] [--header REGEX]
"""
import argparse
import collections
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import time

DIAG_RE = re.compile(r"^(?P<loc>/[^:\s]+:\d+:\d+): (?:warning|error): (?P<msg>.*?) \[(?P<check>[^\]]+)\]$")


def header_db(build, only):
    db = json.loads((build / "compile_commands.json").read_text())
    out = []
    for e in db:
        unit = pathlib.Path(e["file"])
        marker = f"{os.sep}header_check{os.sep}"
        if marker not in str(unit) or unit.suffix != ".cpp":  # C++ units only (a .h also has a C one)
            continue
        include = str(unit).split(marker, 1)[1][: -len(".cpp")]  # clpool/core/pool.hpp
        args = e.get("arguments") or shlex.split(e["command"])
        roots = [a[2:] for a in args if a.startswith("-I")]
        header = next((pathlib.Path(r) / include for r in roots if (pathlib.Path(r) / include).is_file()), None)
        if header is None or (only and not re.search(only, include)):
            continue
        new, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c"):
                skip = a == "-o"
                continue
            if a == str(unit) or a == e["file"]:
                continue
            new.append(a)
        new += ["-Wno-pragma-once-outside-header", "-x", "c++-header", "-c", str(header)]
        out.append({"directory": e["directory"], "file": str(header), "arguments": new})
    return out


REPORTED_ONLY = {"misc-include-cleaner"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="build tree with compile_commands.json and tests/header_check")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1, help="clang-tidy processes")
    ap.add_argument("--clang-tidy", default="clang-tidy-19", help="clang-tidy binary (>= 17)")
    ap.add_argument("--header", help="only headers whose <clpool/...> path matches this regex")
    args = ap.parse_args()

    build = pathlib.Path(args.build).resolve()
    entries = header_db(build, args.header)
    if not entries:
        sys.exit(f"run_tidy: no header-check units in {build}/compile_commands.json "
                 "(configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON and the tests on)")
    dbdir = build / "tidy-headers"
    dbdir.mkdir(exist_ok=True)
    (dbdir / "compile_commands.json").write_text(json.dumps(entries, indent=1))

    runner = shutil.which("run-" + pathlib.Path(args.clang_tidy).name) or shutil.which("run-clang-tidy")
    tidy = shutil.which(args.clang_tidy)
    if not runner or not tidy:
        sys.exit(f"run_tidy: {args.clang_tidy} or its run-clang-tidy not found (Debian: apt install clang-tidy-19)")
    cmd = [runner, "-p", str(dbdir), "-j", str(args.j), "-quiet", "-clang-tidy-binary", tidy,
           "-warnings-as-errors=*," + ",".join("-" + c for c in sorted(REPORTED_ONLY))]
    print(f"run_tidy: {len(entries)} headers, {args.j} jobs: {' '.join(cmd)}", flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - start

    findings = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        m = DIAG_RE.match(line.strip())
        if m:
            check = m["check"].replace(",-warnings-as-errors", "")
            findings[(m["loc"], check)] = m["msg"]
    root = str(pathlib.Path(__file__).resolve().parents[2]) + os.sep
    lines = sorted(f"{loc.replace(root, '')}: {msg} [{check}]" for (loc, check), msg in findings.items())
    report = build / "tidy-findings.txt"
    report.write_text("\n".join(lines) + ("\n" if lines else ""))
    per_check = collections.Counter(check for _, check in findings)
    for check, n in per_check.most_common():
        print(f"{n:6d}  {check}")
    print(f"run_tidy: {len(findings)} findings in {len(entries)} headers ({report}); {seconds:.0f} s")
    if proc.returncode != 0 and not findings:
        print(proc.stdout[-4000:] + proc.stderr[-4000:], file=sys.stderr)
    # misc-include-cleaner is reported, not enforced yet (-warnings-as-errors above leaves it out).
    enforced = [c for _, c in findings if c not in REPORTED_ONLY]
    return 1 if enforced or proc.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
