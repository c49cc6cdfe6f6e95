#!/usr/bin/env python3
"""llama_decode_layer.py - one Llama decoder layer at decode time, with
torch-owned weights, KV cache and activations, run through tileopsd and
compared with the same layer in plain PyTorch.

    python3 llama_decode_layer.py [--address ADDR] [--device cuda|cpu] [--batch B]
                                  [--hidden H] [--heads HQ] [--kv-heads HKV]
                                  [--inter I] [--ctx S] [--steps N] [--breakdown]

On the CUDA backend (a GPU, torch with CUDA, --device cuda) every tensor
stays where torch put it: the weights, the cache and fixed activation
buffers are imported once (tileops.pytorch.register, zero-copy at their
offsets in torch's caching allocator) and each step orders itself with
torch's stream by one IPC event each way, with no host sync: both events
are opened once, the ops are submitted without waiting for the daemon's
answers (tp.run(..., submit=True): a refusal is raised by the step's
tp.torch_waits, or by the sync at the end on the CPU backend), and the
waits and the record go through the rings like the ops. On the CPU
backend (--device cpu, small shapes) each op copies its tensors through the
arena. Prints the largest difference from PyTorch, which must be within
bf16 tolerance (exit 1 otherwise), and the time per step of both.
--breakdown adds where the tileopsd step's host time goes: the tp.run calls
(per op, summed over a step), tp.wait_for_torch and tp.torch_waits, and
the rest of the step's wall time (the copy in, the Python between calls,
the device sync that ends the timed steps).
"""
import argparse
import collections
import math
import sys
import time

import torch

import tileops
import tileops.pytorch as tp


