#!/usr/bin/env python3
"""The Llama 3.1 8B model of tileops-example-llama written in PyTorch, timed on
the same shapes: the baseline of scripts/bench-llama.sh.

One decode step (embedding, 32 layers, final norm, LM head, sampling with
temperature and top-p) for a batch of sequences whose KV cache already holds
`context` tokens, as

  eager+graph     the eager step captured in one CUDA graph (torch.cuda.CUDAGraph)
  compile+graph   torch.compile of the step, then captured the same way

and a prefill of a prompt (torch.compile, no graph). The weights are random
bf16 with the example's shapes (fused qkv and gate_up projections, as a fast
PyTorch implementation keeps them); the values do not matter to the time.

Also the copy bandwidth (device to device, read + write bytes over time, as
tools/bench/bench_cuda.c counts it) and the weight-read floor of a decode step
at batch 1: the weights' bytes over that bandwidth.

Every measurement is one JSON line (--json FILE, appended as it is taken, so
a run cut short by a time limit keeps what it measured). Times are medians
of --iters runs after warm-up, from CUDA events.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

from torch_timing import graphed, median_ms

L, H, HQ, HKV, D, I, V = 32, 4096, 32, 8, 128, 14336, 128256
THETA, EPS = 500000.0, 1e-5


def rope_tables(ctx, device):
    """cos, sin [ctx, D/2] with Llama 3's scaled frequencies (rope_type llama3)."""
    i = torch.arange(0, D // 2, dtype=torch.float64)
    f = THETA ** (-2.0 * i / D)
    wavelen = 2 * math.pi / f
    factor, low, high, orig = 8.0, 1.0, 4.0, 8192.0
    smooth = (orig / wavelen - low) / (high - low)
    scaled = torch.where(wavelen > orig / low, f / factor, (1 - smooth) * f / factor + smooth * f)
    f = torch.where(wavelen < orig / high, f, scaled)
    ang = torch.arange(ctx, dtype=torch.float64)[:, None] * f.float().double()[None, :]
    return ang.cos().float().to(device), ang.sin().float().to(device)


class Llama:
    def __init__(self, device):
        g = torch.Generator(device=device).manual_seed(0)

        def w(*shape, scale):
            return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * scale).to(torch.bfloat16)

        s = 1 / math.sqrt(H)
        self.emb = w(V, H, scale=1.0)
        self.lm_head = w(V, H, scale=s)
        self.final_norm = torch.ones(H, device=device, dtype=torch.bfloat16)
        self.layers = []
        for _ in range(L):
            self.layers.append(dict(
                attn_norm=torch.ones(H, device=device, dtype=torch.bfloat16),
                wqkv=w((HQ + 2 * HKV) * D, H, scale=s),
                wo=w(H, HQ * D, scale=s),
                mlp_norm=torch.ones(H, device=device, dtype=torch.bfloat16),
                wgu=w(2 * I, H, scale=s),
                wd=w(H, I, scale=1 / math.sqrt(I)),
            ))

    def weight_bytes(self):
        n = self.emb.numel() + self.lm_head.numel() + self.final_norm.numel()
        for l in self.layers:
            n += sum(t.numel() for t in l.values())
        return 2 * n


