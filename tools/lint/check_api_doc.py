#!/usr/bin/env python3
"""check_api_doc.py: every public name in clpool's headers appears in docs/API.md.

Reads every header under the include roots (include/, policies/, backends/, benchmarks/include/), skips
detail/ folders and `namespace ... detail` blocks, and collects the names declared at namespace
scope in namespace clpool (and its public sub-namespaces): classes, structs, enums, concepts,
aliases, variables and free functions, plus the public member functions and data members of
classes and structs (a `private:`/`protected:` section is skipped). A name counts as documented
when docs/API.md holds it in backticks, alone or qualified (`Pool::allocate`, `allocate(...)`).

Prints each missing name with the header that declares it; exit status 1 if any is missing.
--list prints every name found, one `header: name` a line. Crude by design (regular expressions,
not a C++ parser): it misses nothing a user touches in these headers, and what it finds that is
not public (a macro argument, say) is listed in IGNORED below. Standard library only; ctest runs
it as lint.api_doc.
"""
import argparse
import pathlib
import re
import sys

ROOTS = ("include", "policies", "backends", "benchmarks/include")
# Names the scan finds that are no API: operators' keywords, std members, implementation helpers
# that must be visible in a header but that no user calls.
IGNORED = {
    "operator", "noexcept", "const", "return", "if", "for", "while", "switch", "sizeof", "static_assert",
    "decltype", "requires", "template", "typename", "std", "main", "extern", "defined", "bool",
}

DECL_RE = [
    re.compile(r"^\s*(?:template\s*<[^;{]*>\s*)?(?:struct|class|union)\s+(?:alignas\([^)]*\)\s+)?(?:\[\[[^\]]*\]\]\s*)?([A-Za-z_]\w*)\s*(?:final\s*)?[:{<]"),
    re.compile(r"^\s*(?:template\s*<[^;{]*>\s*)?(?:struct|class)\s+([A-Za-z_]\w*)\s*;"),
    re.compile(r"^\s*enum\s+(?:class|struct)?\s*([A-Za-z_]\w*)"),
    re.compile(r"^\s*(?:template\s*<[^;{]*>\s*)?concept\s+([A-Za-z_]\w*)"),
    re.compile(r"^\s*(?:template\s*<[^;{]*>\s*)?using\s+([A-Za-z_]\w*)\s*="),
    re.compile(r"^\s*typedef\s+.*?\b([A-Za-z_]\w*)\s*;"),
]
# A function or variable: `... name(` or `... name =`/`name{` at the start of a declaration.
FUNC_RE = re.compile(
    r"^\s*(?:\[\[[^\]]*\]\]\s*)?(?:(?:inline|static|constexpr|consteval|explicit|virtual|friend|extern|"
    r"thread_local|const|volatile|unsigned|signed|long|short|typename)\s+)*"
    r"(?:[A-Za-z_][\w:<>,\s\*&]*?[\s\*&]+)?([A-Za-z_~]\w*)\s*\(")
VAR_RE = re.compile(
    r"^\s*(?:(?:inline|static|constexpr|const|thread_local)\s+)*[A-Za-z_][\w:<>,\s\*&]*?[\s\*&]+([A-Za-z_]\w*)\s*(?:=|\{|;)")