def rope_ref(x, pos, theta):
    d = x.shape[-1]
    half = d // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float32, device=x.device) * 2 / d)
    ang = pos.to(torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


def rms_ref(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


class Layer:
    """The weights, cache and buffers of one layer, all torch tensors."""

    def __init__(self, a, dev, dt):
        g = torch.Generator().manual_seed(1)

        def w(*shape, scale=None):
            s = scale if scale is not None else 1 / math.sqrt(shape[-1])
            return (torch.randn(*shape, generator=g) * s).to(dt).to(dev)

        H, D = a.hidden, a.hidden // a.heads
        self.a, self.D = a, D
        self.w_in, self.w_post = w(H, scale=1.0) + 1, w(H, scale=1.0) + 1
        self.wq, self.wk, self.wv = w(a.heads * D, H), w(a.kv_heads * D, H), w(a.kv_heads * D, H)
        self.wo = w(H, a.heads * D)
        self.w_gate_up, self.w_down = w(2 * a.inter, H), w(H, a.inter)
        self.k_cache = w(a.batch, a.ctx, a.kv_heads, D, scale=1.0)
        self.v_cache = w(a.batch, a.ctx, a.kv_heads, D, scale=1.0)
        self.pos = torch.full((a.batch,), a.ctx // 2, dtype=torch.int64, device=dev)


def torch_step(L, x):
    a, D = L.a, L.D
    B = x.shape[0]
    h = rms_ref(x, L.w_in, 1e-5)
    q = torch.nn.functional.linear(h, L.wq).view(B, a.heads, D)
    k = torch.nn.functional.linear(h, L.wk).view(B, a.kv_heads, D)
    v = torch.nn.functional.linear(h, L.wv).view(B, a.kv_heads, D)
    q, k = rope_ref(q, L.pos, 500000.0), rope_ref(k, L.pos, 500000.0)
    kc, vc = L.k_cache.clone(), L.v_cache.clone()
    b = torch.arange(B, device=x.device)
    kc[b, L.pos], vc[b, L.pos] = k, v
    n = int(L.pos[0]) + 1
    rep = a.heads // a.kv_heads
    kk = kc[:, :n].float().repeat_interleave(rep, dim=2)      # [B, n, Hq, D]
    vv = vc[:, :n].float().repeat_interleave(rep, dim=2)
    s = torch.einsum("bhd,bnhd->bhn", q.float(), kk) / math.sqrt(D)
    attn = torch.einsum("bhn,bnhd->bhd", s.softmax(-1), vv).to(x.dtype)
    o = x + torch.nn.functional.linear(attn.reshape(B, a.heads * D), L.wo)
    h2 = rms_ref(o, L.w_post, 1e-5)
    gu = torch.nn.functional.linear(h2, L.w_gate_up)
    act = (torch.nn.functional.silu(gu[:, :a.inter].float()) * gu[:, a.inter:].float()).to(x.dtype)
    return o + torch.nn.functional.linear(act, L.w_down)


class TileopsLayer:
    """The same layer through tileopsd, over the same torch tensors."""

    def __init__(self, L, client):
        a, D, dev, dt = L.a, L.D, L.w_in.device, L.w_in.dtype
        B = a.batch
        self.L, self.c = L, client
        self.k_cache, self.v_cache = L.k_cache.clone(), L.v_cache.clone()
        e = lambda *s, dtype=dt: torch.empty(*s, dtype=dtype, device=dev)  # noqa: E731
        self.x, self.h = e(B, a.hidden), e(B, a.hidden)
        self.q, self.k, self.v = e(B, a.heads * D), e(B, a.kv_heads * D), e(B, a.kv_heads * D)
        self.attn, self.o, self.h2 = e(B, a.heads, D), e(B, a.hidden), e(B, a.hidden)
        self.gu, self.act, self.out = e(B, 2 * a.inter), e(B, a.inter), e(B, a.hidden)
        self.slots = torch.arange(B, device=dev) * a.ctx + L.pos
        self.lens = (L.pos + 1).to(torch.int32)
        self.q3, self.k3 = self.q.view(B, a.heads, D), self.k.view(B, a.kv_heads, D)
        self.v3 = self.v.view(B, a.kv_heads, D)
        self.attn2 = self.attn.view(B, a.heads * D)
        if client.has_cuda_ipc:
            # Imported once; run() finds them again by address, dtype and shape.
            for t in (L.w_in, L.w_post, L.wq, L.wk, L.wv, L.wo, L.w_gate_up, L.w_down,
                      self.k_cache, self.v_cache, self.x, self.h, self.q, self.k, self.v,
                      self.attn, self.o, self.h2, self.gu, self.act, self.out, self.slots,
                      self.lens, self.q3, self.k3, self.v3, self.attn2, L.pos):
                tp.register(t, client)

    times = None  # --breakdown: {what: host seconds summed over steps}

    def step(self, x):
        L, c = self.L, self.c
        T, clock = self.times, time.perf_counter
        if T is None:
            r = lambda op, *a, **k: tp.run(op, *a, client=c, order=False, submit=True,  # noqa: E731
                                           **k)
            ev = lambda f: f(c)  # noqa: E731
        else:
            def r(op, *a, **k):
                t0 = clock()
                tp.run(op, *a, client=c, order=False, submit=True, **k)
                T["run " + op] += clock() - t0

            def ev(f):
                t0 = clock()
                f(c)
                T[f.__name__] += clock() - t0
        self.x.copy_(x)
        if c.has_cuda_ipc:
            ev(tp.wait_for_torch)  # the daemon's ops wait for the copy above
        r("rms_norm", self.x, L.w_in, eps=1e-5, out=self.h)
        r("gemm", self.h, L.wq, trans_b=True, out=self.q)
        r("gemm", self.h, L.wk, trans_b=True, out=self.k)
        r("gemm", self.h, L.wv, trans_b=True, out=self.v)
        r("rope_neox", self.q3, self.k3, L.pos, rotary_dim=L.D, theta=500000.0)
        r("kv_cache_append", self.k3, self.v3, self.slots, self.k_cache, self.v_cache)
        r("attention_decode", self.q3, self.k_cache, self.v_cache, self.lens, out=self.attn)
        r("gemm", self.attn2, L.wo, None, self.x, trans_b=True, out=self.o)
        r("rms_norm", self.o, L.w_post, eps=1e-5, out=self.h2)
        r("gemm", self.h2, L.w_gate_up, trans_b=True, out=self.gu)
        r("silu_and_mul", self.gu, out=self.act)
        r("gemm", self.act, L.w_down, None, self.o, trans_b=True, out=self.out)
        if c.has_cuda_ipc:
            ev(tp.torch_waits)    # torch's later kernels see self.out
        else:
            c.sync()  # a refused op's error (the copies back have waited already)
        return self.out


def print_breakdown(times, step_us, steps):
    """Host time a step, from what step() summed with --breakdown: each op's
    tp.run calls, each event call, and the rest of the step's wall time
    (the copy in, Python between the calls, the final device sync)."""
    per = {k: v / steps * 1e6 for k, v in times.items()}
    runs = sum(v for k, v in per.items() if k.startswith("run "))
    events = sum(v for k, v in per.items() if not k.startswith("run "))
    print("breakdown per step (host us): tp.run %.1f, events %.1f, rest %.1f, of %.1f"
          % (runs, events, step_us - runs - events, step_us))
    for k in sorted(per, key=per.get, reverse=True):
        print("  %-28s %8.1f us" % (k, per[k]))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--address")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--inter", type=int, default=512)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--breakdown", action="store_true",
                   help="also print where a tileopsd step's host time goes: in the tp.run "
                        "calls (per op), the event calls and the rest")
    a = p.parse_args(argv)
    dev, dt = torch.device(a.device), torch.bfloat16
    with tileops.connect(a.address, name="llama_decode_layer") as c:
        if dev.type == "cuda" and not c.has_cuda_ipc:
            sys.exit("the daemon runs the %s backend: use --device cpu" % c.backend)
        L = Layer(a, dev, dt)
        x = (torch.randn(a.batch, a.hidden, generator=torch.Generator().manual_seed(2))).to(dt).to(dev)
        ref = torch_step(L, x)
        tl = TileopsLayer(L, c)
        got = tl.step(x)
        err = (got.float() - ref.float()).abs().max().item()
        scale = ref.float().abs().max().item()
        print("max |tileops - torch| = %.4g (output max %.3g)" % (err, scale))

        def timeit(f, after_warmup=None):
            f()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if after_warmup is not None:
                after_warmup()
            t0 = time.perf_counter()
            for _ in range(a.steps):
                f()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - t0) / a.steps * 1e6

        def reset():
            tl.times = collections.defaultdict(float) if a.breakdown else None

        t_torch = timeit(lambda: torch_step(L, x))
        t_tileops = timeit(lambda: tl.step(x), reset)
        print("per step: torch %.1f us, tileopsd %.1f us (%s backend, batch %d, hidden %d)"
              % (t_torch, t_tileops, c.backend, a.batch, a.hidden))
        if a.breakdown:
            print_breakdown(tl.times, t_tileops, a.steps)
            tl.times = None
        ok = err <= 0.03 * max(scale, 1.0)
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
