#!/usr/bin/env python3
"""check_layers.py: every clpool header includes only its own layer and the layers it may know.

Reads every header under include/, policies/ and backends/ (the three include roots; every
clpool path is <clpool/...>), maps it to its layer by folder with LAYERS below, and reports,
one line each (file:line: the include: what is wrong):

  - an include of a layer it may not know ("core may not include policies"): upward, or a
    capability (interop, devices, shapes) including another;
  - an include of another layer's detail/ header: a layer reaches another only through that
    layer's public headers (a folder's own detail/ is its own business);
  - a cycle between folders (each cycle once, with one include of each edge);
  - a header outside every layer's folder;
  - an include of a <clpool/...> header (or a "quoted" one) that does not exist.

The programs around the library (every .cpp, .cc, .c, .hpp and .h under tests/, tools/ and
benchmarks/, but the lint fixtures) are held to the same rule: a layer's public headers only,
and a detail/ header only where the --allow FILE lists it, one entry a line:
"<file, or folder/> <clpool/.../detail/x.hpp>  # why", the reason required. An entry that no
longer matches an include fails, and so does one for a library header: the library has no
allow-list.

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
     "process state (fork generation, shutdown and exit marks), fork locks, the asymmetric fence, the one `CLPOOL_*` environment parser, release-in-place, the OpenCL headers as clpool configures them",
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
     "core, policies, platform (never a backend)", {"platform", "core", "policies"}),
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
     "all", {"platform", "core", "diagnostics", "policies", "backends", "runtime", "pools", "interop", "devices", "shapes",
             "compat"}),
    ("compat", "include/clpool/compat/",
     "0.1's spellings of public types as `[[deprecated]]` aliases (CHANGELOG.md)",
     "all but the umbrella", {"platform", "core", "diagnostics", "policies", "backends", "runtime", "pools", "interop",
                              "devices", "shapes"}),
    # An include root of its own, so that 0.1's paths (<clpool/transfer.hpp>) resolve there.
    ("old paths", "compat/clpool/",
     "0.1's header paths, each including today's headers and the compat aliases (CHANGELOG.md)",
     "all but the umbrella", {"platform", "core", "diagnostics", "policies", "backends", "runtime", "pools", "interop",
                              "devices", "shapes", "compat"}),
]
CAPABILITIES = {"interop", "devices", "shapes"}  # side by side: none may know another
INCLUDE_ROOTS = ("include", "policies", "backends", "benchmarks/include", "compat")
HEADER_SUFFIXES = (".hpp", ".h")
# The programs around the library: held to the public headers (--allow lists the exceptions).
CONSUMER_ROOTS = ("tests", "tools", "benchmarks")
CONSUMER_SUFFIXES = (".cpp", ".cc", ".c", ".hpp", ".h")
CONSUMER_SKIP = ("tests/lint/fixtures/",)  # the checker's own fixture trees, which its tests check

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of(rel):
    """The layer of a repository-relative path (str, '/' separators), or None."""
    for name, folder, *_ in LAYERS:
        if folder.endswith("/") and rel.startswith(folder):
            return name  # a folder's detail/ is inside the folder, so it is the folder's layer
        if rel == folder:
            return name
    return None


def is_detail(rel):
    """True for a header in a detail/ folder (at any depth) of a layer's folder."""
    for _, folder, *_ in LAYERS:
        if folder.endswith("/") and rel.startswith(folder):
            return "/detail/" in "/" + rel[len(folder):]
    return False


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


def includes(path):
    """(line number, '<' or '"', path) of every #include outside comments."""
    text = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
    for lineno, line in enumerate(text.splitlines(), 1):
        m = INCLUDE_RE.match(line)
        if m:
            yield (lineno, *m.groups())


def headers(root):
    for top in INCLUDE_ROOTS:
        base = root / top
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.is_file() and p.suffix in HEADER_SUFFIXES:
                    yield p


