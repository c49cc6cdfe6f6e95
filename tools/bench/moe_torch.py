#!/usr/bin/env python3
"""moe_torch.py - the PyTorch side of scripts/bench-moe.sh: one MoE layer of
Qwen3-30B-A3B, Mixtral-8x7B and DeepSeek-V2-Lite in bf16 on the GPU, at the
given token counts, as

  loop        the per-expert loop of the reference models (Hugging Face's
              Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock, DeepseekV2MoE):
              for each expert hit, its tokens through silu(x W1) * (x W3) W2,
              added back with the routing weights
  grouped_mm  the same layer on torch._grouped_mm (tokens sorted by expert, one
              grouped GEMM for gate-up and one for down), where this torch has it
  floor       the active experts' weights (min(E, T*k) experts, each read once)
              over the copy bandwidth measured in the same run

plus the gate-up grouped GEMM alone on torch._grouped_mm (its TFLOP/s, the
comparison for moe_gate_up at prefill). Writes one JSON object a line.

    moe_torch.py --json OUT [--models a,b] [--tokens 1,8,64,4096] [--iters N]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

from torch_timing import median_ms

MODELS = {
    # hidden, experts, top-k, expert intermediate, shared intermediate, renormalise
    "qwen3-30b-a3b": (2048, 128, 8, 768, 0, True),
    "mixtral-8x7b": (4096, 8, 2, 14336, 0, True),
    "deepseek-v2-lite": (2048, 64, 6, 1408, 2 * 1408, False),
}


def copy_tbps():
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 10)
    del src, dst
    return 2 * n / (ms * 1e-3) / 1e12


class Layer:
    def __init__(self, name):
        self.H, self.E, self.K, self.I, self.S, self.renorm = MODELS[name]
        g = torch.Generator(device="cuda").manual_seed(1)
        mk = lambda *s: (torch.randn(*s, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
        self.gate = mk(self.E, self.H)
        self.w13 = mk(self.E, 2 * self.I, self.H)  # gate rows, then up rows (vLLM's w13)
        self.w2 = mk(self.E, self.H, self.I)
        if self.S:
            self.s13, self.s2 = mk(2 * self.S, self.H), mk(self.H, self.S)

    def route(self, x):
        p = torch.softmax(F.linear(x, self.gate).float(), dim=-1)
        w, ids = torch.topk(p, self.K, dim=-1)
        if self.renorm:
            w = w / w.sum(-1, keepdim=True)
        return w, ids

    def shared(self, x, out):
        if self.S:
            g = F.linear(x, self.s13)
            out += F.linear(F.silu(g[:, : self.S]) * g[:, self.S:], self.s2)
        return out

    def loop(self, x):
        w, ids = self.route(x)
        out = torch.zeros_like(x)
        mask = F.one_hot(ids, self.E).permute(2, 1, 0)  # [E, K, T]
        for e in torch.nonzero(mask.sum(dim=(-1, -2))).flatten().tolist():
            slot, tok = torch.where(mask[e])
            xe = x[tok]
            g = F.linear(xe, self.w13[e])
            y = F.linear(F.silu(g[:, : self.I]) * g[:, self.I:], self.w2[e])
            out.index_add_(0, tok, (y * w[tok, slot, None]).to(x.dtype))
        return self.shared(x, out)

    def sorted_rows(self, x):
        w, ids = self.route(x)
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        counts = torch.bincount(flat, minlength=self.E)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        return w, order, offs

    def grouped(self, x):
        w, order, offs = self.sorted_rows(x)
        xs = x[order // self.K]
        g = torch._grouped_mm(xs, self.w13.transpose(1, 2), offs=offs)
        h = F.silu(g[:, : self.I]) * g[:, self.I:]
        y = torch._grouped_mm(h, self.w2.transpose(1, 2), offs=offs)
        out = torch.zeros(x.shape[0] * self.K, self.H, device="cuda", dtype=torch.float32)
        out[order] = y.float()
        out = (out.view(-1, self.K, self.H) * w[..., None]).sum(1).to(x.dtype)
        return self.shared(x, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tokens", default="1,8,64,4096")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    rows = []
    bw = copy_tbps()
    have_grouped = hasattr(torch, "_grouped_mm")
    rows.append({"mode": "env", "torch": torch.__version__, "copy_tbps": bw,
                 "grouped_mm": have_grouped, "gpu": torch.cuda.get_device_name()})
    for name in a.models.split(","):
        layer = Layer(name)
        for T in [int(t) for t in a.tokens.split(",")]:
            x = torch.randn(T, layer.H, device="cuda").to(torch.bfloat16)
            active = min(layer.E, T * layer.K)
            wbytes = 2 * (active * 3 * layer.I * layer.H + 3 * layer.S * layer.H)
            base = {"model": name, "tokens": T}
            rows.append(dict(base, mode="floor", weight_bytes=wbytes,
                             floor_ms=wbytes / (bw * 1e12) * 1e3))
            with torch.no_grad():
                rows.append(dict(base, mode="loop", ms=median_ms(lambda: layer.loop(x), a.iters)))
                if have_grouped:
                    try:
                        ref = layer.loop(x).float()
                        got = layer.grouped(x).float()
                        err = ((got - ref).norm() / ref.norm()).item()
                        rows.append(dict(base, mode="grouped_mm", rel_err=err,
                                         ms=median_ms(lambda: layer.grouped(x), a.iters)))
                        w, order, offs = layer.sorted_rows(x)
                        xs = x[order // layer.K]
                        wt = layer.w13.transpose(1, 2)
                        ms = median_ms(lambda: torch._grouped_mm(xs, wt, offs=offs), a.iters)
                        fl = 2.0 * T * layer.K * 2 * layer.I * layer.H
                        rows.append(dict(base, mode="grouped_mm_gate_up", ms=ms,
                                         tflops=fl / (ms * 1e-3) / 1e12))
                    except (RuntimeError, TypeError) as e:
                        rows.append(dict(base, mode="grouped_mm", error=str(e)[:200]))
            print(json.dumps(rows[-1]), file=sys.stderr)
        del layer
        torch.cuda.empty_cache()
    with open(a.json, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
