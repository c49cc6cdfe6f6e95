"""Dtypes: the names tileops uses (the manifest's), their codes in
tileops.h, and the numpy and torch types they map to.

bf16 and fp8_e4m3 have no numpy type of their own. With the ml_dtypes
package installed (it ships with JAX and TensorFlow; Debian 12 has no
package of it) they map to ml_dtypes.bfloat16 and ml_dtypes.float8_e4m3fn;
without it, to their storage: uint16 for bf16, uint8 for fp8_e4m3, whose
bits the caller converts (bf16_to_f32 and f32_to_bf16 below do bf16).
"""
NAMES = {"f32": 1, "f16": 2, "bf16": 3, "i32": 4, "i64": 5, "u8": 6, "fp8_e4m3": 7}
CODES = {v: k for k, v in NAMES.items()}
SIZES = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "u8": 1, "fp8_e4m3": 1}

try:
    import ml_dtypes as _ml
except ImportError:
    _ml = None

_np = None
_np_to_name = None


def _numpy():
    global _np, _np_to_name
    if _np is None:
        import numpy
        _np = {
            "f32": numpy.dtype(numpy.float32), "f16": numpy.dtype(numpy.float16),
            "i32": numpy.dtype(numpy.int32), "i64": numpy.dtype(numpy.int64),
            "u8": numpy.dtype(numpy.uint8),
            "bf16": numpy.dtype(_ml.bfloat16) if _ml else numpy.dtype(numpy.uint16),
            "fp8_e4m3": numpy.dtype(_ml.float8_e4m3fn) if _ml else numpy.dtype(numpy.uint8),
        }
        # uint16 means bf16 bits; uint8 stays u8 (fp8 arrays need dtype= or ml_dtypes).
        _np_to_name = {v: k for k, v in _np.items() if k != "fp8_e4m3"}
        if _ml:
            _np_to_name[numpy.dtype(_ml.float8_e4m3fn)] = "fp8_e4m3"
    return _np


def name(dtype):
    """The tileops name of `dtype`: a name ("bf16"), a numpy dtype or type, or a torch dtype."""
    if isinstance(dtype, str) and dtype in NAMES:
        return dtype
    if isinstance(dtype, int) and dtype in CODES:
        return CODES[dtype]
    t = _torch_name(dtype)
    if t:
        return t
    try:
        import numpy
        np_dtype = numpy.dtype(dtype)
    except (ImportError, TypeError):
        raise TypeError("not a dtype tileops knows: %r (one of %s)" % (dtype, ", ".join(NAMES)))
    _numpy()
    if np_dtype not in _np_to_name:
        raise TypeError("numpy dtype %s has no tileops dtype (%s)" % (np_dtype, ", ".join(NAMES)))
    return _np_to_name[np_dtype]


def to_numpy(dtype_name):
    return _numpy()[dtype_name]


def _torch_name(dtype):
    mod = type(dtype).__module__
    if mod != "torch":
        return None
    import torch
    m = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
         torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8"}
    if hasattr(torch, "float8_e4m3fn"):
        m[torch.float8_e4m3fn] = "fp8_e4m3"
    if dtype not in m:
        raise TypeError("torch dtype %s has no tileops dtype (%s)" % (dtype, ", ".join(NAMES)))
    return m[dtype]


def to_torch(dtype_name):
    import torch
    m = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
         "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}
    if hasattr(torch, "float8_e4m3fn"):
        m["fp8_e4m3"] = torch.float8_e4m3fn
    if dtype_name not in m:
        raise TypeError("this torch has no dtype for %s" % dtype_name)
    return m[dtype_name]


def bf16_to_f32(bits):
    """bf16 bits (a uint16 array) as float32 values."""
    import numpy
    return (numpy.asarray(bits, dtype=numpy.uint16).astype(numpy.uint32) << 16).view(numpy.float32)


def f32_to_bf16(values):
    """float32 values rounded to nearest even bf16, as uint16 bits."""
    import numpy
    u = numpy.ascontiguousarray(values, dtype=numpy.float32).view(numpy.uint32)
    rounded = u + 0x7FFF + ((u >> 16) & 1)
    # NaN stays NaN (rounding could carry it into infinity).
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return numpy.where(nan, (u >> 16) | 0x40, rounded >> 16).astype(numpy.uint16)