def consumers(root):
    """The files of the programs around the library (none of them a library header)."""
    library = set(headers(root))
    for top in CONSUMER_ROOTS:
        base = root / top
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if (p.is_file() and p.suffix in CONSUMER_SUFFIXES and p not in library
                        and not p.relative_to(root).as_posix().startswith(CONSUMER_SKIP)):
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
    """Returns [(key, line)]: the library's offences, and the folder graph's cycles."""
    offences = []
    edges = {}  # (from layer, to layer) -> first (file:line, include) seen
    for h in headers(root):
        rel = h.relative_to(root).as_posix()
        layer = layer_of(rel)
        if layer is None:
            offences.append((f"{rel}: outside", f"{rel}:1: header outside every layer's folder (tools/lint/check_layers.py, LAYERS)"))
            continue
        allowed = next(a for name, _, _, _, a in LAYERS if name == layer)
        for lineno, kind, path in includes(h):
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
            elif is_detail(target):
                offences.append((f"{rel}: {spelled} detail",
                                 f"{where}: {layer} may not include a detail/ header of {to} (only its public headers)"))
    offences.extend(cycles(edges))
    return offences


def check_consumers(root, allowed):
    """The detail/ includes of the files around the library that `allowed` does not list.
    Returns ([(key, line)], the entries of `allowed` used); an entry is (file or folder/, spelled)."""
    offences, used = [], set()
    for f in consumers(root):
        rel = f.relative_to(root).as_posix()
        for lineno, kind, path in includes(f):
            target, exists = resolve(root, f, kind, path)
            if target is None or not exists or not is_detail(target):
                continue
            spelled = f"<{path}>" if kind == "<" else f'"{path}"'
            hit = [(w, s) for w, s in allowed if s == spelled and (rel == w or (w.endswith("/") and rel.startswith(w)))]
            if hit:
                used.update(hit)
                continue
            offences.append((f"{rel}: {spelled} detail",
                             f"{rel}:{lineno}: #include {spelled}: a detail/ header of {layer_of(target)} outside the library "
                             f"(include a public header, or list it with its reason in the --allow file)"))
    return offences, used


def read_allow(path):
    """The --allow file: ({(file or folder/, spelled include)}, [errors])."""
    entries, errors = set(), []
    for lineno, line in enumerate(pathlib.Path(path).read_text(encoding="utf-8").splitlines(), 1):
        body, _, reason = line.partition("#")
        parts = body.split()
        if not parts:
            continue
        where = f"{path}:{lineno}"
        if len(parts) != 2:
            errors.append(f"{where}: expected '<file, or folder/> <clpool/.../detail/x.hpp>  # why'")
        elif not reason.strip():
            errors.append(f"{where}: '{parts[0]} {parts[1]}' gives no reason (after a '#')")
        elif not parts[0].startswith(tuple(top + "/" for top in CONSUMER_ROOTS)) or \
                parts[0].startswith(tuple(top + "/" for top in INCLUDE_ROOTS)):
            errors.append(f"{where}: {parts[0]}: only tests/, tools/ and benchmarks/ may be listed; "
                          f"the library has no allow-list (give the header a public home)")
        else:
            entries.add((parts[0], parts[1]))
    return entries, errors


def cycles(edges):
    """One offence per elementary cycle of the folder graph (Johnson-lite: the graph has a dozen
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
    ap.add_argument("--allow", help="file of the detail/ includes allowed in tests/, tools/, benchmarks/, each with its reason")
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
    allowed, allow_errors = read_allow(args.allow) if args.allow else (set(), [])
    around, used = check_consumers(root, allowed)
    offences.extend(around)
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
    for msg in allow_errors:
        print(msg)
        bad += 1
    for where, spelled in sorted(allowed - used):
        print(f"{args.allow}: '{where} {spelled}' matches no include: delete that line")
        bad += 1
    n, m = sum(1 for _ in headers(root)), sum(1 for _ in consumers(root))
    print(f"check_layers: {n} headers and {m} files around them, {len(offences)} offences ({len(offences) - len(known & seen)} not in "
          f"{args.known or 'a --known list'}), {len(used)} of {len(allowed)} allowed detail/ includes used, {bad} failing",
          file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
