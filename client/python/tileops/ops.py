"""Every op of the manifest as a function: ``tileops.ops.rms_norm(x, w, eps=1e-5, out=y)``.

The functions are made at import from ops_table.json (generated from the
manifest, see gen_ops_table.py); each one's docstring is the manifest's
description of the op, its tensors and params. Calling convention:

- inputs positionally in the manifest's order, or by name; optional ones
  may be left out (or passed as None);
- params by keyword only; an omitted one takes the daemon's default (the
  manifest's, shown in the signature);
- ``out=``: the output tensor, or a tuple for ops with several (None for
  one to leave out or to allocate). An output not given is allocated in the
  inputs' client, on their device, with the shape and dtype the manifest's
  rules give it (optional outputs are not allocated). Pass ``out=`` on hot
  paths: a new tensor is a round trip to the daemon;
- ``plan=p`` appends the op to plan p instead of running it;
- ``submit=True`` pipelines: the call returns before the daemon answers and
  an error is raised by the next ``client.sync()``.

The return value is the output tensor, a tuple of them for ops declaring
several outputs, or None for ops that only mutate inputs (rope, kv_cache_append).
Ops the table does not know (a newer daemon's) run with Client.run(name, ...).
"""
import inspect
import json
import os

from . import _dtypes
from . import _expr
from ._client import Tensor, _OpCache, _cacheable_params, _error
from ._lib import byref, c_void_p

_TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops_table.json")
_CONTROL = ("out", "plan", "submit")
_PY_TYPES = {"int": int, "float": float, "bool": bool}
_SLOW = object()  # what OpSpec._fast returns for a call it leaves to the general path


def _default(p):
    d = p["default"]
    if p["type"] == "float" and isinstance(d, str):
        return float(d)  # "inf", "-inf": JSON has no infinity
    if p["type"] == "float" and d is not None:
        return float(d)
    return d


def _dtype_of(rule, env_names, op, tname):
    alts = [a.strip() for a in rule.split("|")]
    concrete = []
    for a in alts:
        if a.startswith("same_as(") and a.endswith(")"):
            ref = env_names.get(a[8:-1])
            if isinstance(ref, _expr.TensorInfo):
                return ref.dtype
        else:
            concrete.append(a)
    if len(concrete) == 1:
        return concrete[0]
    raise ValueError("%s: the dtype of output '%s' may be %s: pass out=" % (op, tname, rule))


