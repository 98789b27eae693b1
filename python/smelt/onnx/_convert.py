"""ONNX graph -> a Python function over smelt's traced arrays -> smelt.jit.

Each ONNX node is one entry of OPS: a function of the node's input values
(smelt Tracers while tracing, NumPy arrays when they are known: the
initializers, constants and everything computed from them alone) written
with NumPy's functions, which smelt's tracer turns into graph-builder
calls and NumPy computes directly.  So a node whose inputs are all known
is computed once with NumPy (constant folding: shape arithmetic never
reaches the graph), and one whose inputs are traced becomes smelt nodes.
Known arrays that meet traced ones become graph constants
(capture_as_const=True).

Everything smelt cannot express is found at load (UnsupportedOperator):
operators outside OPS, attributes an entry does not read, attribute values
it does not handle, and dtypes smelt does not have.
"""
import numpy as np

import smelt
from .._lib import UnsupportedError
from .._tracer import Tracer, current, lift, apply
from .._jit import Function
from . import _exotic

# ---- dtypes ------------------------------------------------------------------------------------------
# ONNX element types smelt has (TensorProto.DataType): FLOAT, UINT8, INT32,
# INT64, BOOL, FLOAT16, DOUBLE.  bfloat16, float8, int4/uint4 and uint64 are
# carried in smelt dtypes by _exotic (hooked into the conversion of each node).
_SMELT_ELEM = {1, 2, 6, 7, 9, 10, 11}
# Narrow integers smelt lacks (int8, int16, uint16, uint32), carried in int64: every value of such a type is
# wrapped to its range (two's complement) after the node that makes it, so + - * shifts and casts wrap as
# they would in the narrow type; graph inputs are widened and outputs narrowed at the call.  Operations
# whose int64 intermediate could overflow before the wrap are refused at load (_NARROW_UNSAFE).
_NARROW = {3: np.dtype(np.int8), 5: np.dtype(np.int16), 4: np.dtype(np.uint16), 12: np.dtype(np.uint32)}
_CARRIER = np.dtype(np.int64)


class UnsupportedOperator(UnsupportedError):
    """An ONNX node smelt cannot run (its operator, an attribute, an
    attribute's value or a dtype), found at load: the message names the node
    and its op_type."""

    def __init__(self, message):
        UnsupportedError.__init__(self, -10, message)


def _np_dtype(elem_type):
    """the NumPy dtype smelt computes an ONNX element type in (int64 for
    the narrow integers)"""
    if elem_type in _NARROW:
        return _CARRIER
    if elem_type in _exotic.CARRIED:
        return _exotic.carrier(elem_type)
    return _onnx_np_dtype(elem_type)


def _onnx_np_dtype(elem_type):
    import onnx
    from onnx import helper
    if elem_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    if elem_type in _exotic.CARRIED:
        return _exotic.np_dtype(elem_type)
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return None


def _dtype_name(elem_type):
    import onnx
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except Exception:
        return str(elem_type)


def _supported_elem(elem_type):
    return elem_type in _SMELT_ELEM or elem_type in _NARROW or elem_type in _exotic.CARRIED


def _wrap(v, dt):
    """an int64 value wrapped to the narrow integer type dt's range"""
    bits = dt.itemsize * 8
    mask = np.int64((1 << bits) - 1)
    v = astype(v, _CARRIER)
    if dt.kind == "u":
        return np.bitwise_and(v, mask)
    half = np.int64(1 << (bits - 1))
    return np.bitwise_and(v + half, mask) - half


# operators whose int64 intermediate could overflow before the wrap: refused on narrow integers (all of them),
# or on uint32 (products of two values up to 2^32)
_NARROW_UNSAFE = {"ReduceProd", "CumProd", "Pow", "Det"}
_UINT32_UNSAFE = {"Mul", "MatMul", "Gemm", "Einsum", "ReduceSumSquare", "Conv", "ConvTranspose", "ReduceL2"}


# ---- helpers usable on Tracers and NumPy arrays alike ------------------------------------------------
def is_traced(x):
    return isinstance(x, Tracer)


def known(x, what):
    """x as a NumPy array; x must be known (not traced)."""
    if is_traced(x):
        raise UnsupportedError(-10, "%s is computed from the model's inputs; smelt needs it known when the "
                               "graph is built (a shape, an axis list, a count)" % what)
    return np.asarray(x)


def sc(x, v):
    """v as a scalar of x's dtype (so that it never changes x's dtype)."""
    return np.dtype(x.dtype).type(v)


def smelt_op(name, *args):
    """smelt's elementwise operator `name` (smelt.ops), on traced or known
    arrays."""
    if any(is_traced(a) for a in args):
        return apply(name, *args)
    r = getattr(smelt.ops, name)(*[np.ascontiguousarray(a) for a in args])
    return np.asarray(r)


def as_graph(x):
    """A graph output: a traced value, or a known array made a constant of
    the graph being traced."""
    if is_traced(x):
        return x
    tr = current()
    x = np.ascontiguousarray(x).reshape(np.shape(x))  # (ascontiguousarray makes a 0-d array 1-d)
    return apply("copy", lift(x, tr))


def norm_axis(a, n):
    a = int(a)
    if not -max(n, 1) <= a < max(n, 1):
        raise ValueError("axis %d out of range for rank %d" % (a, n))
    return a % max(n, 1)


def astype(x, dt):
    dt = np.dtype(dt)
    if x.dtype == dt:
        return x
    return x.astype(dt)


# ---- operators --------------------------------------------------------------------------------------
OPS = {}


def op(name, attrs=(), check=None, since=1):
    """Register an operator: the attributes it reads (any other is an error
    at load) and an optional check(node, attrs, opset) returning what is
    missing, or None."""
    def reg(f):
        OPS[name] = (f, frozenset(attrs), check)
        return f
    return reg


def _unary(name, fn, attrs=()):
    op(name, attrs)(lambda c, ins, A: fn(ins[0]))


for _n, _f in [("Neg", np.negative), ("Abs", np.abs), ("Sqrt", np.sqrt), ("Exp", np.exp), ("Log", np.log),
               ("Tanh", np.tanh), ("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Asin", np.arcsin),
               ("Acos", np.arccos), ("Atan", np.arctan), ("Sinh", np.sinh), ("Cosh", np.cosh),
               ("Asinh", np.arcsinh), ("Acosh", np.arccosh), ("Atanh", np.arctanh), ("Floor", np.floor),
               ("Ceil", np.ceil), ("Round", np.rint), ("Sign", np.sign), ("Not", np.logical_not),
               ("IsNaN", np.isnan), ("BitwiseNot", np.invert)]:
    _unary(_n, _f)
_unary("Reciprocal", lambda x: np.reciprocal(x))
_unary("Erf", lambda x: smelt_op("erf", x))
_unary("Sigmoid", lambda x: smelt_op("sigmoid", x))
_unary("Softplus", lambda x: smelt_op("softplus", x))
_unary("Relu", lambda x: np.maximum(x, sc(x, 0)))
_unary("Softsign", lambda x: x / (sc(x, 1) + np.abs(x)))
_unary("HardSwish", lambda x: x * np.clip(x / sc(x, 6) + sc(x, 0.5), sc(x, 0), sc(x, 1)))
_unary("Mish", lambda x: x * np.tanh(smelt_op("softplus", x)))
_unary("Identity", lambda x: x)


@op("IsInf", ["detect_negative", "detect_positive"])
def _isinf(c, ins, A):
    x = ins[0]
    r = np.isinf(x)
    neg, pos = A.get("detect_negative", 1), A.get("detect_positive", 1)
    if not neg:
        r = np.logical_and(r, x > sc(x, 0))
    if not pos:
        r = np.logical_and(r, x < sc(x, 0))
    return r


@op("LeakyRelu", ["alpha"])
def _leaky(c, ins, A):
    x = ins[0]
    return np.where(x < sc(x, 0), x * sc(x, A.get("alpha", 0.01)), x)


@op("Elu", ["alpha"])
def _elu(c, ins, A):
    x = ins[0]
    a = sc(x, A.get("alpha", 1.0))
    return np.where(x < sc(x, 0), a * (np.exp(x) - sc(x, 1)), x)


@op("Celu", ["alpha"])
def _celu(c, ins, A):
    x = ins[0]
    a = sc(x, A.get("alpha", 1.0))
    return np.maximum(x, sc(x, 0)) + np.minimum(sc(x, 0), a * (np.exp(x / a) - sc(x, 1)))


@op("Selu", ["alpha", "gamma"])
def _selu(c, ins, A):
    x = ins[0]
    a = sc(x, A.get("alpha", 1.67326319217681884765625))
    g = sc(x, A.get("gamma", 1.05070102214813232421875))
    return np.where(x <= sc(x, 0), g * (a * np.exp(x) - a), g * x)


@op("ThresholdedRelu", ["alpha"])
def _trelu(c, ins, A):
    x = ins[0]
    return np.where(x > sc(x, A.get("alpha", 1.0)), x, sc(x, 0))


@op("HardSigmoid", ["alpha", "beta"])
def _hsig(c, ins, A):
    x = ins[0]
    return np.clip(x * sc(x, A.get("alpha", 0.2)) + sc(x, A.get("beta", 0.5)), sc(x, 0), sc(x, 1))


@op("Shrink", ["bias", "lambd"])
def _shrink(c, ins, A):
    x = ins[0]
    b, l = sc(x, A.get("bias", 0.0)), sc(x, A.get("lambd", 0.5))
    return np.where(x < -l, x + b, np.where(x > l, x - b, sc(x, 0)))


@op("Gelu", ["approximate"], check=lambda n, A, o: None if A.get("approximate", "none") in ("none", "tanh")
    else "approximate=%r" % A.get("approximate"))
def _gelu(c, ins, A):
    return smelt_op("gelu_tanh" if A.get("approximate", "none") == "tanh" else "gelu", ins[0])


@op("PRelu")
def _prelu(c, ins, A):
    x, s = ins
    return np.where(x < sc(x, 0), x * astype(s, x.dtype), x)


def _binary(name, fn, attrs=("broadcast", "axis")):
    op(name, attrs, check=_legacy_broadcast)(lambda c, ins, A: fn(ins[0], ins[1]))


def _legacy_broadcast(node, A, opset):
    if A.get("broadcast", 0) and "axis" in A:
        return "broadcast with axis (opset < 7)"
    return None


_binary("Add", np.add)
_binary("Sub", np.subtract)
_binary("Mul", np.multiply)
_binary("And", np.logical_and)
_binary("Or", np.logical_or)
_binary("Xor", np.logical_xor)
_binary("Equal", np.equal)
_binary("Less", np.less)
_binary("Greater", np.greater)
_binary("LessOrEqual", np.less_equal)
_binary("GreaterOrEqual", np.greater_equal)
_binary("BitwiseAnd", np.bitwise_and, ())
_binary("BitwiseOr", np.bitwise_or, ())
_binary("BitwiseXor", np.bitwise_xor, ())


@op("Div", ["broadcast", "axis"], check=_legacy_broadcast)
def _div(c, ins, A):
    a, b = ins
    if np.issubdtype(np.dtype(a.dtype), np.floating):
        return np.divide(a, b)
    # integer division truncates toward zero (C's), as ONNX's
    q = np.divide(astype(a, np.float64), astype(b, np.float64))
    return astype(np.trunc(q), a.dtype)


@op("Pow", ["broadcast", "axis"], check=_legacy_broadcast)
def _pow(c, ins, A):
    a, b = ins
    if np.issubdtype(np.dtype(a.dtype), np.floating):
        return np.power(a, astype(b, a.dtype))
    return astype(np.power(astype(a, np.float64), astype(b, np.float64)), a.dtype)


@op("Mod", ["fmod"])
def _mod(c, ins, A):
    a, b = ins
    if A.get("fmod", 0):
        return np.fmod(a, b)
    return np.mod(a, b)


@op("BitShift", ["direction"], check=lambda n, A, o: None if A.get("direction") in ("LEFT", "RIGHT")
    else "direction=%r" % A.get("direction"))
def _bitshift(c, ins, A):
    a, b = ins
    return np.left_shift(a, b) if A["direction"] == "LEFT" else np.right_shift(a, b)


@op("Where")
def _where(c, ins, A):
    return np.where(ins[0], ins[1], ins[2])


def _variadic(name, fn, mean=False):
    def f(c, ins, A):
        r = ins[0]
        for x in ins[1:]:
            r = fn(r, x)
        if mean:
            r = r / sc(r, len(ins))
        return r
    op(name)(f)


_variadic("Max", np.maximum)
_variadic("Min", np.minimum)
_variadic("Sum", np.add)
_variadic("Mean", np.add, True)


@op("Clip", ["min", "max"])
def _clip(c, ins, A):
    x = ins[0]
    lo = A.get("min") if "min" in A else (ins[1] if len(ins) > 1 else None)
    hi = A.get("max") if "max" in A else (ins[2] if len(ins) > 2 else None)
    if lo is not None and not is_traced(lo):
        lo = sc(x, np.asarray(lo).reshape(()))
    if hi is not None and not is_traced(hi):
        hi = sc(x, np.asarray(hi).reshape(()))
    if is_traced(lo):
        lo = lo.reshape(())
    if is_traced(hi):
        hi = hi.reshape(())
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _check_cast(node, A, opset):
    if "to" in A and not _supported_elem(A["to"]):
        return "a cast to %s (smelt's dtypes: %s)" % (_dtype_name(A["to"]), smelt._dtypes.SUPPORTED)
    return None


@op("Cast", ["to", "saturate"], check=_check_cast)
def _cast(c, ins, A):
    return astype(ins[0], _np_dtype(A["to"]))


@op("CastLike", ["saturate"])
def _castlike(c, ins, A):
    return astype(ins[0], ins[1].dtype)


# ---- reductions -----------------------------------------------------------------------------------
def _red_axes(c, ins, A):
    if "axes" in A:
        axes = list(A["axes"])
    elif len(ins) > 1 and ins[1] is not None:
        axes = [int(v) for v in known(ins[1], "a reduction's axes").reshape(-1)]
    else:
        axes = []
    return axes


def _empty_reduction(x, ax, keep, kind):
    """A reduction over an axis of size 0: the operation's identity (ONNX's
    rule: -inf for max and the log-sums, +inf for min, 0 for the sums, 1 for
    the product), computed here."""
    dt = np.dtype(x.dtype)
    axes = ax if ax is not None else tuple(range(x.ndim))
    shape = [1 if i in axes else n for i, n in enumerate(x.shape)] if keep else \
        [n for i, n in enumerate(x.shape) if i not in axes]
    big = np.inf if dt.kind == "f" else (np.iinfo(dt).max if dt.kind in "iu" else 1)
    small = -np.inf if dt.kind == "f" else (np.iinfo(dt).min if dt.kind in "iu" else 0)
    v = {"max": small, "min": big, "prod": 1, "logsum": -np.inf, "logsumexp": -np.inf,
         "mean": np.nan}.get(kind, 0)
    return np.full(shape, v, dt)


def _reduction(name, kind):
    def f(c, ins, A):
        x = ins[0]
        axes = _red_axes(c, ins, A)
        keep = bool(A.get("keepdims", 1))
        if not axes:
            if A.get("noop_with_empty_axes", 0):
                return x * x if kind == "sumsquare" else x
            ax = None
        else:
            ax = tuple(sorted(norm_axis(a, x.ndim) for a in axes))
        dt = x.dtype
        if any(x.shape[a] == 0 for a in (ax if ax is not None else range(x.ndim))):
            return _empty_reduction(x, ax, keep, kind)
        if kind == "sum":
            r = np.sum(x, axis=ax, keepdims=keep)
        elif kind == "mean":
            r = np.mean(x, axis=ax, keepdims=keep)
        elif kind == "max":
            r = np.max(x, axis=ax, keepdims=keep)
        elif kind == "min":
            r = np.min(x, axis=ax, keepdims=keep)
        elif kind == "prod":
            r = np.prod(x, axis=ax, keepdims=keep)
        elif kind == "l1":
            r = np.sum(np.abs(x), axis=ax, keepdims=keep)
        elif kind == "l2":
            r = np.sqrt(np.sum(x * x, axis=ax, keepdims=keep))
        elif kind == "sumsquare":
            r = np.sum(x * x, axis=ax, keepdims=keep)
        elif kind == "logsum":
            r = np.log(np.sum(x, axis=ax, keepdims=keep))
        elif kind == "logsumexp":
            m = np.max(x, axis=ax, keepdims=True)
            m = np.where(np.isinf(m), sc(m, 0), m)
            r = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
            if not keep:
                r = np.squeeze(r, axis=ax if ax is not None else tuple(range(x.ndim)))
        return astype(r, dt)
    op(name, ["axes", "keepdims", "noop_with_empty_axes"])(f)


for _n, _k in [("ReduceSum", "sum"), ("ReduceMean", "mean"), ("ReduceMax", "max"), ("ReduceMin", "min"),
               ("ReduceProd", "prod"), ("ReduceL1", "l1"), ("ReduceL2", "l2"), ("ReduceSumSquare", "sumsquare"),
               ("ReduceLogSum", "logsum"), ("ReduceLogSumExp", "logsumexp")]:
    _reduction(_n, _k)


