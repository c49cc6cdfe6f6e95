"""Whether this process's CUDA contexts are shared through an MPS server.

Without MPS the GPU runs one process's context at a time: when torch's stream
and tileopsd's wait on each other (tileops.pytorch.wait_for_torch,
torch_waits, run(order=True)) every hand-off waits for the GPU to switch
contexts, which costs far more than the ops of a decode step (docs/python.md,
"Running beside torch: MPS"). The torch bridge warns once per client when
either side is not under MPS.
"""
import ctypes
import warnings

# cuda.h's CU_DEVICE_ATTRIBUTE_MPS_ENABLED (CUDA 12.3 and later drivers).
_ATTRIBUTE_MPS_ENABLED = 133


class TimeSlicingWarning(RuntimeWarning):
    """torch and tileopsd order their streams with each other on a GPU whose
    contexts are not shared through MPS."""


def _driver():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def process_mps(ordinal, driver=None):
    """True or False: whether the contexts this process makes on CUDA device
    `ordinal` are shared through MPS; None where the driver cannot say (no
    driver, not initialised yet, an older driver without the attribute)."""
    drv = driver if driver is not None else _driver()
    if drv is None:
        return None
    dev, value = ctypes.c_int(0), ctypes.c_int(0)
    if drv.cuDeviceGet(ctypes.byref(dev), int(ordinal)) != 0:
        return None
    if drv.cuDeviceGetAttribute(ctypes.byref(value), _ATTRIBUTE_MPS_ENABLED, dev) != 0:
        return None
    return bool(value.value)


def check(client, ordinal, driver=None, stacklevel=3):
    """Warn (TimeSlicingWarning) when the daemon `client` talks to, or this
    process on CUDA device `ordinal`, is not under MPS; returns the warning's
    text, or None when there is nothing to say."""
    if not client.has_cuda_ipc:
        return None
    here = process_mps(ordinal, driver)
    lacking = []
    if not client.has_mps:
        lacking.append("tileopsd's")
    if here is False:
        lacking.append("this process's")
    if not lacking:
        return None
    text = ("tileops: %s CUDA context%s not shared through MPS: each hand-off between torch's "
            "stream and tileopsd's waits for the GPU to switch contexts (0.2 to 0.4 ms on an "
            "H200, more than a decode layer's ops); start nvidia-cuda-mps-control before "
            "both, as docs/python.md says" % (" and ".join(lacking),
                                              "s are" if len(lacking) > 1 else " is"))
    warnings.warn(text, TimeSlicingWarning, stacklevel=stacklevel)
    return text
