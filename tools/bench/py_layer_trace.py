"""py_layer_trace.py - where a step of the Python decode layer goes (a dev harness): the layer of
client/python/examples/llama_decode_layer.py (Llama 3.1 8B shapes, batch 1, torch-owned
tensors) on a CUDA tileopsd of its own (the tests' conftest.Daemon).

1. The step timed sustained (N steps back to back, then one torch.cuda.synchronize) in variants
   that leave out or replace its two orderings with torch: as the example runs it; torch_waits
   split into its daemon record (event_record_now) and torch's stream wait, each timed; the
   record without torch's wait; a host sync (client.sync) instead of torch_waits; the ops alone
   (one sync after all the steps).
2. Three steps traced request by request (tileops_trace_start on the Python client's session):
   for every ring entry of the step, in order, its submission, the executor taking it, its launch
   returning, its completion posted and the client waking, in us from the step's first submission.

Run from the repository root with TILEOPSD, TILEOPS_MANIFEST and TILEOPS_LIBRARY set (the packed
binaries' paths):

    python3 tools/bench/py_layer_trace.py [--steps N]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.getcwd(), "client/python"))
sys.path.insert(0, os.path.join(os.getcwd(), "client/python/tests"))
sys.path.insert(0, os.path.join(os.getcwd(), "client/python/examples"))
import torch  # noqa: E402

import llama_decode_layer as ex  # noqa: E402
import tileops  # noqa: E402
import tileops.pytorch as tp  # noqa: E402
from conftest import Daemon  # noqa: E402

KINDS = {1: "op/event", 2: "plan", 3: "sync"}


class Trace(ctypes.Structure):
    """tileops_trace (client/include/tileops.h)."""
    _fields_ = [("kind", ctypes.c_int), ("status", ctypes.c_int), ("executor", ctypes.c_int),
                ("submit_ns", ctypes.c_int64), ("taken_ns", ctypes.c_int64),
                ("launched_ns", ctypes.c_int64), ("posted_ns", ctypes.c_int64),
                ("woke_ns", ctypes.c_int64)]


def sustained_us(f, steps, end=None):
    """Median over 5 repeats of (steps calls of f, then the device synchronized) per call."""
    v = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            f()
        if end is not None:
            end()
        torch.cuda.synchronize()
        v.append((time.perf_counter() - t0) / steps * 1e6)
    return statistics.median(v)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    lib = ctypes.CDLL(os.environ["TILEOPS_LIBRARY"])
    d = Daemon(backend="cuda")
    c = tileops.connect(d.address, name="py_layer_trace")
    tp.set_client(c)
    a = argparse.Namespace(batch=1, hidden=4096, heads=32, kv_heads=8, inter=14336, ctx=1024,
                           steps=args.steps, address=None, device="cuda", breakdown=False)
    layer = ex.Layer(a, torch.device("cuda"), torch.bfloat16)
    x = torch.randn(1, 4096, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16).cuda()
    tl = ex.TileopsLayer(layer, c)
    for _ in range(5):
        tl.step(x)
    torch.cuda.synchronize()
    c.sync()
    bridge = c._torch_bridge()
    split = {"record": 0.0, "wait_event": 0.0, "n": 0}
    real_waits, real_for_torch = tp.torch_waits, tp.wait_for_torch

    def waits_split(client=None, stream=None):
        t0 = time.perf_counter()
        client.event_record_now()
        t1 = time.perf_counter()
        torch.cuda.current_stream().wait_event(bridge.daemon_event)
        t2 = time.perf_counter()
        split["record"] += t1 - t0
        split["wait_event"] += t2 - t1
        split["n"] += 1

    def record_only(client=None, stream=None):
        client.event_record_now()

    def host_sync(client=None, stream=None):
        client.sync()

    def nothing(client=None, stream=None):
        pass

    rows = []
    for name, waits, fortorch in (("as the example runs it", real_waits, True),
                                  ("torch_waits split", waits_split, True),
                                  ("record only, torch does not wait", record_only, True),
                                  ("client.sync instead of torch_waits", host_sync, True),
                                  ("wait_for_torch, no torch_waits", nothing, True),
                                  ("ops alone, one sync at the end", nothing, False)):
        tp.torch_waits = waits
        if not fortorch:
            tp.wait_for_torch = nothing
        us = sustained_us(lambda: tl.step(x), args.steps, end=c.sync)
        rows.append((name, us))
        print("%-40s %8.1f us a step" % (name, us), flush=True)
        if waits is waits_split and split["n"]:
            print("  event_record_now %.1f us, wait_event %.1f us (mean of %d)"
                  % (split["record"] / split["n"] * 1e6, split["wait_event"] / split["n"] * 1e6,
                     split["n"]), flush=True)
    tp.torch_waits, tp.wait_for_torch = real_waits, real_for_torch

    # The trace: three steps as the example runs them.
    for _ in range(3):
        tl.step(x)
    torch.cuda.synchronize()
    c.sync()
    print("trace_start", lib.tileops_trace_start(c._c, ctypes.c_size_t(8192)), flush=True)
    marks = []
    for _ in range(3):
        marks.append(time.monotonic_ns())
        tl.step(x)
    torch.cuda.synchronize()
    c.sync()
    buf = (Trace * 8192)()
    n = ctypes.c_size_t(0)
    print("trace_read", lib.tileops_trace_read(c._c, buf, ctypes.c_size_t(8192), ctypes.byref(n)),
          n.value, flush=True)
    tr = [buf[i] for i in range(n.value)]
    per_step = len(tr) // 3 if tr else 0
    for s in range(3):
        part = tr[s * per_step:(s + 1) * per_step]
        if not part:
            continue
        t0 = part[0].submit_ns
        print("step %d (%d entries; us from its first submission): kind exec submit taken "
              "launched posted woke" % (s, len(part)), flush=True)
        for t in part:
            rel = [(v - t0) / 1e3 if v else float("nan")
                   for v in (t.submit_ns, t.taken_ns, t.launched_ns, t.posted_ns, t.woke_ns)]
            print("  %-8s %d %8.1f %8.1f %8.1f %8.1f %8.1f" % ((KINDS.get(t.kind, t.kind),
                                                                 t.executor) + tuple(rel)),
                  flush=True)
    c.close()
    d.stop()


if __name__ == "__main__":
    main()
