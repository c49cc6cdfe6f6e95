"""The manifest's expression language (docs/manifest.md, "Expressions"),
evaluated in Python to work out the shapes of outputs the caller did not
pass. The syntax is a subset of Python's, so Python's own parser reads it;
only the forms the manifest allows are evaluated (no eval()). The daemon
still checks every request: a shape computed here is a convenience, never
the authority.
"""
import ast
import functools



class ExprError(ValueError):
    pass


class TensorInfo:
    """What an expression sees of a tensor: its shape and dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = list(shape)
        self.dtype = dtype


def _product(xs):
    return functools.reduce(lambda a, b: a * b, _as_list(xs), 1)


def _as_list(x):
    return x.shape if isinstance(x, TensorInfo) else x


def _minmax(f):
    def g(*args):
        if len(args) == 1:
            return f(_as_list(args[0]))
        return f(args)
    return g


def _broadcast_shape(a, b):
    a, b = _as_list(a), _as_list(b)
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ExprError("shapes %s and %s do not broadcast" % (a, b))
        out.append(y if x == 1 else x)
    return out


def _broadcastable(a, b):
    a, b = _as_list(a), _as_list(b)
    if len(a) > len(b):
        return False
    return all(x == 1 or x == y for x, y in zip(reversed(a), reversed(b)))


@functools.lru_cache(maxsize=None)
def parse(text):
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise ExprError("cannot parse %r: %s" % (text, e))


class Env:
    """Names visible to an op's expressions: tensors, params, vars."""

    def __init__(self, names, elem_bytes, dtype_size):
        self.names = names
        self.elem_bytes = elem_bytes
        self.dtype_size = dtype_size

    def call(self, fname, args):
        if fname == "has":
            return args[0] is not None
        if fname == "elem_bytes":
            return self.dtype_size(args[0].dtype)
        funcs = {
            "product": _product,
            "len": lambda x: len(_as_list(x)),
            "min": _minmax(min),
            "max": _minmax(max),
            "ceil_div": lambda a, b: -(-a // b),
            "broadcast_shape": _broadcast_shape,
            "broadcastable": _broadcastable,
        }
        if fname not in funcs:
            raise ExprError("unknown function %s" % fname)
        return funcs[fname](*args)


_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_CMPOPS = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
}


def evaluate(text, env):
    return _ev(parse(text), env)


def _ev(n, env):
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, ast.Name):
        if n.id == "true":
            return True
        if n.id == "false":
            return False
        if n.id == "elem_bytes":
            return env.elem_bytes
        if n.id not in env.names:
            raise ExprError("unknown name %s" % n.id)
        return env.names[n.id]
    if isinstance(n, ast.List):
        return [_ev(e, env) for e in n.elts]
    if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
        a, b = _ev(n.left, env), _ev(n.right, env)
        try:
            return _BINOPS[type(n.op)](_as_list(a), _as_list(b))
        except ZeroDivisionError:
            raise ExprError("division by zero")
    if isinstance(n, ast.UnaryOp):
        v = _ev(n.operand, env)
        if isinstance(n.op, ast.USub):
            return -v
        if isinstance(n.op, ast.Not):
            return not v
    if isinstance(n, ast.BoolOp):
        if isinstance(n.op, ast.And):
            return all(_ev(v, env) for v in n.values)
        return any(_ev(v, env) for v in n.values)
    if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _CMPOPS:
        return _CMPOPS[type(n.ops[0])](_as_list(_ev(n.left, env)),
                                       _as_list(_ev(n.comparators[0], env)))
    if isinstance(n, ast.IfExp):
        return _ev(n.body, env) if _ev(n.test, env) else _ev(n.orelse, env)
    if isinstance(n, ast.Attribute):
        t = _ev(n.value, env)
        if t is None:
            raise ExprError("an absent optional tensor has no %s" % n.attr)
        if not isinstance(t, TensorInfo):
            raise ExprError("%s of a non-tensor" % n.attr)
        if n.attr == "shape":
            return list(t.shape)
        if n.attr == "ndim":
            return len(t.shape)
        if n.attr == "numel":
            return _product(t.shape)
        raise ExprError("unknown attribute %s" % n.attr)
    if isinstance(n, ast.Subscript):
        v = _as_list(_ev(n.value, env))
        s = n.slice
        try:
            if isinstance(s, ast.Slice):
                lo = _ev(s.lower, env) if s.lower is not None else None
                hi = _ev(s.upper, env) if s.upper is not None else None
                return list(v[lo:hi])
            return v[_ev(s, env)]
        except IndexError:
            raise ExprError("index out of range")
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
        return env.call(n.func.id, [_ev(a, env) for a in n.args])
    raise ExprError("unsupported expression %s" % ast.dump(n))


