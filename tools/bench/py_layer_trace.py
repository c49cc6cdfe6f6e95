"""py_layer_trace.py - the decode layer of client/python/examples/llama_decode_layer.py (Llama
3.1 8B shapes, batch 1, torch-owned tensors) traced request by request on the GPU (a dev
harness): tileops_trace_start on the Python client's session, ten steps after five of warm-up,
then for each of the step's twelve ops the median time from its submission to the executor
taking it ("ring"), to its launch returning ("launch") and to its completion posted ("post"),
and each step's span from its first op taken to its last launched. Run from the repository
root with TILEOPSD, TILEOPS_MANIFEST and TILEOPS_LIBRARY set (the packed binaries' paths):

    python3 tools/bench/py_layer_trace.py
"""
import argparse
import ctypes
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.getcwd(), "client/python"))
sys.path.insert(0, os.path.join(os.getcwd(), "client/python/tests"))
sys.path.insert(0, os.path.join(os.getcwd(), "client/python/examples"))
import torch  # noqa: E402

import llama_decode_layer as ex  # noqa: E402
import tileops  # noqa: E402
import tileops.pytorch as tp  # noqa: E402
from conftest import Daemon  # noqa: E402

OPS = ["rms_norm", "gemm q", "gemm k", "gemm v", "rope", "kv_append", "attn_decode", "gemm o",
       "rms_norm2", "gemm gu", "silu_mul", "gemm down"]


class Trace(ctypes.Structure):
    """tileops_trace (client/include/tileops.h)."""
    _fields_ = [("kind", ctypes.c_int), ("status", ctypes.c_int), ("executor", ctypes.c_int),
                ("submit_ns", ctypes.c_int64), ("taken_ns", ctypes.c_int64),
                ("launched_ns", ctypes.c_int64), ("posted_ns", ctypes.c_int64),
                ("woke_ns", ctypes.c_int64)]


def main():
    lib = ctypes.CDLL(os.environ["TILEOPS_LIBRARY"])
    d = Daemon(backend="cuda")
    c = tileops.connect(d.address, name="py_layer_trace")
    tp.set_client(c)
    a = argparse.Namespace(batch=1, hidden=4096, heads=32, kv_heads=8, inter=14336, ctx=1024,
                           steps=20, address=None, device="cuda", breakdown=False)
    layer = ex.Layer(a, torch.device("cuda"), torch.bfloat16)
    x = torch.randn(1, 4096, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16).cuda()
    tl = ex.TileopsLayer(layer, c)
    for _ in range(5):
        tl.step(x)
    torch.cuda.synchronize()
    c.sync()
    print("trace_start", lib.tileops_trace_start(c._c, ctypes.c_size_t(8192)), flush=True)
    for _ in range(10):
        tl.step(x)
    torch.cuda.synchronize()
    c.sync()
    buf = (Trace * 8192)()
    n = ctypes.c_size_t(0)
    print("trace_read", lib.tileops_trace_read(c._c, buf, ctypes.c_size_t(8192), ctypes.byref(n)),
          n.value, flush=True)
    rows = [buf[i] for i in range(n.value)]
    ops = [t for t in rows if t.kind == 1]  # TILEOPS_TRACE_OP
    print("ops traced", len(ops), "kinds", sorted(set(t.kind for t in rows)), flush=True)
    per = {}
    for i, t in enumerate(ops):
        k = OPS[i % 12] if len(ops) % 12 == 0 else str(i % 12)
        per.setdefault(k, []).append(((t.taken_ns - t.submit_ns) / 1e3,
                                      (t.launched_ns - t.taken_ns) / 1e3,
                                      (t.posted_ns - t.launched_ns) / 1e3))
    for k, v in per.items():
        print("%-12s ring %.1f  launch %.1f  post %.1f us (median of %d)"
              % (k, statistics.median(s[0] for s in v), statistics.median(s[1] for s in v),
                 statistics.median(s[2] for s in v), len(v)), flush=True)
    spans = [round((ops[s * 12 + 11].launched_ns - ops[s * 12].taken_ns) / 1e3, 1)
             for s in range(len(ops) // 12)]
    print("first op taken -> last op launched per step (us):", spans, flush=True)
    c.close()
    d.stop()


if __name__ == "__main__":
    main()