class OpSpec:
    """One op of the table, and the function that runs it."""

    def __init__(self, d):
        self.name = d["name"]
        self.family = d["family"]
        self.doc = d["doc"] or ""
        self.torch = d["torch"]
        self.status = d["status"]
        self.inputs = d["inputs"]
        self.outputs = d["outputs"]
        self.params = d["params"]
        self.vars = d["vars"]
        self.in_names = [t["name"] for t in self.inputs]
        self.in_index = {n: i for i, n in enumerate(self.in_names)}
        self.param_types = {p["name"]: p["type"] for p in self.params}
        self.param_defaults = {p["name"]: _default(p) for p in self.params}
        self.nbname = self.name.encode()
        clash = set(_CONTROL) & (set(self.in_names) | set(self.param_types))
        if clash:
            raise RuntimeError("op %s names %s, which tileops.ops uses" % (self.name, clash))
        # What the fast path (_fast) checks a call against, worked out once.
        self.n_in = len(self.inputs)
        self.in_optional = tuple(bool(t["optional"]) for t in self.inputs)
        req = [i for i, o in enumerate(self.in_optional) if not o]
        self.n_in_needed = req[-1] + 1 if req else 0
        self.out_required = tuple(not t["optional"] for t in self.outputs)
        self.cache = _OpCache()

    # ---- the hot path --------------------------------------------------------------------
    def _fast(self, args, out, submit, kw):
        """The call with every input and output given as a Tensor (or None for an
        optional one) and params by keyword: the common case of a hot loop.
        Returns _SLOW for anything else, which __call__ then handles (and
        explains, when it is wrong). The op struct comes from self.cache when
        the same handles and params were seen before; the daemon validates
        the request either way, so a bad shape raises its message as before."""
        n = len(args)
        if n < self.n_in_needed or n > self.n_in:
            return _SLOW
        ins = []
        client = None
        for i, a in enumerate(args):
            if a.__class__ is Tensor:
                ins.append(a.handle)
                if client is None:
                    client = a.client
            elif a is None and self.in_optional[i]:
                ins.append(0)
            else:
                return _SLOW
        nout = len(self.out_required)
        if out.__class__ is Tensor:
            if nout == 0 or (nout > 1 and True in self.out_required[1:]):
                return _SLOW
            outs = (out.handle,)
            ret = out if nout == 1 else (out,) + (None,) * (nout - 1)
            if client is None:
                client = out.client
        elif out is None:
            if True in self.out_required:
                return _SLOW
            outs = ()
            ret = None if nout <= 1 else (None,) * nout
        else:
            if out.__class__ is not tuple and out.__class__ is not list:
                return _SLOW
            outl = list(out)
            if len(outl) > nout:
                return _SLOW
            outl += [None] * (nout - len(outl))
            outs = []
            for i, t in enumerate(outl):
                if t.__class__ is Tensor:
                    outs.append(t.handle)
                    if client is None:
                        client = t.client
                elif t is None and not self.out_required[i]:
                    outs.append(0)
                else:
                    return _SLOW
            outs = tuple(outs)
            ret = outl[0] if nout == 1 else tuple(outl)
        if client is None:
            return _SLOW
        ptr = self._op_ptr(ins, outs, kw)
        if ptr is None:
            return _SLOW
        lib = client._lib
        if submit:
            cp = c_void_p()
            st = lib.op_submit(client._c, ptr, byref(cp))
            if st:
                raise _error(st, self.name)
            client._track(cp)
        else:
            st = lib.op_run(client._c, ptr)
            if st:
                raise _error(st)
        return ret

    def _op_ptr(self, ins, outs, kw):
        """A pointer to the tileops_op of this op over handles `ins` and `outs`
        with params `kw` as the caller gave them (converted here by the
        manifest's types); None when kw names something that is not a param."""
        key = (tuple(ins), outs, tuple(kw.items())) if kw else (tuple(ins), outs)
        try:
            ptr = self.cache.get(key)
        except TypeError:  # an unhashable param value
            ptr, key = None, None
        if ptr is not None:
            return ptr
        params = {}
        for k, v in kw.items():
            if k not in self.param_types:
                return None
            params[k] = self._param(k, v)
        if key is not None and not _cacheable_params(params):
            key = None
        return self.cache.put(key, self.nbname.decode(), ins, outs, params)

    # ---- the call ------------------------------------------------------------------------
    def __call__(self, *args, out=None, plan=None, submit=False, **kw):
        if plan is None:
            r = self._fast(args, out, submit, kw)
            if r is not _SLOW:
                return r
        return self._call(args, out, plan, submit, kw)

    def _call(self, args, out, plan, submit, kw):
        ins = [None] * len(self.inputs)
        if len(args) > len(ins):
            raise TypeError("%s takes %d input tensors, %d given" % (self.name, len(ins), len(args)))
        ins[:len(args)] = args
        params = {}
        for k, v in kw.items():
            i = self.in_index.get(k)
            if i is not None:
                if i < len(args):
                    raise TypeError("%s: input '%s' given twice" % (self.name, k))
                ins[i] = v
            elif k in self.param_types:
                params[k] = self._param(k, v)
            else:
                raise TypeError("%s: no input or param named '%s' (inputs %s; params %s)"
                                % (self.name, k, ", ".join(self.in_names),
                                   ", ".join(self.param_types) or "none"))
        for i, t in enumerate(self.inputs):
            if ins[i] is None and not t["optional"]:
                raise TypeError("%s: missing input '%s'" % (self.name, t["name"]))
            if ins[i] is not None and not isinstance(ins[i], Tensor):
                raise TypeError("%s: input '%s' is a %s, not a tileops.Tensor"
                                % (self.name, t["name"], type(ins[i]).__name__))
        outs = self._outputs(out, ins, params, plan)
        if plan is not None:
            plan.add(self.name, ins, outs, params)
        else:
            client = self._client(ins, outs)
            client.run(self.name, ins, outs, params, submit=submit)
        if not self.outputs:
            return None
        if len(self.outputs) == 1:
            return outs[0]
        return tuple(outs)

    def _param(self, k, v):
        ty = self.param_types[k]
        if ty == "bool":
            return bool(v)
        if ty == "int":
            if isinstance(v, float) and not v.is_integer():
                raise TypeError("%s: param '%s' is an int, not %r" % (self.name, k, v))
            return int(v)
        return float(v)

    def _client(self, ins, outs):
        for t in list(ins) + list(outs):
            if t is not None:
                return t.client
        raise TypeError("%s: no tensor to find the client by" % self.name)

    def _outputs(self, out, ins, params, plan):
        n = len(self.outputs)
        if n == 0:
            if out is not None:
                raise TypeError("%s has no outputs (it writes its inputs)" % self.name)
            return []
        if out is None:
            outs = [None] * n
        elif isinstance(out, Tensor):
            outs = [out] + [None] * (n - 1)
        else:
            outs = list(out)
            if len(outs) > n:
                raise TypeError("%s has %d outputs, %d given" % (self.name, n, len(outs)))
            outs += [None] * (n - len(outs))
        missing = [i for i, t in enumerate(self.outputs) if outs[i] is None and not t["optional"]]
        if missing:
            client = plan.client if plan is not None else self._client(ins, outs)
            self._allocate(client, ins, outs, params, missing)
        return outs

    def _allocate(self, client, ins, outs, params, missing):
        names = {}
        for t, v in zip(self.inputs, ins):
            names[t["name"]] = None if v is None else _expr.TensorInfo(v.shape, v.dtype)
        for k, d in self.param_defaults.items():
            names[k] = params.get(k, d)
        first = next((v for v in ins if v is not None), None)
        # On the device of the tensors given: an op's tensors share one.
        given = next((v for v in list(ins) + list(outs) if v is not None), None)
        device = given.device if given is not None else 0
        env = _expr.Env(names, _dtypes.SIZES[first.dtype] if first is not None else 0,
                        lambda dt: _dtypes.SIZES[dt])
        for vname, text in self.vars:
            try:
                names[vname] = _expr.evaluate(text, env)
            except (_expr.ExprError, TypeError, IndexError):
                pass  # not every var is defined for every call (optional tensors)
        for i, t in enumerate(self.outputs):
            if outs[i] is not None:
                names[t["name"]] = _expr.TensorInfo(outs[i].shape, outs[i].dtype)
                continue
            if i not in missing:
                continue
            if not t["shape"]:
                raise ValueError("%s: output '%s' has no shape rule: pass out=" % (self.name, t["name"]))
            try:
                shape = _expr.evaluate(t["shape"], env)
            except (_expr.ExprError, TypeError, KeyError) as e:
                raise ValueError("%s: cannot work out the shape of output '%s' (%s): %s; pass out="
                                 % (self.name, t["name"], t["shape"], e))
            dt = _dtype_of(t["dtype"], names, self.name, t["name"])
            outs[i] = client.tensor(dt, shape, device=device)
            names[t["name"]] = _expr.TensorInfo(shape, dt)

    # ---- the function --------------------------------------------------------------------
    def function(self):
        spec = self

        fast, slow = spec._fast, spec._call

        def op(*args, out=None, plan=None, submit=False, **kw):
            if plan is None:
                r = fast(args, out, submit, kw)
                if r is not _SLOW:
                    return r
            return slow(args, out, plan, submit, kw)

        op.__name__ = op.__qualname__ = self.name
        op.__doc__ = self.docstring()
        op.__signature__ = self.signature()
        op.spec = self
        return op

    def signature(self):
        P = inspect.Parameter
        ps = []
        for t in self.inputs:
            ps.append(P(t["name"], P.POSITIONAL_OR_KEYWORD,
                        default=None if t["optional"] else P.empty))
        for p in self.params:
            d = self.param_defaults[p["name"]]
            ps.append(P(p["name"], P.KEYWORD_ONLY, default=P.empty if d is None else d,
                        annotation=_PY_TYPES[p["type"]]))
        ps.append(P("out", P.KEYWORD_ONLY, default=None))
        ps.append(P("plan", P.KEYWORD_ONLY, default=None))
        ps.append(P("submit", P.KEYWORD_ONLY, default=False))
        return inspect.Signature(ps)

    def docstring(self):
        lines = [self.doc, ""]
        lines.append("Family %s; matches %s.%s" % (self.family, self.torch,
                     "" if self.status == "implemented" else
                     " Specified, not implemented: the daemon refuses it (UNSUPPORTED)."))

        def tensors(title, ts):
            if not ts:
                return
            lines.extend(["", title + ":"])
            for t in ts:
                bits = [t["dtype"]]
                if t.get("shape"):
                    bits.append("shape " + t["shape"])
                if t.get("optional"):
                    bits.append("optional")
                if t.get("mutated"):
                    bits.append("written in place")
                s = "    %s: %s" % (t["name"], ", ".join(bits))
                if t.get("doc"):
                    s += ". " + t["doc"]
                lines.append(s)

        tensors("Inputs", self.inputs)
        tensors("Outputs (out=)", self.outputs)
        if self.params:
            lines.extend(["", "Params:"])
            for p in self.params:
                d = self.param_defaults[p["name"]]
                bits = [p["type"], "required" if d is None else "default %r" % d]
                if p["range"]:
                    bits.append("range " + p["range"])
                if p["values"]:
                    bits.append("one of %s" % p["values"])
                s = "    %s (%s)" % (p["name"], ", ".join(bits))
                if p["doc"]:
                    s += ": " + p["doc"]
                lines.append(s)
        lines.extend(["", "Raises tileops.Error with the daemon's message when the request is refused."])
        return "\n".join(lines)


def _load():
    with open(_TABLE_PATH) as f:
        table = json.load(f)
    specs = {}
    for d in table["ops"]:
        specs[d["name"]] = OpSpec(d)
    return specs


specs = _load()
"""The op table: name -> OpSpec (tensors, params, family, doc)."""

for _name, _spec in specs.items():
    globals()[_name] = _spec.function()

__all__ = sorted(specs)


def families():
    """{family: [op names]}."""
    out = {}
    for s in specs.values():
        out.setdefault(s.family, []).append(s.name)
    return out
