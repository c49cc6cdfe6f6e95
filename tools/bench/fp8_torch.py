#!/usr/bin/env python3
"""fp8_torch.py - the PyTorch side of scripts/bench-fp8.sh: every gemm_fp8
workload of the list `tileops-bench --family gemm_fp8 --list FILE` writes, as

  scaled_mm   torch._scaled_mm (cuBLASLt) at the workload's scale layout:
              per tensor (scalar scales) or rowwise ([M, 1] x [1, N]), bf16 out;
              128-block workloads where this torch has blockwise scaling
              (1x128 activations, 128x128 weights), else left out
  bf16        torch.nn.functional.linear on bf16 operands of the same shape

Each is timed two ways, rotating over enough copies of the operands that the
L2 does not hold the weight: replayed from a CUDA graph of 20 calls
(torch_timing.graph_ms; scaled_mm_us, bf16_us: the figures compared, since
ours are timed in graphs too) and called eagerly back to back
(torch_timing.median_ms; scaled_mm_eager_us, bf16_eager_us: what a model
calling them from Python gets, host dispatch included). Writes
one JSON object a line, keyed by the workload's label, so the table can be
joined with tileops-bench-fp8's and tileops-bench's rows.

    fp8_torch.py --workloads LIST.json --json OUT [--iters N]
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

from torch_timing import graph_ms, median_ms

L2_ROTATE_BYTES = 256 << 20


def rotating(make, set_bytes):
    """Copies of an operand set and a function giving the next one each call."""
    n = max(2, min(64, -(-L2_ROTATE_BYTES // max(set_bytes, 1))))
    sets = [make() for _ in range(n)]
    state = {"i": 0}

    def nxt():
        s = sets[state["i"] % n]
        state["i"] += 1
        return s
    return nxt


def fp8(*shape):
    return (torch.rand(*shape, device="cuda") * 1.75 + 0.25).to(torch.float8_e4m3fn)


def time_scaled_mm(m, n, k, layout, iters):
    f32 = dict(device="cuda", dtype=torch.float32)

    def make():
        a, b = fp8(m, k), fp8(n, k)
        if layout == 0:
            sa, sb = torch.tensor(0.01, **f32), torch.tensor(0.01, **f32)
        elif layout == 1:
            sa, sb = torch.full((m, 1), 0.01, **f32), torch.full((1, n), 0.01, **f32)
        else:
            # blockwise: a 1x128 (outer-dim major), b 128x128, as torch documents them
            sa = torch.full((k // 128, m), 0.01, **f32).t()
            sb = torch.full((n // 128, k // 128), 0.01, **f32)
        return a, b.t(), sa, sb
    nxt = rotating(make, m * k + n * k)

    def call():
        a, bt, sa, sb = nxt()
        return torch._scaled_mm(a, bt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    call()  # raises where this torch cannot run the layout
    return graph_ms(call) * 1e3, median_ms(call, iters) * 1e3


def time_bf16(m, n, k, iters):
    def make():
        return (torch.rand(m, k, device="cuda", dtype=torch.bfloat16),
                torch.rand(n, k, device="cuda", dtype=torch.bfloat16))
    nxt = rotating(make, 2 * (m * k + n * k))
    return graph_ms(lambda: F.linear(*nxt())) * 1e3, median_ms(lambda: F.linear(*nxt()), iters) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    wl = [w for w in json.load(open(args.workloads)) if w["op"] == "gemm_fp8"]
    out = open(args.json, "w")
    out.write(json.dumps({"mode": "env", "torch": torch.__version__,
                          "device": torch.cuda.get_device_name()}) + "\n")
    for w in wl:
        (m, k), n = w["inputs"][0]["shape"], w["inputs"][1]["shape"][0]
        layout = w["params"].get("scale_layout", 0)
        if len(w["inputs"]) > 4:
            continue  # bias and residual: cuBLASLt's epilogues differ; not compared
        row = {"label": w["label"], "m": m, "n": n, "k": k, "layout": layout}
        try:
            row["scaled_mm_us"], row["scaled_mm_eager_us"] = time_scaled_mm(m, n, k, layout,
                                                                            args.iters)
        except (RuntimeError, TypeError, ValueError) as e:
            row["scaled_mm_error"] = str(e).splitlines()[0][:200]
        row["bf16_us"], row["bf16_eager_us"] = time_bf16(m, n, k, args.iters)
        out.write(json.dumps(row) + "\n")
        out.flush()
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
