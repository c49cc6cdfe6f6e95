#!/usr/bin/env python3
"""Time the PyTorch equivalents of tileops-bench's workloads.

Reads the workload list that `tileops-bench --list FILE` writes, so both
programs run the same shapes, dtypes and params, and times each workload
the way tileops-bench does: random inputs in [0.25, 2) (never zeros),
enough copies of the tensors to defeat the 60 MiB L2 (at least 4, and
256 MiB in all), warm-up, then one call on each copy back to back in a
CUDA graph, the median replay over the copies (median_us, the figure
compared), and every call timed alone with CUDA events (single_us) behind
a delay kernel (torch.cuda._sleep, about 200 us: the host has
enqueued the whole call before the device reaches its first event, so the
events time the device work, not the host's launch path; tileops-bench
does the same with 40 us, enough for its one launch), the median
reported; workloads moving under 32 MiB also back to back, 20
calls captured in a CUDA graph, the median replay over 20.

Each workload runs through PyTorch eager and, unless --no-compile, through
torch.compile (the same function, fixed shapes); a failure to compile is
recorded, not fatal. --compile-budget-s caps the time spent compiling.

    python3 torch_baseline.py --workloads wl.json --json torch.json [--op NAME]
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from torch_timing import graph_ms, median_ms

MIB = 1024.0 * 1024.0
GRAPH_CALLS = 20
# Clock cycles of the delay before each timed call (about 200 us at 1.98 GHz).
DELAY_CYCLES = 400000
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}


def make_inputs(w, dev):
    """One set of the workload's tensors (inputs only)."""
    ts = []
    limit = w["inputs"][3]["shape"][0] if len(w["inputs"]) > 3 else 131072
    for t in w["inputs"]:
        dt = DTYPES[t["dtype"]]
        if dt in (torch.int32, torch.int64):
            ts.append(torch.randint(0, limit, t["shape"], device=dev, dtype=dt))
        else:
            ts.append(torch.rand(t["shape"], device=dev, dtype=torch.float32)
                      .mul_(1.75).add_(0.25).to(dt))
    return ts


def rope_fn(neox, rd, theta, cached):
    def rope(q, k, pos, cache=None):
        half = rd // 2
        if cached:
            cs = cache.index_select(0, pos).float()
            cos, sin = cs[:, :half], cs[:, half:]
        else:
            inv = 1.0 / (theta ** (torch.arange(0, rd, 2, device=q.device,
                                                dtype=torch.float32) / rd))
            ang = pos.float()[:, None] * inv[None, :]
            cos, sin = ang.cos(), ang.sin()
        for x in (q, k):
            r = x[..., :rd].float()
            c, s = cos[:, None, :], sin[:, None, :]
            if neox:
                x1, x2 = r[..., :half], r[..., half:]
                out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
            else:
                x1, x2 = r[..., 0::2], r[..., 1::2]
                out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
            x[..., :rd].copy_(out)
    return rope


def op_fn(w):
    """The PyTorch function of a workload; it takes the inputs and returns the outputs."""
    op, p = w["op"], w["params"]
    simple = {
        "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
        "abs": torch.abs, "neg": torch.neg, "reciprocal": torch.reciprocal,
        "sigmoid": torch.sigmoid, "tanh": torch.tanh, "erf": torch.erf, "relu": F.relu,
        "silu": F.silu, "mish": F.mish, "hardswish": F.hardswish,
        "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
        "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow,
    }
    if op in simple:
        return simple[op]
    if op == "gelu":
        return lambda x: F.gelu(x, approximate="tanh" if p["approximate"] else "none")
    if op == "softplus":
        return lambda x: F.softplus(x, beta=p["beta"], threshold=p["threshold"])
    if op == "leaky_relu":
        return lambda x: F.leaky_relu(x, p["negative_slope"])
    if op == "clamp":
        return lambda x: torch.clamp(x, p["min_value"], p["max_value"])
    if op in ("silu_and_mul", "gelu_and_mul"):
        act = F.silu if op == "silu_and_mul" else (
            lambda g: F.gelu(g, approximate="tanh" if p["approximate"] else "none"))

        def gated(x):
            d = x.shape[-1] // 2
            return act(x[..., :d]) * x[..., d:]
        return gated
    if op == "rms_norm":
        return lambda x, wt: F.rms_norm(x, (x.shape[-1],), wt, p["eps"])
    if op == "layer_norm":
        return lambda x, wt, b=None: F.layer_norm(x, (x.shape[-1],), wt, b, p["eps"])
    if op == "fused_add_rms_norm":
        def farms(x, res, wt):
            res.add_(x)
            return F.rms_norm(res, (x.shape[-1],), wt, p["eps"])
        return farms
    if op == "fused_add_layer_norm":
        def faln(x, res, wt, b=None):
            res.add_(x)
            return F.layer_norm(res, (x.shape[-1],), wt, b, p["eps"])
        return faln
    if op == "softmax":
        return lambda x: torch.softmax(x, -1)
    if op == "log_softmax":
        return lambda x: torch.log_softmax(x, p["dim"])
    if op in ("sum", "mean", "amax", "argmax"):
        f = getattr(torch, op)
        return lambda x: f(x, dim=p["dim"], keepdim=p["keepdim"])
    if op.startswith("rope_"):
        return rope_fn(op == "rope_neox", p["rotary_dim"], p["theta"],
                       len(w["inputs"]) > 3)
    if "_pool" in op:
        n = int(op[-2])
        axes = "w" if n == 1 else ("hw" if n == 2 else "dhw")
        k = [p["kernel_" + a] for a in axes]
        s = [p["stride_" + a] for a in axes]
        pad = [p["padding_" + a] for a in axes]
        if op.startswith("max"):
            dil = [p["dilation_" + a] for a in axes]
            f = getattr(F, "max_pool%dd" % n)
            return lambda x: f(x, k, s, pad, dil, ceil_mode=p["ceil_mode"])
        f = getattr(F, "avg_pool%dd" % n)
        return lambda x: f(x, k, s, pad, ceil_mode=p["ceil_mode"],
                           count_include_pad=p["count_include_pad"])
    if op == "quant_fp8_per_tensor":
        def qt(x, given=None):
            scale = x.abs().amax().float() / 448.0 if given is None else given
            q = (x.float() / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
            return q, scale
        return qt
    if op == "quant_fp8_per_token":
        def qk(x):
            scale = x.abs().amax(dim=-1, keepdim=True).float() / 448.0
            q = (x.float() / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
            return q, scale
        return qk
    raise KeyError(op)


def set_bytes(w):
    b = 0
    for t in w["inputs"] + w["outputs"]:
        b += math.prod(t["shape"]) * torch.empty(0, dtype=DTYPES.get(t["dtype"], torch.uint8)).element_size()
    return b


def time_calls(fn, sets, runs):
    for i in range(5):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(runs)]
    for i in range(runs):
        args = sets[(i + 5) % len(sets)]
        torch.cuda._sleep(DELAY_CYCLES)
        ev[i][0].record()
        fn(*args)
        ev[i][1].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)


