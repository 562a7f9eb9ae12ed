#!/usr/bin/env python3
"""check_layers.py: every clpool header includes only its own layer and the layers it may know.

Reads every header under include/, policies/ and backends/ (the three include roots; every
clpool path is <clpool/...>), maps it to its layer by folder with LAYERS below, and reports,
one line each (file:line: the include: what is wrong):

  - an include of a layer it may not know ("core may not include policies"): upward, or a
    capability (interop, devices, shapes) including another;
  - a cycle between folders (each cycle once, with one include of each edge);
  - a header outside every layer's folder;
  - an include of a <clpool/...> header (or a "quoted" one) that does not exist.

Exit status 1 when it reports anything, 0 otherwise. --known FILE accepts the offences listed
there (one key a line, as printed in brackets at the end of each line) and fails on a listed
one that no longer occurs, so the list only shrinks. --root checks another tree (the tests use
small fixture trees). --print-table prints the table as docs/DESIGN.md quotes it; --check-doc
FILE fails unless FILE holds that table verbatim.

Standard library only; runs in well under a second. CI: .ci/steps.d/05-layers.sh.
"""
import argparse
import pathlib
import re
import sys

# The layer table: the one place it is written. docs/DESIGN.md ("Layers") quotes it: run
# --print-table after changing it (a ctest, lint.layers_doc, checks the quote).
# (layer, folder, what it holds, may include (as written in the doc), may include (the set))
LAYERS = [
    ("platform", "include/clpool/platform/",
     "process state (fork generation, shutdown and exit marks), fork locks, the asymmetric fence, the one `CLPOOL_*` environment parser, release-in-place",
     "nothing of clpool's", set()),
    ("core", "include/clpool/core/",
     "the Backend and policy concepts, `backend_traits`, `Pool`, `Handle`, `PoolStats`, errors, memory kinds",
     "platform", {"platform"}),
    ("diagnostics", "include/clpool/diagnostics/",
     "history, call sites, snapshot JSON, out-of-memory reports",
     "core, platform", {"platform", "core"}),
    ("policies", "policies/clpool/policies/",
     "buckets, flags, limits, locks, `SpinMutex`, `ThreadCached` and its magazines",
     "core, diagnostics, platform", {"platform", "core", "diagnostics"}),
    ("backends", "backends/clpool/backends/",
     "host, OpenCL, mapped pinned",
     "core, diagnostics, platform", {"platform", "core", "diagnostics"}),
    ("runtime", "include/clpool/runtime/",
     "configuration (`CLPOOL_*`), shutdown and the list of registries, interrupts, interruptible waits, the queues finished at exit",
     "core, policies, platform (no backend: the OpenCL headers come from platform)", {"platform", "core", "policies"}),
    ("pools", "include/clpool/pools/",
     "the named pools (`BufferPool`, `host::BufferPool`, ...) and their process-wide registries",
     "the above", {"platform", "core", "diagnostics", "policies", "backends", "runtime"}),
    ("interop", "include/clpool/interop/",
     "transfers, `PinnedAllocator`, the drop-in `clpool::Buffer` and its C ABI",
     "the above", {"platform", "core", "diagnostics", "policies", "backends", "runtime", "pools"}),
    ("devices", "include/clpool/devices/",
     "the selector grammar, device listing, `DeviceHandle`",
     "runtime, pools and below", {"platform", "core", "diagnostics", "policies", "backends", "runtime", "pools"}),
    ("shapes", "include/clpool/shapes/",
     "the shape trie, `Shape`, `ShapeMirror`, epoch reclamation, the reader-writer lock",
     "runtime, pools and below", {"platform", "core", "diagnostics", "policies", "backends", "runtime", "pools"}),
    ("benchmark", "benchmarks/include/clpool/benchmark/",
     "`clpool::benchmark`: the standard Google Benchmark runs for any pool type (its own include root and CMake target)",
     "core, diagnostics, policies, platform", {"platform", "core", "diagnostics", "policies"}),
    ("umbrella", "include/clpool/clpool.hpp",
     "everything",
     "all", {"platform", "core", "diagnostics", "policies", "backends", "runtime", "pools", "interop", "devices", "shapes"}),
]
CAPABILITIES = {"interop", "devices", "shapes"}  # side by side: none may know another
INCLUDE_ROOTS = ("include", "policies", "backends", "benchmarks/include")
HEADER_SUFFIXES = (".hpp", ".h")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(rel):
    """The layer of a repository-relative path (str, '/' separators), or None."""
    for name, folder, *_ in LAYERS:
        if folder.endswith("/") and rel.startswith(folder):
            return name  # a folder's detail/ is inside the folder, so it is the folder's layer
        if rel == folder:
            return name
    return None


