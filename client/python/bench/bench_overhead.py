#!/usr/bin/env python3
"""bench_overhead.py - the per-op time of a small op called from Python
through tileopsd, pipelined, against the same op in eager PyTorch.

    python3 bench_overhead.py [--address ADDR] [--op add|rms_norm] [--n N]
                              [--shape 1,4096] [--dtype bf16] [--repeats R]

Three ways, each N back-to-back calls then one wait, median of R repeats:
  tileops      tileops.ops.<op>(..., out=y, submit=True) on daemon tensors;
  tileops+torch tileops.pytorch.run on registered torch CUDA tensors, with no
               per-op ordering (CUDA backend only);
  torch        the op in eager PyTorch on CUDA tensors (when torch has CUDA).
The target (docs/perf.md) is tileops <= 1.5x torch per op. Prints one JSON
object per way: {"way", "op", "shape", "dtype", "per_op_us", "n", "repeats"}.
"""
import argparse
import json
import statistics
import time

import tileops


def median_per_op(fn, wait, n, repeats):
    fn()
    wait()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        wait()
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--address")
    p.add_argument("--op", default="add", choices=["add", "rms_norm"])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--shape", default="1,4096")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    shape = tuple(int(s) for s in a.shape.split(","))
    out = []

    def report(way, us):
        d = {"way": way, "op": a.op, "shape": list(shape), "dtype": a.dtype,
             "per_op_us": round(us, 3), "n": a.n, "repeats": a.repeats}
        out.append(d)
        print(json.dumps(d), flush=True)

    with tileops.connect(a.address, name="bench_overhead") as c:
        x, y = c.tensor(a.dtype, shape), c.tensor(a.dtype, shape)
        w = c.tensor(a.dtype, shape[-1:])
        if a.op == "add":
            call = lambda: tileops.ops.add(x, x, out=y, submit=True)  # noqa: E731
        else:
            call = lambda: tileops.ops.rms_norm(x, w, eps=1e-5, out=y, submit=True)  # noqa: E731
        report("tileops", median_per_op(call, c.sync, a.n, a.repeats))
        try:
            import torch
        except ImportError:
            return
        if not torch.cuda.is_available():
            return
        import tileops.pytorch as tp
        tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
        tx = torch.randn(shape, device="cuda", dtype=tdt)
        ty, tw = torch.empty_like(tx), torch.ones(shape[-1], device="cuda", dtype=tdt)
        if c.has_cuda_ipc:
            for t in (tx, ty, tw):
                tp.register(t, c)
            if a.op == "add":
                tcall = lambda: tp.run("add", tx, tx, out=ty, client=c, order=False)  # noqa: E731
            else:
                tcall = lambda: tp.run("rms_norm", tx, tw, eps=1e-5, out=ty, client=c,  # noqa: E731
                                       order=False)
            report("tileops+torch", median_per_op(tcall, c.sync, a.n, a.repeats))
        if a.op == "add":
            eager = lambda: torch.add(tx, tx, out=ty)  # noqa: E731
        elif hasattr(torch.nn.functional, "rms_norm"):
            eager = lambda: torch.nn.functional.rms_norm(tx, (shape[-1],), tw, 1e-5)  # noqa: E731
        else:
            def eager():
                xf = tx.float()
                return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(tdt) * tw
        report("torch", median_per_op(eager, torch.cuda.synchronize, a.n, a.repeats))
        per = {d["way"]: d["per_op_us"] for d in out}
        print(json.dumps({"ratio_tileops_over_torch": round(per["tileops"] / per["torch"], 3)}))


if __name__ == "__main__":
    main()