def strip(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def names_in(path):
    """Yield the public names declared in one header."""
    text = strip(path.read_text())
    # Track braces: a stack of scopes, each 'ns:<name>', 'class:<name>:<access>', or 'block'.
    stack = []
    pending = None  # the kind of scope the next '{' opens
    out = []
    lines = text.split("\n")
    prev = ""
    for line in lines:
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        # A declaration's continuation (parameters, a template head) declares nothing new.
        continued = prev.endswith((",", "(", "&&", "||"))
        prev = s
        in_detail = any(x.startswith("ns:") and x.endswith("detail") for x in stack) or any(
            x.startswith("ns:") and "detail" in x.split("::") for x in stack)
        in_hidden = any(x == "block" or x.endswith(":private") for x in stack)
        in_class = bool(stack) and stack[-1].startswith("class:")
        ns_ok = any(x.startswith("ns:clpool") for x in stack) or (
            not any(x.startswith("ns:") for x in stack) and path.suffix == ".h")
        if re.match(r'^extern\s+""\s*\{', s):  # a C header's extern "C" block: its names are the API
            stack.append("ns:clpool_c")
            continue
        m = re.match(r"^namespace\s+([\w:]+)\s*\{", s)
        if m:
            stack.append("ns:" + m.group(1))
            s = s[m.end():]
            if "}" in s:
                stack.pop()
            continue
        m = re.match(r"^(public|private|protected)\s*:", s)
        if m and stack and stack[-1].startswith("class:"):
            parts = stack[-1].split(":")
            stack[-1] = ":".join(parts[:2] + ["public" if m.group(1) == "public" else "private"])
            continue
        found = None
        kind = None
        if continued and not re.match(r"^(?:struct|class|enum|concept|using)\b", s):
            ns_ok = False
        if s.startswith("template") and (s.endswith(">") or not re.search(r"\b(?:struct|class|concept|using)\b", s)):
            ns_ok = False
        if ns_ok and not in_detail and not in_hidden:
            for rx in DECL_RE:
                mm = rx.match(s)
                if mm:
                    found, kind = mm.group(1), "type"
                    break
            if not found:
                mm = FUNC_RE.match(s)
                if mm and not re.match(r"^\s*(return|if|for|while|switch|else|case|do|throw|delete|new)\b", s):
                    found, kind = mm.group(1), "func"
            if not found and (in_class or not stack or stack[-1].startswith("ns:")):
                mm = VAR_RE.match(s)
                if mm and not re.match(r"^\s*(return|using|throw|delete|goto|case)\b", s):
                    found, kind = mm.group(1), "var"
        if found and found not in IGNORED and not found.startswith("~") and not found.startswith("_") and not found.endswith("_"):
            owner = stack[-1].split(":")[1] if in_class else None
            if not (owner and found == owner):  # constructors
                out.append((owner, found))
        # Update the scope stack for braces on this line.
        opens = s.count("{")
        closes = s.count("}")
        is_class = re.match(r"^(?:template\s*<.*>\s*)?(?:struct|class|union)\s+(?:alignas\([^)]*\)\s+)?([A-Za-z_]\w*)", s)
        is_enum = re.match(r"^enum\b", s)
        for i in range(opens):
            if i == 0 and is_class and not s.rstrip().endswith(";"):
                default = "public" if s.lstrip().startswith(("struct", "template")) and "class " not in s.split("{")[0].split("<")[0] else (
                    "public" if re.match(r"^(?:template\s*<.*>\s*)?struct\b", s) else "private")
                stack.append("class:" + is_class.group(1) + ":" + default)
            elif i == 0 and is_enum:
                stack.append("enum")
            else:
                stack.append("block" if (stack and not stack[-1].startswith("ns:")) or not is_class else "block")
        # a class head on its own line with '{' on the next line is rare in this codebase (clang-format)
        for _ in range(closes):
            if stack:
                stack.pop()
        # enum bodies: their enumerators are documented with the enum
    return out


def all_names(root):
    found = []
    for top in ROOTS:
        base = root / top / "clpool"
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".hpp", ".h") or "detail" in path.relative_to(base).parts:
                continue
            rel = path.relative_to(root / top).as_posix()
            for owner, name in names_in(path):
                found.append((rel, owner, name))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=pathlib.Path(__file__).resolve().parents[2], type=pathlib.Path)
    ap.add_argument("--doc", default=None, type=pathlib.Path)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    doc_path = args.doc or args.root / "docs" / "API.md"
    found = all_names(args.root)
    if args.list:
        for rel, owner, name in found:
            print(f"{rel}: {owner + '::' if owner else ''}{name}")
        return 0
    doc = doc_path.read_text()
    spans = re.findall(r"`([^`]+)`", doc)
    words = set()
    for sp in spans:
        for w in re.findall(r"[A-Za-z_]\w*", sp):
            words.add(w)
    missing = [(rel, owner, name) for rel, owner, name in found if name not in words]
    seen = set()
    for rel, owner, name in missing:
        key = (rel, name)
        if key in seen:
            continue
        seen.add(key)
        print(f"{rel}: `{(owner + '::') if owner else ''}{name}` is not in {doc_path.name}")
    headers = len({r for r, _, _ in found})
    print(f"check_api_doc: {len({(r, n) for r, _, n in found})} public names in {headers} headers, "
          f"{len(seen)} missing from {doc_path.name}", file=sys.stderr)
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())
