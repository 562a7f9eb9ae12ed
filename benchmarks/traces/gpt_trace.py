#!/usr/bin/env python3
"""Writes GPT-style allocation traces in the clpool trace format (docs/TRACE_FORMAT.md).

  gpt_trace.py training  [-o OUT] [--steps N] [--seed S]   a training loop, sequence length varying per batch
  gpt_trace.py inference [-o OUT] [--requests N] [--seed S] decoding whose KV cache grows by re-allocation

The model is GPT-2 small as an eager framework allocates for it: 12 layers, width 768, 12 heads,
vocabulary 50257, batch 8; fp32 master weights and Adam states, fp16 activations. Training: each
step draws a sequence length (128 .. 1024, a multiple of 64), keeps every activation the backward
needs, frees it as the backward passes its layer, and frees the weight gradients after the
optimizer (zero_grad(set_to_none=True)). Inference: per request a prompt (64 .. 512 tokens) and
48 .. 96 generated tokens; each new token re-allocates each layer's K and V one token longer
and frees the old ones (torch.cat), the pattern that defeats size-class caching.

Deterministic: a fixed-seed splitmix64, no library random, so the same arguments give the same
bytes on every Python 3. Standard library only. The defaults write about 18 000 (training) and 60 000 (inference) events.
"""

import argparse
import gzip
import io
import sys

V, D, H, L, B, CTX = 50257, 768, 12, 12, 8, 1024
F16, F32, I64 = 2, 4, 8


class Rng:
    """splitmix64: stable across Python versions, unlike random's methods."""

    def __init__(self, seed):
        self.s = seed & (2**64 - 1)

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    def uniform(self, lo, hi):  # an integer in [lo, hi]
        return lo + self.next() % (hi - lo + 1)


class Trace:
    def __init__(self, out):
        self.out = out
        self.t = 0
        self.next_id = 1
        self.live = 0
        self.peak = 0
        self.events = 0
        out.write("clpool-trace 1\n")

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


def layer_params():
    # (rows, cols) of each weight and bias of one transformer block.
    return [(D,), (D,), (D, 3 * D), (3 * D,), (D, D), (D,), (D,), (D,), (D, 4 * D), (4 * D,), (4 * D, D), (D,)]


def numel(shape):
    n = 1
    for x in shape:
        n *= x
    return n


def all_params():
    shapes = [(V, D), (CTX, D)]
    for _ in range(L):
        shapes += layer_params()
    return shapes + [(D,), (D,)]  # the final layer norm


def training(out, steps, seed):
    rng = Rng(seed)
    tr = Trace(out)
    tr.comment(f"GPT-2 small training, batch {B}, sequence length 128..1024 per step, {steps} steps, seed {seed}")
    tr.comment("written by benchmarks/traces/gpt_trace.py training")
    params = [tr.alloc(numel(s) * F32) for s in all_params()]  # fp32 master weights, live throughout
    adam = []  # exp_avg and exp_avg_sq, made on the first optimizer step
    for step in range(steps):
        s = 64 * rng.uniform(2, 16)
        T = B * s
        tr.comment(f"step {step}: sequence length {s}")
        weights16 = [tr.alloc(numel(sh) * F16) for sh in all_params()]  # autocast copies of the weights
        tokens, targets = tr.alloc(T * I64), tr.alloc(T * I64)
        x = tr.alloc(T * D * F16)  # embeddings: saved
        saved = []  # per layer, the activations the backward needs
        for _ in range(L):
            keep = []
            mean = tr.alloc(T * F32)
            rstd = tr.alloc(T * F32)
            ln1 = tr.alloc(T * D * F16)
            qkv = tr.alloc(T * 3 * D * F16)
            scores = tr.alloc(B * H * s * s * F16)
            probs = tr.alloc(B * H * s * s * F16)
            mask = tr.alloc(B * H * s * s)  # attention dropout mask (bytes)
            ctx = tr.alloc(T * D * F16)
            proj = tr.alloc(T * D * F16)
            resid1 = tr.alloc(T * D * F16)
            tr.free(proj)  # added into the residual
            ln2 = tr.alloc(T * D * F16)
            mean2, rstd2 = tr.alloc(T * F32), tr.alloc(T * F32)
            fc1 = tr.alloc(T * 4 * D * F16)
            gelu = tr.alloc(T * 4 * D * F16)
            fc2 = tr.alloc(T * D * F16)
            mask2 = tr.alloc(T * D)
            resid2 = tr.alloc(T * D * F16)
            tr.free(fc2)
            keep = [mean, rstd, ln1, qkv, scores, probs, mask, ctx, resid1, ln2, mean2, rstd2, fc1, gelu, mask2, resid2]
            saved.append(keep)
        lnf = tr.alloc(T * D * F16)
        logits = tr.alloc(T * V * F16)
        logp = tr.alloc(T * V * F32)  # log_softmax in fp32: saved
        loss = tr.alloc(F32)
        # backward
        grad_logp = tr.alloc(T * V * F32)
        tr.free(loss)
        grad_logits = tr.alloc(T * V * F16)
        tr.free(grad_logp)
        tr.free(logp)
        grads = {}  # weight gradients, fp32, accumulated until the optimizer
        g_wte = tr.alloc(V * D * F32)
        grad_x = tr.alloc(T * D * F16)
        tr.free(grad_logits)
        tr.free(logits)
        tr.free(lnf)
        for layer in reversed(range(L)):
            keep = saved.pop()
            for shape in layer_params():
                grads[(layer, shape, len(grads))] = tr.alloc(numel(shape) * F32)
            # the gradient of each activation as the backward passes it, freed once used
            g_mlp = tr.alloc(T * 4 * D * F16)
            g_mlp2 = tr.alloc(T * 4 * D * F16)
            tr.free(g_mlp)
            g_ln2 = tr.alloc(T * D * F16)
            tr.free(g_mlp2)
            g_scores = tr.alloc(B * H * s * s * F16)
            g_probs = tr.alloc(B * H * s * s * F16)
            tr.free(g_scores)
            g_qkv = tr.alloc(T * 3 * D * F16)
            tr.free(g_probs)
            g_new = tr.alloc(T * D * F16)
            tr.free(g_qkv)
            tr.free(g_ln2)
            tr.free(grad_x)
            grad_x = g_new
            for a in reversed(keep):
                tr.free(a)
        g_wpe = tr.alloc(CTX * D * F32)
        tr.free(grad_x)
        tr.free(x)
        tr.free(tokens)
        tr.free(targets)
        # optimizer: Adam states on the first step, a temporary per parameter
        if not adam:
            adam = [tr.alloc(numel(sh) * F32) for sh in all_params() for _ in range(2)]
        for sh in all_params():
            tmp = tr.alloc(numel(sh) * F32)
            tr.free(tmp)
        for g in list(grads.values()) + [g_wte, g_wpe]:
            tr.free(g)
        for w in weights16:
            tr.free(w)
    tr.comment(f"peak live {tr.peak} bytes, {tr.events} events")
    del params, adam  # live at the end, as a process's weights are
    return tr