def strip_comments(text):
    """The text with /* */ and // comments blanked; line numbers are kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(c if c == "\n" else " " for c in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text[i] == '"':  # a string literal: copied as is (an include's quoted path is one)
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def headers(root):
    for top in INCLUDE_ROOTS:
        base = root / top
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.is_file() and p.suffix in HEADER_SUFFIXES:
                    yield p


def resolve(root, including, kind, path):
    """The repository-relative path an include names, or None where it is not clpool's.
    Returns (rel or None, exists)."""
    if kind == '"':
        local = (including.parent / path).resolve()
        if local.is_file():
            try:
                return local.relative_to(root).as_posix(), True
            except ValueError:
                return None, True
    if not path.startswith("clpool/"):
        if kind == '"':
            return path, False  # a quoted include found nowhere
        return None, True  # a system or third-party header: not this check's business
    for top in INCLUDE_ROOTS:
        if (root / top / path).is_file():
            return f"{top}/{path}", True
    # Missing: name the folder it would be in, so the layer rule still applies.
    guess = next((f"{top}/{path}" for top in INCLUDE_ROOTS
                  if layer_of(f"{top}/{path}") is not None), f"include/{path}")
    return guess, False


def check(root):
    """Returns [(key, line)]: the offences, and the folder graph's edges."""
    offences = []
    edges = {}  # (from layer, to layer) -> first (file:line, include) seen
    for h in headers(root):
        rel = h.relative_to(root).as_posix()
        layer = layer_of(rel)
        if layer is None:
            offences.append((f"{rel}: outside", f"{rel}:1: header outside every layer's folder (tools/lint/check_layers.py, LAYERS)"))
            continue
        allowed = next(a for name, _, _, _, a in LAYERS if name == layer)
        text = strip_comments(h.read_text(encoding="utf-8", errors="replace"))
        for lineno, line in enumerate(text.splitlines(), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            kind, path = m.groups()
            spelled = f"<{path}>" if kind == "<" else f'"{path}"'
            target, exists = resolve(root, h, kind, path)
            if target is None:
                continue
            where = f"{rel}:{lineno}: #include {spelled}"
            if not exists:
                offences.append((f"{rel}: {spelled} missing", f"{where}: no such header"))
            to = layer_of(target)
            if to is None:
                if exists:
                    offences.append((f"{rel}: {spelled} outside", f"{where}: includes a header outside every layer"))
                continue
            if to == layer:
                continue
            edges.setdefault((layer, to), (f"{rel}:{lineno}", spelled))
            if to not in allowed:
                why = " (capabilities do not know each other)" if {layer, to} <= CAPABILITIES else ""
                offences.append((f"{rel}: {spelled}", f"{where}: {layer} may not include {to}{why}"))
    offences.extend(cycles(edges))
    return offences


def cycles(edges):
    """One offence per elementary cycle of the folder graph (Johnson-lite: the graph has twelve
    nodes, so a DFS from each node over higher-ordered nodes finds each cycle once)."""
    order = {name: i for i, (name, *_) in enumerate(LAYERS)}
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    found = []

    def dfs(start, node, path):
        for nxt in sorted(succ.get(node, []), key=order.get):
            if nxt == start:
                found.append(path[:])
            elif order[nxt] > order[start] and nxt not in path:
                path.append(nxt)
                dfs(start, nxt, path)
                path.pop()

    for start in sorted(succ, key=order.get):
        dfs(start, start, [start])
    out = []
    for cyc in found:
        ring = cyc + [cyc[0]]
        via = "; ".join(f"{a} -> {b}: {edges[(a, b)][0]} {edges[(a, b)][1]}" for a, b in zip(ring, ring[1:]))
        first = edges[(ring[0], ring[1])][0]
        out.append((f"cycle: {' -> '.join(ring)}", f"{first}: folders in a cycle: {' -> '.join(ring)} ({via})"))
    return out


def table():
    rows = ["| layer | folder | what it holds | may include |", "|---|---|---|---|"]
    for name, folder, what, may, _ in LAYERS:
        rows.append(f"| {name} | `{folder}` | {what} | {may} |")
    return "\n".join(rows) + "\n"


def main():
    here = pathlib.Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(here), help="the tree to check (default: this repository)")
    ap.add_argument("--known", help="file of accepted offence keys (one a line, # comments)")
    ap.add_argument("--print-table", action="store_true", help="print the layer table (markdown) and exit")
    ap.add_argument("--check-doc", metavar="FILE", help="fail unless FILE quotes the layer table verbatim")
    args = ap.parse_args()

    if args.print_table:
        sys.stdout.write(table())
        return 0
    if args.check_doc:
        if table() not in pathlib.Path(args.check_doc).read_text(encoding="utf-8"):
            print(f"{args.check_doc}: does not quote the layer table of tools/lint/check_layers.py; "
                  f"paste the output of `python3 tools/lint/check_layers.py --print-table`", file=sys.stderr)
            return 1
        return 0

    root = pathlib.Path(args.root).resolve()
    offences = check(root)
    known = set()
    if args.known:
        for line in pathlib.Path(args.known).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                known.add(line)
    bad = 0
    seen = set()
    for key, msg in offences:
        seen.add(key)
        if key in known:
            print(f"known: {msg}")
        else:
            print(f"{msg}  [{key}]")
            bad += 1
    for key in sorted(known - seen):
        print(f"{args.known}: '{key}' no longer occurs: delete that line")
        bad += 1
    n = sum(1 for _ in headers(root))
    print(f"check_layers: {n} headers, {len(offences)} offences ({len(offences) - len(known & seen)} not in "
          f"{args.known or 'a --known list'}), {bad} failing", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
