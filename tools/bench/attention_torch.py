#!/usr/bin/env python3
"""Time PyTorch's scaled_dot_product_attention on the prefill bench's shapes.

Each shape runs twice: with SDPA forced to cuDNN (SDPBackend.CUDNN_ATTENTION)
and forced to flash (SDPBackend.FLASH_ATTENTION). Tensors are allocated as
[B, S, H, D], the layout TileOPs takes, and handed to torch as transposed
[B, H, S, D] views. GQA goes through enable_gqa=True; where a backend refuses
that, the kv heads are repeated (repeat_interleave) and the row says so
("gqa": "repeat_kv"). Causal shapes here have S == Skv, where torch's
top-left causal mask equals our bottom-right one. Varlen shapes are skipped
(SDPA has no packed form).

Times are CUDA-event medians of --runs runs after a warm-up; TFLOP/s counts
4 * B * Hq * S * Skv * D (halved when causal), as tileops-bench-prefill does.

  attention_torch.py --shapes prefill.jsonl --json torch.jsonl [--runs N]

--shapes reads the JSON lines tileops-bench-prefill wrote, so both time the
same shapes; without it the target shapes below are used.
"""
import argparse
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

TARGETS = [
    dict(label="target d128 B4 H32 S4096 non-causal", B=4, S=4096, Skv=4096, Hq=32, Hkv=32,
         D=128, Dv=128, causal=False, dtype="bf16", varlen_seqs=0),
    dict(label="target d128 B4 H32 S4096 causal", B=4, S=4096, Skv=4096, Hq=32, Hkv=32,
         D=128, Dv=128, causal=True, dtype="bf16", varlen_seqs=0),
    dict(label="target d64 B16 H16 S1024 non-causal", B=16, S=1024, Skv=1024, Hq=16, Hkv=16,
         D=64, Dv=64, causal=False, dtype="bf16", varlen_seqs=0),
    dict(label="target d256 B4 H16 S4096 non-causal", B=4, S=4096, Skv=4096, Hq=16, Hkv=16,
         D=256, Dv=256, causal=False, dtype="bf16", varlen_seqs=0),
]

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def flops(s):
    f = 2.0 * s["B"] * s["Hq"] * s["S"] * s["Skv"] * (s["D"] + s["Dv"])
    return f / 2 if s["causal"] else f


def median_ms(fn, runs):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def time_shape(s, backend, runs):
    dt = DTYPES[s["dtype"]]
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(s["B"], s["S"], s["Hq"], s["D"], device="cuda", dtype=dt, generator=gen)
    k = torch.randn(s["B"], s["Skv"], s["Hkv"], s["D"], device="cuda", dtype=dt, generator=gen)
    v = torch.randn(s["B"], s["Skv"], s["Hkv"], s["Dv"], device="cuda", dtype=dt, generator=gen)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    gqa = s["Hq"] != s["Hkv"]
    row = dict(s, bench="prefill", impl="torch-" + backend, supported=False, ms=0.0, tflops=0.0)
    attempts = [("enable_gqa", qt, kt, vt)] if gqa else [("none", qt, kt, vt)]
    if gqa:
        rep = s["Hq"] // s["Hkv"]
        attempts.append(("repeat_kv", qt, kt.repeat_interleave(rep, dim=1),
                         vt.repeat_interleave(rep, dim=1)))
    for how, a, b, c in attempts:
        def run():
            with sdpa_kernel(BACKENDS[backend]):
                return F.scaled_dot_product_attention(a, b, c, is_causal=s["causal"],
                                                      enable_gqa=(how == "enable_gqa"))
        try:
            ms = median_ms(run, runs)
        except RuntimeError as e:
            row["error"] = str(e).splitlines()[0][:200]
            continue
        row.update(supported=True, ms=ms, tflops=flops(s) / (ms * 1e-3) / 1e12, gqa=how)
        row.pop("error", None)
        break
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", help="JSON lines from tileops-bench-prefill")
    ap.add_argument("--json", help="write one JSON line per shape and backend here")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()

    shapes = TARGETS
    if args.shapes:
        shapes = [json.loads(l) for l in open(args.shapes) if l.strip().startswith("{")]
    keep = ("label", "B", "S", "Skv", "Hq", "Hkv", "D", "Dv", "causal", "dtype", "varlen_seqs")
    out = open(args.json, "w") if args.json else None
    for s in shapes:
        s = {k: s[k] for k in keep}
        if s["varlen_seqs"] or (s["causal"] and s["S"] != s["Skv"]):
            continue
        for backend in BACKENDS:
            row = time_shape(s, backend, max(args.runs, 10))
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
        torch.cuda.empty_cache()
    if out:
        out.close()


if __name__ == "__main__":
    sys.exit(main())