def inference(out, requests, seed):
    rng = Rng(seed)
    tr = Trace(out)
    tr.comment(f"GPT-2 small inference, batch {B}, {requests} requests, KV cache grown by re-allocation, seed {seed}")
    tr.comment("written by benchmarks/traces/gpt_trace.py inference")
    weights = [tr.alloc(numel(s) * F16) for s in all_params()]
    for r in range(requests):
        prompt = rng.uniform(64, 512)
        new = rng.uniform(48, 96)
        tr.comment(f"request {r}: prompt {prompt} tokens, {new} generated")
        kv = []
        # prefill: the whole prompt at once
        T = B * prompt
        x = tr.alloc(T * D * F16)
        for _ in range(L):
            qkv = tr.alloc(T * 3 * D * F16)
            k, v = tr.alloc(T * D * F16), tr.alloc(T * D * F16)
            kv.append([k, v])
            scores = tr.alloc(B * H * prompt * prompt * F16)
            ctx = tr.alloc(T * D * F16)
            tr.free(scores)
            tr.free(qkv)
            h = tr.alloc(T * 4 * D * F16)
            y = tr.alloc(T * D * F16)
            tr.free(h)
            tr.free(ctx)
            tr.free(x)
            x = y
        logits = tr.alloc(B * V * F16)  # the last position only
        tr.free(x)
        tr.free(logits)
        # decode: one token at a time
        for i in range(new):
            s = prompt + i + 1
            x = tr.alloc(B * D * F16)
            for layer in range(L):
                qkv = tr.alloc(B * 3 * D * F16)
                for j in range(2):  # K, then V: torch.cat makes a longer tensor, the old one is freed
                    grown = tr.alloc(B * s * D * F16)
                    tr.free(kv[layer][j])
                    kv[layer][j] = grown
                scores = tr.alloc(B * H * s * F16)
                ctx = tr.alloc(B * D * F16)
                tr.free(scores)
                tr.free(qkv)
                h = tr.alloc(B * 4 * D * F16)
                y = tr.alloc(B * D * F16)
                tr.free(h)
                tr.free(ctx)
                tr.free(x)
                x = y
            logits = tr.alloc(B * V * F16)
            token = tr.alloc(B * I64)
            tr.free(logits)
            tr.free(x)
            tr.free(token)
        for pair in kv:
            for t in pair:
                tr.free(t)
    tr.comment(f"peak live {tr.peak} bytes, {tr.events} events")
    del weights
    return tr


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["training", "inference"])
    p.add_argument("-o", "--output", default="-", help="the trace to write ('-': standard output)")
    p.add_argument("--steps", type=int, default=12, help="training steps (default 12)")
    p.add_argument("--requests", type=int, default=4, help="inference requests (default 4)")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--check", metavar="FILE", help="regenerate and compare with FILE (plain or .gz); exit 1 if it differs")
    a = p.parse_args(argv)
    if a.steps < 1 or a.requests < 1:
        p.error("--steps and --requests must be at least 1")
    if a.check:
        buf = io.StringIO()
        training(buf, a.steps, a.seed) if a.kind == "training" else inference(buf, a.requests, a.seed)
        with open(a.check, "rb") as f:
            committed = f.read()
        if a.check.endswith(".gz"):
            committed = gzip.decompress(committed)
        if committed.decode("ascii") != buf.getvalue():
            print(f"gpt_trace: {a.check} differs from what '{a.kind}' generates now; regenerate it "
                  f"(benchmarks/traces/README.md)", file=sys.stderr)
            return 1
        print(f"gpt_trace: {a.check} is what '{a.kind}' generates")
        return 0
    out = sys.stdout if a.output == "-" else open(a.output, "w", encoding="ascii", newline="\n")
    try:
        tr = training(out, a.steps, a.seed) if a.kind == "training" else inference(out, a.requests, a.seed)
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"gpt_trace: {a.kind}: {tr.events} events, peak live {tr.peak / 2**30:.2f} GiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
