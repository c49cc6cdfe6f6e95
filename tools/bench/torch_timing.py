"""torch_timing.py - device time of a PyTorch callable, as the model benches
(llama_torch.py, moe_torch.py) measure their baselines.

The calls are issued back to back with a CUDA event pair around each and one
synchronize at the end, so the GPU never idles between them: timed with a sync
after every call, a kernel runs cooler and faster than it does under load, and
the baseline would be flattered.
"""
import statistics

import torch


def median_ms(fn, iters, warmup=3):
    """Median milliseconds of one call of fn over iters sustained calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)



def graphed(fn, calls=1):
    """The replay of one CUDA graph of `calls` back-to-back calls of fn, captured
    after three warm-up calls on a side stream (fn's operands are tensors it
    closes over, or picks in turn)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g.replay


def graph_ms(fn, calls=20, iters=10):
    """Median milliseconds of one call of fn, replayed from one CUDA graph of
    `calls` back-to-back calls (each call may pick its own operands), so that
    host dispatch drops out as it does for a kernel timed in a graph."""
    return median_ms(graphed(fn, calls), iters) / calls
