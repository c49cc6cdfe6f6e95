"""Client, Tensor, Completion and Plan: libtileops's objects in Python."""
import collections
import ctypes
import operator
import os
import sys
import threading

from . import _dtypes
from . import _lib as L
from ._lib import byref, c_double, c_int, c_int64, c_size_t, c_uint64, c_void_p


class Error(Exception):
    """A failed tileops call: `status` (the tileops_status code), `status_name`
    ("SHAPE", "DTYPE", ...) and `message` (the daemon's or the library's words)."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = L.STATUS_NAMES[status] if 0 <= status < len(L.STATUS_NAMES) else str(status)
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


def _check(st, what=None):
    if st != L.OK:
        raise _error(st, what)


def _error(st, what=None):
    lib = L.lib()
    msg = lib.last_error().decode(errors="replace")
    if not msg:
        msg = lib.strerror(st).decode()
    if what:
        msg = "%s: %s" % (what, msg)
    return Error(st, msg)


def _shape_array(shape):
    shape = tuple(int(d) for d in shape)
    if len(shape) > L.MAX_DIMS:
        raise ValueError("rank %d: tileops tensors have at most %d dims" % (len(shape), L.MAX_DIMS))
    return shape, (c_int64 * max(len(shape), 1))(*shape)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# Completions pending at once per client before older ones are reaped: the
# library waits beyond 256 outstanding.
_REAP_EVERY = 64

Device = collections.namedtuple("Device", "index ordinal name memory_bytes")
Device.__doc__ = """One device the daemon serves (its `devices` setting): `index` (what
device= names), `ordinal` (the CUDA device ordinal; on the CPU backend the
emulated device's number), `name` and `memory_bytes` (0 where not known)."""


def _device_index(device):
    """The index device= names: an int, or a Device of client.devices."""
    if isinstance(device, Device):
        return device.index
    if isinstance(device, bool):
        raise TypeError("device: expected an index or a tileops.Device, got bool")
    try:
        return operator.index(device)
    except TypeError:
        raise TypeError("device: expected an index or a tileops.Device, got %s"
                        % type(device).__name__) from None


class Client:
    """A session with tileopsd: tensors, ops, plans. Made by tileops.connect().

    Thread safety: as libtileops's (a client may be used from several
    threads). Closing frees every tensor and plan of the session.
    """

    def __init__(self, address=None, name=None, tenant=None, arena_bytes=0, timeout_ms=0):
        self._lib = L.lib()
        opts = L.ConnectOptions()
        opts.address = address.encode() if address else None
        opts.arena_bytes = int(arena_bytes)
        opts.timeout_ms = int(timeout_ms)
        opts.name = (name if name is not None else _default_name()).encode()
        opts.tenant = tenant.encode() if tenant else None
        self._c = c_void_p()
        _check(self._lib.connect_opts(byref(opts), byref(self._c)), "connect")
        self.address = address or os.environ.get("TILEOPS_ADDRESS") or _default_address()
        info = L.ServerInfo()
        _check(self._lib.server_info_get(self._c, byref(info)))
        self.protocol_version = info.protocol_version
        self.daemon_version = info.daemon_version.decode()
        self.backend = info.backend.decode()
        self.device = info.device.decode()
        self.capabilities = info.capabilities
        self.max_message_bytes = info.max_message_bytes
        self.session_id = info.session_id
        self.devices = self._device_list()
        self._pending = collections.deque()
        self._deferred = None
        self._mu = threading.Lock()
        self._torch = None
        self._ev_last = None  # (handle bytes, its tileops_ipc_event) of the last event_wait

    # ---- lifetime ------------------------------------------------------------------------
    @property
    def closed(self):
        return self._c is None or not self._c.value

    def close(self):
        """Close the session: the daemon frees its tensors and plans. Idempotent."""
        if self.closed:
            return
        with self._mu:
            for cp in self._pending:
                self._lib.completion_free(cp)
            self._pending.clear()
        if self._torch is not None:
            self._torch.close()
        self._lib.close(self._c)
        self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if not sys.is_finalizing():
            self.close()

    def __repr__(self):
        return "<tileops.Client session %d on %s (%s)>" % (self.session_id, self.address, self.backend)

    def _device_list(self):
        """The devices the daemon said it serves at connect (a list of Device). A
        library without tileops_device_count knows of one: the daemon's device."""
        if not self._lib.has("device_count"):
            return [Device(0, 0, self.device, 0)]
        out = []
        d = L.DeviceInfo()
        for i in range(self._lib.device_count(self._c)):
            _check(self._lib.device_info_get(self._c, i, byref(d)), "device_info_get")
            out.append(Device(d.index, d.ordinal, (d.name or b"").decode(errors="replace"),
                              d.memory_bytes))
        return out

    @property
    def has_cuda_ipc(self):
        """Whether tensors can be imported and exported (the CUDA backend)."""
        return bool(self.capabilities & L.CAP_CUDA_IPC)

    @property
    def has_mps(self):
        """Whether the daemon's GPU contexts are shared through an MPS server, so
        that a process's own kernels (torch's) run beside the daemon's rather than
        the GPU time-slicing between the two (docs/python.md)."""
        return bool(self.capabilities & L.CAP_MPS)

    # ---- tensors -------------------------------------------------------------------------
    def tensor(self, dtype, shape, device=0):
        """A new tensor of `dtype` (a name like "f32", a numpy or a torch dtype) and
        `shape`, filled with zero bytes, on `device` (an index of client.devices,
        or one of its entries). Ops run on the device of their tensors: every
        tensor of one op on the same device."""
        dt = _dtypes.name(dtype)
        shape, arr = _shape_array(shape)
        device = _device_index(device)
        h = c_uint64()
        if device == 0:
            # Every libtileops has this one; device 0 needs nothing newer.
            st = self._lib.tensor_create(self._c, _dtypes.NAMES[dt], len(shape), arr, byref(h))
        else:
            st = self._lib.tensor_create_on(self._c, device, _dtypes.NAMES[dt], len(shape), arr,
                                            byref(h))
        _check(st)
        return Tensor(self, h.value, dt, shape, device=device)

    def from_numpy(self, array, dtype=None, device=0):
        """A new tensor on `device` holding a copy of `array` (any array-like);
        `dtype` overrides the array's (needed for fp8_e4m3 without ml_dtypes:
        pass uint8 bits)."""
        import numpy
        a = numpy.asarray(array)
        dt = _dtypes.name(dtype if dtype is not None else a.dtype)
        t = self.tensor(dt, a.shape, device=device)
        t.write(a)
        return t

    def copy(self, dst, src):
        """Copy every byte of tensor `src` into tensor `dst`, on one device or
        between two: both packed with the same byte size (the daemon refuses
        other pairs, naming both sizes). In order with the session's other
        work: later reads and ops see the copy."""
        for what, t in (("dst", dst), ("src", src)):
            if not isinstance(t, Tensor):
                raise TypeError("copy: %s is a %s, not a tileops.Tensor" % (what, type(t).__name__))
            if t.client is not self:
                raise ValueError("copy: %s is a tensor of another client" % what)
            t._live()
        _check(self._lib.tensor_copy(self._c, dst.handle, src.handle), "copy")

    def from_torch(self, t):
        """A tensor over torch tensor `t`: zero-copy for a contiguous CUDA tensor
        (imported with CUDA IPC, offset and size included), a copy through the
        arena for a CPU tensor. See tileops.pytorch."""
        return self._torch_bridge().from_torch(t)

    def from_dlpack(self, obj):
        """A tensor from any object with __dlpack__: CUDA ones through torch
        (zero-copy, as from_torch), host ones copied through numpy."""
        dev = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
        if dev == 1:  # kDLCPU
            import numpy
            return self.from_numpy(numpy.from_dlpack(obj))
        import torch.utils.dlpack
        return self.from_torch(torch.utils.dlpack.from_dlpack(obj))

    def import_ipc(self, handle, offset, nbytes, dtype, shape):
        """Wrap device memory another process exported as a tensor, without a copy:
        `handle` the 64 bytes of the allocation's cudaIpcMemHandle_t, `offset` and
        `nbytes` the part of it the tensor may touch. CUDA backend only."""
        h = L.IpcHandle()
        raw = bytes(handle)
        if len(raw) != 64:
            raise ValueError("a CUDA IPC handle has 64 bytes, not %d" % len(raw))
        ctypes.memmove(h.bytes, raw, 64)
        dt = _dtypes.name(dtype)
        shape, arr = _shape_array(shape)
        out = c_uint64()
        _check(self._lib.tensor_import(self._c, byref(h), offset, nbytes, _dtypes.NAMES[dt],
                                       len(shape), arr, byref(out)))
        return Tensor(self, out.value, dt, shape)

    # ---- ops -----------------------------------------------------------------------------
    def run(self, op, inputs=(), outputs=(), params=None, submit=False, timed=False):
        """Run op `op` (a name, docs/ops.md) over tensors (None for an omitted
        optional one) with `params` (a dict). By default it returns once the daemon
        validated and launched it, raising Error on a bad request. submit=True
        pipelines: it returns at once and errors are raised by the next sync().
        timed=True returns a Completion whose gpu_us() is the op's device time."""
        if timed:
            o, keep = _op_struct(op, inputs, outputs, params)
            cp = c_void_p()
            _check(self._lib.op_submit_timed(self._c, byref(o), byref(cp)), op)
            return Completion(self, cp, keep)
        ptr = self._op_ptr(op, inputs, outputs, params)
        if submit:
            cp = c_void_p()
            st = self._lib.op_submit(self._c, ptr, byref(cp))
            if st:
                raise _error(st, op)
            self._track(cp)
            return None
        st = self._lib.op_run(self._c, ptr)
        if st:
            raise _error(st)
        return None

    @staticmethod
    def _op_ptr(op, inputs, outputs, params):
        """A pointer to a tileops_op for the call, from _RUN_CACHE when the
        same op, handles and params (by type and value) were run before."""
        ins = _handles(inputs, op)
        outs = _handles(outputs, op)
        if params:
            if not _cacheable_params(params):
                return _RUN_CACHE.put(None, op, ins, outs, params)
            key = (op, tuple(ins), tuple(outs),
                   tuple((k, v.__class__, v) for k, v in params.items()))
        else:
            key = (op, tuple(ins), tuple(outs))
        ptr = _RUN_CACHE.get(key)
        if ptr is None:
            ptr = _RUN_CACHE.put(key, op, ins, outs, params)
        return ptr

    def _track(self, cp):
        with self._mu:
            self._pending.append(cp)
            if len(self._pending) >= _REAP_EVERY:
                self._reap(False)

    def _reap(self, wait):
        """Free finished completions from the oldest on (all of them if `wait`),
        keeping the first error for sync() to raise. Holds self._mu."""
        lib = self._lib
        while self._pending:
            cp = self._pending[0]
            st = lib.completion_wait(cp, -1) if wait else lib.completion_poll(cp)
            if st == L.IN_PROGRESS:
                return
            if st != L.OK and self._deferred is None:
                self._deferred = _error(st)
            self._pending.popleft()
            lib.completion_free(cp)

    def sync(self):
        """Wait for everything submitted so far; raise the first error of an op
        submitted with submit=True since the last sync, or of the device."""
        with self._mu:
            self._reap(True)
            err, self._deferred = self._deferred, None
        st = self._lib.sync(self._c)
        if err is not None:
            raise err
        _check(st, "sync")

    # ---- plans ---------------------------------------------------------------------------
    def plan(self, buckets=None, bucketed=None, name=None):
        """Start a plan (see Plan). Use as a context manager: the plan is sent at the
        end of the `with` block."""
        return Plan(self, buckets, bucketed, name)

    def open_plan(self, name):
        """A warm-up plan the daemon captured at start, by name."""
        return Plan._open(self, name)

    def admin_reset(self):
        """Drop every tenant's cached graphs (for test isolation; admin only)."""
        _check(self._lib.admin_reset(self._c), "admin_reset")

    # ---- ordering with CUDA work (CUDA backend) ------------------------------------------
    def event_wait(self, handle):
        """Make the session's later ops wait, on the device, for the CUDA IPC event
        `handle` (64 bytes, recorded by the caller with the interprocess flag)."""
        raw = bytes(handle)
        last = self._ev_last
        if last is None or last[0] != raw:
            if len(raw) != 64:
                raise ValueError("a CUDA IPC event handle has 64 bytes, not %d" % len(raw))
            ev = L.IpcEvent()
            ctypes.memmove(ev.bytes, raw, 64)
            last = self._ev_last = (raw, ctypes.pointer(ev))  # the same event every step
        _check(self._lib.event_wait(self._c, last[1]), "event_wait")

    def event_record(self):
        """Record an event after the session's work so far: its CUDA IPC event
        handle (64 bytes), for the caller to open and wait on."""
        ev = L.IpcEvent()
        _check(self._lib.event_record(self._c, byref(ev)), "event_record")
        return bytes(ev.bytes)

    # ---- events opened once (the per-step way; tileops.h, "Events opened once") ----------
    def event_register(self, handle):
        """Register the CUDA IPC event `handle` (64 bytes, an event made with the
        interprocess flag) once: returns its id for event_wait_registered. The
        daemon keeps it open until event_release(id) or the session's end; the
        caller keeps the event alive that long (CUDA requires it of an opened
        IPC event). A round trip: once, not every step."""
        raw = bytes(handle)
        if len(raw) != 64:
            raise ValueError("a CUDA IPC event handle has 64 bytes, not %d" % len(raw))
        ev = L.IpcEvent()
        ctypes.memmove(ev.bytes, raw, 64)
        out = ctypes.c_uint64()
        _check(self._lib.event_register(self._c, byref(ev), byref(out)), "event_register")
        return out.value

    def event_release(self, event):
        """Close a registered event in the daemon (after the work submitted before)."""
        _check(self._lib.event_release(self._c, int(event)), "event_release")

    def event_wait_registered(self, event):
        """The session's later ops wait, on the device, for the latest record of
        registered event `event`. Pipelined like run(..., submit=True): no round
        trip, and a refusal is raised by the next sync() or event_record_now()."""
        cp = c_void_p()
        st = self._lib.event_wait_submit(self._c, int(event), byref(cp))
        if st:
            raise _error(st, "event_wait_submit")
        self._track(cp)

    def event_export(self):
        """The handle (64 bytes) of the session's own interprocess event, which
        event_record_now() records again: open it once (a round trip)."""
        ev = L.IpcEvent()
        _check(self._lib.event_export(self._c, byref(ev)), "event_export")
        return bytes(ev.bytes)

    def event_record_now(self, raise_pending=True):
        """Record the session's exported event after its work so far, and return
        once the daemon has queued that record (a spin on the rings, no nng round
        trip): from then on waiting on the event waits for that work. Raises the
        first error of the work pipelined before it (run(..., submit=True),
        event_wait_registered), as sync() would, without waiting for the device
        (raise_pending=False leaves those for the next sync)."""
        lib = self._lib
        cp = c_void_p()
        st = lib.event_record_submit(self._c, byref(cp))
        if st:
            raise _error(st, "event_record_submit")
        st = lib.completion_wait(cp, -1)
        err = _error(st) if st else None
        lib.completion_free(cp)
        if raise_pending:
            with self._mu:
                self._reap(False)  # what came before it on the rings has finished
                deferred, self._deferred = self._deferred, None
            if deferred is not None:
                raise deferred
        if err is not None:
            raise err

    # ---- stats ---------------------------------------------------------------------------
    def stats(self, address=None):
        """The daemon's stats document (a dict; docs/operations.md describes it),
        from its stats socket: `address`, else $TILEOPS_STATS_ADDRESS, else
        stats.sock beside this client's control socket."""
        from . import _stats
        if address is None:
            address = os.environ.get("TILEOPS_STATS_ADDRESS") or _stats.beside(self.address)
        return _stats.fetch(address)

    def _torch_bridge(self):
        if self._torch is None:
            from .pytorch import _Bridge
            self._torch = _Bridge(self)
        return self._torch


def _default_name():
    argv0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    return "python:%s[%d]" % (argv0, os.getpid())


def _default_address():
    buf = ctypes.create_string_buffer(512)
    if L.lib().default_address(buf, len(buf)) == L.OK:
        return buf.value.decode()
    return None


_PARAM_KINDS = {bool: L.PARAM_BOOL, int: L.PARAM_INT, float: L.PARAM_FLOAT}


def _param_array(params):
    if not params:
        return None, 0, ()
    arr = (L.Param * len(params))()
    names = []
    for i, (k, v) in enumerate(params.items()):
        nb = k.encode()
        names.append(nb)
        p = arr[i]
        p.name = nb
        if isinstance(v, bool):
            p.kind, p.v.b = L.PARAM_BOOL, int(v)
        elif isinstance(v, int):
            p.kind, p.v.i = L.PARAM_INT, v
        elif isinstance(v, float):
            p.kind, p.v.f = L.PARAM_FLOAT, v
        else:
            # numpy scalars and the like: by what they convert to.
            if hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu":
                p.kind, p.v.i = L.PARAM_INT, int(v)
            elif hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "b":
                p.kind, p.v.b = L.PARAM_BOOL, int(bool(v))
            else:
                p.kind, p.v.f = L.PARAM_FLOAT, float(v)
    return arr, len(params), names


def _handles(ts, what):
    out = []
    for t in ts:
        if t is None:
            out.append(0)
        elif isinstance(t, Tensor):
            out.append(t.handle)
        else:
            raise TypeError("%s: expected tileops.Tensor or None, got %s" % (what, type(t).__name__))
    return out


def _op_struct(name, inputs, outputs, params):
    """A tileops_op and the ctypes objects it points into (keep them alive)."""
    return _op_struct_h(name, _handles(inputs, name), _handles(outputs, name), params)


def _op_struct_h(name, ins, outs, params):
    """_op_struct over handles (lists of ints, 0 for an omitted tensor)."""
    ins, outs = list(ins), list(outs)
    # Trailing omitted optional tensors are left off rather than sent as 0.
    while ins and ins[-1] == 0:
        ins.pop()
    while outs and outs[-1] == 0:
        outs.pop()
    ia = (c_uint64 * max(len(ins), 1))(*ins)
    oa = (c_uint64 * max(len(outs), 1))(*outs)
    pa, npar, names = _param_array(params)
    nb = name.encode()
    o = L.Op(nb, ia, len(ins), oa, len(outs), pa, npar)
    return o, (ia, oa, pa, names, nb)


class _OpCache:
    """Built tileops_op structs, keyed by what they hold (handles and params),
    so that a call repeated with the same tensors and params (every step of a
    decode loop) reuses one struct instead of building four ctypes objects.

    An entry holds only numbers and bytes, never a Tensor or a client: the C
    library reads it (const tileops_op *) and copies what it sends, so one
    entry serves any client and any thread, and a handle number that a freed
    tensor's successor reuses still means exactly what it says. The daemon
    validates every request as before. Bounded: cleared when full.
    """

    __slots__ = ("entries", "limit")

    def __init__(self, limit=256):
        self.entries = {}
        self.limit = limit

    def get(self, key):
        e = self.entries.get(key)
        return e[0] if e is not None else None

    def put(self, key, name, ins, outs, params):
        """The pointer to a new struct for (ins, outs, params), kept under `key`
        when `key` is not None."""
        o, keep = _op_struct_h(name, ins, outs, params)
        entry = (ctypes.pointer(o), keep)
        if key is not None:
            if len(self.entries) >= self.limit:
                self.entries.clear()
            self.entries[key] = entry
        return entry[0]


def _cacheable_params(params):
    """Whether params may key a cache by equality: False when a value equals
    another it must not be confused with (0.0 and -0.0; NaN, equal to nothing)
    or is not a plain number."""
    for v in params.values():
        c = v.__class__
        if c is float:
            if v == 0.0 or v != v:
                return False
        elif c is not int and c is not bool:
            return False
    return True


_RUN_CACHE = _OpCache()


class Tensor:
    """A tensor in tileopsd, named by a handle of its client's session.

    The daemon owns the memory; freed by free(), when the object is garbage
    collected, or when the client closes. Attributes: client, handle, dtype
    (a name: "f32", "bf16", ...), shape (a tuple), nbytes, device (the index
    of the device it was created on; a view's is its base's; 0 for imported
    tensors and a warm-up plan's).
    """

    __slots__ = ("client", "handle", "dtype", "shape", "device", "_owned", "_keep",
                 "__weakref__")

    def __init__(self, client, handle, dtype, shape, owned=True, keep=None, device=0):
        self.client = client
        self.handle = handle
        self.dtype = dtype
        self.shape = tuple(shape)
        self.device = device
        self._owned = owned
        self._keep = keep  # what the memory belongs to (a torch tensor, a base tensor)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def numel(self):
        return _numel(self.shape)

    @property
    def nbytes(self):
        return self.numel * _dtypes.SIZES[self.dtype]

    def __repr__(self):
        where = " on device %d" % self.device if self.device else ""
        return "<tileops.Tensor %s%s handle %d%s>" % (self.dtype, list(self.shape), self.handle,
                                                     where)

    def _live(self):
        if not self.handle:
            raise ValueError("tensor was freed")
        if self.client.closed:
            raise ValueError("tensor's client is closed")

    def write(self, array, offset=0):
        """Copy `array` (array-like, converted to this tensor's dtype, C order) into
        the tensor at byte `offset`; by default the whole tensor."""
        import numpy
        self._live()
        a = numpy.ascontiguousarray(array)
        want = _dtypes.to_numpy(self.dtype)
        if a.dtype != want:
            if self.dtype in ("bf16", "fp8_e4m3") and a.dtype.kind == "f" and want.kind != "f":
                if self.dtype == "bf16":
                    a = _dtypes.f32_to_bf16(a)
                else:
                    raise TypeError("fp8_e4m3 from %s needs ml_dtypes (or pass uint8 bits)" % a.dtype)
            else:
                a = a.astype(want)
        if offset == 0 and a.nbytes != self.nbytes:
            raise ValueError("write: %d bytes for a tensor of %d (%s%s)" % (a.nbytes, self.nbytes, self.dtype, list(self.shape)))
        _check(self.client._lib.tensor_write(self.client._c, self.handle, offset,
                                             a.ctypes.data, a.nbytes), "write")

    def read(self, out=None):
        """The tensor's bytes as a numpy array (into `out` when given)."""
        return self.numpy(out)

    def numpy(self, out=None):
        """A numpy array with a copy of the tensor (waits for the ops that write it)."""
        import numpy
        self._live()
        dt = _dtypes.to_numpy(self.dtype)
        if out is None:
            out = numpy.empty(self.shape, dtype=dt)
        elif out.dtype != dt or out.nbytes != self.nbytes or not out.flags.c_contiguous:
            raise ValueError("numpy(out=): need a C-contiguous %s array of %d bytes" % (dt, self.nbytes))
        if self.nbytes:
            _check(self.client._lib.tensor_read(self.client._c, self.handle, 0,
                                                out.ctypes.data, out.nbytes), "read")
        return out

    def __array__(self, dtype=None):
        # numpy.asarray(t) reads the tensor.
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def to_torch(self, device=None):
        """A torch tensor of this tensor: on the CUDA backend a zero-copy view of
        the daemon's memory (exported with CUDA IPC; keep this Tensor alive while
        it is used), else a CPU copy. See tileops.pytorch."""
        return self.client._torch_bridge().to_torch(self, device)

    def view(self, shape=None, dtype=None, offset=0, strides=None):
        """A view of part of this tensor's memory (no copy): `offset` in bytes,
        `strides` in elements (None: packed row-major). Needs a libtileops with
        tileops_tensor_view."""
        self._live()
        dt = _dtypes.name(dtype) if dtype is not None else self.dtype
        shape, arr = _shape_array(self.shape if shape is None else shape)
        st = None
        if strides is not None:
            if len(strides) != len(shape):
                raise ValueError("view: %d strides for rank %d" % (len(strides), len(shape)))
            st = (c_int64 * max(len(shape), 1))(*[int(s) for s in strides])
        out = c_uint64()
        _check(self.client._lib.tensor_view(self.client._c, self.handle, offset, _dtypes.NAMES[dt],
                                            len(shape), arr, st, byref(out)), "view")
        return Tensor(self.client, out.value, dt, shape, keep=self, device=self.device)

    def reshape(self, *shape):
        """The same memory under another shape of as many elements (a view)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if -1 in shape:
            known = _numel(d for d in shape if d != -1)
            shape = tuple(self.numel // known if d == -1 else d for d in shape)
        if _numel(shape) != self.numel:
            raise ValueError("reshape: %s has %d elements, not %d" % (list(shape), _numel(shape), self.numel))
        return self.view(shape)

    def export_ipc(self):
        """(handle, offset, nbytes): the CUDA IPC handle of the allocation holding
        the tensor, the tensor's byte offset in it and the bytes it spans."""
        self._live()
        h = L.IpcHandle()
        off, n = c_size_t(), c_size_t()
        _check(self.client._lib.tensor_export(self.client._c, self.handle, byref(h), byref(off),
                                              byref(n)), "export")
        return bytes(h.bytes), off.value, n.value

    def free(self):
        """Free the tensor in the daemon now (ops already submitted finish first)."""
        if not self.handle:
            return
        c, h = self.client, self.handle
        self.handle = 0
        if self._owned and not c.closed:
            if c._torch is not None:
                c._torch.release(self, h)
            _check(c._lib.tensor_free(c._c, h), "free")
        self._keep = None

    def __del__(self):
        if self.handle and not sys.is_finalizing():
            try:
                self.free()
            except Error:
                pass


class Completion:
    """A pending op submitted with Client.run(..., timed=True)."""

    def __init__(self, client, cp, keep=None):
        self.client = client
        self._cp = cp
        self._keep = keep

    def wait(self, timeout_ms=-1):
        """Wait; True when done (raising Error if it failed), False on time-out."""
        st = self.client._lib.completion_wait(self._cp, timeout_ms)
        if st == L.IN_PROGRESS:
            return False
        _check(st)
        return True

    def done(self):
        return self.wait(0)

    def gpu_us(self):
        """The op's device time in microseconds (CPU time on the CPU backend)."""
        self.wait()
        us = c_double()
        _check(self.client._lib.completion_gpu_us(self._cp, byref(us)), "gpu_us")
        return us.value

    def free(self):
        if self._cp and self._cp.value and not self.client.closed:
            self.client._lib.completion_free(self._cp)
        self._cp = None

    def __del__(self):
        if not sys.is_finalizing():
            self.free()


class Plan:
    """A sequence of ops the daemon checks once, captures once per shape bucket
    (a CUDA graph on the GPU) and replays in one request (docs/plans.md).

        with client.plan(buckets=[1, 2, 4, 8], bucketed=[x, y]) as p:
            tileops.ops.rms_norm(x, w, out=y, plan=p)
        p.run(3)                       # rows 0..2 of x and y, bucket 4
        p.run(bindings={x: x2})        # x2 in x's place, from now on

    Ops are added by passing plan=p to the tileops.ops functions (or with
    add()); the plan is sent by end(), which the `with` block calls.
    """

    def __init__(self, client, buckets=None, bucketed=None, name=None, _opened=None):
        self.client = client
        self._p = c_void_p()
        self._tensors = []      # Python references to every tensor the plan names
        self._named = {}
        self.buckets = list(buckets or [])
        if _opened is not None:
            self._p, self._named, self.buckets = _opened
            self.sent = True
            return
        self.sent = False
        opts = L.PlanOptions()
        keep = []
        if buckets:
            b = (c_int64 * len(buckets))(*[int(x) for x in buckets])
            opts.buckets, opts.n_buckets = b, len(buckets)
            keep.append(b)
        if bucketed:
            hs = _handles(bucketed, "plan")
            ba = (c_uint64 * len(hs))(*hs)
            opts.bucketed, opts.n_bucketed = ba, len(hs)
            keep.append(ba)
            self._tensors.extend(bucketed)
        if name:
            opts.name = name.encode()
        _check(client._lib.plan_begin(client._c, byref(opts), byref(self._p)), "plan_begin")

    @classmethod
    def _open(cls, client, name):
        p = c_void_p()
        _check(client._lib.plan_open(client._c, name.encode(), byref(p)), "plan_open")
        return cls(client, _opened=(p, {}, []))

    def add(self, op, inputs=(), outputs=(), params=None):
        """Append op `op` (as Client.run takes it)."""
        if self.sent:
            raise ValueError("plan already sent")
        o, _keep = _op_struct(op, inputs, outputs, params)
        _check(self.client._lib.plan_add(self._p, byref(o)), op)
        self._tensors.extend(t for t in list(inputs) + list(outputs) if t is not None)

    def end(self):
        """Send the plan; the daemon checks every op for every bucket."""
        if not self.sent:
            _check(self.client._lib.plan_end(self._p), "plan_end")
            self.sent = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.end()

    def tensor(self, name):
        """A tensor of a warm-up plan, by the name its warm-up file gives it."""
        if name in self._named:
            return self._named[name]
        h, dt, nd = c_uint64(), c_int(), c_int()
        shape = (c_int64 * L.MAX_DIMS)()
        _check(self.client._lib.plan_tensor(self._p, name.encode(), byref(h), byref(dt), byref(nd),
                                            shape), "plan_tensor")
        t = Tensor(self.client, h.value, _dtypes.CODES[dt.value], shape[:nd.value], owned=False)
        self._named[name] = t
        return t

    def _bindings(self, bindings):
        if not bindings:
            return None, 0
        pairs = list(bindings.items()) if isinstance(bindings, dict) else list(bindings)
        arr = (L.Binding * len(pairs))()
        for i, (a, b) in enumerate(pairs):
            arr[i].plan_tensor = a.handle
            arr[i].tensor = b.handle
            self._tensors.append(b)
        return arr, len(pairs)

    def run(self, size=0, bindings=None, submit=False):
        """Replay for `size` rows of the bucketed dim (0: the largest bucket).
        `bindings` ({plan tensor: tensor} or pairs) replace the plan's tensors for
        this run and later ones. submit=True: as Client.run's."""
        self.end()
        arr, n = self._bindings(bindings)
        c = self.client
        if submit:
            cp = c_void_p()
            _check(c._lib.plan_submit(self._p, int(size), arr, n, byref(cp)), "plan_submit")
            c._track(cp)
        else:
            _check(c._lib.plan_run(self._p, int(size), arr, n), "plan_run")

    def free(self):
        """Free the plan and its graphs in the daemon."""
        if self._p is not None and self._p.value and not self.client.closed:
            self.client._lib.plan_free(self._p)
        self._p = None
        self._tensors = []

    def __del__(self):
        if not sys.is_finalizing():
            self.free()
