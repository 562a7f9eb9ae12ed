#!/usr/bin/env python3
"""SVG plots from Google Benchmark JSON output, with the Python standard library only.

  plot.py latency  OUT.svg IN.json [IN.json ...] [--filter REGEX] [--time cpu_time|real_time] [--title T]
      time per iteration (ns, log scale) against the size argument (bytes, log scale),
      one line per benchmark family (the name without its trailing /<bytes>).
  plot.py threads  OUT.svg IN.json [IN.json ...] [--filter REGEX] [--title T]
      items_per_second (log scale) against the thread count, one line per family
      (the name without /real_time and /threads:N).

Where a run has repetitions, the median aggregate is plotted; otherwise the single run.
"""
import argparse
import html
import json
import math
import re
import sys

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39"]
UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        bms = doc.get("benchmarks", [])
        has_median = any(b.get("aggregate_name") == "median" for b in bms)
        for b in bms:
            if b.get("error_occurred"):
                continue
            if has_median and b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
                runs.append(b)
            elif not has_median and b.get("run_type", "iteration") == "iteration":
                runs.append(b)
    return runs


def family_and_x(name, mode):
    base = name.split("_median")[0]
    if mode == "latency":
        m = re.match(r"^(.*)/(\d+)(?:/.*)?$", base)
        return (m.group(1), int(m.group(2))) if m else (None, None)
    m = re.search(r"/threads:(\d+)", base)
    if not m:
        return None, None
    fam = re.sub(r"/(real_time|process_time|threads:\d+|min_time:[^/]+)", "", base)
    return fam, int(m.group(1))


def nice_bytes(v):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= div:
            return f"{v / div:g} {unit}"
    return f"{v:g} B"


def nice_num(v):
    for suffix, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:g}{suffix}"
    if v >= 1:
        return f"{v:g}"
    return f"{v:.2g}"


def nice_ns(v):
    """A time axis label in the unit that keeps it short (the values are nanoseconds)."""
    for suffix, div in (("s", 1e9), ("ms", 1e6), ("\u00b5s", 1e3)):
        if v >= div:
            return f"{v / div:g} {suffix}"
    return f"{v:g} ns"


DASHES = ["", "7,3", "2,3"]  # with the palette, keeps overlapping lines apart


def svg_plot(series, out, title, xlabel, ylabel, xfmt, yfmt, xlog2=True):
    W, H, L, R, T, B = 960, 560, 80, 300, 40, 60
    pw, ph = W - L - R, H - T - B
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts if y > 0]
    if not xs or not ys:
        sys.exit("plot.py: nothing to plot (check --filter and the input)")
    lx = (lambda v: math.log2(v)) if xlog2 else (lambda v: v)
    x0, x1 = lx(min(xs)), lx(max(xs))
    if x1 == x0:
        x1 = x0 + 1
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if y1 == y0:
        y1 = y0 + 1

    def px(x):
        return L + (lx(x) - x0) / (x1 - x0) * pw

    def py(y):
        return T + ph - (math.log10(y) - y0) / (y1 - y0) * ph

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L + pw / 2}" y="22" text-anchor="middle" font-size="15">{html.escape(title)}</text>']
    for e in range(y0, y1 + 1):  # decades, with 2x and 5x minor lines
        for m in (1, 2, 5):
            v = m * 10 ** e
            if v > 10 ** y1:
                break
            y = py(v)
            o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="{"#ccc" if m == 1 else "#eee"}"/>')
            if m == 1 or (y1 - y0) <= 2:
                o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{yfmt(v)}</text>')
    for x in sorted(set(xs)):
        X = px(x)
        o.append(f'<line x1="{X:.1f}" y1="{T}" x2="{X:.1f}" y2="{T + ph}" stroke="#eee"/>')
        o.append(f'<text x="{X:.1f}" y="{T + ph + 16}" text-anchor="middle">{html.escape(xfmt(x))}</text>')
    o.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    o.append(f'<text x="{L + pw / 2}" y="{H - 15}" text-anchor="middle">{html.escape(xlabel)}</text>')
    o.append(f'<text transform="translate(18,{T + ph / 2}) rotate(-90)" text-anchor="middle">{html.escape(ylabel)}</text>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = PALETTE[i % len(PALETTE)]
        dash = f' stroke-dasharray="{DASHES[i % len(DASHES)]}"' if DASHES[i % len(DASHES)] else ""
        pts = sorted(p for p in pts if p[1] > 0)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        o.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        for x, y in pts:
            o.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"><title>{html.escape(name)}: {yfmt(y)}</title></circle>')
        ly = T + 10 + i * 18
        o.append(f'<line x1="{L + pw + 15}" y1="{ly}" x2="{L + pw + 35}" y2="{ly}" stroke="{c}" stroke-width="3"{dash}/>')
        o.append(f'<text x="{L + pw + 40}" y="{ly + 4}">{html.escape(name)}</text>')
    o.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["latency", "threads"])
    ap.add_argument("out")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--filter", default=".*", help="regex on benchmark names")
    ap.add_argument("--time", default="cpu_time", choices=["cpu_time", "real_time"])
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    rx = re.compile(a.filter)
    series = {}
    for b in load(a.inputs):
        name = b.get("run_name", b["name"])
        if not rx.search(name):
            continue
        fam, x = family_and_x(name, a.mode)
        if fam is None:
            continue
        if a.mode == "latency":
            y = b[a.time] * UNIT_NS[b.get("time_unit", "ns")]
        else:
            y = b.get("items_per_second", 0.0)
        series.setdefault(fam, []).append((x, y))
    if a.mode == "latency":
        svg_plot(series, a.out, a.title or "Allocate + release: time per pair vs size", "size",
                 f"time per pair ({a.time}, log)", nice_bytes, nice_ns)
    else:
        svg_plot(series, a.out, a.title or "Aggregate throughput vs threads", "threads",
                 "allocate+release pairs per second (log)", lambda v: str(v), nice_num)


if __name__ == "__main__":
    main()