def _arg(name, fn):
    def f(c, ins, A):
        x = ins[0]
        axis = norm_axis(A.get("axis", 0), x.ndim)
        keep = bool(A.get("keepdims", 1))
        if A.get("select_last_index", 0):
            n = x.shape[axis]
            r = fn(np.flip(x, axis), axis=axis, keepdims=keep)
            r = astype(r, np.int64)
            return np.int64(n - 1) - r
        return astype(fn(x, axis=axis, keepdims=keep), np.int64)
    op(name, ["axis", "keepdims", "select_last_index"])(f)


_arg("ArgMax", np.argmax)
_arg("ArgMin", np.argmin)


# ---- softmax family and normalisations ------------------------------------------------------------------
def _softmax_like(name, kind):
    def f(c, ins, A):
        x = ins[0]
        if c.opset_of(name) < 13:
            axis = norm_axis(A.get("axis", 1), x.ndim)
            shape = x.shape
            n0 = int(np.prod(shape[:axis], dtype=np.int64))
            x2 = x.reshape(n0, int(np.prod(shape[axis:], dtype=np.int64)))
            return _softmax_core(x2, 1, kind).reshape(shape)
        return _softmax_core(x, norm_axis(A.get("axis", -1), x.ndim), kind)
    op(name, ["axis"])(f)


def _softmax_core(x, axis, kind):
    if kind == "hardmax":
        idx = np.argmax(x, axis=axis, keepdims=True)
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        iota = np.arange(x.shape[axis], dtype=np.int64).reshape(shape)
        return astype(np.equal(astype(idx, np.int64), iota), x.dtype)
    m = np.max(x, axis=axis, keepdims=True)
    d = x - m
    e = np.exp(d)
    s = np.sum(e, axis=axis, keepdims=True)
    if kind == "log":
        return d - np.log(s)
    return e / s


_softmax_like("Softmax", "soft")
_softmax_like("LogSoftmax", "log")
_softmax_like("Hardmax", "hardmax")


@op("LayerNormalization", ["axis", "epsilon", "stash_type"],
    check=lambda n, A, o: None if A.get("stash_type", 1) == 1 else "stash_type=%r" % A.get("stash_type"))
def _layernorm(c, ins, A):
    x = ins[0]
    scale = ins[1]
    bias = ins[2] if len(ins) > 2 else None
    axis = norm_axis(A.get("axis", -1), x.ndim)
    eps = A.get("epsilon", 1e-5)
    axes = tuple(range(axis, x.ndim))
    xf = astype(x, np.float32) if x.dtype != np.float64 else x
    mean = np.mean(xf, axis=axes, keepdims=True)
    d = xf - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv = np.float32(1) / np.sqrt(var + sc(var, eps))
    y = astype(d * inv, x.dtype) * scale
    if bias is not None:
        y = y + bias
    return [y, mean, inv]


@op("BatchNormalization", ["epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"],
    check=lambda n, A, o: "opset < 9 (spatial / is_test)" if o < 9 else None)
def _batchnorm(c, ins, A):
    """Inference: the given statistics; training_mode=1: the batch's
    (population variance), and the running statistics updated with
    momentum as extra outputs."""
    x, scale, b, mean, var = ins[:5]
    eps = A.get("epsilon", 1e-5)
    shape = [1] * x.ndim
    if x.ndim > 1:
        shape[1] = x.shape[1]
    r = lambda v: v.reshape(shape)  # noqa: E731
    if not A.get("training_mode", 0):
        return (x - r(mean)) / np.sqrt(r(var) + sc(x, eps)) * r(scale) + r(b)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    bm = np.mean(x, axis=axes, keepdims=True)
    dv = x - bm
    bv = np.mean(dv * dv, axis=axes, keepdims=True)
    y = dv / np.sqrt(bv + sc(x, eps)) * r(scale) + r(b)
    mom = A.get("momentum", 0.9)
    bm, bv = bm.reshape(-1), bv.reshape(-1)
    return [y, astype(mean * sc(mean, mom) + bm * sc(bm, 1 - mom), np.dtype(x.dtype)),
            astype(var * sc(var, mom) + bv * sc(bv, 1 - mom), np.dtype(x.dtype))]


