"""tileops: the Python client of tileopsd, over libtileops (ctypes).

    import numpy as np, tileops
    with tileops.connect() as c:
        x = c.from_numpy(np.random.rand(4, 4096).astype(np.float32))
        w = c.from_numpy(np.ones(4096, np.float32))
        y = tileops.ops.rms_norm(x, w, eps=1e-5)
        print(y.numpy())

docs/python.md describes the package: the library lookup, dtypes, ops,
plans, errors and the PyTorch path (tileops.pytorch).
"""
from ._client import Client, Completion, Device, Error, Plan, Tensor
from ._dtypes import bf16_to_f32, f32_to_bf16
from ._mps import TimeSlicingWarning
from . import ops

__version__ = "0.1.0"
__all__ = ["Client", "Completion", "Device", "Error", "Plan", "Tensor", "connect", "ops",
           "library_path", "bf16_to_f32", "f32_to_bf16", "stats", "TimeSlicingWarning"]


def connect(address=None, name=None, tenant=None, arena_bytes=0, timeout_ms=0):
    """Connect to tileopsd and open a session.

    address: the daemon's nng address; None: $TILEOPS_ADDRESS, else the
    default socket (the user's daemon when it runs, else the system's).
    name: shown in the daemon's logs and stats (default: the script's name
    and pid). tenant: whose graph-cache quota plans use (None: the
    session's own). arena_bytes: the shared-memory arena for reads and
    writes (0: 64 MiB). timeout_ms: per reply, 0 waits without limit.
    """
    return Client(address, name=name, tenant=tenant, arena_bytes=arena_bytes,
                  timeout_ms=timeout_ms)


def library_path():
    """The path of the libtileops this process loaded (loading it if needed)."""
    from . import _lib
    return _lib.lib().path


def stats(address=None):
    """The stats document of the daemon at `address` ($TILEOPS_STATS_ADDRESS,
    else stats.sock beside the default control socket)."""
    import os
    from . import _stats
    from ._client import _default_address
    address = address or os.environ.get("TILEOPS_STATS_ADDRESS") or _stats.beside(
        os.environ.get("TILEOPS_ADDRESS") or _default_address())
    return _stats.fetch(address)
