"""Running tileopsd ops on torch tensors.

Three ways, from the most to the least explicit:

- ``client.from_torch(t)`` / ``tensor.to_torch()``: a tileops.Tensor over a
  torch tensor and back. A contiguous CUDA tensor is imported without a copy:
  torch's own CUDA IPC export (``_share_cuda_``) gives the handle of the
  caching allocator's block that holds the tensor and the storage's offset
  in it, to which the tensor's own offset is added; the daemon checks that
  offset and size against the block it opens. The tileops.Tensor keeps the
  torch tensor alive (the daemon uses its memory) and gives torch's IPC
  reference back when freed. A CPU tensor is copied through the arena.
  ``to_torch()`` of a daemon-owned tensor on the CUDA backend opens the
  daemon's export with torch's ``_new_shared_cuda`` (no copy; keep the
  tileops.Tensor alive while it is used); on the CPU backend it is a copy.

- ``tileops.pytorch.run(op, *tensors, out=..., **params)``: one op on torch
  tensors, as tileops.ops takes tileops tensors; outputs not given are made
  with torch.empty. CPU tensors are copied in and the outputs (and inputs
  the op writes) copied back. CUDA tensors are used in place: those made
  tileops tensors with from_torch (or register()) are found again at no
  cost, others are imported for the call and freed after it. Ordering with
  torch's stream (``order=True``, the default, on CUDA): the daemon waits on
  the device for an event recorded on torch's current stream, and torch's
  stream waits for an event the daemon records after the op, so neither
  side synchronises the host. With a library that has them, both events are
  opened once (tileops_event_register / tileops_event_export) and each wait
  and record goes through the rings without a round trip
  (tileops_event_wait_submit / tileops_event_record_submit); else
  tileops_event_wait / tileops_event_record. ``submit=True`` returns before
  the daemon answers; a refusal is raised by the next sync or torch_waits.

- ``torch.ops.tileops.<op>``: every manifest op as a torch custom op
  (torch.library), for the CPU and CUDA dispatch keys, so that it can be
  called inside a model's forward and appears in traced graphs. It runs
  through ``run`` on the client ``set_client`` gave (else one connected on
  first use). Params whose manifest default is infinite are ``float?`` with
  None meaning the daemon's default (torch's schemas have no infinity).
  Optional outputs (attention_prefill's lse) are always produced.
  Autograd is not supported: these are inference ops.
"""
import threading
import weakref

import torch

from . import _dtypes
from . import _ipc
from . import _expr
from . import _mps
from . import ops as _ops
from ._client import _error
from ._lib import byref, c_void_p
from .ops import _SLOW

__all__ = ["run", "set_client", "get_client", "register", "unregister", "wait_for_torch",
           "torch_waits",
           "LIBRARY_NAMESPACE"]

LIBRARY_NAMESPACE = "tileops"

_default = {"client": None}
_default_lock = threading.Lock()


def set_client(client):
    """The client torch.ops.tileops.* and run() use when given none."""
    _default["client"] = client


def get_client():
    with _default_lock:
        c = _default["client"]
        if c is None or c.closed:
            import tileops
            c = _default["client"] = tileops.connect(name="torch.ops.tileops")
        return c