@op("InstanceNormalization", ["epsilon"])
def _instnorm(c, ins, A):
    x, scale, b = ins
    eps = A.get("epsilon", 1e-5)
    axes = tuple(range(2, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    shape = [1] * x.ndim
    shape[1] = x.shape[1]
    return d / np.sqrt(var + sc(x, eps)) * scale.reshape(shape) + b.reshape(shape)


@op("MeanVarianceNormalization", ["axes"])
def _mvn(c, ins, A):
    x = ins[0]
    axes = tuple(norm_axis(a, x.ndim) for a in A.get("axes", [0, 2, 3]))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    return d / (np.sqrt(var) + sc(x, 1e-9))


@op("LpNormalization", ["axis", "p"], check=lambda n, A, o: None if A.get("p", 2) in (1, 2) else "p=%r" % A.get("p"))
def _lpnorm(c, ins, A):
    x = ins[0]
    axis = norm_axis(A.get("axis", -1), x.ndim)
    if A.get("p", 2) == 1:
        n = np.sum(np.abs(x), axis=axis, keepdims=True)
    else:
        n = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    return x / n


@op("GroupNormalization", ["epsilon", "num_groups", "stash_type"],
    check=lambda n, A, o: None if A.get("stash_type", 1) == 1 else "stash_type=%r" % A.get("stash_type"))
def _groupnorm(c, ins, A):
    x, scale, bias = ins
    g = int(A["num_groups"])
    n, ch = x.shape[0], x.shape[1]
    xf = astype(x, np.float32) if x.dtype != np.float64 else x
    xg = xf.reshape(n, g, -1)
    mean = np.mean(xg, axis=2, keepdims=True)
    d = xg - mean
    var = np.mean(d * d, axis=2, keepdims=True)
    y = astype((d / np.sqrt(var + sc(var, A.get("epsilon", 1e-5)))).reshape(x.shape), x.dtype)
    shape = [1] * x.ndim
    shape[1] = ch
    if scale.shape[0] != ch:  # opset 18: one scale and bias a group
        scale = np.broadcast_to(np.expand_dims(scale, 1), (g, ch // g)).reshape(ch)
        bias = np.broadcast_to(np.expand_dims(bias, 1), (g, ch // g)).reshape(ch)
    return y * scale.reshape(shape) + bias.reshape(shape)


@op("LRN", ["alpha", "beta", "bias", "size"])
def _lrn(c, ins, A):
    x = ins[0]
    size = int(A["size"])
    alpha, beta, bias = A.get("alpha", 1e-4), A.get("beta", 0.75), A.get("bias", 1.0)
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = x * x
    widths = [[0, 0]] * x.ndim
    widths[1] = [lo, hi]
    sq = np.pad(sq, widths, mode="constant", constant_values=sc(x, 0))
    ch = x.shape[1]
    tot = None
    for k in range(size):
        idx = [slice(None)] * x.ndim
        idx[1] = slice(k, k + ch)
        part = sq[tuple(idx)]
        tot = part if tot is None else tot + part
    return x / np.power(sc(x, bias) + sc(x, alpha / size) * tot, sc(x, beta))


@op("GlobalAveragePool")
def _gap(c, ins, A):
    x = ins[0]
    return np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalMaxPool")
def _gmp(c, ins, A):
    x = ins[0]
    return np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


# ---- windows and scans (smelt.ops.conv / max_pool / avg_pool, np.cumsum) ----------------------------
# smelt's windows take 1 or 2 spatial axes; 3 are built from them: a 3-D conv as a sum over the kernel's
# depth of 2-D convs on depth slices, a 3-D max or average pool as a 2-D pool then a (k, 1) pool over depth
# (both separable: the window is a box and its validity a per-axis condition).
def _check_conv_pool(node, A, opset):
    if A.get("auto_pad", "NOTSET") not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        return "auto_pad=%r" % A.get("auto_pad")
    if "kernel_shape" in A and len(A["kernel_shape"]) not in (1, 2, 3):
        return "%d spatial axes (1 to 3)" % len(A["kernel_shape"])
    return None


def _window_attrs(x, A, kernel, dilated_same=True):
    """strides, pads (before..., after...), dilations of a window over x's
    spatial axes, auto_pad resolved at x's (known) shape."""
    ns = x.ndim - 2
    if ns not in (1, 2, 3):
        raise UnsupportedError(-10, "a window over %d spatial axes (1 to 3)" % ns)
    s = [int(v) for v in A.get("strides", [1] * ns)]
    d = [int(v) for v in A.get("dilations", [1] * ns)]
    p = [int(v) for v in A.get("pads", [0] * (2 * ns))]
    mode = A.get("auto_pad", "NOTSET")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode == "VALID":
        p = [0] * (2 * ns)
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        for i in range(ns):
            n = int(x.shape[2 + i])
            o = -(-n // s[i])
            ext = (int(kernel[i]) - 1) * (d[i] if dilated_same else 1) + 1
            total = max(0, (o - 1) * s[i] + ext - n)
            lo = total // 2 if mode == "SAME_UPPER" else total - total // 2
            p[i], p[ns + i] = lo, total - lo
    return s, p, d


def _known_or_traced(x):
    return x if is_traced(x) else np.ascontiguousarray(x)


def _conv_nd(x, w, b, s, p, d, g):
    """ONNX's Conv over 1 to 3 spatial axes."""
    ns = x.ndim - 2
    if ns <= 2:
        args = [_known_or_traced(v) for v in ([x, w] + ([b] if b is not None else []))]
        return smelt.ops.conv(*args, strides=s, pads=p, dilations=d, groups=g)
    # 3-D: pad depth, then per depth tap j the depth slices j*d0, j*d0 + s0, ... as a batch of 2-D convs
    n, kd = int(x.shape[2]), int(w.shape[2])
    if p[0] or p[3]:
        widths = [[0, 0] for _ in range(5)]
        widths[2] = [p[0], p[3]]
        x = np.pad(x, widths, mode="constant", constant_values=sc(x, 0))
    n_out = (n + p[0] + p[3] - (kd - 1) * d[0] - 1) // s[0] + 1
    acc = None
    for j in range(kd):
        xs = x[:, :, j * d[0]: j * d[0] + (n_out - 1) * s[0] + 1: s[0]]
        nb, ch, dd, hh, ww = xs.shape
        xs = np.transpose(xs, (0, 2, 1, 3, 4)).reshape(nb * dd, ch, hh, ww)
        wj = w[:, :, j]
        y = _conv_nd(xs, wj, None, s[1:], [p[1], p[2], p[4], p[5]], d[1:], g)
        acc = y if acc is None else acc + y
    m, ho, wo = acc.shape[1:]
    acc = np.transpose(acc.reshape(x.shape[0], n_out, m, ho, wo), (0, 2, 1, 3, 4))
    if b is not None:
        acc = acc + b.reshape(1, -1, 1, 1, 1)
    return acc


@op("Conv", ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"], check=_check_conv_pool)
def _conv(c, ins, A):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 and ins[2] is not None else None
    s, p, d = _window_attrs(x, A, list(w.shape[2:]))
    return _conv_nd(x, w, b, s, p, d, int(A.get("group", 1)))


@op("ConvTranspose", ["auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads",
                      "strides"], check=_check_conv_pool)
def _conv_transpose(c, ins, A):
    """ConvTranspose as a Conv: the input spread by the strides (zeros
    between its elements), padded by (kernel extent - 1) - pads (cropped
    where that is negative), convolved with the weights' spatial axes
    flipped and their input and output channels swapped within each group."""
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 and ins[2] is not None else None
    ns = x.ndim - 2
    if ns not in (1, 2, 3):
        raise UnsupportedError(-10, "ConvTranspose over %d spatial axes (1 to 3)" % ns)
    g = int(A.get("group", 1))
    k = [int(v) for v in w.shape[2:]]
    s = [int(v) for v in A.get("strides", [1] * ns)]
    d = [int(v) for v in A.get("dilations", [1] * ns)]
    op_ = [int(v) for v in A.get("output_padding", [0] * ns)][:ns]
    n_in = [int(v) for v in x.shape[2:]]
    full = [s[i] * (n_in[i] - 1) + op_[i] + (k[i] - 1) * d[i] + 1 for i in range(ns)]
    mode = A.get("auto_pad", "NOTSET")
    out_shape = [int(v) for v in A["output_shape"]][-ns:] if "output_shape" in A else None
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        target = out_shape or [n_in[i] * s[i] for i in range(ns)]
        total = [full[i] - target[i] for i in range(ns)]
        lo = [t // 2 if mode == "SAME_UPPER" else t - t // 2 for t in total]
        p = lo + [total[i] - lo[i] for i in range(ns)]
    elif mode == "VALID":
        p = [0] * (2 * ns)
    else:
        p = [int(v) for v in A.get("pads", [0] * (2 * ns))]
    if out_shape is None:
        out_shape = [full[i] - p[i] - p[ns + i] for i in range(ns)]
    if min(out_shape) <= 0:
        if min(out_shape) < 0:
            raise ValueError("ConvTranspose: pads larger than the output (output shape %s)" % out_shape)
        return np.zeros([int(x.shape[0]), g * int(w.shape[1])] + out_shape, np.dtype(x.dtype))
    # spread: after each input element s - 1 zeros (the last ones dropped)
    y = x
    for i in range(ns):
        if s[i] == 1:
            continue
        a = 2 + i
        shape = list(y.shape)
        e = np.expand_dims(y, a + 1)
        widths = [[0, 0] for _ in range(e.ndim)]
        widths[a + 1] = [0, s[i] - 1]
        e = np.pad(e, widths, mode="constant", constant_values=sc(x, 0))
        shape[a] = shape[a] * s[i]
        y = e.reshape(shape)
        idx = [slice(None)] * y.ndim
        idx[a] = slice(0, (n_in[i] - 1) * s[i] + 1)
        y = y[tuple(idx)]
    # pad (crop where negative) so that a stride-1 conv gives out_shape
    widths, crop, cropped = [[0, 0] for _ in range(y.ndim)], [slice(None)] * y.ndim, False
    for i in range(ns):
        a = 2 + i
        ext = (k[i] - 1) * d[i]
        left = ext - p[i]
        right = out_shape[i] + ext - y.shape[a] - left
        if left < 0 or right < 0:
            crop[a] = slice(max(-left, 0), y.shape[a] - max(-right, 0))
            cropped = True
        widths[a] = [max(left, 0), max(right, 0)]
    if cropped:
        y = y[tuple(crop)]
    if any(lo or hi for lo, hi in widths):
        y = np.pad(y, widths, mode="constant", constant_values=sc(x, 0))
    # weights [C, M/g, k...] -> [M, C/g, k...], spatial axes flipped
    cin, mg = int(w.shape[0]), int(w.shape[1])
    wt = w.reshape([g, cin // g, mg] + k)
    wt = np.transpose(wt, [0, 2, 1] + list(range(3, 3 + ns))).reshape([g * mg, cin // g] + k)
    wt = np.flip(wt, tuple(range(2, 2 + ns)))
    return _conv_nd(y, wt, b, [1] * ns, [0] * (2 * ns), d, g)


def _pool_geometry(x, k, s, p, d, ceil_mode):
    """The output length of each spatial axis and the pads that make the
    last (ceil_mode) window fit: ONNX's rule (a window starting in the
    right padding is dropped)."""
    ns = x.ndim - 2
    out, p2 = [], list(p)
    for i in range(ns):
        n = int(x.shape[2 + i])
        ext = (k[i] - 1) * d[i] + 1
        span = n + p[i] + p[ns + i] - ext
        o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= n + p[i]:
            o -= 1
        out.append(o)
        p2[ns + i] = max(p[ns + i], (o - 1) * s[i] + ext - n - p[i])
    return out, p2


def _sum_pool(x, k, s, p, d):
    """The sum over each window (zeros outside x): a conv with a kernel of
    ones, one group a channel."""
    ch = int(x.shape[1])
    ones = np.ones([ch, 1] + list(k), np.dtype(x.dtype))
    return _conv_nd(x, ones, None, s, p, d, ch)


def _window_count(x, k, s, p, d, out):
    """How many of each window's positions lie inside x (a constant)."""
    ns = x.ndim - 2
    cnt = np.ones([1, 1] + [1] * ns)
    for i in range(ns):
        n = int(x.shape[2 + i])
        pos = np.arange(out[i])[:, None] * s[i] + np.arange(k[i])[None, :] * d[i] - p[i]
        c1 = np.sum((pos >= 0) & (pos < n), axis=1).astype(np.float64)
        shape = [1] * (ns + 2)
        shape[2 + i] = out[i]
        cnt = cnt * c1.reshape(shape)
    return cnt


@op("MaxPool", ["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"],
    check=_check_conv_pool)
def _maxpool(c, ins, A):
    x = ins[0]
    k = [int(v) for v in A["kernel_shape"]]
    s, p, d = _window_attrs(x, A, k)
    ceil = bool(A.get("ceil_mode", 0))
    if c.n_outputs > 1:
        return list(_maxpool_with_indices(x, k, s, p, d, ceil, int(A.get("storage_order", 0))))
    if x.ndim == 5:  # a 2-D pool over (H, W), then a (kd, 1) pool over depth
        nb, ch, dd, hh, ww = x.shape
        y = smelt.ops.max_pool(_known_or_traced(x.reshape(nb, ch * dd, hh, ww)), k[1:], strides=s[1:],
                               pads=[p[1], p[2], p[4], p[5]], dilations=d[1:], ceil_mode=ceil)
        ho, wo = y.shape[2:]
        y = smelt.ops.max_pool(_known_or_traced(y.reshape(nb, ch, dd, ho * wo)), [k[0], 1], strides=[s[0], 1],
                               pads=[p[0], 0, p[3], 0], dilations=[d[0], 1], ceil_mode=ceil)
        return y.reshape(nb, ch, y.shape[2], ho, wo)
    return smelt.ops.max_pool(_known_or_traced(x), k, strides=s, pads=p, dilations=d, ceil_mode=ceil)


@op("AveragePool", ["auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"],
    check=_check_conv_pool)
def _avgpool(c, ins, A):
    x = ins[0]
    k = [int(v) for v in A["kernel_shape"]]
    s, p, d = _window_attrs(x, A, k, dilated_same=False)
    ceil, incl = bool(A.get("ceil_mode", 0)), bool(A.get("count_include_pad", 0))
    if x.ndim <= 4 and all(v == 1 for v in d):
        return smelt.ops.avg_pool(_known_or_traced(x), k, strides=s, pads=p, ceil_mode=ceil, count_include_pad=incl)
    # dilations or 3 spatial axes: the window sums (a conv with ones) over the count of each window (ONNX's
    # reference: with count_include_pad every window counts its kernel size)
    out, p2 = _pool_geometry(x, k, s, p, d, ceil)
    total = _sum_pool(x, k, s, p2, d)
    total = total[tuple([slice(None)] * 2 + [slice(0, o) for o in out])]
    if incl:
        return total / sc(x, int(np.prod(k)))
    return total / _window_count(x, k, s, p, d, out).astype(np.dtype(x.dtype))


@op("LpPool", ["auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"],
    check=lambda n, A, o: _check_conv_pool(n, A, o) or
    (None if int(A.get("p", 2)) >= 1 else "p=%r" % A.get("p")))
def _lppool(c, ins, A):
    """(sum over the window of |x|^p)^(1/p), padding counting as zeros."""
    x = ins[0]
    k = [int(v) for v in A["kernel_shape"]]
    s, p, d = _window_attrs(x, A, k, dilated_same=False)
    pw = int(A.get("p", 2))
    out, p2 = _pool_geometry(x, k, s, p, d, bool(A.get("ceil_mode", 0)))
    a = np.abs(x) if pw == 1 else (x * x if pw == 2 else np.power(np.abs(x), sc(x, pw)))
    total = _sum_pool(a, k, s, p2, d)
    total = total[tuple([slice(None)] * 2 + [slice(0, o) for o in out])]
    if pw == 1:
        return total
    return np.sqrt(total) if pw == 2 else np.power(total, sc(x, 1.0 / pw))


@op("CumSum", ["exclusive", "reverse"])
def _cumsum(c, ins, A):
    x = ins[0]
    axis = norm_axis(known(ins[1], "CumSum's axis").reshape(-1)[0], x.ndim)
    excl, rev = int(A.get("exclusive", 0)), int(A.get("reverse", 0))
    if is_traced(x):
        from .._tracer import window
        return astype(window("cumsum", [x], axis=axis, exclusive=excl, reverse=rev), x.dtype)
    y = np.flip(x, axis) if rev else x
    y = np.cumsum(y, axis=axis, dtype=x.dtype)
    if excl:
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis)), np.take(y, range(x.shape[axis] - 1), axis)], axis)
    return np.flip(y, axis) if rev else y


@op("DepthToSpace", ["blocksize", "mode"],
    check=lambda n, A, o: None if A.get("mode", "DCR") in ("DCR", "CRD") else "mode=%r" % A.get("mode"))
def _d2s(c, ins, A):
    x = ins[0]
    b = int(A["blocksize"])
    n, ch, h, w = x.shape
    if A.get("mode", "DCR") == "DCR":
        y = np.transpose(x.reshape(n, b, b, ch // (b * b), h, w), (0, 3, 4, 1, 5, 2))
    else:
        y = np.transpose(x.reshape(n, ch // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3))
    return y.reshape(n, ch // (b * b), h * b, w * b)


@op("SpaceToDepth", ["blocksize"])
def _s2d(c, ins, A):
    x = ins[0]
    b = int(A["blocksize"])
    n, ch, h, w = x.shape
    y = np.transpose(x.reshape(n, ch, h // b, b, w // b, b), (0, 3, 5, 1, 2, 4))
    return y.reshape(n, ch * b * b, h // b, w // b)


@op("Upsample", ["mode", "scales"],
    check=lambda n, A, o: None if A.get("mode", "nearest") == "nearest" else "mode=%r" % A.get("mode"))
def _upsample(c, ins, A):
    x = ins[0]
    scales = A["scales"] if "scales" in A else known(ins[1], "Upsample's scales").reshape(-1).tolist()
    for a, k in enumerate(scales):
        if k != int(k) or k < 1:
            raise UnsupportedError(-10, "Upsample by %r (integer scales only)" % k)
        k = int(k)
        if k == 1:
            continue
        shape = list(x.shape)
        e = np.expand_dims(x, a + 1)
        bshape = shape[:a + 1] + [k] + shape[a + 1:]
        x = np.broadcast_to(e, bshape).reshape(shape[:a] + [shape[a] * k] + shape[a + 1:])
    return x


# ---- Resize: per resized axis, the source indices and weights of every output position computed at load
# (NumPy, float64, ONNX's formulas), then takes along that axis with those constant indices and a weighted
# sum with constant weights; the innermost axis first, as ONNX's reference nests them -------------------
_RESIZE_CTM = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_crop_and_resize")
_RESIZE_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_check(node, A, opset):
    mode = A.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic") or (opset < 11 and mode == "cubic"):
        return "mode=%r" % mode
    if A.get("coordinate_transformation_mode", "half_pixel") not in _RESIZE_CTM:
        return "coordinate_transformation_mode=%r" % A.get("coordinate_transformation_mode")
    if A.get("nearest_mode", "round_prefer_floor") not in _RESIZE_NEAREST:
        return "nearest_mode=%r" % A.get("nearest_mode")
    if A.get("keep_aspect_ratio_policy", "stretch") not in ("stretch", "not_larger", "not_smaller"):
        return "keep_aspect_ratio_policy=%r" % A.get("keep_aspect_ratio_policy")
    if A.get("antialias", 0) and mode == "nearest":
        return "antialias with mode 'nearest'"
    return None


def _resize_coeffs(mode, nearest_mode, a, antialias):
    """ONNX's coefficient functions of (ratio, scale): the weights of the
    taps around a source coordinate (ratio in (0, 1] past the tap before it)."""
    if mode == "nearest":
        def f(ratio, scale):
            if ratio == 1:
                return np.array([0.0, 1.0])
            up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                  "floor": False, "ceil": True}[nearest_mode]
            return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])
        return f
    if mode == "linear":
        if not antialias:
            return lambda ratio, scale: np.array([1 - ratio, ratio])

        def lin_aa(ratio, scale):
            scale = min(scale, 1.0)
            start = int(np.floor(-1 / scale) + 1)
            args = (np.arange(start, start + 2 - 2 * start) - ratio) * scale
            w = np.clip(1 - np.abs(args), 0, 1)
            return w / np.sum(w)
        return lin_aa
    if not antialias:
        def cubic(r, scale):
            return np.array([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                             ((a + 2) * r - (a + 3)) * r * r + 1,
                             ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                             ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a])
        return cubic

    def cubic_aa(ratio, scale):
        scale = min(scale, 1.0)

        def k(x):
            x = abs(x)
            if x <= 1:
                return (a + 2) * x ** 3 - (a + 3) * x * x + 1
            if x < 2:
                return a * x ** 3 - 5 * a * x * x + 8 * a * x - 4 * a
            return 0.0
        i0 = int(np.floor(-2 / scale) + 1)
        w = np.array([k(scale * (i - ratio)) for i in range(i0, 2 - i0)])
        return w / np.sum(w)
    return cubic_aa


def _resize_axis(n, m, scale, out_width, coeffs, ctm, roi, exclude_outside):
    """One resized axis of n inputs and m outputs: (idx [m, K], w [m, K],
    outside [m] or None): output i is sum_k w[i, k] * x[idx[i, k]], or the
    extrapolation value where outside[i] (tf_crop_and_resize)."""
    rows, outside = [], np.zeros(m, np.bool_)
    for i in range(m):
        x = np.int64(i)
        if ctm == "align_corners":
            xo = 0.0 if out_width == 1 else x * (n - 1) / (out_width - 1)
        elif ctm == "asymmetric":
            xo = x / scale
        elif ctm == "tf_crop_and_resize":
            lo, hi = roi
            xo = (hi - lo) * (n - 1) / 2 if out_width == 1 else x * (hi - lo) * (n - 1) / (out_width - 1)
            xo += lo * (n - 1)
            if xo < 0 or xo > n - 1:
                outside[i] = True
                rows.append({})
                continue
        elif ctm == "pytorch_half_pixel":
            xo = -0.5 if out_width == 1 else (x + 0.5) / scale - 0.5
        elif ctm == "half_pixel":
            xo = (x + 0.5) / scale - 0.5
        else:  # half_pixel_symmetric
            offset = n / 2 * (1 - m / out_width)
            xo = offset + (x + 0.5) / scale - 0.5
        xo = float(xo)
        fl = int(np.floor(xo))
        ratio = 1 if xo.is_integer() else xo - fl
        w = np.array(coeffs(ratio, scale), np.float64)
        k = len(w)
        p = -(-k // 2)
        xp, limit = xo + p, n + 2 * p
        lo_c = max(0, min(fl + p - k - 2, limit - k))
        hi_c = min(limit, max(fl + p + k + 3, k))
        taps = sorted(sorted(range(lo_c, hi_c), key=lambda j: (abs(xp - j), j))[:k])
        taps = [j - p for j in taps]
        if exclude_outside:
            w = np.array([0.0 if (j < 0 or j >= n) else v for j, v in zip(taps, w)])
            w = w / np.sum(w)
        row = {}
        for j, v in zip(taps, w):
            if v != 0:
                jj = min(max(j, 0), n - 1)
                row[jj] = row.get(jj, 0.0) + v
        rows.append(row)
    K = max([len(r) for r in rows] + [1])
    idx = np.zeros((m, K), np.int64)
    wt = np.zeros((m, K), np.float64)
    for i, r in enumerate(rows):
        for k, (j, v) in enumerate(sorted(r.items())):
            idx[i, k], wt[i, k] = j, v
    return idx, wt, (outside if outside.any() else None)


@op("Resize", ["antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
               "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"], check=_resize_check)
def _resize(c, ins, A):
    x = ins[0]
    r = x.ndim
    mode = A.get("mode", "nearest")
    opt = lambda i: ins[i] if len(ins) > i and ins[i] is not None else None  # noqa: E731
    if c.opset_of("Resize") < 11:  # Resize-10: (X, scales), Upsample's coordinates (ONNX's 10 -> 11 adapter)
        roi, scales, sizes = None, known(ins[1], "Resize's scales"), None
        ctm, nearest_mode = "asymmetric", "floor"
    else:
        roi, scales, sizes = (None if opt(i) is None else known(opt(i), "Resize's %s" % w).reshape(-1)
                              for i, w in ((1, "roi"), (2, "scales"), (3, "sizes")))
        ctm = A.get("coordinate_transformation_mode", "half_pixel")
        nearest_mode = A.get("nearest_mode", "round_prefer_floor")
    if roi is not None and roi.size == 0:
        roi = None
    if scales is not None and scales.size == 0:
        scales = None
    if sizes is not None and sizes.size == 0:
        sizes = None
    axes = [norm_axis(a, r) for a in A["axes"]] if "axes" in A else list(range(r))
    if (scales is None) == (sizes is None):
        raise ValueError("Resize needs exactly one of scales and sizes")
    ns = [int(x.shape[a]) for a in axes]
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        if len(sizes) != len(axes):
            raise ValueError("Resize: %d sizes for %d axes" % (len(sizes), len(axes)))
        sf = [s / n for s, n in zip(sizes, ns)]
        policy = A.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            s = min(sf) if policy == "not_larger" else max(sf)
            sf = [s] * len(axes)
            sizes = [int(s * n + 0.5) for n in ns]
        out_w = [s * n for s, n in zip(sf, ns)]
    else:
        scales = np.asarray(scales)
        if len(scales) != len(axes):
            raise ValueError("Resize: %d scales for %d axes" % (len(scales), len(axes)))
        sizes = [int(np.float64(s) * n) for s, n in zip(scales, ns)]
        sf = [float(s) for s in scales]
        out_w = [float(s * type(s)(n)) for s, n in zip(scales, ns)]  # in the scales' type, as ONNX's reference
    if ctm == "tf_crop_and_resize":
        if roi is None:
            raise ValueError("Resize with tf_crop_and_resize needs roi")
        k = len(roi) // 2
        rois = [(roi[i], roi[k + i]) for i in range(k)]
        if k == r and len(axes) != r:
            rois = [rois[a] for a in axes]
    else:
        rois = [None] * len(axes)
    coeffs = _resize_coeffs(mode, nearest_mode, A.get("cubic_coeff_a", -0.75), A.get("antialias", 0))
    ext = A.get("extrapolation_value", 0.0)
    dt = np.dtype(x.dtype)
    cdt = dt if dt in (np.float32, np.float64) else np.dtype(np.float32 if dt == np.float16 else np.float64)
    y = x
    for j in reversed(range(len(axes))):
        a, n, m = axes[j], ns[j], sizes[j]
        idx, wt, outside = _resize_axis(n, m, sf[j], out_w[j], coeffs, ctm, rois[j],
                                        bool(A.get("exclude_outside", 0)))
        if outside is None and idx.shape[1] == 1 and np.all(wt == 1.0):
            if m == n and np.array_equal(idx[:, 0], np.arange(n)):
                continue
            y = np.take(y, idx[:, 0], axis=a)  # nearest: a read, exact for every dtype
            continue
        bshape = [1] * r
        bshape[a] = m
        yc = astype(y, cdt)
        acc = None
        for k in range(idx.shape[1]):
            if not np.any(wt[:, k]):
                continue
            term = np.take(yc, idx[:, k], axis=a) * wt[:, k].astype(cdt).reshape(bshape)
            acc = term if acc is None else acc + term
        if acc is None:
            acc = np.take(yc, idx[:, 0], axis=a) * np.zeros(bshape, cdt)
        if outside is not None:
            acc = np.where(outside.reshape(bshape), cdt.type(ext), acc)
        y = acc
    return astype(y, dt)


# ---- GridSample: per output position and spatial axis the source coordinate computed from the grid (traced),
# its taps' indices and weights, and one take_along_axis of the flattened input per combination of taps ---
def _gs_mode(A):
    m = A.get("mode", "linear")
    return {"bilinear": "linear", "bicubic": "cubic"}.get(m, m)


def _gs_check(node, A, opset):
    if _gs_mode(A) not in ("linear", "nearest", "cubic"):
        return "mode=%r" % A.get("mode")
    if A.get("padding_mode", "zeros") not in ("zeros", "border", "reflection"):
        return "padding_mode=%r" % A.get("padding_mode")
    return None


def _gs_reflect(v, lo, hi):
    """v reflected at the borders lo and hi until inside (ONNX's reference)."""
    rng = sc(v, hi - lo)
    lo, hi = sc(v, lo), sc(v, hi)
    below = v < lo
    dx = np.where(below, lo - v, v - hi)
    n = np.floor(dx / rng)
    r = dx - n * rng
    even = np.equal(n - sc(v, 2) * np.floor(n / sc(v, 2)), sc(v, 0))
    from_lo, from_hi = lo + r, hi - r
    return np.where(below, np.where(even, from_lo, from_hi),
                    np.where(v > hi, np.where(even, from_hi, from_lo), v))


@op("GridSample", ["align_corners", "mode", "padding_mode"], check=_gs_check)
def _grid_sample(c, ins, A):
    import itertools
    x, grid = ins
    mode, pad, align = _gs_mode(A), A.get("padding_mode", "zeros"), bool(A.get("align_corners", 0))
    nb, ch = int(x.shape[0]), int(x.shape[1])
    dims = [int(v) for v in x.shape[2:]]
    k = len(dims)
    out_sp = [int(v) for v in grid.shape[1:-1]]
    npos = int(np.prod(out_sp, dtype=np.int64))
    if grid.shape[-1] != k:
        raise ValueError("GridSample: a grid of %d coordinates for %d spatial axes" % (grid.shape[-1], k))
    g = grid.reshape(nb, npos, k)
    taps = []  # per axis: [(index, valid or None, weight or None)]
    for i, L in enumerate(dims):
        n = g[:, :, k - 1 - i]  # the grid's coordinates are in reverse axis order
        one = sc(n, 1)
        v = (n + one) / sc(n, 2) * sc(n, L - 1) if align else ((n + one) * sc(n, L) - one) / sc(n, 2)
        if mode == "nearest":
            v = np.rint(v)
        lo, hi = (0.0, L - 1.0) if align else (-0.5, L - 0.5)
        if pad != "zeros":
            out = np.logical_or(v < sc(v, lo), v > sc(v, hi))
            v = np.where(out, np.clip(v, sc(v, 0), sc(v, L - 1)) if pad == "border" else _gs_reflect(v, lo, hi), v)

        def pixel(j, lo=lo, hi=hi, L=L):
            """an integer source index j: (index inside the axis, valid)"""
            if pad == "zeros":
                return np.clip(j, np.int64(0), np.int64(L - 1)), np.logical_and(j >= np.int64(0), j < np.int64(L))
            if pad == "border":
                return np.clip(j, np.int64(0), np.int64(L - 1)), None
            jf = astype(j, np.float64)
            return np.clip(astype(np.trunc(_gs_reflect(jf, lo, hi)), np.int64), np.int64(0), np.int64(L - 1)), None
        if mode == "nearest":
            taps.append([pixel(astype(np.trunc(v), np.int64)) + (None,)])
            continue
        f = np.floor(v)
        t = v - f
        fi = astype(f, np.int64)
        if mode == "linear":
            ws = [sc(t, 1) - t, t]
            offs = [0, 1]
        else:
            a = -0.75
            t1, t2 = t + sc(t, 1), sc(t, 1) - t
            ws = [((sc(t, a) * t1 - sc(t, 5 * a)) * t1 + sc(t, 8 * a)) * t1 - sc(t, 4 * a),
                  ((sc(t, a + 2) * t - sc(t, a + 3)) * t) * t + sc(t, 1),
                  ((sc(t, a + 2) * t2 - sc(t, a + 3)) * t2) * t2 + sc(t, 1),
                  ((sc(t, a) * (t2 + sc(t, 1)) - sc(t, 5 * a)) * (t2 + sc(t, 1)) + sc(t, 8 * a)) * (t2 + sc(t, 1))
                  - sc(t, 4 * a)]
            offs = [-1, 0, 1, 2]
        taps.append([pixel(fi + np.int64(o)) + (w,) for o, w in zip(offs, ws)])
    xf = x.reshape(nb, ch, int(np.prod(dims, dtype=np.int64)))
    strides = [int(np.prod(dims[i + 1:], dtype=np.int64)) for i in range(k)]
    acc = None
    for combo in itertools.product(*taps):
        flat, valid, w = None, None, None
        for (j, ok, wt), st in zip(combo, strides):
            term = j * np.int64(st) if st != 1 else j
            flat = term if flat is None else flat + term
            if ok is not None:
                valid = ok if valid is None else np.logical_and(valid, ok)
            if wt is not None:
                w = wt if w is None else w * wt
        idx = np.broadcast_to(flat.reshape(nb, 1, npos), (nb, ch, npos))
        if is_traced(xf) or is_traced(idx):
            from .. import _tracer
            val = _tracer.take_along_axis(xf, idx, axis=2)
        else:
            val = np.take_along_axis(np.asarray(xf), np.asarray(idx), axis=2)
        if valid is not None:
            val = np.where(valid.reshape(nb, 1, npos), val, sc(x, 0))
        if w is not None:
            val = val * astype(w, x.dtype).reshape(nb, 1, npos)
        acc = val if acc is None else acc + val
    return acc.reshape([nb, ch] + out_sp)


def _window(kind):
    def f(c, ins, A):
        n = int(known(ins[0], "the window's size").reshape(-1)[0])
        dt = _np_dtype(A.get("output_datatype", 1))
        d = n if A.get("periodic", 1) else n - 1
        i = np.arange(n, dtype=np.float64)
        t = 2 * np.pi * i / d if d else np.zeros(n)
        if kind == "hann":
            w = 0.5 - 0.5 * np.cos(t)
        elif kind == "hamming":
            w = 25.0 / 46 - 21.0 / 46 * np.cos(t)
        else:
            w = 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t)
        return w.astype(dt)
    return f


def _check_window(node, A, opset):
    return None if _supported_elem(A.get("output_datatype", 1)) else "output_datatype %s" % \
        _dtype_name(A.get("output_datatype"))


for _n, _k in [("HannWindow", "hann"), ("HammingWindow", "hamming"), ("BlackmanWindow", "blackman")]:
    op(_n, ["output_datatype", "periodic"], check=_check_window)(_window(_k))


# ---- indexed reads: Gather, GatherElements (smelt's take, take_along_axis: read inside the kernel that
# uses them; an index out of range is an error when the plan runs) --------------------------------------
@op("Gather", ["axis"])
def _gather(c, ins, A):
    """On values known at load (shape arithmetic: Gather of Shape's result),
    NumPy's take; on traced ones, smelt's take."""
    data, idx = ins[0], ins[1]
    axis = norm_axis(A.get("axis", 0), data.ndim)
    if not is_traced(data) and not is_traced(idx):
        return np.take(np.asarray(data), np.asarray(idx).astype(np.int64), axis=axis)
    from .. import _tracer  # (NumPy's take dispatches on its data only: known data, traced indices)
    return _tracer.take(data, idx, axis=axis)


@op("GatherElements", ["axis"])
def _gather_elements(c, ins, A):
    """take_along_axis; indices no larger than the data along the other
    axes (ONNX's rule) read the data's first elements there"""
    data, idx = ins[0], ins[1]
    axis = norm_axis(A.get("axis", 0), data.ndim)
    for d in range(data.ndim):
        if d != axis and idx.shape[d] != data.shape[d]:
            key = [slice(None)] * data.ndim
            key[d] = slice(0, idx.shape[d])
            data = data[tuple(key)]
    if not is_traced(data) and not is_traced(idx):
        return np.take_along_axis(np.asarray(data), np.asarray(idx).astype(np.int64), axis=axis)
    from .. import _tracer
    return _tracer.take_along_axis(data, idx, axis=axis)


# ---- GatherND, ScatterElements / Scatter, ScatterND: compositions of take / take_along_axis and
# comparisons of the indices with an iota (a one-hot mask over the written axis) ----------------------------
def _take_along(a, idx, axis):
    if is_traced(a) or is_traced(idx):
        from .. import _tracer
        return _tracer.take_along_axis(a, idx, axis=axis)
    return np.take_along_axis(np.asarray(a), np.asarray(idx), axis=axis)


def _wrap_neg(i, n):
    """ONNX's negative indices (counting from the end) as int64; n a
    scalar or an array broadcasting with i"""
    i = astype(i, np.int64)
    return np.where(i < np.int64(0), i + np.asarray(n, np.int64), i)


@op("GatherND", ["batch_dims"])
def _gather_nd(c, ins, A):
    """data[indices[..., :]] as one take_along_axis of the data flattened
    over the indexed axes (per batch)."""
    data, idx = ins
    b = int(A.get("batch_dims", 0))
    q = int(idx.shape[-1])
    dshape = [int(v) for v in data.shape]
    bshape, ishape, rest = dshape[:b], dshape[b:b + q], dshape[b + q:]
    nb = int(np.prod(bshape, dtype=np.int64))
    kk = int(np.prod(ishape, dtype=np.int64))
    r = int(np.prod(rest, dtype=np.int64))
    mid = [int(v) for v in idx.shape[b:-1]]
    m = int(np.prod(mid, dtype=np.int64))
    i2 = _wrap_neg(idx.reshape(nb, m, q), np.array(ishape, np.int64).reshape(1, 1, q))
    strides = np.array([int(np.prod(ishape[j + 1:], dtype=np.int64)) for j in range(q)], np.int64)
    flat = np.sum(i2 * strides.reshape(1, 1, q), axis=2) if q > 1 else i2.reshape(nb, m) * strides[0]
    flat = np.broadcast_to(flat.reshape(nb, m, 1), (nb, m, r))
    y = _take_along(data.reshape(nb, kk, r), flat, 1)
    return y.reshape(bshape + mid + rest)


def _scatter_check(node, A, opset):
    r = A.get("reduction", "none")
    return None if r in ("none", "add", "mul", "max", "min") else "reduction=%r" % r


def _scatter_combine(data, hit_any, part, kind, last_upd):
    """data combined with the reduced updates (for max and min, reduced
    with the data where no index hit: no identity element is needed)."""
    if kind == "none":
        return np.where(hit_any, last_upd, data)
    if kind == "add":
        return data + part
    if kind == "mul":
        return data * part
    return (np.maximum if kind == "max" else np.minimum)(data, part)


_SCATTER_REDUCE = {"add": np.sum, "mul": np.prod, "max": np.max, "min": np.min}


@op("ScatterElements", ["axis", "reduction"], check=_scatter_check)
def _scatter_elements(c, ins, A):
    """Each output element along `axis` from the updates whose index is its
    position: a mask (indices == iota) over a new axis of the output
    axis's length, reduced over the indices' axis (max and min over the
    data's value too, so no identity element is needed); for reduction
    none the last such update (ONNX's reference order)."""
    data, idx, upd = ins
    kind = A.get("reduction", "none")
    nd = data.ndim
    axis = norm_axis(A.get("axis", 0), nd)
    J = int(data.shape[axis])
    ishape = [int(v) for v in idx.shape]
    i = _wrap_neg(idx, J)
    # hit[..., p_axis, j, ...]: index p_axis of the indices writes position j
    e_shape = ishape[:axis + 1] + [1] + ishape[axis + 1:]
    iota_shape = [1] * (nd + 1)
    iota_shape[axis + 1] = J
    hit = np.equal(i.reshape(e_shape), np.arange(J, dtype=np.int64).reshape(iota_shape))
    u = upd.reshape(e_shape)
    # the data where the indices reach (they may be shorter than the data on the other axes)
    sub = tuple(slice(None) if d == axis else slice(0, ishape[d]) for d in range(nd))
    dsub = data[sub] if any(ishape[d] != int(data.shape[d]) for d in range(nd) if d != axis) else data
    hit_any = np.any(hit, axis=axis)
    if kind == "none":
        p_shape = [1] * (nd + 1)
        p_shape[axis] = ishape[axis]
        pos = np.broadcast_to(np.arange(ishape[axis], dtype=np.int64).reshape(p_shape), ishape[:axis + 1] + [J] +
                              ishape[axis + 1:])
        last = np.maximum(np.max(np.where(hit, pos, np.int64(-1)), axis=axis), np.int64(0))
        last = np.moveaxis(_take_along(np.moveaxis(upd, axis, -1), np.moveaxis(last, axis, -1), nd - 1), -1, axis)
        res, part = _scatter_combine(dsub, hit_any, None, kind, last), None
    else:
        ident = np.expand_dims(dsub, axis) if kind in ("max", "min") else np.dtype(upd.dtype).type(kind == "mul")
        part = astype(_SCATTER_REDUCE[kind](np.where(hit, u, ident), axis=axis), np.dtype(data.dtype))
        res = _scatter_combine(dsub, hit_any, part, kind, None)
    if dsub is data:
        return res
    widths = [[0, int(data.shape[d]) - (J if d == axis else ishape[d])] for d in range(nd)]
    region = np.zeros([int(v) for v in data.shape], np.bool_)
    region[sub] = True
    return np.where(region, np.pad(res, widths, mode="constant", constant_values=sc(res, 0)), data)


@op("Scatter", ["axis"])
def _scatter(c, ins, A):
    return _scatter_elements(c, ins, {"axis": A.get("axis", 0)})


@op("ScatterND", ["reduction"], check=_scatter_check)
def _scatter_nd(c, ins, A):
    """The data as rows (the indexed axes flattened) and the updates as
    rows: a mask (flat index == row) [updates, rows], reduced over the
    updates (a product for add); for reduction none the last update of a
    row (ONNX's reference order)."""
    data, idx, upd = ins
    kind = A.get("reduction", "none")
    q = int(idx.shape[-1])
    dshape = [int(v) for v in data.shape]
    K = int(np.prod(dshape[:q], dtype=np.int64))
    R = int(np.prod(dshape[q:], dtype=np.int64))
    M = int(np.prod(idx.shape[:-1], dtype=np.int64))
    i2 = _wrap_neg(idx.reshape(M, q), np.array(dshape[:q], np.int64).reshape(1, q))
    strides = np.array([int(np.prod(dshape[j + 1:q], dtype=np.int64)) for j in range(q)], np.int64)
    flat = np.sum(i2 * strides.reshape(1, q), axis=1) if q > 1 else i2.reshape(M) * strides[0]
    hit = np.equal(flat.reshape(M, 1), np.arange(K, dtype=np.int64).reshape(1, K))  # [M, K]
    d2 = data.reshape(K, R)
    u2 = upd.reshape(M, R)
    hit_any = np.any(hit, axis=0).reshape(K, 1)
    last = part = None
    if kind == "none":
        pos = np.broadcast_to(np.arange(M, dtype=np.int64).reshape(M, 1), (M, K))
        last_m = np.max(np.where(hit, pos, np.int64(-1)), axis=0)
        last = np.take(u2, np.maximum(last_m, np.int64(0)), axis=0)
    else:
        ident = d2.reshape(1, K, R) if kind in ("max", "min") else np.dtype(upd.dtype).type(kind == "mul")
        part = astype(_SCATTER_REDUCE[kind](np.where(hit.reshape(M, K, 1), u2.reshape(M, 1, R), ident), axis=0),
                      np.dtype(data.dtype))
    return _scatter_combine(d2, hit_any, part, kind, last).reshape(dshape)


# ---- TopK (k rounds of max/argmax, the chosen ones masked out), ReverseSequence (a take_along_axis),
# AffineGrid (theta times a constant grid), Col2Im (a sum of spread, shifted blocks) -----------------------
@op("TopK", ["axis", "k", "largest", "sorted"])
def _topk(c, ins, A):
    """The k largest (smallest) along axis, in order, ties by the lower
    index (ONNX's rule): k rounds of max and first argmax over what is not
    yet taken."""
    x = ins[0]
    k = int(A["k"]) if "k" in A else int(known(ins[1], "TopK's k").reshape(-1)[0])
    axis = norm_axis(A.get("axis", -1), x.ndim)
    n = int(x.shape[axis])
    if not 0 <= k <= n:
        raise ValueError("TopK: k=%d for an axis of %d" % (k, n))
    shape = [1] * x.ndim
    shape[axis] = n
    iota = np.arange(n, dtype=np.int64).reshape(shape)
    if k == 0:
        out = list(x.shape)
        out[axis] = 0
        return [np.zeros(out, np.dtype(x.dtype)), np.zeros(out, np.int64)]
    largest = bool(A.get("largest", 1))
    best = np.max if largest else np.min
    fill = (np.min if largest else np.max)(x, axis=axis, keepdims=True)  # no better than any element
    cur, taken, vals, idxs = x, None, [], []
    for j in range(k):
        v = best(cur, axis=axis, keepdims=True)
        hit = np.equal(cur, v)
        if taken is not None:
            hit = np.logical_and(hit, np.logical_not(taken))
        i = astype(np.argmax(astype(hit, np.int32), axis=axis, keepdims=True), np.int64)
        vals.append(v)
        idxs.append(i)
        if j + 1 < k:
            now = np.equal(iota, i)
            taken = now if taken is None else np.logical_or(taken, now)
            cur = np.where(now, fill, cur)
    if k == 1:
        return [vals[0], idxs[0]]
    return [np.concatenate(vals, axis=axis), np.concatenate(idxs, axis=axis)]


@op("ReverseSequence", ["batch_axis", "time_axis"])
def _reverse_sequence(c, ins, A):
    x, lens = ins
    ba, ta = int(A.get("batch_axis", 1)), int(A.get("time_axis", 0))
    T, nb = int(x.shape[ta]), int(x.shape[ba])
    tshape, bshape = [1] * x.ndim, [1] * x.ndim
    tshape[ta], bshape[ba] = T, nb
    t = np.arange(T, dtype=np.int64).reshape(tshape)
    ln = astype(lens, np.int64).reshape(bshape)
    idx = np.where(t < ln, ln - np.int64(1) - t, t)
    return _take_along(x, np.broadcast_to(idx, [int(v) for v in x.shape]), ta)


@op("AffineGrid", ["align_corners"])
def _affine_grid(c, ins, A):
    theta = ins[0]
    size = [int(v) for v in known(ins[1], "AffineGrid's size").reshape(-1)]
    sp = size[2:]
    k = len(sp)
    if k not in (2, 3):
        raise ValueError("AffineGrid: %d spatial axes (2 or 3)" % k)
    align = bool(A.get("align_corners", 0))
    axes = []
    for L in sp:
        axes.append(np.linspace(-1.0, 1.0, L) if align else (2 * np.arange(L) + 1) / L - 1.0)
    mesh = np.meshgrid(*axes, indexing="ij")  # over (D,) H, W
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(sp)))], 1)  # [P, k+1]: x, y, (z), 1
    dt = np.dtype(theta.dtype)
    g = np.matmul(theta, base.T.astype(dt))  # [N, k, P]
    return np.transpose(g, (0, 2, 1)).reshape([int(theta.shape[0])] + sp + [k])


def _spread(y, axes, strides):
    """y with strides[i] - 1 zeros after each element along axes[i] (none
    after the last)."""
    for a, s in zip(axes, strides):
        if s == 1:
            continue
        n = int(y.shape[a])
        shape = list(y.shape)
        e = np.expand_dims(y, a + 1)
        widths = [[0, 0] for _ in range(e.ndim)]
        widths[a + 1] = [0, s - 1]
        e = np.pad(e, widths, mode="constant", constant_values=sc(y, 0))
        shape[a] = n * s
        idx = [slice(None)] * len(shape)
        idx[a] = slice(0, (n - 1) * s + 1)
        y = e.reshape(shape)[tuple(idx)]
    return y


@op("Col2Im", ["dilations", "pads", "strides"])
def _col2im(c, ins, A):
    """Each block position's columns spread by the strides and added at
    its offset in the padded image; the padding cut off."""
    x = ins[0]
    img = [int(v) for v in known(ins[1], "Col2Im's image_shape").reshape(-1)]
    blk = [int(v) for v in known(ins[2], "Col2Im's block_shape").reshape(-1)]
    ns = len(img)
    s = [int(v) for v in A.get("strides", [1] * ns)]
    d = [int(v) for v in A.get("dilations", [1] * ns)]
    p = [int(v) for v in A.get("pads", [0] * (2 * ns))]
    nblk = [(img[i] + p[i] + p[ns + i] - d[i] * (blk[i] - 1) - 1) // s[i] + 1 for i in range(ns)]
    nb = int(x.shape[0])
    K = int(np.prod(blk))
    ch = int(x.shape[1]) // K
    if int(x.shape[2]) != int(np.prod(nblk)):
        raise ValueError("Col2Im: %d columns for %s blocks" % (int(x.shape[2]), nblk))
    xr = x.reshape([nb, ch, K] + nblk)
    padded = [img[i] + p[i] + p[ns + i] for i in range(ns)]
    acc = None
    for t, tap in enumerate(np.ndindex(*blk)):
        y = _spread(xr[:, :, t], list(range(2, 2 + ns)), s)
        widths = [[0, 0], [0, 0]]
        for i in range(ns):
            lo = tap[i] * d[i]
            widths.append([lo, padded[i] - lo - int(y.shape[2 + i])])
        y = np.pad(y, widths, mode="constant", constant_values=sc(y, 0))
        acc = y if acc is None else acc + y
    return acc[tuple([slice(None)] * 2 + [slice(p[i], p[i] + img[i]) for i in range(ns)])]


# ---- Compress (its condition a static input: a take with the kept positions), MaxUnpool (a scatter into
# each plane), MaxPool's Indices (the first tap holding the window's max), Det (Gaussian elimination with
# partial pivoting, the row swaps as takes), MelWeightMatrix (computed at load) ---------------------------
@op("Compress", ["axis"])
def _compress(c, ins, A):
    x = ins[0]
    cond = known(ins[1], "Compress's condition").reshape(-1).astype(np.bool_)
    if "axis" not in A:
        x = x.reshape(-1)
        axis = 0
    else:
        axis = norm_axis(A["axis"], x.ndim)
    keep = np.nonzero(cond[:int(x.shape[axis])])[0].astype(np.int64)
    if keep.size == 0:
        shape = [int(v) for v in x.shape]
        shape[axis] = 0
        return np.zeros(shape, np.dtype(x.dtype))
    return np.take(x, keep, axis=axis)


@op("MaxUnpool", ["kernel_shape", "pads", "strides"])
def _max_unpool(c, ins, A):
    x, idx = ins[0], ins[1]
    k = [int(v) for v in A["kernel_shape"]]
    ns = len(k)
    s = [int(v) for v in A.get("strides", [1] * ns)]
    p = [int(v) for v in A.get("pads", [0] * (2 * ns))]
    nb, ch = int(x.shape[0]), int(x.shape[1])
    inferred = [(int(x.shape[2 + i]) - 1) * s[i] - (p[i] + p[ns + i]) + k[i] for i in range(ns)]
    pout = int(np.prod(inferred))
    pin = int(np.prod([int(v) for v in x.shape[2:]]))
    base = (np.arange(nb * ch, dtype=np.int64) * pout).reshape(nb * ch, 1)
    local = astype(idx, np.int64).reshape(nb * ch, pin) - base
    y = _scatter_elements(c, [np.zeros((nb * ch, pout), np.dtype(x.dtype)), local, x.reshape(nb * ch, pin)],
                          {"axis": 1})
    y = y.reshape([nb, ch] + inferred)
    if len(ins) > 2 and ins[2] is not None:
        out = [int(v) for v in known(ins[2], "MaxUnpool's output_shape").reshape(-1)][2:]
        widths = [[0, 0], [0, 0]] + [[0, o - n] for o, n in zip(out, inferred)]
        if any(w[1] < 0 for w in widths):
            raise ValueError("MaxUnpool: output_shape %s smaller than %s" % (out, inferred))
        if any(w[1] for w in widths):
            y = np.pad(y, widths, mode="constant", constant_values=sc(y, 0))
    return y


def _maxpool_with_indices(x, k, s, p, d, ceil, storage_order):
    """MaxPool's values and Indices (the flat position in x of the first
    tap holding each window's max, row-major, or column-major over the
    spatial axes with storage_order 1), from the taps' strided views of x
    padded with -inf."""
    ns = x.ndim - 2
    out, p2 = _pool_geometry(x, k, s, p, d, ceil)
    dims = [int(v) for v in x.shape[2:]]
    widths = [[0, 0], [0, 0]] + [[p[i], p2[ns + i]] for i in range(ns)]
    xp = np.pad(x, widths, mode="constant", constant_values=-np.inf) if any(w[0] or w[1] for w in widths) else x
    nb, ch = int(x.shape[0]), int(x.shape[1])
    taps = list(np.ndindex(*k))
    views = []
    for t in taps:
        key = [slice(None), slice(None)] + [slice(t[i] * d[i], t[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i])
                                            for i in range(ns)]
        views.append(xp[tuple(key)])
    best = views[0]
    for v in views[1:]:
        best = np.maximum(best, v)
    plane = int(np.prod(dims))
    nc_base = (np.arange(nb * ch, dtype=np.int64) * plane).reshape([nb, ch] + [1] * ns)
    idx = None
    for t, v in reversed(list(zip(taps, views))):  # the first tap in order wins: built from the last
        pos = [np.arange(out[i]) * s[i] + t[i] * d[i] - p[i] for i in range(ns)]
        grids = np.meshgrid(*pos, indexing="ij")
        if storage_order:
            flat = sum(g * int(np.prod(dims[:i])) for i, g in enumerate(grids))
        else:
            flat = sum(g * int(np.prod(dims[i + 1:])) for i, g in enumerate(grids))
        here = np.asarray(flat, np.int64).reshape([1, 1] + out) + nc_base
        idx = here if idx is None else np.where(np.equal(v, best), here, idx)
        if idx is here:
            idx = np.broadcast_to(here, [nb, ch] + out)
    return best, idx


@op("Det")
def _det(c, ins, A):
    x = ins[0]
    n = int(x.shape[-1])
    lead = [int(v) for v in x.shape[:-2]]
    a = x.reshape([-1, n, n]) if lead else x.reshape(1, n, n)
    m = int(a.shape[0])
    dt = np.dtype(a.dtype)
    iota = np.arange(n, dtype=np.int64).reshape(1, n)
    det = None
    sign = np.ones((m,), dt)
    for k in range(n):
        col = np.abs(a[:, k:, k])  # [m, n-k]
        r = astype(np.argmax(col, axis=1), np.int64) + np.int64(k)  # [m]
        r2 = r.reshape(m, 1)
        perm = np.where(np.equal(iota, np.int64(k)), r2, np.where(np.equal(iota, r2), np.int64(k), iota))
        a = _take_along(a, np.broadcast_to(perm.reshape(m, n, 1), (m, n, n)), 1)
        sign = np.where(np.equal(r, np.int64(k)), sign, -sign)
        piv = a[:, k, k]
        det = piv if det is None else det * piv
        if k + 1 < n:
            safe = np.where(np.equal(piv, sc(piv, 0)), sc(piv, 1), piv)
            f = a[:, k + 1:, k] / safe.reshape(m, 1)
            lower = a[:, k + 1:, :] - f.reshape(m, n - k - 1, 1) * a[:, k:k + 1, :]
            a = np.concatenate([a[:, :k + 1, :], lower], 1)
    return (det * sign).reshape(lead)


@op("MelWeightMatrix", ["output_datatype"], check=_check_window)
def _mel(c, ins, A):
    nmel, dft, rate = (int(known(v, "MelWeightMatrix's %s" % w).reshape(-1)[0])
                       for v, w in zip(ins[:3], ("num_mel_bins", "dft_length", "sample_rate")))
    lo, hi = (float(known(v, "MelWeightMatrix's %s" % w).reshape(-1)[0])
              for v, w in zip(ins[3:5], ("lower_edge_hertz", "upper_edge_hertz")))
    nspec = dft // 2 + 1
    lo_mel, hi_mel = 2595 * np.log10(1 + lo / 700), 2595 * np.log10(1 + hi / 700)
    bins = np.arange(nmel + 2) * ((hi_mel - lo_mel) / (nmel + 2)) + lo_mel
    bins = (((dft + 1) * (700 * (np.power(10, bins / 2595) - 1))) // rate).astype(int)
    w = np.zeros((nspec, nmel))
    for i in range(nmel):
        left, center, right = bins[i], bins[i + 1], bins[i + 2]
        if center == left:
            w[center, i] = 1
        else:
            for j in range(left, center + 1):
                w[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            w[j, i] = (right - j) / (right - center)
    return w.astype(_np_dtype(A.get("output_datatype", 1)))


@op("DeformConv", ["dilations", "group", "kernel_shape", "offset_group", "pads", "strides"],
    check=lambda n, A, o: None if len(A.get("kernel_shape", [0, 0])) == 2 else "%d spatial axes (2)"
    % len(A["kernel_shape"]))
def _deform_conv(c, ins, A):
    """Per kernel tap, the input sampled bilinearly (zeros outside) at the
    tap's position plus its offset (4 take_along_axis reads of the
    flattened input), times the mask; then the columns times the weights
    per group (one product)."""
    x, w, off = ins[0], ins[1], ins[2]
    b = ins[3] if len(ins) > 3 and ins[3] is not None else None
    mask = ins[4] if len(ins) > 4 and ins[4] is not None else None
    if x.ndim != 4:
        raise UnsupportedError(-10, "DeformConv over %d spatial axes (2)" % (x.ndim - 2))
    nb, ch, H, W = (int(v) for v in x.shape)
    oc, kh, kw = int(w.shape[0]), int(w.shape[2]), int(w.shape[3])
    g, go = int(A.get("group", 1)), int(A.get("offset_group", 1))
    sh, sw = (int(v) for v in A.get("strides", [1, 1]))
    dh, dw = (int(v) for v in A.get("dilations", [1, 1]))
    ph, pw = (int(v) for v in A.get("pads", [0, 0, 0, 0])[:2])
    oh, ow = int(off.shape[2]), int(off.shape[3])
    P, K, cgo = oh * ow, kh * kw, ch // go
    dt = np.dtype(x.dtype)
    offr = off.reshape(nb, go, kh, kw, 2, P)
    mr = mask.reshape(nb, go, kh, kw, P) if mask is not None else None
    base_h = (np.arange(oh) * sh - ph).reshape(oh, 1) + np.zeros((1, ow))
    base_w = (np.arange(ow) * sw - pw).reshape(1, ow) + np.zeros((oh, 1))
    xf = x.reshape(nb, go, cgo, H * W)
    cols = []
    for a in range(kh):
        for bb in range(kw):
            py = offr[:, :, a, bb, 0] + (base_h + a * dh).reshape(1, 1, P).astype(dt)
            px = offr[:, :, a, bb, 1] + (base_w + bb * dw).reshape(1, 1, P).astype(dt)
            y0, x0 = np.floor(py), np.floor(px)
            wy, wx = py - y0, px - x0
            yi, xi = astype(y0, np.int64), astype(x0, np.int64)
            acc = None
            for cy, cx, wgt in ((0, 0, (sc(wy, 1) - wy) * (sc(wx, 1) - wx)), (0, 1, (sc(wy, 1) - wy) * wx),
                                (1, 0, wy * (sc(wx, 1) - wx)), (1, 1, wy * wx)):
                yy, xx = yi + np.int64(cy), xi + np.int64(cx)
                ok = np.logical_and(np.logical_and(yy >= np.int64(0), yy < np.int64(H)),
                                    np.logical_and(xx >= np.int64(0), xx < np.int64(W)))
                flat = np.clip(yy, np.int64(0), np.int64(H - 1)) * np.int64(W) + \
                    np.clip(xx, np.int64(0), np.int64(W - 1))
                v = _take_along(xf, np.broadcast_to(flat.reshape(nb, go, 1, P), (nb, go, cgo, P)), 3)
                wv = np.where(ok, wgt, sc(wgt, 0))
                if mr is not None:
                    wv = wv * mr[:, :, a, bb]
                term = v * astype(wv, dt).reshape(nb, go, 1, P)
                acc = term if acc is None else acc + term
            cols.append(acc.reshape(nb, ch, 1, P))
    col = np.concatenate(cols, 2) if K > 1 else cols[0]  # [nb, ch, K, P]
    cg = ch // g
    col = col.reshape(nb, g, cg * K, P)
    wg = w.reshape(g, oc // g, cg * K)
    y = np.matmul(wg.reshape(1, g, oc // g, cg * K), col).reshape(nb, oc, oh, ow)
    if b is not None:
        y = y + b.reshape(1, oc, 1, 1)
    return y


# ---- losses: the class axis read through a one-hot mask (target == iota) --------------------------
def _nll(x, target, weight, A):
    red = A.get("reduction", "mean")
    c = x.shape[1]
    shape = [1] * x.ndim
    shape[1] = c
    iota = np.arange(c, dtype=np.int64).reshape(shape)
    t = np.expand_dims(astype(target, np.int64), 1)
    hit = np.equal(t, iota)
    zero = sc(x, 0)
    picked = np.sum(np.where(hit, x, zero), axis=1)
    if weight is not None:
        w = np.sum(np.where(hit, astype(weight, x.dtype).reshape(shape), zero), axis=1)
    else:
        w = np.where(np.equal(t, t), sc(x, 1), zero).reshape(picked.shape)
    if "ignore_index" in A:
        w = np.where(np.equal(astype(target, np.int64), np.int64(A["ignore_index"])), zero, w)
    loss = -picked * w
    if red == "none":
        return loss
    total = np.sum(loss)
    if red == "sum":
        return total
    return total / np.sum(w)


def _check_reduction(node, A, opset):
    r = A.get("reduction", "mean")
    return None if r in ("none", "sum", "mean") else "reduction=%r" % r


@op("NegativeLogLikelihoodLoss", ["reduction", "ignore_index"], check=_check_reduction)
def _nllloss(c, ins, A):
    return _nll(ins[0], ins[1], ins[2] if len(ins) > 2 else None, A)


@op("SoftmaxCrossEntropyLoss", ["reduction", "ignore_index"], check=_check_reduction)
def _sce(c, ins, A):
    x = ins[0]
    m = np.max(x, axis=1, keepdims=True)
    d = x - m
    logp = d - np.log(np.sum(np.exp(d), axis=1, keepdims=True))
    return [_nll(logp, ins[1], ins[2] if len(ins) > 2 else None, A), logp]


# ---- matrix products ------------------------------------------------------------------------------------
@op("MatMul")
def _matmul(c, ins, A):
    return np.matmul(ins[0], ins[1])


@op("Gemm", ["alpha", "beta", "transA", "transB", "broadcast"])
def _gemm(c, ins, A):
    a, b = ins[0], ins[1]
    cc = ins[2] if len(ins) > 2 else None
    if A.get("transA", 0):
        a = np.transpose(a)
    if A.get("transB", 0):
        b = np.transpose(b)
    y = np.matmul(a, b)
    alpha, beta = A.get("alpha", 1.0), A.get("beta", 1.0)
    if alpha != 1.0:
        y = y * sc(y, alpha)
    if cc is not None:
        y = y + (cc * sc(cc, beta) if beta != 1.0 else cc)
    return y


def _einsum_check(node, A, opset):
    eq = A.get("equation", "")
    if isinstance(eq, bytes):
        eq = eq.decode()
    eq = eq.replace(" ", "")
    if eq.count("->") > 1 or any(ch not in ",->." and not ch.isalpha() for ch in eq):
        return "the equation %r" % eq
    return None


def _einsum_prepare(eq, ins):
    """the equation with '...' spelled out in letters the equation does not
    use (aligned at the right, as broadcasting), and the operands with any
    index repeated within one of them reduced to its diagonal (x * eye,
    summed)"""
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs, out = eq, None
    terms = lhs.split(",")
    free = [ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if ch not in eq]
    nell = max([x.ndim - (len(t) - 3) for t, x in zip(terms, ins) if "..." in t] + [0])
    ell = "".join(free[:nell])
    terms = [t.replace("...", ell[nell - (x.ndim - (len(t) - 3)):]) if "..." in t else t for t, x in zip(terms, ins)]
    if out is None:
        letters = "".join(terms)
        out = ell + "".join(sorted(ch for ch in set(letters) if letters.count(ch) == 1 and ch not in ell))
    else:
        out = out.replace("...", ell)
    xs = []
    for i, (t, x) in enumerate(zip(terms, ins)):
        while len(set(t)) != len(t):
            ch = next(c for c in t if t.count(c) > 1)
            p1, p2 = t.index(ch), t.index(ch, t.index(ch) + 1)
            n = int(x.shape[p1])
            shape = [1] * x.ndim
            shape[p1], shape[p2] = n, n
            x = np.sum(np.where(np.eye(n, dtype=np.bool_).reshape(shape), x, sc(x, 0)), axis=p2)
            t = t[:p2] + t[p2 + 1:]
        terms[i] = t
        xs.append(x)
    return ",".join(terms) + "->" + out, xs


@op("Einsum", ["equation"], check=_einsum_check)
def _einsum(c, ins, A):
    """Einsum as broadcast products and one sum: every operand transposed
    and expanded to the equation's index order, multiplied, the indices not
    in the output summed ('...' spelled out, repeated indices within an
    operand taken as its diagonal first)."""
    eq = A["equation"]
    eq = (eq.decode() if isinstance(eq, bytes) else eq).replace(" ", "")
    eq, ins = _einsum_prepare(eq, list(ins))
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    order = list(out) + sorted(set("".join(terms)) - set(out))
    sizes = {}
    for t, x in zip(terms, ins):
        for ch, n in zip(t, x.shape):
            sizes[ch] = max(sizes.get(ch, 1), n)
    prod = None
    for t, x in zip(terms, ins):
        present = [ch for ch in order if ch in t]
        x = np.transpose(x, [t.index(ch) for ch in present]) if x.ndim > 1 else x
        shape = [x.shape[present.index(ch)] if ch in t else 1 for ch in order]
        x = x.reshape(shape)
        prod = x if prod is None else prod * x
    red = tuple(range(len(out), len(order)))
    if red:
        prod = astype(np.sum(prod, axis=red), ins[0].dtype)
    return prod


# ---- quantization (uint8; int8, int16, uint16 carried in int64, see _NARROW).  Integer products are computed
# in float64, exact below 2^53, then made int32 ------------------------------------------------------------
def _q_param(v, x, axis, block):
    """a scale or zero point broadcastable to x: a scalar, one per element
    of `axis`, or (block_size) one per block along `axis`"""
    if v.ndim == 0 or (int(np.prod(v.shape, dtype=np.int64)) == 1 and not block):
        return v.reshape(())
    axis = norm_axis(axis, x.ndim)
    if not block:
        shape = [1] * x.ndim
        shape[axis] = int(v.shape[0])
        return v.reshape(shape)
    nb = int(v.shape[axis])
    e = np.expand_dims(v, axis + 1)
    shape = [int(s) for s in e.shape]
    shape[axis + 1] = block
    rep = np.broadcast_to(e, shape)
    flat = [int(s) for s in v.shape]
    flat[axis] = nb * block
    rep = rep.reshape(flat)
    if flat[axis] != int(x.shape[axis]):
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(0, int(x.shape[axis]))
        rep = rep[tuple(idx)]
    return rep


def _check_quant(node, A, opset):
    if "output_dtype" in A and A["output_dtype"] not in (2, 3, 4, 5) + _exotic.FLOAT8 + _exotic.INT4S:
        return "output_dtype %s (uint8, int8, uint16, int16, int4, uint4, float8 are)" % \
            _dtype_name(A["output_dtype"])
    return None


def _saturate(r, c, default=np.uint8):
    """r rounded already, saturated to the output's integer type (uint8,
    or a narrow type carried in int64)"""
    dt = (c.out_narrow[0] if c.out_narrow else None) or np.dtype(default)
    info = np.iinfo(dt)
    r = np.clip(r, sc(r, info.min), sc(r, info.max))
    return astype(r, np.uint8 if dt == np.uint8 else _CARRIER)


def _saturate_u8(r):
    return astype(np.clip(r, sc(r, 0), sc(r, 255)), np.uint8)


@op("QuantizeLinear", ["axis", "block_size", "output_dtype", "saturate"], check=_check_quant)
def _quantize(c, ins, A):
    x, s = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 and ins[2] is not None else None
    axis, block = A.get("axis", 1), int(A.get("block_size", 0))
    r = np.rint(x / _q_param(s, x, axis, block))
    if zp is not None:
        r = r + astype(_q_param(zp, x, axis, block), np.dtype(r.dtype))
    return _saturate(r, c)


@op("DequantizeLinear", ["axis", "block_size"])
def _dequantize(c, ins, A):
    x, s = ins[0], ins[1]
    zp = ins[2] if len(ins) > 2 and ins[2] is not None else None
    axis, block = A.get("axis", 1), int(A.get("block_size", 0))
    d = astype(x, np.float32)
    if zp is not None:
        d = d - astype(_q_param(zp, x, axis, block), np.float32)
    return astype(d * astype(_q_param(s, x, axis, block), np.float32), np.dtype(s.dtype))


@op("DynamicQuantizeLinear")
def _dyn_quantize(c, ins, A):
    """uint8 with the scale and zero point from x's range (0 included)."""
    x = ins[0]
    f = np.float32
    mx = np.maximum(np.max(x), f(0))
    mn = np.minimum(np.min(x), f(0))
    scale = np.where(np.equal(mx, mn), f(1), mx - mn) / f(255)
    zp = np.rint(np.clip(f(0) - mn / scale, f(0), f(255)))
    y = _saturate_u8(np.rint(x / scale) + zp)
    return [y, astype(scale, np.dtype(x.dtype)), astype(zp, np.uint8)]


def _int_centered(v, zp, per_row_axis=None):
    """v - zero point as float64 (exact for 8-bit integers)"""
    d = astype(v, np.float64)
    if zp is not None:
        z = astype(zp, np.float64)
        if per_row_axis is not None and z.ndim == 1 and int(z.shape[0]) > 1:
            shape = [1] * v.ndim
            shape[per_row_axis] = int(z.shape[0])
            z = z.reshape(shape)
        d = d - z
    return d


def _opt_in(ins, i):
    return ins[i] if len(ins) > i and ins[i] is not None else None


@op("MatMulInteger")
def _matmul_integer(c, ins, A):
    a = _int_centered(ins[0], _opt_in(ins, 2), per_row_axis=ins[0].ndim - 2 if ins[0].ndim >= 2 else None)
    b = _int_centered(ins[1], _opt_in(ins, 3), per_row_axis=ins[1].ndim - 1)
    return astype(np.matmul(a, b), np.int32)


@op("QLinearMatMul")
def _qlinear_matmul(c, ins, A):
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = ins[:8]
    acc = np.matmul(_int_centered(a, a_zp), _int_centered(b, b_zp))
    mult = astype(a_s * b_s / y_s, np.float64)
    return _saturate(np.rint(acc * mult + astype(y_zp, np.float64)), c)


def _int_conv(x, w, xzp, wzp, A):
    xd = _int_centered(x, xzp)
    wd = _int_centered(w, wzp, per_row_axis=0)
    s, p, d = _window_attrs(xd, A, list(w.shape[2:]))
    return _conv_nd(xd, wd, None, s, p, d, int(A.get("group", 1)))


_CONV_ATTRS = ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"]


@op("ConvInteger", _CONV_ATTRS, check=_check_conv_pool)
def _conv_integer(c, ins, A):
    return astype(_int_conv(ins[0], ins[1], _opt_in(ins, 2), _opt_in(ins, 3), A), np.int32)


@op("QLinearConv", _CONV_ATTRS, check=_check_conv_pool)
def _qlinear_conv(c, ins, A):
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = ins[:8]
    b = _opt_in(ins, 8)
    acc = _int_conv(x, w, x_zp, w_zp, A)
    if b is not None:
        acc = acc + astype(b, np.float64).reshape([1, -1] + [1] * (x.ndim - 2))
    ws = w_s.reshape([1, -1] + [1] * (x.ndim - 2)) if w_s.ndim == 1 and int(w_s.shape[0]) > 1 else w_s
    mult = astype(x_s * ws / y_s, np.float64)
    return _saturate(np.rint(acc * mult + astype(y_zp, np.float64)), c)


# ---- DFT, STFT: products with constant cosine and sine matrices along the signal axis ---------------------
def _dft_axis(x, axis, length, onesided, inverse):
    """x [..., n, 1 or 2] (real, or real and imaginary parts) transformed
    along `axis` (n truncated or zero-padded to length): [..., k, 2]."""
    nd = x.ndim
    axis = norm_axis(axis, nd)
    if axis == nd - 1:
        raise ValueError("DFT: the signal axis cannot be the last (it holds the real and imaginary parts)")
    dt = np.dtype(x.dtype)
    n = int(x.shape[axis])
    re = x[..., 0]
    im = x[..., 1] if int(x.shape[-1]) == 2 else None
    m = min(n, length)
    if m < n:
        idx = [slice(None)] * (nd - 1)
        idx[axis] = slice(0, m)
        re = re[tuple(idx)]
        im = None if im is None else im[tuple(idx)]
    kout = length // 2 + 1 if onesided else length
    jk = np.outer(np.arange(m), np.arange(kout)) % length
    ang = 2 * np.pi * jk / length
    cos, sin = np.cos(ang), np.sin(ang)
    if inverse:
        cos, sin = cos / length, sin / length
    cos, sin = cos.astype(dt), sin.astype(dt)
    re = np.moveaxis(re, axis, -1)
    im = None if im is None else np.moveaxis(im, axis, -1)
    if not inverse:  # X = sum x e^{-i w}
        out_re = np.matmul(re, cos) if im is None else np.matmul(re, cos) + np.matmul(im, sin)
        out_im = -np.matmul(re, sin) if im is None else np.matmul(im, cos) - np.matmul(re, sin)
    else:  # x = sum X e^{+i w} / length
        out_re = np.matmul(re, cos) if im is None else np.matmul(re, cos) - np.matmul(im, sin)
        out_im = np.matmul(re, sin) if im is None else np.matmul(re, sin) + np.matmul(im, cos)
    y = np.stack([out_re, out_im], -1)  # [..., k, 2] with the signal axis last but one
    return np.moveaxis(y, -2, axis)


@op("DFT", ["axis", "inverse", "onesided"])
def _dft(c, ins, A):
    x = ins[0]
    length = int(known(ins[1], "DFT's dft_length").reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else None
    if c.opset_of("DFT") >= 20:
        axis = int(known(ins[2], "DFT's axis").reshape(-1)[0]) if len(ins) > 2 and ins[2] is not None else -2
    else:
        axis = int(A.get("axis", 1))
    axis = norm_axis(axis, x.ndim)
    if length is None:
        length = int(x.shape[axis])
    inverse, onesided = bool(A.get("inverse", 0)), bool(A.get("onesided", 0))
    if inverse and onesided:  # ONNX's reference: the inverse of all frequencies, the first half kept
        y = _dft_axis(x, axis, length, False, True)
        idx = [slice(None)] * y.ndim
        idx[axis] = slice(0, length // 2 + 1)
        return y[tuple(idx)]
    return _dft_axis(x, axis, length, onesided, inverse)


@op("STFT", ["onesided"])
def _stft(c, ins, A):
    x = ins[0]
    step = int(known(ins[1], "STFT's frame_step").reshape(-1)[0])
    window = ins[2] if len(ins) > 2 and ins[2] is not None else None
    flen = int(known(ins[3], "STFT's frame_length").reshape(-1)[0]) if len(ins) > 3 and ins[3] is not None else None
    n = int(x.shape[-2])
    if flen is None:
        flen = n if window is None else int(window.shape[0])
    if window is None:
        window = np.ones(flen, np.dtype(x.dtype))
    w = int(window.shape[0])
    frames = 1 + (n - flen) // step
    if frames < 1:
        raise ValueError("STFT: a frame of %d on a signal of %d" % (flen, n))
    parts = []
    for f in range(frames):
        fr = x[:, f * step: f * step + w]
        if int(fr.shape[1]) < w:  # past the end: zeros
            fr = np.pad(fr, [[0, 0], [0, w - int(fr.shape[1])], [0, 0]], mode="constant", constant_values=sc(x, 0))
        parts.append(np.expand_dims(fr, 1))
    fx = parts[0] if frames == 1 else np.concatenate(parts, 1)  # [batch, frames, w, c]
    fx = fx * astype(window, np.dtype(x.dtype)).reshape(1, 1, w, 1)
    return _dft_axis(fx, 2, flen, bool(A.get("onesided", 1)), False)


# ---- RNN, GRU, LSTM: unrolled over the (known) sequence length; one product for the input projections of
# every step, one per step for the recurrence; sequence_lens by masks (a step past a sequence's length keeps
# its state and writes zeros to Y) -------------------------------------------------------------------------
_ACTS = {"Relu": lambda x: np.maximum(x, sc(x, 0)), "Tanh": np.tanh,
         "Sigmoid": lambda x: smelt_op("sigmoid", x), "Softsign": lambda x: x / (sc(x, 1) + np.abs(x)),
         "Softplus": lambda x: smelt_op("softplus", x),
         "LeakyRelu": lambda x: np.where(x < sc(x, 0), x * sc(x, 0.01), x),
         "ThresholdedRelu": lambda x: np.where(x > sc(x, 1.0), x, sc(x, 0)),
         "HardSigmoid": lambda x: np.clip(x * sc(x, 0.2) + sc(x, 0.5), sc(x, 0), sc(x, 1)),
         "Elu": lambda x: np.where(x < sc(x, 0), np.exp(x) - sc(x, 1), x)}
_ACTS_LOWER = {k.lower(): v for k, v in _ACTS.items()}
_RNN_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_RNN_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _rnn_check(node, A, opset):
    if A.get("direction", "forward") not in ("forward", "reverse", "bidirectional"):
        return "direction=%r" % A.get("direction")
    for a in A.get("activations", []):
        if a.lower() not in _ACTS_LOWER:
            return "activation %r" % a
    if "activation_alpha" in A or "activation_beta" in A:
        return "activation_alpha / activation_beta (the activations' default parameters are)"
    return None


def _recurrent(kind, c, ins, A):
    x, w, r = ins[0], ins[1], ins[2]
    opt = lambda i: ins[i] if len(ins) > i and ins[i] is not None else None  # noqa: E731
    b, lens, h0 = opt(3), opt(4), opt(5)
    c0, peep = (opt(6), opt(7)) if kind == "LSTM" else (None, None)
    layout = int(A.get("layout", 0))
    if layout:
        x = np.transpose(x, (1, 0, 2))
        h0 = None if h0 is None else np.transpose(h0, (1, 0, 2))
        c0 = None if c0 is None else np.transpose(c0, (1, 0, 2))
    T, nb = int(x.shape[0]), int(x.shape[1])
    G = _RNN_GATES[kind]
    hs = int(r.shape[-1])
    dirs = {"forward": ["forward"], "reverse": ["reverse"], "bidirectional": ["forward", "reverse"]}[
        A.get("direction", "forward")]
    nacts = len(_RNN_DEFAULT_ACTS[kind])
    acts = [_ACTS_LOWER[a.lower()] for a in A.get("activations", _RNN_DEFAULT_ACTS[kind] * len(dirs))]
    clip = A.get("clip")
    dt = np.dtype(x.dtype)
    zero = np.zeros((nb, hs), dt)
    if lens is not None:
        lens = astype(lens, np.int64).reshape(nb, 1)
    ys, hts, cts = [], [], []
    for d, direction in enumerate(dirs):
        f_act = acts[d * nacts:(d + 1) * nacts]
        if clip is not None:  # on the gates' inputs (not on an LSTM's cell state before h, as onnxruntime)
            cl = float(clip)
            f_act = [(lambda g: (lambda v: g(np.clip(v, sc(v, -cl), sc(v, cl)))))(g) if j < 2 else g
                     for j, g in enumerate(f_act)]
        wd, rd = w[d], r[d]  # [G*hs, I], [G*hs, hs]
        bd = b[d] if b is not None else np.zeros(2 * G * hs, dt)
        wb, rb = bd[:G * hs], bd[G * hs:]
        xw = np.matmul(x.reshape(T * nb, -1), np.transpose(wd)).reshape(T, nb, G * hs) + wb
        h = h0[d] if h0 is not None else zero
        cc = (c0[d] if c0 is not None else zero) if kind == "LSTM" else None
        if kind == "LSTM":
            pd = peep[d] if peep is not None else None
        outs = [None] * T
        steps = range(T) if direction == "forward" else range(T - 1, -1, -1)
        for t in steps:
            xt = xw[t]
            if kind == "RNN":
                hn = f_act[0](xt + np.matmul(h, np.transpose(rd)) + rb)
            elif kind == "GRU":
                zr = xt[:, :2 * hs] + np.matmul(h, np.transpose(rd[:2 * hs])) + rb[:2 * hs]
                z, rr = f_act[0](zr[:, :hs]), f_act[0](zr[:, hs:])
                rh, rbh = rd[2 * hs:], rb[2 * hs:]
                if A.get("linear_before_reset", 0):
                    hh = f_act[1](xt[:, 2 * hs:] + rr * (np.matmul(h, np.transpose(rh)) + rbh))
                else:
                    hh = f_act[1](xt[:, 2 * hs:] + np.matmul(rr * h, np.transpose(rh)) + rbh)
                hn = (sc(z, 1) - z) * hh + z * h
            else:
                g4 = xt + np.matmul(h, np.transpose(rd)) + rb
                gi, go, gf, gc = (g4[:, k * hs:(k + 1) * hs] for k in range(4))
                if pd is not None:
                    gi = gi + pd[:hs] * cc
                    gf = gf + pd[2 * hs:] * cc
                i_ = f_act[0](gi)
                f_ = sc(i_, 1) - i_ if A.get("input_forget", 0) else f_act[0](gf)
                cn = f_ * cc + i_ * f_act[1](gc)
                if pd is not None:
                    go = go + pd[hs:2 * hs] * cn
                hn = f_act[0](go) * f_act[2](cn)
            if lens is not None:
                live = np.int64(t) < lens  # [nb, 1]
                hn = np.where(live, hn, h)
                if kind == "LSTM":
                    cn = np.where(live, cn, cc)
                outs[t] = np.where(live, hn, sc(hn, 0))
            else:
                outs[t] = hn
            h = hn
            if kind == "LSTM":
                cc = cn
        ys.append(np.stack(outs, 0))  # [T, nb, hs]
        hts.append(h)
        cts.append(cc)
    y = np.stack(ys, 1)  # [T, D, nb, hs]
    yh = np.stack(hts, 0)
    res = [y, yh]
    if kind == "LSTM":
        res.append(np.stack(cts, 0))
    if layout:
        res = [np.transpose(y, (2, 0, 1, 3))] + [np.transpose(v, (1, 0, 2)) for v in res[1:]]
    return [astype(v, dt) for v in res]


_RNN_ATTRS = ["activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout"]
op("RNN", _RNN_ATTRS, check=_rnn_check)(lambda c, ins, A: _recurrent("RNN", c, ins, A))
op("GRU", _RNN_ATTRS + ["linear_before_reset"], check=_rnn_check)(lambda c, ins, A: _recurrent("GRU", c, ins, A))
op("LSTM", _RNN_ATTRS + ["input_forget"], check=_rnn_check)(lambda c, ins, A: _recurrent("LSTM", c, ins, A))


# ---- layout -------------------------------------------------------------------------------------------
@op("Reshape", ["allowzero", "shape"])
def _reshape(c, ins, A):
    x = ins[0]
    shape = A["shape"] if "shape" in A else known(ins[1], "Reshape's shape").reshape(-1).tolist()
    shape = [int(s) for s in shape]
    if not A.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    if -1 in shape:
        rest = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        total = int(np.prod(x.shape, dtype=np.int64))
        shape[shape.index(-1)] = total // rest if rest else 0
    return x.reshape(shape)


@op("Transpose", ["perm"])
def _transpose(c, ins, A):
    x = ins[0]
    perm = A.get("perm")
    return np.transpose(x, None if perm is None else [int(p) for p in perm])


def _axes_arg(A, ins, what):
    if "axes" in A:
        return [int(a) for a in A["axes"]]
    if len(ins) > 1 and ins[1] is not None:
        return [int(a) for a in known(ins[1], what).reshape(-1)]
    return None


@op("Squeeze", ["axes"])
def _squeeze(c, ins, A):
    x = ins[0]
    axes = _axes_arg(A, ins, "Squeeze's axes")
    if axes is None:
        axes = [i for i, s in enumerate(x.shape) if s == 1]
    axes = sorted(norm_axis(a, x.ndim) for a in axes)
    return x.reshape([s for i, s in enumerate(x.shape) if i not in axes])


@op("Unsqueeze", ["axes"])
def _unsqueeze(c, ins, A):
    x = ins[0]
    axes = _axes_arg(A, ins, "Unsqueeze's axes") or []
    n = x.ndim + len(axes)
    axes = sorted(norm_axis(a, n) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return x.reshape(shape)


@op("Flatten", ["axis"])
def _flatten(c, ins, A):
    x = ins[0]
    axis = A.get("axis", 1)
    if axis < 0:
        axis += x.ndim
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis:], dtype=np.int64)))


@op("Expand")
def _expand(c, ins, A):
    x = ins[0]
    shape = [int(s) for s in known(ins[1], "Expand's shape").reshape(-1)]
    out = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    if tuple(out) == tuple(x.shape):
        return x
    return np.broadcast_to(x, out)


@op("Concat", ["axis"])
def _concat(c, ins, A):
    parts = [x for x in ins if x is not None]
    axis = norm_axis(A["axis"], parts[0].ndim)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts, axis=axis)


@op("Split", ["axis", "split", "num_outputs"])
def _split(c, ins, A):
    x = ins[0]
    axis = norm_axis(A.get("axis", 0), x.ndim)
    n = x.shape[axis]
    if "split" in A:
        sizes = [int(s) for s in A["split"]]
    elif len(ins) > 1 and ins[1] is not None:
        sizes = [int(s) for s in known(ins[1], "Split's sizes").reshape(-1)]
    else:
        k = A.get("num_outputs", c.n_outputs)
        step = -(-n // k)
        sizes = [min(step, n - i * step) for i in range(k)]
    outs, start = [], 0
    for s in sizes:
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(start, start + s)
        outs.append(x[tuple(idx)])
        start += s
    return outs


_IMAX = (1 << 63) - 1


@op("Slice", ["starts", "ends", "axes"])
def _slice(c, ins, A):
    x = ins[0]
    if "starts" in A:
        starts, ends = list(A["starts"]), list(A["ends"])
        axes = list(A.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = known(ins[1], "Slice's starts").reshape(-1).tolist()
        ends = known(ins[2], "Slice's ends").reshape(-1).tolist()
        axes = known(ins[3], "Slice's axes").reshape(-1).tolist() if len(ins) > 3 and ins[3] is not None \
            else list(range(len(starts)))
        steps = known(ins[4], "Slice's steps").reshape(-1).tolist() if len(ins) > 4 and ins[4] is not None \
            else [1] * len(starts)
    idx = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = norm_axis(a, x.ndim)
        n = x.shape[a]
        b0, e0, st = slice(int(s), int(e), int(st)).indices(n)
        if st < 0 and e0 < 0:
            e0 = None
        idx[a] = slice(b0, e0, st)
    return x[tuple(idx)]


@op("Pad", ["mode", "pads", "value"],
    check=lambda n, A, o: None if A.get("mode", "constant") in ("constant", "edge", "reflect", "wrap") else
    "mode=%r" % A.get("mode"))
def _pad(c, ins, A):
    x = ins[0]
    if "pads" in A:
        pads = [int(p) for p in A["pads"]]
        value = A.get("value", 0.0)
        axes = list(range(x.ndim))
    else:
        pads = [int(p) for p in known(ins[1], "Pad's pads").reshape(-1)]
        value = known(ins[2], "Pad's value").reshape(-1)[0] if len(ins) > 2 and ins[2] is not None else 0
        axes = [norm_axis(a, x.ndim) for a in known(ins[3], "Pad's axes").reshape(-1)] \
            if len(ins) > 3 and ins[3] is not None else list(range(x.ndim))
    k = len(axes)
    widths = [[0, 0] for _ in range(x.ndim)]
    for i, a in enumerate(axes):
        widths[a] = [pads[i], pads[i + k]]
    # negative pads crop
    idx = [slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(widths)]
    if any(b < 0 or e < 0 for b, e in widths):
        x = x[tuple(idx)]
    widths = [[max(b, 0), max(e, 0)] for b, e in widths]
    if not any(b or e for b, e in widths):
        return x
    mode = A.get("mode", "constant")
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=sc(x, value))
    for a, (b, e) in enumerate(widths):
        if not (b or e):
            continue
        n = x.shape[a]

        def part(lo, hi, step=1):
            idx = [slice(None)] * x.ndim
            idx[a] = slice(lo, hi, step)
            return x[tuple(idx)]
        if mode == "edge":
            def rep(p, k):
                shape = list(p.shape)
                shape[a] = k
                return np.broadcast_to(p, shape)
            left, right = rep(part(0, 1), b), rep(part(n - 1, n), e)
        elif mode == "wrap":
            if b > n or e > n:
                raise UnsupportedError(-10, "Pad(mode='wrap') wider than the axis")
            left, right = part(n - b, n), part(0, e)
        else:  # reflect
            if b >= n or e >= n:
                raise UnsupportedError(-10, "Pad(mode='reflect') as wide as the axis")
            left, right = np.flip(part(1, b + 1), a), np.flip(part(n - 1 - e, n - 1), a)
        x = np.concatenate([p for p, k in ((left, b), (x, 1), (right, e)) if k], axis=a)
    return x


@op("CenterCropPad", ["axes"])
def _center_crop_pad(c, ins, A):
    x = ins[0]
    shape = [int(v) for v in known(ins[1], "CenterCropPad's shape").reshape(-1)]
    axes = [norm_axis(a, x.ndim) for a in A.get("axes", range(x.ndim))]
    for a, t in zip(axes, shape):
        n = x.shape[a]
        if t < n:  # crop the middle (the extra element from the start's side)
            idx = [slice(None)] * x.ndim
            lo = (n - t) // 2
            idx[a] = slice(lo, lo + t)
            x = x[tuple(idx)]
        elif t > n:  # pad with zeros around
            widths = [[0, 0] for _ in range(x.ndim)]
            widths[a] = [(t - n) // 2, t - n - (t - n) // 2]
            x = np.pad(x, widths, mode="constant", constant_values=sc(x, 0))
    return x


@op("Tile")
def _tile(c, ins, A):
    x = ins[0]
    reps = [int(r) for r in known(ins[1], "Tile's repeats").reshape(-1)]
    for a, r in enumerate(reps):
        if r == 0:
            shape = list(x.shape)
            shape[a] = 0
            return np.zeros(shape, x.dtype) if not is_traced(x) else np.zeros_like(x, shape=shape)
        if r != 1:
            x = np.concatenate([x] * r, axis=a)
    return x


@op("Dropout", ["ratio", "seed", "is_test", "consumed_inputs"])
def _dropout(c, ins, A):
    x = ins[0]
    ratio = float(known(ins[1], "Dropout's ratio").reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None \
        else A.get("ratio", 0.5)
    if len(ins) > 2 and ins[2] is not None and bool(known(ins[2], "Dropout's training_mode").reshape(-1)[0]) \
            and ratio != 0:
        raise UnsupportedError(-10, "Dropout in training mode draws random numbers: smelt runs inference only")
    mask = np.ones(x.shape, np.bool_)
    return [x, mask]


def _const_value(A):
    import onnx
    from onnx import numpy_helper
    if "value" in A:
        return numpy_helper.to_array(A["value"])
    if "value_float" in A:
        return np.array(A["value_float"], np.float32)
    if "value_floats" in A:
        return np.array(A["value_floats"], np.float32)
    if "value_int" in A:
        return np.array(A["value_int"], np.int64)
    if "value_ints" in A:
        return np.array(A["value_ints"], np.int64)
    raise UnsupportedError(-10, "Constant without a numeric value")  # pragma: no cover (checked at load)


def _check_constant(node, A, opset):
    for k in ("sparse_value", "value_string", "value_strings"):
        if k in A:
            return "the attribute %s" % k
    if "value" in A and not _supported_elem(A["value"].data_type):
        return "a constant of dtype %s" % _dtype_name(A["value"].data_type)
    return None


@op("Constant", ["value", "value_float", "value_floats", "value_int", "value_ints", "sparse_value", "value_string",
                 "value_strings"], check=_check_constant)
def _constant(c, ins, A):
    return _const_value(A)


def _check_cos(node, A, opset):
    if "value" in A and not _supported_elem(A["value"].data_type):
        return "a value of dtype %s" % _dtype_name(A["value"].data_type)
    return None


@op("ConstantOfShape", ["value"], check=_check_cos)
def _cos(c, ins, A):
    from onnx import numpy_helper
    shape = [int(s) for s in known(ins[0], "ConstantOfShape's shape").reshape(-1)]
    v = numpy_helper.to_array(A["value"]).reshape(-1) if "value" in A else np.zeros(1, np.float32)
    return np.full(shape, v[0], v.dtype)


@op("Shape", ["start", "end"])
def _shape(c, ins, A):
    s = np.array(ins[0].shape, np.int64)
    n = len(s)
    start = A.get("start", 0)
    end = A.get("end", n)
    return s[slice(start, end)]


@op("Size")
def _size(c, ins, A):
    return np.array(int(np.prod(ins[0].shape, dtype=np.int64)), np.int64)


@op("Range")
def _range(c, ins, A):
    start, limit, delta = (known(v, "Range's %s" % w).reshape(-1)[0]
                           for v, w in zip(ins, ("start", "limit", "delta")))
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return (start + np.arange(n).astype(start.dtype) * delta).astype(start.dtype)


@op("EyeLike", ["dtype", "k"], check=lambda n, A, o: None if "dtype" not in A or _supported_elem(A["dtype"])
    else "dtype %s" % _dtype_name(A["dtype"]))
def _eyelike(c, ins, A):
    x = ins[0]
    dt = _np_dtype(A["dtype"]) if "dtype" in A else x.dtype
    return np.eye(x.shape[0], x.shape[1], k=A.get("k", 0), dtype=dt)


@op("Trilu", ["upper"])
def _trilu(c, ins, A):
    x = ins[0]
    k = int(known(ins[1], "Trilu's k").reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else 0
    n, m = x.shape[-2], x.shape[-1]
    ones = np.ones((n, m), np.bool_)
    mask = np.triu(ones, k) if A.get("upper", 1) else np.tril(ones, k)
    if not is_traced(x):
        return np.where(mask, x, np.zeros((), x.dtype))
    return np.where(mask, x, sc(x, 0))


@op("OneHot", ["axis"])
def _onehot(c, ins, A):
    idx, depth, values = ins
    depth = int(known(depth, "OneHot's depth").reshape(-1)[0])
    out_nd = idx.ndim + 1
    axis = norm_axis(A.get("axis", -1), out_nd)
    i = astype(idx, np.int64)
    i = np.where(i < np.int64(0), i + np.int64(depth), i)
    i = np.expand_dims(i, axis)
    shape = [1] * out_nd
    shape[axis] = depth
    iota = np.arange(depth, dtype=np.int64).reshape(shape)
    hit = np.equal(i, iota)
    off = values[0:1].reshape(())
    on = values[1:2].reshape(())
    return np.where(hit, on, off)


# ---- the optimizers of the ai.onnx.preview.training domain (elementwise updates; the t > 0 branches as
# selects, t being a value) -------------------------------------------------------------------------------
TRAINING_OPS = {}


def _training_groups(ins, per):
    """(r, t, groups of `per` tensors: one per optimized tensor)"""
    r, t = ins[0], ins[1]
    rest = ins[2:]
    n = len(rest) // per
    return r, t, [[rest[k * n + i] for k in range(per)] for i in range(n)], n


def _adagrad(c, ins, A):
    r, t, groups, n = _training_groups(ins, 3)
    eps, decay, norm = A.get("epsilon", 0.0), A.get("decay_factor", 0.0), A.get("norm_coefficient", 0.0)
    xs, hs = [], []
    for x, g, h in groups:
        rr = astype(r, np.float64) / (1.0 + astype(t, np.float64) * decay)
        gr = sc(x, norm) * x + g
        hn = h + gr * gr
        xn = x - astype(rr, np.dtype(x.dtype)) * gr / (np.sqrt(hn) + sc(hn, eps))
        xs.append(astype(xn, np.dtype(x.dtype)))
        hs.append(astype(hn, np.dtype(h.dtype)))
    return xs + hs


def _adam(c, ins, A):
    r, t, groups, n = _training_groups(ins, 4)
    alpha, beta = A.get("alpha", 0.9), A.get("beta", 0.999)
    eps, norm, post = A.get("epsilon", 0.0), A.get("norm_coefficient", 0.0), A.get("norm_coefficient_post", 0.0)
    tf = astype(t, np.float64)
    corr = np.sqrt(1.0 - np.power(np.float64(beta), tf)) / (1.0 - np.power(np.float64(alpha), tf))
    rr = np.where(t > np.int64(0), astype(r, np.float64) * corr, astype(r, np.float64))
    xs, vs, hs = [], [], []
    for x, g, v, h in groups:
        dt = np.dtype(x.dtype)
        gr = sc(x, norm) * x + g
        vn = sc(v, alpha) * v + sc(v, 1 - alpha) * gr
        hn = sc(h, beta) * h + sc(h, 1 - beta) * (gr * gr)
        xn = x - astype(rr, dt) * (vn / (np.sqrt(hn) + sc(hn, eps)))
        xs.append(astype(sc(xn, 1 - post) * xn, dt))
        vs.append(astype(vn, np.dtype(v.dtype)))
        hs.append(astype(hn, np.dtype(h.dtype)))
    return xs + vs + hs


def _momentum(c, ins, A):
    r, t, groups, n = _training_groups(ins, 3)
    alpha, beta, norm = A["alpha"], A["beta"], A["norm_coefficient"]
    nesterov = A.get("mode", "standard") == "nesterov"
    xs, vs = [], []
    for x, g, v in groups:
        dt = np.dtype(x.dtype)
        gr = sc(x, norm) * x + g
        badj = np.where(t > np.int64(0), sc(gr, beta), sc(gr, 1))
        vn = sc(v, alpha) * v + badj * gr
        step = gr + sc(vn, alpha) * vn if nesterov else vn
        xs.append(astype(x - astype(r, dt) * step, dt))
        vs.append(astype(vn, np.dtype(v.dtype)))
    return xs + vs


TRAINING_OPS["Adagrad"] = (_adagrad, frozenset(["decay_factor", "epsilon", "norm_coefficient"]), None)
TRAINING_OPS["Adam"] = (_adam, frozenset(["alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"]),
                        None)
TRAINING_OPS["Momentum"] = (_momentum, frozenset(["alpha", "beta", "mode", "norm_coefficient"]),
                            lambda n, A, o: None if A.get("mode", "standard") in ("standard", "nesterov")
                            else "mode=%r" % A.get("mode"))



# ---- the model ----------------------------------------------------------------------------------------
def supported_ops():
    """The ONNX operators (default domain) smelt.onnx converts."""
    return sorted(OPS)


# the inputs of each operator whose values (not only shapes) smelt needs
# when it builds the graph: axes, shapes, sizes, counts.  A graph input
# reaching one of them (through any nodes but Shape and Size, which read
# shapes only) is a static input: its values are part of the signature.
KNOWN_INPUTS = {"Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "Slice": (1, 2, 3, 4),
                "Pad": (1, 2, 3), "Tile": (1,), "Expand": (1,), "Range": (0, 1, 2), "ConstantOfShape": (0,),
                "Trilu": (1,), "OneHot": (1,), "Dropout": (1, 2), "Upsample": (1,), "Resize": (1, 2, 3),
                "TopK": (1,), "AffineGrid": (1,), "Col2Im": (1, 2), "DFT": (1, 2), "STFT": (1, 3),
                "Compress": (1,), "MaxUnpool": (2,), "MelWeightMatrix": (0, 1, 2, 3, 4), "CenterCropPad": (1,),
                "HannWindow": (0,), "HammingWindow": (0,), "BlackmanWindow": (0,)}
for _n in OPS:
    if _n.startswith("Reduce"):
        KNOWN_INPUTS[_n] = (1,)
KNOWN_INPUTS["CumSum"] = (1,)  # its axis
_SHAPE_ONLY = {"Shape", "Size", "EyeLike"}


class _Static:
    """A graph input whose values the graph's construction reads: hashed
    by value, a static argument of the compiled function."""
    __slots__ = ("a", "key")

    def __init__(self, a):
        self.a = np.array(a)
        self.key = (self.a.dtype.str, self.a.shape, self.a.tobytes())

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _Static) and self.key == other.key


class _NodeCtx:
    __slots__ = ("opsets", "n_outputs", "out_narrow")

    def __init__(self, opsets):
        self.opsets = opsets
        self.n_outputs = 1
        self.out_narrow = ()  # per output: its narrow integer dtype (carried in int64), or None

    def opset_of(self, name):
        return self.opsets.get("", 1)


_NOT_GIVEN = object()  # an input the call does not name


def _value_type_ok(vi):
    t = vi.type
    which = t.WhichOneof("value")
    if which is None:
        return None  # no type given: the values decide
    if which != "tensor_type":
        return _control.container_type_ok(t)  # sequences and optionals of tensors
    if not _supported_elem(t.tensor_type.elem_type):
        return "a tensor of dtype %s (smelt's dtypes: %s)" % (_dtype_name(t.tensor_type.elem_type),
                                                               smelt._dtypes.SUPPORTED)
    return None


class OnnxFunction:
    """An ONNX model as a callable: f(*inputs, **named_inputs) -> tuple of
    NumPy arrays in the graph's output order.  One smelt plan per input
    signature (dtypes and shapes): a new batch size traces again."""

    def __init__(self, model, opt_level=3, backend=None):
        import onnx
        from onnx import numpy_helper
        if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__"):
            model = onnx.load(model)
        if not isinstance(model, onnx.ModelProto):
            raise TypeError("smelt.onnx.load takes a path or an onnx.ModelProto, not %s" % type(model).__name__)
        self.model = model
        g = model.graph
        self.opsets = {}
        for o in model.opset_import:
            self.opsets["" if o.domain in ("", "ai.onnx") else o.domain] = o.version
        self.opset = self.opsets.get("", 1)
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
        except Exception:
            inferred = g
        # initializers: constants, identical ones shared
        self.consts = {}
        seen = {}
        for init in g.initializer:
            if init.data_type and not _supported_elem(init.data_type):
                raise UnsupportedOperator("initializer %r: dtype %s (smelt's dtypes: %s)"
                                          % (init.name, _dtype_name(init.data_type), smelt._dtypes.SUPPORTED))
            a = numpy_helper.to_array(init)
            if init.data_type in _NARROW:
                a = a.astype(_CARRIER)
            elif init.data_type in _exotic.CARRIED:
                a = _exotic.to_carrier(a, init.data_type)
            key = (a.dtype.str, a.shape, a.tobytes())
            self.consts[init.name] = seen.setdefault(key, a)
        for init in g.sparse_initializer:
            raise UnsupportedOperator("sparse initializer %r: sparse tensors are not supported"
                                      % init.values.name)
        self.input_names = [vi.name for vi in g.input if vi.name not in self.consts]
        self._input_types = [vi.type if _control.is_container_type(vi.type) else None
                             for vi in g.input if vi.name not in self.consts]
        self.input_dtypes = []
        for vi in g.input:
            if vi.name in self.consts:
                continue
            why = _value_type_ok(vi)
            if why:
                raise UnsupportedOperator("graph input %r: %s" % (vi.name, why))
            self.input_dtypes.append(_onnx_np_dtype(vi.type.tensor_type.elem_type) if vi.type.HasField("tensor_type")
                                     else None)
        self.output_names = [vi.name for vi in g.output]
        for vi in g.output:
            why = _value_type_ok(vi)
            if why:
                raise UnsupportedOperator("graph output %r: %s" % (vi.name, why))
        for vi in inferred.value_info:
            why = _value_type_ok(vi)
            if why:
                raise UnsupportedOperator("value %r: %s" % (vi.name, why))
        if model.functions:
            pass  # local functions are only reached through nodes of their domain (refused below)
        # the narrow integer values (by name) and every value's element type where known
        elem = {}
        for vi in list(inferred.value_info) + list(g.output) + list(g.input):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                elem[vi.name] = vi.type.tensor_type.elem_type
        for init in g.initializer:
            elem[init.name] = init.data_type
        self.narrow = {n: _NARROW[e] for n, e in elem.items() if e in _NARROW}
        self.exotic = {n: e for n, e in elem.items() if e in _exotic.CARRIED}  # carried as _exotic says
        self._elem = elem
        self.nodes = self._convert_nodes(g.node, "")
        self._ctx = _NodeCtx(self.opsets)
        # static inputs: those whose values shape the graph (an If's branches' nodes take part; an If reads
        # every value its branches read, and its outputs come from its branches' outputs)
        producer, reads, all_nodes = {}, {}, []

        def walk(nodes):
            for node in nodes:
                all_nodes.append(node)
                r = [x for x in node.input if x]
                for a in node.attribute:
                    if a.type == onnx.AttributeProto.GRAPH:
                        sub = walk(a.g.node)
                        r += sub + [o.name for o in a.g.output]
                reads[id(node)] = r
                for o in node.output:
                    producer[o] = node
                for link in _control.body_links(node):  # a Loop's, Scan's body inputs: what feeds them
                    producer[link.name] = link
                    reads[id(link)] = link.reads
            return [x for node in nodes for x in reads[id(node)]]
        walk(g.node)
        need, stack = set(), []
        for node in all_nodes:
            for i in KNOWN_INPUTS.get(node.op_type, ()):
                if i < len(node.input) and node.input[i]:
                    stack.append(node.input[i])
            stack.extend(_control.known_names(node))
        while stack:
            n = stack.pop()
            if n in need:
                continue
            need.add(n)
            node = producer.get(n)
            if node is not None and node.op_type not in _SHAPE_ONLY:
                stack.extend(reads[id(node)])
        self.static_inputs = tuple(i for i, n in enumerate(self.input_names) if n in need
                                   and not _control.is_container_type(self._input_types[i]))
        name = (g.name or "onnx_model").replace(" ", "_")
        self._fn = Function(self._graph_fn, opt_level=opt_level, backend=backend, capture_as_const=True,
                            static_argnums=self.static_inputs, name=name)

    # the function traced once per signature
    def _graph_fn(self, *args):
        env = self.evaluate([a.a if isinstance(a, _Static) else _control.trace_in(a) for a in args])
        outs, leaves = [], []

        def leaf(v):
            if int(np.prod(v.shape, dtype=np.int64)) == 0:
                # no elements: made at the call, not by the plan
                return ("empty", np.dtype(v.dtype).str, tuple(v.shape))
            leaves.append(v)
            return as_graph(v)
        for n in self.output_names:
            outs.append(_control.graph_out(env[n], leaf))  # a sequence is a list, an empty optional None
        if not leaves:  # a plan needs one output: a dummy, dropped at the call
            outs.append(as_graph(np.zeros(1, np.float32)))
        return tuple(outs)

    def evaluate(self, args):
        """Run the nodes on args (traced or NumPy arrays): every value by name."""
        env = dict(self.consts)
        env.update(zip(self.input_names, args))
        return self._run_nodes(self.nodes, env)

    def _run_nodes(self, nodes, env):
        ctx = self._ctx
        for label, fn, ins, outs, attrs in nodes:
            try:
                vals = [env[n] if n else None for n in ins]
            except KeyError as e:
                raise ValueError("%s: input %s is not computed by any earlier node" % (label, e)) from None
            while vals and vals[-1] is None:
                vals.pop()
            try:
                if getattr(fn, "control", False):  # _control.py: If, Loop, Scan, sequences, optionals
                    r = fn(self, vals, attrs, env, label)
                else:
                    ctx.n_outputs = len(outs)
                    ctx.out_narrow = [self.narrow.get(o) for o in outs]
                    r = fn(ctx, vals, attrs)
            except Exception as e:
                if hasattr(e, "add_note"):
                    e.add_note("in ONNX %s" % label)
                raise
            if not isinstance(r, (list, tuple)):
                r = [r]
            for n, v in zip(outs, r):
                if n:
                    if n in self.narrow:
                        v = _wrap(v, self.narrow[n])
                    env[n] = v
        return env

    def _convert_nodes(self, graph_nodes, where):
        """The nodes of a graph (the model's, or an If's branch: `where`
        names it) as (label, fn, inputs, outputs, attrs), every refusal
        found here."""
        import onnx
        from onnx import helper
        elem = self._elem
        nodes = []
        for i, node in enumerate(graph_nodes):
            label = "%snode %d%s (%s)" % (where, i, " %r" % node.name if node.name else "", node.op_type)
            if node.domain == "ai.onnx.preview.training" and node.op_type in TRAINING_OPS:
                entry = TRAINING_OPS[node.op_type]
            elif node.domain not in ("", "ai.onnx"):
                raise UnsupportedOperator("%s: operator domain %r is not supported (the default ONNX domain is, "
                                          "and ai.onnx.preview.training's %s)"
                                          % (label, node.domain, ", ".join(sorted(TRAINING_OPS))))
            else:
                entry = OPS.get(node.op_type)
            if entry is None:
                raise UnsupportedOperator("%s: operator %s is not supported by smelt.onnx (supported: "
                                          "smelt.onnx.supported_ops(), docs/onnx.md)" % (label, node.op_type))
            fn, allowed, check = entry
            attrs = {}
            for a in node.attribute:
                if a.name not in allowed:
                    raise UnsupportedOperator("%s: attribute %r is not supported" % (label, a.name))
                if a.type == onnx.AttributeProto.GRAPH and node.op_type in _control.SUBGRAPH_OPS:
                    attrs[a.name] = _control.subgraph(self, a.g, label, a.name)
                    continue
                if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    raise UnsupportedOperator("%s: subgraph attribute %r is not supported" % (label, a.name))
                v = a.t if a.type == onnx.AttributeProto.TENSOR else helper.get_attribute_value(a)
                if isinstance(v, bytes):
                    v = v.decode()
                attrs[a.name] = v
            if check is not None:
                why = check(node, attrs, self.opset)
                if why:
                    raise UnsupportedOperator("%s: %s is not supported" % (label, why))
            if self.narrow:
                ins_read = node.input[:1] if node.op_type == "Pow" else node.input  # (a narrow exponent is safe)
                touched = [self.narrow[n] for n in list(ins_read) + list(node.output) if n in self.narrow]
                if touched and (node.op_type in _NARROW_UNSAFE or (
                        node.op_type in _UINT32_UNSAFE and np.dtype(np.uint32) in touched)):
                    raise UnsupportedOperator("%s: %s on %s is not supported (carried in int64, its intermediate "
                                              "could overflow before the wrap)" % (label, node.op_type, touched[0]))
                for o in node.output:
                    if o and o not in elem:
                        raise UnsupportedOperator("%s: output %r has no known type (a model with narrow integers "
                                                  "needs every value's type)" % (label, o))
            if self.exotic:
                fn = _exotic.hook(label, node, attrs, elem, fn) or fn
            nodes.append((label, fn, list(node.input), list(node.output), attrs))
        return nodes

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = list(args) + [_NOT_GIVEN] * (len(self.input_names) - len(args))
            for k, v in kwargs.items():
                try:
                    i = self.input_names.index(k)
                except ValueError:
                    raise TypeError("the model has no input %r (inputs: %s)" % (k, ", ".join(self.input_names))) \
                        from None
                if args[i] is not _NOT_GIVEN:
                    raise TypeError("input %r given twice" % k)
                args[i] = v
        # (None is an empty optional where the input is an optional)
        if len(args) != len(self.input_names) or any(a is _NOT_GIVEN or (a is None and t is None)
                                                     for a, t in zip(args, self._input_types)):
            raise TypeError("the model takes %d input(s) (%s), %d given"
                            % (len(self.input_names), ", ".join(self.input_names),
                               sum(a is not None and a is not _NOT_GIVEN for a in args)))
        args = [np.asarray(a) if t is None else _control.call_arg(a, t, n)
                for a, t, n in zip(args, self._input_types, self.input_names)]
        for i, (a, dt, n) in enumerate(zip(args, self.input_dtypes, self.input_names)):
            if dt is not None and a.dtype != dt:
                raise TypeError("input %r is %s, the model wants %s" % (n, a.dtype, dt))
            if n in self.narrow:
                args[i] = a.astype(_CARRIER)
            elif n in self.exotic:
                args[i] = _exotic.to_carrier(a, self.exotic[n])
        for i in self.static_inputs:
            args[i] = _Static(args[i])
        res = self._fn(*args)
        res = [_control.call_out(r, lambda x: np.empty(x[2], x[1]) if type(x) is tuple else x)
               for r in res[:len(self.output_names)]]
        return tuple(r.astype(self.narrow[n]) if n in self.narrow else
                     _exotic.from_carrier(r, self.exotic[n]) if n in self.exotic else r
                     for r, n in zip(res, self.output_names))

    def stats(self):
        return self._fn.stats()

    def explain(self, *args, **kw):
        return self._fn.explain(*args, **kw)


def load(model, *, opt_level=3, backend=None):
    """An ONNX model (a path or an onnx.ModelProto) as a callable over NumPy
    arrays (smelt.onnx.OnnxFunction).  Unsupported operators, attributes
    and dtypes raise UnsupportedOperator here, naming the node."""
    return OnnxFunction(model, opt_level=opt_level, backend=backend)


from . import _control  # noqa: E402 (registers If, Loop, Scan, the Sequence and Optional operators)
