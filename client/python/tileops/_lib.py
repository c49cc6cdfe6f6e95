"""The ctypes binding of libtileops: finding the library and the C types.

Only this module knows the C ABI of tileops.h. The library is looked up,
first match wins:

1. ``$TILEOPS_LIBRARY``: a path to libtileops.so (or any name dlopen takes);
2. ``_config.LIBRARY``: written into the package by CMake, both in the build
   tree's copy (build/client/python) and by ``cmake --install``, as a path
   relative to the package folder;
3. the build tree beside a source checkout: the package imported from
   ``<src>/client/python`` finds ``<src>/build/client/libtileops.so``;
4. the system's: ``ctypes.util.find_library("tileops")`` (ldconfig's cache,
   LD_LIBRARY_PATH), then ``libtileops.so.0`` for dlopen to find.

Functions of the C API that a library may lack (the ones added after 0.1:
views, imports with offsets, events, devices and copies) are bound lazily:
calling one that the loaded library does not export raises
NotImplementedError naming it.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, Structure, Union, byref, c_char_p, c_double, c_int, c_int32,
                    c_int64, c_size_t, c_uint32, c_uint64, c_ubyte, c_void_p)

MAX_DIMS = 8

# tileops_status (proto/tileops_codes.h): the names Error carries.
STATUS_NAMES = [
    "OK", "INVALID_ARGUMENT", "CONNECT", "PROTOCOL", "VERSION", "PERMISSION", "NO_SESSION",
    "UNKNOWN_OP", "UNKNOWN_HANDLE", "DTYPE", "SHAPE", "PARAM", "RANGE", "TOO_LARGE",
    "OUT_OF_MEMORY", "QUOTA", "BUSY", "UNSUPPORTED", "BACKEND", "SHUTDOWN", "TIMEOUT", "CLOSED",
    "INTERNAL", "IN_PROGRESS",
]
OK = 0
ERR_UNSUPPORTED = 17
IN_PROGRESS = 23

PARAM_INT, PARAM_FLOAT, PARAM_BOOL = 1, 2, 3
CAP_CUDA_IPC, CAP_GPU, CAP_MPS = 1 << 0, 1 << 1, 1 << 2


class ConnectOptions(Structure):
    _fields_ = [("address", c_char_p), ("arena_bytes", c_size_t), ("timeout_ms", c_int),
                ("name", c_char_p), ("tenant", c_char_p)]


class ServerInfo(Structure):
    _fields_ = [("protocol_version", c_uint32), ("daemon_version", c_char_p),
                ("backend", c_char_p), ("device", c_char_p), ("capabilities", c_uint64),
                ("max_message_bytes", c_uint64), ("session_id", c_uint64)]


class DeviceInfo(Structure):
    _fields_ = [("index", c_uint32), ("ordinal", c_int32), ("name", c_char_p),
                ("memory_bytes", c_uint64)]


class _ParamValue(Union):
    _fields_ = [("i", c_int64), ("f", c_double), ("b", c_int)]


class Param(Structure):
    _fields_ = [("name", c_char_p), ("kind", c_int), ("v", _ParamValue)]


class Op(Structure):
    _fields_ = [("name", c_char_p), ("inputs", POINTER(c_uint64)), ("n_inputs", c_size_t),
                ("outputs", POINTER(c_uint64)), ("n_outputs", c_size_t),
                ("params", POINTER(Param)), ("n_params", c_size_t)]


class PlanOptions(Structure):
    _fields_ = [("buckets", POINTER(c_int64)), ("n_buckets", c_size_t),
                ("bucketed", POINTER(c_uint64)), ("n_bucketed", c_size_t), ("name", c_char_p)]


class Binding(Structure):
    _fields_ = [("plan_tensor", c_uint64), ("tensor", c_uint64)]


class IpcHandle(Structure):
    """tileops_ipc_handle: a cudaIpcMemHandle_t, 64 opaque bytes."""
    _fields_ = [("bytes", c_ubyte * 64)]


class IpcEvent(Structure):
    """tileops_ipc_event: a cudaIpcEventHandle_t, 64 opaque bytes."""
    _fields_ = [("bytes", c_ubyte * 64)]


P = c_void_p  # tileops_client *, tileops_plan *, tileops_completion *
T = c_uint64  # tileops_tensor
S = c_int     # tileops_status

# name: (restype, argtypes). Every function of tileops.h this package uses.
_REQUIRED = {
    "tileops_strerror": (c_char_p, [c_int]),
    "tileops_last_error": (c_char_p, []),
    "tileops_dtype_size": (c_size_t, [c_int]),
    "tileops_dtype_name": (c_char_p, [c_int]),
    "tileops_default_address": (S, [c_char_p, c_size_t]),
    "tileops_connect_opts": (S, [POINTER(ConnectOptions), POINTER(P)]),
    "tileops_close": (None, [P]),
    "tileops_server_info_get": (S, [P, POINTER(ServerInfo)]),
    "tileops_tensor_create": (S, [P, c_int, c_int, POINTER(c_int64), POINTER(T)]),
    "tileops_tensor_free": (S, [P, T]),
    "tileops_tensor_write": (S, [P, T, c_size_t, c_void_p, c_size_t]),
    "tileops_tensor_read": (S, [P, T, c_size_t, c_void_p, c_size_t]),
    "tileops_op_run": (S, [P, POINTER(Op)]),
    "tileops_op_submit": (S, [P, POINTER(Op), POINTER(P)]),
    "tileops_completion_wait": (S, [P, c_int]),
    "tileops_completion_poll": (S, [P]),
    "tileops_completion_free": (None, [P]),
    "tileops_sync": (S, [P]),
    "tileops_plan_begin": (S, [P, POINTER(PlanOptions), POINTER(P)]),
    "tileops_plan_add": (S, [P, POINTER(Op)]),
    "tileops_plan_end": (S, [P]),
    "tileops_plan_run": (S, [P, c_int64, POINTER(Binding), c_size_t]),
    "tileops_plan_submit": (S, [P, c_int64, POINTER(Binding), c_size_t, POINTER(P)]),
    "tileops_plan_open": (S, [P, c_char_p, POINTER(P)]),
    "tileops_plan_tensor": (S, [P, c_char_p, POINTER(T), POINTER(c_int), POINTER(c_int),
                                POINTER(c_int64)]),
    "tileops_plan_free": (None, [P]),
    "tileops_admin_reset": (S, [P]),
    "tileops_op_submit_timed": (S, [P, POINTER(Op), POINTER(P)]),
    "tileops_completion_gpu_us": (S, [P, POINTER(c_double)]),
}

# Functions a library may not have yet; bound when first called.
_OPTIONAL = {
    "tileops_tensor_view": (S, [P, T, c_size_t, c_int, c_int, POINTER(c_int64),
                                POINTER(c_int64), POINTER(T)]),
    "tileops_tensor_export": (S, [P, T, POINTER(IpcHandle), POINTER(c_size_t),
                                  POINTER(c_size_t)]),
    "tileops_tensor_import": (S, [P, POINTER(IpcHandle), c_size_t, c_size_t, c_int, c_int,
                                  POINTER(c_int64), POINTER(T)]),
    "tileops_event_wait": (S, [P, POINTER(IpcEvent)]),
    "tileops_event_record": (S, [P, POINTER(IpcEvent)]),
    "tileops_event_register": (S, [P, POINTER(IpcEvent), POINTER(c_uint64)]),
    "tileops_event_release": (S, [P, c_uint64]),
    "tileops_event_wait_submit": (S, [P, c_uint64, POINTER(P)]),
    "tileops_event_export": (S, [P, POINTER(IpcEvent)]),
    "tileops_event_record_submit": (S, [P, POINTER(P)]),
    "tileops_device_count": (c_int, [P]),
    "tileops_device_info_get": (S, [P, c_int, POINTER(DeviceInfo)]),
    "tileops_tensor_create_on": (S, [P, c_int, c_int, c_int, POINTER(c_int64), POINTER(T)]),
    "tileops_tensor_copy": (S, [P, T, T]),
}
# tileops_tensor_export and _import took no offset or size before the
# library gained IPC events; both changed in the same release. A library
# without tileops_event_wait has the old signatures, which this package
# does not call (calling a C function through the wrong prototype would
# pass garbage rather than fail).
_OFFSET_ABI_MARKER = "tileops_event_wait"


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def candidates():
    """The places the library is looked for, in order (for messages and docs)."""
    out = []
    env = os.environ.get("TILEOPS_LIBRARY")
    if env:
        return [env]
    pkg = _package_dir()
    try:
        from . import _config
        lib = getattr(_config, "LIBRARY", None)
        if lib:
            out.append(os.path.normpath(os.path.join(pkg, lib)))
    except ImportError:
        pass
    # <src>/client/python/tileops -> <src>/build/client/libtileops.so
    src = os.path.dirname(os.path.dirname(os.path.dirname(pkg)))
    out.append(os.path.join(src, "build", "client", "libtileops.so"))
    found = ctypes.util.find_library("tileops")
    if found:
        out.append(found)
    out.append("libtileops.so.0")
    return out


class Library:
    """libtileops loaded with its prototypes; attributes are the C functions."""

    def __init__(self, path=None):
        tried = [path] if path else candidates()
        errors = []
        self.cdll = None
        for cand in tried:
            # A path that is not there is skipped quietly; a name is for dlopen.
            if os.sep in cand and not os.path.exists(cand):
                errors.append("%s: no such file" % cand)
                continue
            try:
                self.cdll = ctypes.CDLL(cand)
                self.path = cand
                break
            except OSError as e:
                errors.append(str(e))
        if self.cdll is None:
            raise OSError("libtileops not found (set TILEOPS_LIBRARY to its path); tried: "
                          + "; ".join(errors))
        for name, (res, args) in _REQUIRED.items():
            f = getattr(self.cdll, name)
            f.restype, f.argtypes = res, args
            setattr(self, name[len("tileops_"):], f)

    def has(self, name):
        """Whether the loaded library exports tileops_<name>."""
        full = "tileops_" + name
        if full in ("tileops_tensor_export", "tileops_tensor_import"):
            full = _OFFSET_ABI_MARKER
        try:
            getattr(self.cdll, full)
            return True
        except AttributeError:
            return False

    def __getattr__(self, attr):
        # Reached only for names not bound in __init__: the optional ones.
        full = "tileops_" + attr
        if full not in _OPTIONAL:
            raise AttributeError(attr)
        if not self.has(attr):
            what = ("the signature with offset and size" if attr in ("tensor_export", "tensor_import")
                    else "the function")
            raise NotImplementedError(
                "%s: the loaded libtileops (%s) lacks %s; it needs a newer library"
                % (full, self.path, what))
        f = getattr(self.cdll, full)
        f.restype, f.argtypes = _OPTIONAL[full]
        setattr(self, attr, f)
        return f


_lib = None


def lib():
    """The process's libtileops, loaded on first use."""
    global _lib
    if _lib is None:
        _lib = Library()
    return _lib