def _untyped(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()
    s = t.storage()
    return s.untyped() if hasattr(s, "untyped") else s._untyped()


def _storage_class():
    return getattr(torch, "UntypedStorage", None) or torch._UntypedStorage


class _Bridge:
    """A client's torch side: imported tensors, IPC references, events."""

    def __init__(self, client):
        self.client = client
        self.imports = {}        # _key(t) -> weakref to the tileops.Tensor
        self.registered = {}     # the same keys -> the tileops.Tensor, held until unregistered
        self.ipc_refs = {}       # tileops handle -> (ref counter file, offset) to give back
        self.event = None        # our interprocess event, recorded again for every wait
        self.event_handle = None  # its cudaIpcEventHandle_t bytes, asked for once
        self.daemon_events = {}  # daemon's event handles, opened once
        # Events opened once (when the library has them): per torch stream, an
        # interprocess event made and registered once, with the completion of
        # its last wait; the session's exported event, opened once.
        self.fast_events = client._lib.has("event_register")
        self.stream_events = {}  # (device, stream) -> [torch event, id, last wait's completion]
        self.daemon_event = None
        self.mps_checked = False  # _mps.check ran (once per client)

    def lookup(self, t):
        """The live import of CUDA tensor t (same address, dtype, shape and
        strides), or None."""
        key = _key(t)
        hit = self.registered.get(key)
        if hit is None:
            ref = self.imports.get(key)
            hit = ref() if ref is not None else None
            if hit is None and ref is not None:
                self.imports.pop(key, None)  # its tileops.Tensor is gone
        return hit if hit is not None and hit.handle else None

    def register(self, t):
        out = self.from_torch(t)
        if t.is_cuda:
            self.registered[_key(t)] = out
        return out

    def unregister(self, t):
        out = self.registered.pop(_key(t), None)
        if out is not None:
            out.free()

    def run_registered(self, spec, args, out, kw, submit=False):
        """run(..., order=False) when every tensor is registered (the hot loop
        of a model step): each is found by one dict lookup on its address,
        dtype, shape and strides, and the op struct comes from the op's cache
        (tileops.ops's fast path). _SLOW for anything else, which run() then
        does the general way. Synchronous, as run() is: a refused request
        raises the daemon's message here; with submit, pipelined as
        tileops.ops's submit=True (raised by the next sync or torch_waits)."""
        reg = self.registered
        n = len(args)
        if not reg or n < spec.n_in_needed or n > spec.n_in:
            return _SLOW
        ins = []
        try:
            for i, a in enumerate(args):
                if a is None:
                    if not spec.in_optional[i]:
                        return _SLOW
                    ins.append(0)
                    continue
                hit = reg.get((a.data_ptr(), a.dtype, a.shape, a.stride()))
                if hit is None or not hit.handle:
                    return _SLOW
                ins.append(hit.handle)
            nout = len(spec.out_required)
            if out is None:
                if True in spec.out_required:
                    return _SLOW
                outs, ret = (), None
            else:
                outl = [out] if isinstance(out, torch.Tensor) else list(out)
                if len(outl) != nout:
                    return _SLOW
                outs = []
                for o in outl:
                    hit = reg.get((o.data_ptr(), o.dtype, o.shape, o.stride()))
                    if hit is None or not hit.handle:
                        return _SLOW
                    outs.append(hit.handle)
                outs = tuple(outs)
                ret = outl[0] if nout == 1 else tuple(outl)
        except (AttributeError, TypeError):  # not a torch tensor
            return _SLOW
        if kw and None in kw.values():
            return _SLOW  # run() leaves None params out
        ptr = spec._op_ptr(ins, outs, kw)
        if ptr is None:
            return _SLOW
        c = self.client
        if submit:
            cp = c_void_p()
            st = c._lib.op_submit(c._c, ptr, byref(cp))
            if st:
                raise _error(st, spec.name)
            c._track(cp)
            return ret
        st = c._lib.op_run(c._c, ptr)
        if st:
            raise _error(st)
        return ret

    def close(self):
        lib = self.client._lib
        for ent in self.stream_events.values():
            if ent[2] is not None:
                lib.completion_free(ent[2])
                ent[2] = None
            if not self.client.closed:
                try:
                    # Released before torch's event goes (CUDA's rule for an
                    # opened IPC event); the session's end would release it too.
                    self.client.event_release(ent[1])
                except Exception:  # noqa: BLE001 - best effort while closing
                    pass
        self.stream_events.clear()
        self.daemon_event = None
        self.registered.clear()
        for ref in list(self.ipc_refs.values()):
            _release_ipc(ref)
        self.ipc_refs.clear()

    # ---- tensors ---------------------------------------------------------------------------
    def from_torch(self, t):
        dt = _dtypes.name(t.dtype)
        if not t.is_cuda:
            a = t.detach().contiguous()
            if dt == "bf16":
                a = a.view(torch.int16)
            elif dt == "fp8_e4m3":
                a = a.view(torch.uint8)
            arr = a.numpy()
            out = self.client.tensor(dt, tuple(t.shape))
            out.write(arr.view(_dtypes.to_numpy(dt)) if arr.dtype != _dtypes.to_numpy(dt) else arr)
            return out
        if not t.is_contiguous():
            raise ValueError("from_torch: a CUDA tensor must be contiguous to be imported "
                             "(tileops tensors are packed row-major); use .contiguous()")
        hit = self.lookup(t)
        if hit is not None:
            return hit
        key = _key(t)
        s = _untyped(t)
        (_dev, handle, _size, storage_offset, rc_file, rc_offset,
         ev_handle, ev_required) = s._share_cuda_()
        esize = t.element_size()
        offset = storage_offset + t.storage_offset() * esize
        nbytes = t.numel() * esize
        if ev_required and self.client._lib.has("event_wait"):
            # torch recorded this event when it shared the storage: the daemon's
            # use of the memory waits for torch's work on it so far.
            self.client.event_wait(ev_handle)
        out = self.client.import_ipc(_ipc.torch_mem_handle(handle), offset, nbytes, dt,
                                     tuple(t.shape))
        out._keep = t
        self.ipc_refs[out.handle] = (rc_file, rc_offset)
        self.imports[key] = weakref.ref(out)
        return out

    def release(self, tensor, handle):
        """Called by Tensor.free of an imported tensor: give torch's reference back
        once the daemon's work on the memory is ordered before torch's."""
        ref = self.ipc_refs.pop(handle, None)
        if ref is None:
            return
        try:
            # Not the place to raise a pipelined op's error: the next sync or
            # torch_waits does.
            self.torch_waits(raise_pending=False)
        finally:
            _release_ipc(ref)

    def to_torch(self, tensor, device=None):
        tdt = _dtypes.to_torch(tensor.dtype)
        if not self.client.has_cuda_ipc:
            import numpy
            a = tensor.numpy()
            if a.dtype != _dtypes.to_numpy(tensor.dtype) or tensor.dtype in ("bf16", "fp8_e4m3"):
                a = a.view(numpy.int16 if tensor.dtype == "bf16" else numpy.uint8)
                return torch.from_numpy(a.copy()).view(tdt)
            return torch.from_numpy(a)
        if isinstance(tensor._keep, torch.Tensor):
            return tensor._keep  # it was torch's to begin with
        handle, offset, nbytes = tensor.export_ipc()
        dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        # No reference counter to decrement (the daemon is not torch) and no
        # event: the caller orders with torch_waits() (run() does).
        storage = _storage_class()._new_shared_cuda(dev.index, handle, nbytes, offset, b"", 0,
                                                    bytes(64), False)
        out = torch.empty(0, dtype=tdt, device=dev)
        try:
            out.set_(storage, 0, tensor.shape)
        except TypeError:
            out.set_(torch.TypedStorage(wrap_storage=storage, dtype=tdt), 0, tensor.shape)
        return out

    # ---- ordering ----------------------------------------------------------------------------
    def _check_mps(self):
        """Once per client: warn when torch's process or the daemon is not under MPS."""
        if not self.mps_checked:
            self.mps_checked = True
            _mps.check(self.client, torch.cuda.current_device(), stacklevel=5)

    def wait_for_torch(self, stream=None):
        """The daemon's later ops wait for the work queued on torch's stream."""
        self._check_mps()
        if self.fast_events:
            return self._wait_for_torch_registered(stream or torch.cuda.current_stream())
        if self.event is None:
            self.event = torch.cuda.Event(interprocess=True)
            self.event_handle = None
        stream = stream or torch.cuda.current_stream()
        self.event.record(stream)
        if self.event_handle is None:
            # One event, recorded again each time: its handle never changes,
            # and asking for it is a driver call each time.
            self.event_handle = self.event.ipc_handle()
        self.client.event_wait(self.event_handle)

    def _wait_for_torch_registered(self, stream):
        """wait_for_torch with an event made and registered once per stream
        (the daemon opened it once) and a wait that goes through the rings
        without a round trip. Before the event is recorded again, its last
        wait must have been run by the daemon: a wait takes the latest record
        when the daemon runs it, and must not take this step's (normally long
        done: torch_waits waits for the daemon to have run everything before
        its record). A refused wait is raised here or by the next sync."""
        c = self.client
        lib = c._lib
        key = (stream.device, stream.cuda_stream)
        ent = self.stream_events.get(key)
        if ent is None:
            ev = torch.cuda.Event(interprocess=True)
            ev.record(stream)
            ent = self.stream_events[key] = [ev, c.event_register(ev.ipc_handle()), None]
        else:
            cp = ent[2]
            if cp is not None:
                ent[2] = None
                st = lib.completion_wait(cp, -1)
                err = _error(st) if st else None
                lib.completion_free(cp)
                if err is not None:
                    raise err
            ent[0].record(stream)
        cp = c_void_p()
        st = lib.event_wait_submit(c._c, ent[1], byref(cp))
        if st:
            raise _error(st, "event_wait_submit")
        ent[2] = cp

    def torch_waits(self, stream=None, raise_pending=True):
        """Torch's stream waits for the daemon's work so far."""
        if not self.client.has_cuda_ipc:
            return
        self._check_mps()
        if self.fast_events:
            if self.daemon_event is None:
                self.daemon_event = torch.cuda.Event.from_ipc_handle(
                    torch.cuda.current_device(), self.client.event_export())
            # Returns once the daemon has queued the record (and raises what
            # the pipelined work before it refused): only then may torch wait.
            self.client.event_record_now(raise_pending)
            (stream or torch.cuda.current_stream()).wait_event(self.daemon_event)
            return
        h = self.client.event_record()
        ev = self.daemon_events.get(h)
        if ev is None:
            ev = self.daemon_events[h] = torch.cuda.Event.from_ipc_handle(
                torch.cuda.current_device(), h)
        (stream or torch.cuda.current_stream()).wait_event(ev)


def _key(t):
    """What names a registered or imported torch tensor: its address, dtype,
    shape and strides (two views of one address differ in shape or strides)."""
    return (t.data_ptr(), t.dtype, tuple(t.shape), tuple(t.stride()))


def _release_ipc(ref):
    rc_file, rc_offset = ref
    cls = _storage_class()
    f = getattr(cls, "_release_ipc_counter_cuda", None) or getattr(cls, "_release_ipc_counter")
    try:
        f(rc_file, rc_offset)
    except RuntimeError:
        pass  # best effort, as torch's own consumers do


def register(t, client=None):
    """Import CUDA tensor `t` once (zero-copy) so that run() and the torch ops find
    it without a round trip, until unregister(t) or the client closes; returns the
    tileops.Tensor, which keeps `t` alive. For weights, caches and buffers reused
    every step. A CPU tensor is copied and not kept (run() copies CPU tensors on
    every call, so later changes to them are seen)."""
    return (client or get_client())._torch_bridge().register(t)


def unregister(t, client=None):
    """Free the import register(t) made."""
    (client or get_client())._torch_bridge().unregister(t)


def wait_for_torch(client=None, stream=None):
    """The daemon's later ops wait (on the device) for torch's work so far."""
    (client or get_client())._torch_bridge().wait_for_torch(stream)


def torch_waits(client=None, stream=None):
    """Torch's stream waits (on the device) for the daemon's work so far."""
    (client or get_client())._torch_bridge().torch_waits(stream)


# ---- run -----------------------------------------------------------------------------------
def _output_specs(spec, ins, params, produce_optional):
    """(shape, dtype name) of each output, from the manifest's rules; None for
    optional outputs not produced."""
    names = {}
    for t, v in zip(spec.inputs, ins):
        names[t["name"]] = None if v is None else _expr.TensorInfo(tuple(v.shape), _dtypes.name(v.dtype))
    for k, d in spec.param_defaults.items():
        names[k] = params.get(k, d)
    first = next((v for v in ins if v is not None), None)
    env = _expr.Env(names, first.element_size() if first is not None else 0,
                    lambda dt: _dtypes.SIZES[dt])
    for vname, text in spec.vars:
        try:
            names[vname] = _expr.evaluate(text, env)
        except (_expr.ExprError, TypeError, IndexError):
            pass
    out = []
    for t in spec.outputs:
        if t["optional"] and not produce_optional:
            out.append(None)
            continue
        shape = _expr.evaluate(t["shape"], env)
        from .ops import _dtype_of
        dt = _dtype_of(t["dtype"], names, spec.name, t["name"])
        names[t["name"]] = _expr.TensorInfo(shape, dt)
        out.append((shape, dt))
    return out


def run(op, *args, out=None, client=None, order=True, submit=False, **kw):
    """Run manifest op `op` on torch tensors; returns the output(s) as torch tensors
    (as tileops.ops does with tileops tensors). See the module's doc.

    submit=True pipelines, as tileops.ops's submit=True does: the call returns
    before the daemon answers, and a refusal is raised by the next
    client.sync() or torch_waits(). With order=False over registered CUDA
    tensors (a model step between one wait_for_torch and one torch_waits)
    the ops then cost no round trip each. CPU tensors are still copied back
    after the op (a read waits for it, but a refused op's error comes at
    the next sync)."""
    spec = _ops.specs[op]
    if client is None:
        client = get_client()
    if not order:
        b = client._torch if client._torch is not None else client._torch_bridge()
        r = b.run_registered(spec, args, out, kw, submit)
        if r is not _SLOW:
            return r
    ins = [None] * len(spec.inputs)
    ins[:len(args)] = args
    params = {}
    for k, v in kw.items():
        if k in spec.in_index:
            ins[spec.in_index[k]] = v
        elif k in spec.param_types:
            if v is not None:
                params[k] = spec._param(k, v)
        else:
            raise TypeError("%s: no input or param named '%s'" % (op, k))
    return _run(spec, ins, out, params, client, order, produce_optional=False, submit=submit)


def _run(spec, ins, out, params, client, order, produce_optional, submit=False):
    n = len(spec.outputs)
    outs = [None] * n if out is None else ([out] if isinstance(out, torch.Tensor) else list(out))
    outs += [None] * (n - len(outs))
    if any(o is None for o in outs):
        first = next(v for v in ins if v is not None)
        for i, s in enumerate(_output_specs(spec, ins, params, produce_optional)):
            if outs[i] is None and s is not None:
                outs[i] = torch.empty(s[0], dtype=_dtypes.to_torch(s[1]), device=first.device)
    cuda = any(t is not None and t.is_cuda for t in list(ins) + outs)
    b = client._torch_bridge()
    temps = []

    def tt(t):
        if t is None:
            return None
        if cuda:
            hit = b.lookup(t)
            if hit is not None:
                return hit
        x = b.from_torch(t)
        temps.append(x)
        return x

    tins = [tt(t) for t in ins]
    touts = [tt(t) if t is not None else None for t in outs]
    if cuda and order:
        b.wait_for_torch()
    client.run(spec.name, tins, touts, params, submit=submit)
    if cuda:
        if order:
            b.torch_waits()
    else:
        # Copy back what the op wrote: its outputs and the inputs it mutates.
        written = [(outs[i], touts[i]) for i in range(n) if outs[i] is not None]
        written += [(ins[i], tins[i]) for i, t in enumerate(spec.inputs)
                    if t.get("mutated") and ins[i] is not None]
        for dst, src in written:
            dst.copy_(b.to_torch(src).view(dst.shape))
    for x in temps:
        x.free()
    if n == 0:
        return None
    return outs[0] if n == 1 else tuple(outs)


# ---- torch.ops.tileops.* ------------------------------------------------------------------
_SCHEMA_TYPES = {"int": "int", "float": "float", "bool": "bool"}


def _schema(spec):
    args, alias = [], iter("abcdefghijklmnopqrstuvwxyz")
    for t in spec.inputs:
        ty = "Tensor(%s!)" % next(alias) if t.get("mutated") else "Tensor"
        if t["optional"]:
            args.append("%s? %s=None" % (ty, t["name"]))
        else:
            args.append("%s %s" % (ty, t["name"]))
    for p in spec.params:
        d = spec.param_defaults[p["name"]]
        ty = _SCHEMA_TYPES[p["type"]]
        if d is None:
            args.append("%s %s" % (ty, p["name"]))
        elif isinstance(d, float) and d in (float("inf"), float("-inf")):
            args.append("%s? %s=None" % (ty, p["name"]))
        elif isinstance(d, bool):
            args.append("%s %s=%s" % (ty, p["name"], "True" if d else "False"))
        else:
            args.append("%s %s=%r" % (ty, p["name"], d))
    rets = ", ".join("Tensor" for _ in spec.outputs)
    ret = "()" if not spec.outputs else ("Tensor" if len(spec.outputs) == 1 else "(%s)" % rets)
    return "%s(%s) -> %s" % (spec.name, ", ".join(args), ret)


def _impl(spec):
    n_in = len(spec.inputs)
    pnames = [p["name"] for p in spec.params]

    def impl(*args):
        ins = list(args[:n_in])
        params = {k: v for k, v in zip(pnames, args[n_in:]) if v is not None}
        return _run(spec, ins, None, params, get_client(), True, produce_optional=True)

    impl.__name__ = spec.name
    return impl


_library = None


def _define_ops():
    global _library
    if _library is not None:
        return
    lib = torch.library.Library(LIBRARY_NAMESPACE, "DEF")
    for name, spec in sorted(_ops.specs.items()):
        lib.define(_schema(spec))
        fn = _impl(spec)
        for key in ("CPU", "CUDA"):
            lib.impl(name, fn, key)
    _library = lib


_define_ops()