def rope(x, cos, sin):
    """neox rotation of x [..., D] by cos, sin [..., D/2] (broadcast)."""
    x1, x2 = x[..., : D // 2].float(), x[..., D // 2:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def sample(logits, temperature, top_p):
    """Temperature, then top-p over the sorted probabilities, then an exponential race."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    sp, si = probs.sort(dim=-1, descending=True)
    keep = (sp.cumsum(-1) - sp) < top_p
    sp = sp * keep
    q = torch.empty_like(sp).exponential_()
    return si.gather(-1, (sp / q).argmax(-1, keepdim=True)).squeeze(-1)


def decode_logits(m, kc, vc, ids, pos, lens, cos, sin):
    """The next-token logits of B sequences; kc, vc [L][B, ctx, HKV, D]; pos, lens [B]."""
    B = ids.shape[0]
    ctx = kc[0].shape[1]
    x = m.emb[ids]
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]
    mask = (torch.arange(ctx, device=ids.device)[None, :] < lens[:, None])[:, None, None, :]
    rows = torch.arange(B, device=ids.device)
    for li, l in enumerate(m.layers):
        h = F.rms_norm(x, (H,), l["attn_norm"], EPS)
        qkv = F.linear(h, l["wqkv"])
        q = qkv[:, : HQ * D].view(B, HQ, D)
        k = qkv[:, HQ * D: (HQ + HKV) * D].view(B, HKV, D)
        v = qkv[:, (HQ + HKV) * D:].view(B, HKV, D)
        q, k = rope(q, c, s), rope(k, c, s)
        kc[li][rows, pos] = k
        vc[li][rows, pos] = v
        o = F.scaled_dot_product_attention(q[:, :, None, :], kc[li].transpose(1, 2),
                                           vc[li].transpose(1, 2), attn_mask=mask,
                                           enable_gqa=True)
        x = x + F.linear(o.reshape(B, HQ * D), l["wo"])
        h = F.rms_norm(x, (H,), l["mlp_norm"], EPS)
        gu = F.linear(h, l["wgu"])
        x = x + F.linear(F.silu(gu[:, :I]) * gu[:, I:], l["wd"])
    return F.linear(F.rms_norm(x, (H,), m.final_norm, EPS), m.lm_head)


def decode_step(m, kc, vc, ids, pos, lens, cos, sin, temperature, top_p):
    """One token for each of B sequences: the forward, then the sampler."""
    return sample(decode_logits(m, kc, vc, ids, pos, lens, cos, sin), temperature, top_p)


def prefill(m, ids, cos, sin):
    """The logits of the last token of one prompt [T] (causal attention within it)."""
    T = ids.shape[0]
    x = m.emb[ids]
    c, s = cos[:T][:, None, :], sin[:T][:, None, :]
    for l in m.layers:
        h = F.rms_norm(x, (H,), l["attn_norm"], EPS)
        qkv = F.linear(h, l["wqkv"])
        q = rope(qkv[:, : HQ * D].view(T, HQ, D), c, s)
        k = rope(qkv[:, HQ * D: (HQ + HKV) * D].view(T, HKV, D), c, s)
        v = qkv[:, (HQ + HKV) * D:].view(T, HKV, D)
        o = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                           is_causal=True, enable_gqa=True)
        x = x + F.linear(o.transpose(0, 1).reshape(T, HQ * D), l["wo"])
        h = F.rms_norm(x, (H,), l["mlp_norm"], EPS)
        gu = F.linear(h, l["wgu"])
        x = x + F.linear(F.silu(gu[:, :I]) * gu[:, I:], l["wd"])
    return F.linear(F.rms_norm(x[-1:], (H,), m.final_norm, EPS), m.lm_head)


def copy_tbps(nbytes=4 << 30):
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(0x5A)
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a), 10, warmup=2)
    del a, b
    return 2 * nbytes / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--contexts", default="1024,4096")
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--modes", default="eager+graph,compile+graph")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-p", type=float, default=0.95)
    a = ap.parse_args()
    out = open(a.json, "a")

    def emit(rec):
        rec["torch"] = torch.__version__
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(json.dumps(rec), flush=True)

    dev = "cuda"
    torch.manual_seed(0)
    bw = copy_tbps()
    m = Llama(dev)
    wb = m.weight_bytes()
    emit({"mode": "floor", "copy_tbps": bw, "weight_bytes": wb,
          "floor_ms": wb / (bw * 1e12) * 1e3})
    ctxs = [int(c) for c in a.contexts.split(",") if c]
    cos, sin = rope_tables(max(ctxs + [a.prefill]) + 1, dev)
    # The prefill first: it is one figure, and the decode loop below is long.
    if a.prefill > 0:
        ids = torch.randint(0, V, (a.prefill,), device=dev)
        pre_c = torch.compile(prefill, dynamic=False)
        try:
            ms = median_ms(lambda: pre_c(m, ids, cos, sin), max(5, a.iters // 2))
            emit({"mode": "prefill", "impl": "compile", "batch": 1, "tokens": a.prefill,
                  "ms": ms, "tokens_per_s": a.prefill / (ms * 1e-3)})
        except Exception as e:
            emit({"mode": "prefill", "impl": "compile", "tokens": a.prefill, "error": repr(e)[:300]})
    # Inductor cannot compile the sampler's argmax over a 128k vocabulary
    # (torch 2.11: "NYI TritonSplitDimKernel reductions"), so the compiled
    # variant compiles the forward and runs the sampler eagerly, both inside
    # the one CUDA graph of the step.
    logits_c = torch.compile(decode_logits, dynamic=False)

    def step_c(m, kc, vc, ids, pos, lens, cos, sin, temperature, top_p):
        return sample(logits_c(m, kc, vc, ids, pos, lens, cos, sin), temperature, top_p)

    for ctx in ctxs:
        for B in [int(b) for b in a.batches.split(",") if b]:
            try:
                kc = [torch.zeros(B, ctx, HKV, D, device=dev, dtype=torch.bfloat16) for _ in range(L)]
                vc = [torch.zeros_like(t) for t in kc]
            except torch.OutOfMemoryError:
                emit({"mode": "decode", "batch": B, "context": ctx, "error": "out of memory"})
                continue
            ids = torch.randint(0, V, (B,), device=dev)
            pos = torch.full((B,), ctx - 1, device=dev, dtype=torch.long)
            lens = pos + 1
            for mode in a.modes.split(","):
                fn = step_c if mode.startswith("compile") else decode_step
                t0 = time.time()
                try:
                    run = graphed(lambda: fn(m, kc, vc, ids, pos, lens, cos, sin,
                                             a.temperature, a.top_p))
                    ms = median_ms(run, a.iters)
                    emit({"mode": "decode", "impl": mode, "batch": B, "context": ctx,
                          "step_ms": ms, "tokens_per_s": B / (ms * 1e-3),
                          "setup_s": time.time() - t0})
                except Exception as e:  # a failed variant must not stop the others
                    emit({"mode": "decode", "impl": mode, "batch": B, "context": ctx,
                          "error": repr(e)[:300]})
            del kc, vc
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