def time_graph(fn, args, runs):
    return graph_ms(lambda: fn(*args), GRAPH_CALLS, runs) * 1e3


def time_rotated(fn, sets, runs, keep=True):
    """Per-call time of one call on each set, back to back in a CUDA graph
    (a loop of launches with no synchronization when fn cannot be captured).

    Every call's outputs stay alive until the timing ends, so each call
    writes its own memory, as tileops-bench's calls write their own copy of
    the outputs. Freed at once, a call's output would take the block the
    previous call's had (the graph's pool and the caching allocator both
    reuse it), and every call would write the same lines, which then stay
    in L2 when small (`--free-outputs` times them that way: on the H200 it
    made PyTorch's 1 to 10 MiB workloads 4 to 14% faster, those of 32 MiB
    1%). keep=False frees each output at once."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for args in sets[:3]:
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    kept = []
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for args in sets:
                out = fn(*args)
                if keep:
                    kept.append(out)
            del out
        run = g.replay
    except Exception:
        kept = []
        torch.cuda.synchronize()

        def run():
            kept[:] = [fn(*args) for args in sets] if keep else []
    return median_ms(run, runs, warmup=2) * 1e3 / len(sets)


def measure(fn, w, sets, runs, keep=True):
    r = {}
    try:
        r["single_us"] = time_calls(fn, sets, runs)
        us = time_rotated(fn, sets, runs, keep)
        r["median_us"] = us
        r["tbps"] = w["bytes"] / (us * 1e-6) / 1e12
        r["tflops"] = w["flops"] / (us * 1e-6) / 1e12
    except Exception as e:  # recorded, the run goes on
        r["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200])
        return r
    if set_bytes(w) < 32 * MIB:
        try:
            r["graph_us"] = time_graph(fn, sets[0], runs)
        except Exception as e:
            r["graph_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200])
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", required=True, help="tileops-bench --list output")
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--op", help="only ops whose name contains this")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--free-outputs", action="store_true",
                    help="free each call's outputs at once when timing back to back "
                    "(every call then writes the same memory)")
    ap.add_argument("--compile-budget-s", type=float, default=300.0,
                    help="stop compiling new workloads after this many seconds")
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    wls = json.load(open(a.workloads))
    out = {"tool": "torch_baseline", "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": []}
    compile_spent = 0.0
    for w in wls:
        if a.op and a.op not in w["op"]:
            continue
        res = {k: w[k] for k in ("op", "label", "dtype", "inputs", "params", "bytes", "flops")}
        try:
            fn = op_fn(w)
            nsets = min(1024, max(4, math.ceil(256 * MIB / max(set_bytes(w), 1))))
            sets = [make_inputs(w, dev) for _ in range(nsets)]
        except Exception as e:
            res["error"] = "%s: %s" % (type(e).__name__, e)
            out["results"].append(res)
            continue
        res["sets"] = nsets
        res["eager"] = measure(fn, w, sets, a.runs, not a.free_outputs)
        if a.no_compile:
            res["compile"] = {"error": "not run (--no-compile)"}
        elif compile_spent > a.compile_budget_s:
            res["compile"] = {"error": "not run (compile budget spent)"}
        else:
            t0 = time.time()
            try:
                cfn = torch.compile(fn, dynamic=False)
                cfn(*sets[0])
                torch.cuda.synchronize()
                res["compile"] = measure(cfn, w, sets, a.runs, not a.free_outputs)
            except Exception as e:
                res["compile"] = {"error": "%s: %s" % (type(e).__name__,
                                                       str(e).splitlines()[0][:200])}
            compile_spent += time.time() - t0
        print("%-22s %-44s %-5s eager %s us compile %s us" % (
            w["op"], w["label"][:44], w["dtype"],
            "%.2f" % res["eager"]["median_us"] if "median_us" in res["eager"] else "-",
            "%.2f" % res["compile"]["median_us"] if "median_us" in res["compile"] else "-"),
            file=sys.stderr)
        out["results"].append(res)
        del sets
        torch.cuda.empty_cache()
    text = json.dumps(out, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
