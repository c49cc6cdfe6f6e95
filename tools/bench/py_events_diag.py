"""py_events_diag.py - the Python package's event calls timed one by one on the GPU (a dev
harness): a CUDA tileopsd of its own (the tests' conftest.Daemon), two registered torch tensors,
the median of 60 of each: event_record_now, torch_waits and wait_for_torch alone, and after
twelve small ops submitted through tileops.pytorch.run. Run from the repository root with
TILEOPSD, TILEOPS_MANIFEST and TILEOPS_LIBRARY set (the packed binaries' paths):

    python3 tools/bench/py_events_diag.py
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.getcwd(), "client/python"))
sys.path.insert(0, os.path.join(os.getcwd(), "client/python/tests"))
import torch  # noqa: E402

import tileops  # noqa: E402
import tileops.pytorch as tp  # noqa: E402
from conftest import Daemon  # noqa: E402


def median_us(f, n=60):
    v = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        f()
        v.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(v)


def main():
    d = Daemon(backend="cuda")
    c = tileops.connect(d.address, name="py_events_diag")
    tp.set_client(c)
    x = torch.ones(1, 4096, device="cuda", dtype=torch.bfloat16)
    y = torch.zeros_like(x)
    tp.register(x, c)
    tp.register(y, c)
    c.event_export()  # the session's event exists from here on

    def ops(k):
        for _ in range(k):
            tp.run("add", x, x, out=y, client=c, order=False, submit=True)

    def record_after_ops():
        ops(12)
        t0 = time.perf_counter()
        c.event_record_now()
        return (time.perf_counter() - t0) * 1e6

    cases = [
        ("event_record_now alone", lambda: c.event_record_now()),
        ("torch_waits alone", lambda: tp.torch_waits(c)),
        ("wait_for_torch alone", lambda: tp.wait_for_torch(c)),
        ("12 submits", lambda: ops(12)),
        ("12 submits + sync", lambda: (ops(12), c.sync())),
        ("12 submits + event_record_now", lambda: (ops(12), c.event_record_now())),
        ("12 submits + event_record_now(raise_pending=False)",
         lambda: (ops(12), c.event_record_now(False))),
        ("12 submits + torch_waits", lambda: (ops(12), tp.torch_waits(c))),
    ]
    for name, f in cases:
        print("%s: %.1f us" % (name, median_us(f)), flush=True)
    v = [record_after_ops() for _ in range(40)]
    print("event_record_now after 12 submits (itself): %.1f us" % statistics.median(v), flush=True)
    c.close()
    d.stop()


if __name__ == "__main__":
    main()
