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
  inputs' client with the shape and dtype the manifest's rules give it
  (optional outputs are not allocated). Pass ``out=`` on hot paths: a new
  tensor is a round trip to the daemon;
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
from ._client import Tensor, _op_struct, _check
from . import _lib as L

_TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops_table.json")
_CONTROL = ("out", "plan", "submit")
_PY_TYPES = {"int": int, "float": float, "bool": bool}


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

    # ---- the call ------------------------------------------------------------------------
    def __call__(self, *args, out=None, plan=None, submit=False, **kw):
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
            if submit:
                client.run(self.name, ins, outs, params, submit=True)
            else:
                o, _keep = _op_struct(self.name, ins, outs, params)
                _check(client._lib.op_run(client._c, L.byref(o)))
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
            outs[i] = client.tensor(dt, shape)
            names[t["name"]] = _expr.TensorInfo(shape, dt)

    # ---- the function --------------------------------------------------------------------
    def function(self):
        spec = self

        def op(*args, **kw):
            return spec(*args, **kw)

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
