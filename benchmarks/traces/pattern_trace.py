#!/usr/bin/env python3
"""Writes allocation-pattern traces in the clpool trace format (docs/TRACE_FORMAT.md).

  pattern_trace.py kv_cache   [-o OUT]            a KV cache grown by re-allocation, a token per step
  pattern_trace.py loguniform [-o OUT] [--seed S] bench_memory's churn over its loguniform mix
  pattern_trace.py tensors    [-o OUT] [--seed S] bench_memory's churn over its tensor mix
  pattern_trace.py KIND --check FILE              regenerate and compare with FILE (plain or .gz)

kv_cache: what a new user's decoding loop does. Over sequence lengths 1 .. 512, twice, each step
allocates the cache one token larger (16 KiB per token: 8 MiB at 512), copies the old one into
it and frees the old one, with five temporaries per step: the token's q, k and v (16 KiB each)
before the new cache, then the attention scores (4 KiB per token) and the output (16 KiB), all
freed at the end of the step.

loguniform, tensors: the churn of benchmarks/bench_memory.cpp, the same mixes and generator:
40 iterations of the same 256 sizes drawn from the mix, in an order shuffled anew each time,
each replacing a random one of 64 live buffers (the new one made first). The same events as
`bench_memory --write-churn-traces DIR` writes for that seed (7 by default, bench_memory's
first): std::mt19937_64, std::shuffle and std::uniform_real_distribution as libstdc++
(GCC 11 and later) implements them, rewritten here.

Standard library only; the same arguments give the same bytes on every Python 3.
"""

import argparse
import gzip
import io
import math
import sys

M64 = 2**64 - 1


class Trace:
    def __init__(self, out, title):
        self.out = out
        self.t = 0
        self.next_id = 1
        self.live = 0
        self.peak = 0
        self.events = 0
        out.write("clpool-trace 1\n# " + title + "\n")

    def comment(self, text):
        self.out.write("# " + text + "\n")

    def alloc(self, nbytes):
        self.t += 1000
        i = self.next_id
        self.next_id += 1
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        self.events += 1
        self.out.write(f"{self.t} alloc {i} 0x1 0x1 {nbytes}\n")
        return (i, nbytes)

    def free(self, block):
        self.t += 1000
        self.live -= block[1]
        self.events += 1
        self.out.write(f"{self.t} free {block[0]}\n")


def kv_cache(out):
    tr = Trace(out, "KV cache grown by re-allocation: 16 KiB per token, sequence lengths 1 .. 512, twice")
    token = 16 << 10
    for rep in range(2):
        tr.comment(f"pass {rep}")
        cache = None
        for s in range(1, 513):
            temps = [tr.alloc(token) for _ in range(3)]  # q, k, v of the new token
            grown = tr.alloc(s * token)
            if cache:
                tr.free(cache)  # after the copy
            cache = grown
            temps.append(tr.alloc(s * 4096))  # attention scores
            temps.append(tr.alloc(token))  # the output
            for t in temps:
                tr.free(t)
        tr.free(cache)
    return tr


class MT19937_64:
    """std::mt19937_64."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & M64
        for i in range(1, 312):
            self.mt[i] = (6364136223846793005 * (self.mt[i - 1] ^ (self.mt[i - 1] >> 62)) + i) & M64
        self.i = 312

    def __call__(self):
        if self.i >= 312:
            mt = self.mt
            for k in range(312):
                y = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                v = mt[(k + 156) % 312] ^ (y >> 1)
                if y & 1:
                    v ^= 0xB5026F5AA96619E9
                mt[k] = v
            self.i = 0
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & M64


def uniform_int(g, urange):
    """libstdc++'s uniform_int_distribution over [0, urange] for a 64-bit generator (Lemire's method)."""
    erange = urange + 1
    if erange > M64:
        return g()
    product = g() * erange
    low = product & M64
    if low < erange:
        threshold = (-erange) % erange
        while low < threshold:
            product = g() * erange
            low = product & M64
    return product >> 64


def shuffle(v, g):
    """libstdc++'s std::shuffle (two swap positions per draw while the range allows)."""
    n = len(v)
    if n == 0:
        return
    if M64 // n >= n:
        i = 1
        if n % 2 == 0:
            j = uniform_int(g, 1)
            v[i], v[j] = v[j], v[i]
            i += 1
        while i != n:
            r = i + 1
            x = uniform_int(g, r * (r + 1) - 1)
            a, b = x // (r + 1), x % (r + 1)
            v[i], v[a] = v[a], v[i]
            i += 1
            v[i], v[b] = v[b], v[i]
            i += 1
        return
    for i in range(1, n):
        j = uniform_int(g, i)
        v[i], v[j] = v[j], v[i]


def tensor_mix():
    out = []
    f = 4
    for _ in range(6):
        out += [8 * 512 * 768 * f, 8 * 512 * 3072 * f, 8 * 12 * 512 * 512 * f, 768 * 768 * f, 768 * 3072 * f, 3072 * f,
                768 * f]
    for c in (64, 128, 256, 512):
        hw = 224 * 64 // c
        out += [8 * c * hw * hw * f, c * c * 9 * f, c * f]
    out += [n * f for n in (1, 7, 100, 1000, 12345)]
    return out


def loguniform_mix():
    g = MT19937_64(42)
    out = []
    for _ in range(400):
        u = g() / 2.0**64  # generate_canonical<double, 53>
        if u >= 1.0:
            u = math.nextafter(1.0, 0.0)
        out.append(int(math.exp2(u * (26.0 - 10.0) + 10.0)))
    return out


def churn(out, mix, seed):
    sizes = tensor_mix() if mix == "tensors" else loguniform_mix()
    tr = Trace(out, f"bench_memory churn, {mix} mix, seed {seed}")
    g = MT19937_64(seed)
    slots = 64
    step = [sizes[g() % len(sizes)] for _ in range(256)]
    live = [None] * slots
    for it in range(40):
        tr.comment(f"iteration {it}")
        shuffle(step, g)
        for n in step:
            slot = g() % slots
            b = tr.alloc(n)
            if live[slot]:
                tr.free(live[slot])
            live[slot] = b
    for b in live:
        if b:
            tr.free(b)
    return tr


def write(kind, out, seed):
    return kv_cache(out) if kind == "kv_cache" else churn(out, kind, seed)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["kv_cache", "loguniform", "tensors"])
    p.add_argument("-o", "--output", default="-", help="the trace to write ('-': standard output)")
    p.add_argument("--seed", type=int, default=7, help="the churn's seed (default 7)")
    p.add_argument("--check", metavar="FILE", help="regenerate and compare with FILE (plain or .gz); exit 1 if it differs")
    a = p.parse_args(argv)
    if a.seed < 0 or a.seed > M64:
        p.error(f"--seed {a.seed} is outside 0 .. {M64}")
    if a.check:
        buf = io.StringIO()
        write(a.kind, buf, a.seed)
        with open(a.check, "rb") as f:
            committed = f.read()
        if a.check.endswith(".gz"):
            committed = gzip.decompress(committed)
        if committed.decode("ascii") != buf.getvalue():
            print(f"pattern_trace: {a.check} differs from what '{a.kind}' generates now; regenerate it "
                  f"(benchmarks/traces/README.md)", file=sys.stderr)
            return 1
        print(f"pattern_trace: {a.check} is what '{a.kind}' generates")
        return 0
    out = sys.stdout if a.output == "-" else open(a.output, "w", encoding="ascii", newline="\n")
    try:
        tr = write(a.kind, out, a.seed)
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"pattern_trace: {a.kind}: {tr.events} events, peak live {tr.peak / 2**20:.2f} MiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
