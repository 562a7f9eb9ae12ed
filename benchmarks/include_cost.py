#!/usr/bin/env python3
"""Include cost: how long the compiler takes to read clpool's pool core, against a yardstick.

Compiles (-fsyntax-only -std=c++20 -O0, the project's include roots) each of these translation
units N times, alternating, and prints the median CPU time (user + system of the compiler
process) and wall time of each, and the ratios of the CPU-time medians to (a). CPU time is the
measure because it barely moves when other jobs share the machine; wall time does:

  (0) an empty TU                       the compiler's start-up, for reference only
  (a) <boost/intrusive/list.hpp> + <vector>   the yardstick: what the core cannot do without
  (b) <clpool/core/pool.hpp>
  (c) (b) + <clpool/policies/{locks,bucket,flags,limits}.hpp>   what a user of the core includes

The goal (issue 13): b/a and c/a at most 1.5. --max-ratio makes the script exit 1 above it.
--root measures another checkout (e.g. an older commit in a temporary worktree).

  python3 benchmarks/include_cost.py                  # g++, 15 rounds
  python3 benchmarks/include_cost.py --cxx clang++ -n 25 --max-ratio 1.5
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

TUS = {
    "0": ("empty TU", []),
    "a": ("boost/intrusive/list + vector", ["boost/intrusive/list.hpp", "vector"]),
    "b": ("clpool/core/pool.hpp", ["clpool/core/pool.hpp"]),
    "c": ("pool.hpp + locks/bucket/flags/limits",
          ["clpool/core/pool.hpp", "clpool/policies/locks.hpp", "clpool/policies/bucket.hpp",
           "clpool/policies/flags.hpp", "clpool/policies/limits.hpp"]),
}


def main():
    here = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(here), help="clpool checkout to measure (default: this one)")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"), help="compiler (default: $CXX or g++)")
    ap.add_argument("-n", type=int, default=15, help="rounds; each compiles every TU once (default 15)")
    ap.add_argument("--max-ratio", type=float, help="exit 1 if b/a or c/a is above this")
    ap.add_argument("--flag", action="append", default=[], help="extra compiler flag (repeatable)")
    args = ap.parse_args()

    root = pathlib.Path(args.root).resolve()
    includes = [f"-I{root / d}" for d in ("include", "policies", "backends")]
    base = [args.cxx, "-std=c++20", "-O0", "-fsyntax-only", *includes, *args.flag]

    with tempfile.TemporaryDirectory(prefix="clpool-include-cost-") as tmp:
        files = {}
        for key, (_, headers) in TUS.items():
            path = pathlib.Path(tmp) / f"tu_{key}.cpp"
            path.write_text("".join(f"#include <{h}>\n" for h in headers) + "int main() { return 0; }\n")
            files[key] = path
        # One warm-up round (page cache, compiler binary), not counted; it also checks each TU compiles.
        for key, path in files.items():
            r = subprocess.run(base + [str(path)], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"TU ({key}) does not compile:\n{r.stderr}")
        times = {key: [] for key in files}  # CPU seconds
        walls = {key: [] for key in files}
        for _ in range(args.n):
            for key, path in files.items():  # alternating: drift in machine load hits every TU alike
                t0 = time.perf_counter()
                proc = subprocess.Popen(base + [str(path)])
                _, status, usage = os.wait4(proc.pid, 0)
                walls[key].append(time.perf_counter() - t0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                if proc.returncode != 0:
                    sys.exit(f"TU ({key}) failed with {proc.returncode}")
                times[key].append(usage.ru_utime + usage.ru_stime)

    med = {k: statistics.median(v) for k, v in times.items()}
    wall = {k: statistics.median(v) for k, v in walls.items()}
    version = subprocess.run([args.cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"compiler: {version}")
    print(f"root: {root}   rounds: {args.n}   flags: {' '.join(base[1:4] + args.flag)}")
    for key, (label, _) in TUS.items():
        spread = f"{min(times[key]) * 1e3:.0f}-{max(times[key]) * 1e3:.0f}"
        print(f"  ({key}) {label:<38} CPU median {med[key] * 1e3:6.1f} ms (min-max {spread})"
              f"   wall median {wall[key] * 1e3:6.1f} ms")
    print(f"  load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    ratios = {"b/a": med["b"] / med["a"], "c/a": med["c"] / med["a"]}
    print("  ratios: " + "   ".join(f"{k} = {v:.2f}" for k, v in ratios.items()))
    if args.max_ratio is not None:
        over = [k for k, v in ratios.items() if v > args.max_ratio]
        if over:
            print(f"include cost: {', '.join(over)} above {args.max_ratio}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
