"""The tracer: an array type whose operations call smelt's graph builder.

A traced function receives Tracer objects in place of its array arguments.
Every operator, method and NumPy function on them (through NumPy's
__array_ufunc__ and __array_function__ protocols, NEP 13 and NEP 18) adds a
node to a smelt graph; nothing is computed.  NumPy's names map to smelt's
operators through the library's own operator table (smelt_op_name) and its
alias table (smelt_op_alias): no second list of operators here.
"""
import os
import sys
import threading

import numpy as np

from . import _dtypes as D
from ._lib import T, Error, TracerError, UnsupportedError, c_table, ffi, lib, make_error, text

# ---- the operator table, read from the library ----------------------------
OPS = {}
_i = 0
while True:
    _p = lib.smelt_op_name(_i)
    if _p == ffi.NULL:
        break
    OPS[text(_p)] = _i
    _i += 1
ALIASES = dict(c_table(lib.smelt_op_alias))
del _i, _p
REDUCTIONS = ("sum", "prod", "mean", "max", "min", "argmax", "argmin", "any", "all")
# the operators a NumPy ufunc may map to: elementwise ones (arity 1-3, not
# views, sources, reductions or library calls; matmul is handled apart)
_NOT_ELEMWISE = {"input", "const", "arange", "constant", "cast", "broadcast_to", "reshape", "transpose",
                 "slice", "concat", "pad", "matmul", "barrier", "conv_taps", "cumsum", "cumprod"} | set(REDUCTIONS)
_NOT_ELEMWISE |= {"take", "take_along_axis"}  # indexed reads: np.take, np.take_along_axis, W[ids]
ELEMWISE = {n: i for n, i in OPS.items() if n not in _NOT_ELEMWISE}


def op_for_numpy_name(name):
    """smelt's elementwise operator for a NumPy ufunc name, or None."""
    name = ALIASES.get(name, name)
    return ELEMWISE.get(name)


# ---- where the user's code is ----------------------------------------------
_pkg_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
_np_dir = os.path.dirname(os.path.abspath(np.__file__)) + os.sep


def user_location():
    """'file:line (the line's text)' of the innermost frame of the user's
    code (outside this package and NumPy), or ''."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(_pkg_dir) or fn.startswith(_np_dir) or fn.startswith("<__array_function__")):
            import linecache
            src = linecache.getline(fn, f.f_lineno).strip()
            return "%s:%d%s" % (fn, f.f_lineno, " (`%s`)" % src if src else "")
        f = f.f_back
    return ""


def _at():
    loc = user_location()
    return " at " + loc if loc else ""


# ---- the trace being recorded ------------------------------------------------
_state = threading.local()


def current():
    """The TraceState being recorded on this thread, or None."""
    return getattr(_state, "trace", None)


class TraceState:
    """One recording: the graph, the arrays it captured, host callbacks."""

    def __init__(self, ctx, capture_as_const=False, fname="function"):
        self.ctx = ctx
        p = ffi.new(T["smelt_graph **"])
        ctx.check(lib.smelt_graph_new(ctx.ptr, p), "smelt_graph_new")
        self.g = ffi.gc(p[0], lib.smelt_graph_free)
        self.capture_as_const = capture_as_const
        self.fname = fname
        self.n_inputs = 0
        # the inputs after the arguments, in creation order: ("capture", array)
        # read anew each call, or ("callback", callback, leaf index) of
        # exclude_from_trace
        self.extra = []
        self._captured_ids = {}
        self.keep = []          # objects the graph's nodes refer to (names)
        self.prev = None

    def __enter__(self):
        self.prev = current()
        _state.trace = self
        return self

    def __exit__(self, *exc):
        _state.trace = self.prev

    # builder results: a Tracer, or the graph's error raised at the user's line
    def wrap(self, node, what):
        if node == ffi.NULL:
            st = lib.smelt_graph_status(self.g) or -1
            raise make_error(st, "%s%s: %s" % (what, _at(), text(lib.smelt_graph_errmsg(self.g))))
        return Tracer(self, node)

    def input(self, dt, shape, name=None):
        sh = ffi.new(T["int64_t[]"], list(shape) or [0])
        nm = ffi.new(T["char[]"], name.encode()) if name else ffi.NULL
        if name:
            self.keep.append(nm)
        t = self.wrap(lib.smelt_input(self.g, nm, dt, len(shape), sh), "input")
        self.n_inputs += 1
        return t

    def capture(self, arr):
        """A concrete array the function reads: an extra input bound to this
        array object (read anew on every call), or a constant with
        capture_as_const."""
        key = id(arr)
        t = self._captured_ids.get(key)
        if t is not None:
            return t
        orig = arr
        arr = ensure_usable(arr, "an array the function reads")
        if self.capture_as_const or arr is not orig:
            t = self.constant(arr)  # a copy was needed: its values now
        else:
            t = self.input(D.to_smelt(arr.dtype), arr.shape)
            self.extra.append(("capture", arr))
        self._captured_ids[key] = t
        self.keep.append(orig)
        return t

    def constant(self, arr):
        tw = wrap_tensor(self.ctx, arr)
        return self.wrap(lib.smelt_constant(self.g, tw), "constant")


def ensure_usable(a, what):
    """a as a NumPy array smelt can read where it lies (aligned, native byte
    order, element strides); otherwise a copy."""
    a = np.asarray(a)
    if a.dtype.byteorder == ">" or not a.flags.aligned or any(s % a.itemsize for s in a.strides):
        a = np.array(a, dtype=a.dtype.newbyteorder("="), order="C", copy=True)
    D.to_smelt(a.dtype, what)
    return a


def data_ptr(a):
    """The address of a's first element as a cdata (no copy)."""
    try:
        return ffi.from_buffer(a)
    except (ValueError, TypeError, BufferError):  # not C-contiguous, or no buffer
        return ffi.cast(T["void *"], a.__array_interface__["data"][0])


def wrap_tensor(ctx, a, dt=None):
    """A smelt tensor over a's memory (the caller keeps a alive)."""
    if dt is None:
        dt = D.to_smelt(a.dtype)
    isz = a.itemsize
    shape = ffi.new(T["int64_t[]"], list(a.shape) or [0])
    strides = ffi.new(T["int64_t[]"], [s // isz for s in a.strides] or [0])
    out = ffi.new(T["smelt_tensor **"])
    ctx.check(lib.smelt_tensor_wrap(ctx.ptr, dt, a.ndim, shape, strides, data_ptr(a), out), "smelt_tensor_wrap")
    return ffi.gc(out[0], lib.smelt_tensor_free)


# ---- lifting operands ----------------------------------------------------------
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def lift(x, tr):
    """x as a node of the trace tr: a Tracer of it, a weak scalar for a
    Python number (NEP 50, as NumPy 2), a typed constant for a NumPy scalar,
    a captured array for an array."""
    if isinstance(x, Tracer):
        if x._tr is not tr:
            raise TracerError("a traced value of another trace (%s) is used in this one%s: pass it as an "
                              "argument instead of keeping it from an earlier call" % (x._tr.fname, _at()))
        return x
    if isinstance(x, bool) or isinstance(x, np.bool_):
        return tr.wrap(lib.smelt_const(tr.g, float(bool(x)), D.BOOL), "constant")
    if isinstance(x, int):
        if not _I64_MIN <= x <= _I64_MAX:
            raise OverflowError("the Python integer %d does not fit in int64%s" % (x, _at()))
        if abs(x) > 1 << 53:
            raise OverflowError("the Python integer %d is not exact as a double (smelt's scalars are "
                                "doubles)%s: pass it as an int64 array" % (x, _at()))
        return tr.wrap(lib.smelt_scalar(tr.g, float(x)), "scalar")
    if isinstance(x, float):
        return tr.wrap(lib.smelt_scalar(tr.g, x), "scalar")
    if isinstance(x, np.generic):
        dt = D.to_smelt(x.dtype, "a NumPy scalar")
        if isinstance(x, np.integer) and int(float(x)) != int(x):
            return tr.capture(np.asarray(x))  # (an int64 beyond 2^53: a constant's double would round it)
        return tr.wrap(lib.smelt_const(tr.g, float(x), dt), "constant")
    if isinstance(x, complex):
        raise D.DtypeError(-4, "complex numbers are not supported by smelt%s" % _at())
    if isinstance(x, (np.ndarray, list, tuple)) or hasattr(x, "__array_interface__") or hasattr(x, "__array__"):
        return tr.capture(x if isinstance(x, np.ndarray) else np.asarray(x))
    raise TypeError("smelt cannot trace a value of type %s%s" % (type(x).__name__, _at()))


def _trace_of(args):
    for a in args:
        if isinstance(a, Tracer):
            return a._tr
        if isinstance(a, (list, tuple)):
            t = _trace_of(a)
            if t is not None:
                return t
    return None


def _nodes(ts):
    return ffi.new(T["smelt_node *[]"], [t._n for t in ts])


def apply(opname, *args):
    tr = _trace_of(args)
    nodes = [lift(a, tr) for a in args]
    op = OPS[opname]
    return tr.wrap(lib.smelt_op_apply(tr.g, op, len(nodes), _nodes(nodes)), opname)


def _axes(axis):
    if axis is None:
        return []
    if isinstance(axis, (tuple, list)):
        return [_index(a, "axis") for a in axis]
    return [_index(axis, "axis")]


def _index(v, what):
    if isinstance(v, Tracer):
        raise TracerError("%s must be a concrete integer, not a traced value%s: make it a static argument "
                          "(static_argnums / static_argnames)" % (what, _at()))
    try:
        return int(v.__index__())
    except AttributeError:
        raise TypeError("%s must be an integer, got %r%s" % (what, v, _at())) from None


def reduce(opname, x, axis=None, keepdims=False, dtype=None):
    tr = _trace_of([x])
    x = lift(x, tr)
    if dtype is not None:
        x = x.astype(dtype)
    ax = _axes(axis)
    if axis is not None and not ax and x.ndim:  # axis=() reduces nothing
        return x
    arr = ffi.new(T["int[]"], ax or [0])
    return tr.wrap(lib.smelt_reduce(tr.g, OPS[opname], x._n, len(ax), arr, 1 if keepdims else 0), opname)


# ---- the traced array ------------------------------------------------------------------------
def _concrete(what):
    def f(self, *a, **k):
        raise TracerError(
            "%s of a traced value (%s) needs a concrete value%s, which a traced function does not have: "
            "its values exist only when the compiled plan runs.  For a choice that depends on data use "
            "np.where(cond, a, b); for a setting, pass it as a static argument (static_argnums / "
            "static_argnames) or compute it outside the function."
            % (what, self._sig(), _at()))
    return f


def _binop(opname, reflected=False):
    def f(self, other):
        if not _liftable(other):
            return NotImplemented
        return apply(opname, other, self) if reflected else apply(opname, self, other)
    f.__name__ = opname
    return f


def _liftable(x):
    return isinstance(x, (Tracer, int, float, bool, np.generic, np.ndarray, list, tuple))


class Tracer:
    """A value of the function being traced: a node of a smelt graph with
    its (concrete) shape and dtype.  Behaves as a NumPy array under NumPy's
    functions, operators, methods and indexing; has no values."""

    __slots__ = ("_tr", "_n", "shape", "_dt")
    __array_priority__ = 1000
    __hash__ = None

    def __init__(self, tr, node):
        self._tr = tr
        self._n = node
        nd = lib.smelt_node_ndim(node)
        sp = lib.smelt_node_shape(node)
        self.shape = tuple(int(sp[i]) for i in range(nd))
        self._dt = lib.smelt_node_dtype(node)

    # ---- array attributes
    @property
    def dtype(self):
        return D.to_numpy(self._dt)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def T(self):
        return self.transpose()

    def _sig(self):
        return "%s[%s]" % (D.to_numpy(self._dt).name, ",".join(map(str, self.shape)))

    def __repr__(self):
        return "Tracer(%s)" % self._sig()

    # ---- no concrete values
    __bool__ = _concrete("bool()")
    __float__ = _concrete("float()")
    __int__ = _concrete("int()")
    __complex__ = _concrete("complex()")
    __index__ = _concrete("use as an index")
    item = _concrete("item()")
    tolist = _concrete("tolist()")
    __array__ = _concrete("conversion to a NumPy array (np.asarray, np.array or a function smelt does not trace)")
    tobytes = _concrete("tobytes()")

    def __setitem__(self, key, value):
        raise TracerError("traced arrays cannot be assigned to (x[...] = v)%s: build the new value instead, "
                          "e.g. np.where(mask, v, x), or with np.concatenate / np.pad" % _at())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        for i in range(self.shape[0]):
            yield self[i]

    # ---- operators: the table _OPERATORS below the class
    def __pow__(self, other):
        # NumPy's ** on arrays takes these exponents apart (its fast scalar
        # power): a square, a square root, a reciprocal; np.power does not
        if isinstance(other, (int, float, np.integer, np.floating)) and not isinstance(other, (bool, np.bool_)):
            e = float(other)
            if D.is_float(self._dt):
                if e == 2.0:
                    return apply("square", self)
                if e == 0.5:
                    return apply("sqrt", self)
                if e == -1.0:
                    return apply("reciprocal", self)
                if e == 1.0:
                    return self
                if e == 0.0:
                    return apply("ones_like", self)
            elif e == 2.0 and isinstance(other, (int, np.integer)):
                return apply("square", self)
        if not _liftable(other):
            return NotImplemented
        return apply("pow", self, other)

    def __matmul__(self, other):
        if not _liftable(other):
            return NotImplemented
        return matmul(self, other)

    def __rmatmul__(self, other):
        if not _liftable(other):
            return NotImplemented
        return matmul(other, self)

    def __neg__(self):
        return apply("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return apply("abs", self)

    def __invert__(self):
        return apply("bitwise_not", self)

    # ---- methods
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        dt = D.to_smelt(dtype, "astype")
        if dt == self._dt:
            return self
        return self._tr.wrap(lib.smelt_cast(self._tr.g, self._n, dt), "astype")

    def reshape(self, *shape, order="C"):
        if order != "C":
            raise UnsupportedError(-10, "reshape(order=%r) is not supported (only 'C')%s" % (order, _at()))
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        shape = [_index(s, "a reshape's size") for s in shape]
        sh = ffi.new(T["int64_t[]"], shape or [0])
        return self._tr.wrap(lib.smelt_reshape(self._tr.g, self._n, len(shape), sh), "reshape")

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        if not axes:
            perm = ffi.NULL
        else:
            if len(axes) != self.ndim:
                raise ValueError("transpose: axes %r do not match an array of rank %d%s" % (tuple(axes), self.ndim, _at()))
            perm = ffi.new(T["int[]"], [_index(a, "an axis") % max(self.ndim, 1) for a in axes])
        return self._tr.wrap(lib.smelt_transpose(self._tr.g, self._n, perm), "transpose")

    def swapaxes(self, a, b):
        return swapaxes(self, a, b)

    def ravel(self, order="C"):
        return self.reshape(-1, order=order)

    flatten = ravel

    def squeeze(self, axis=None):
        return squeeze(self, axis)

    def copy(self, order="C"):
        return apply("copy", self)

    def clip(self, min=None, max=None, **kw):
        return clip(self, min, max, **kw)

    def round(self, decimals=0, out=None):
        return around(self, decimals, out)

    def dot(self, b, out=None):
        return dot(self, b, out)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return _red("sum")(self, axis, dtype, out, keepdims, **kw)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return _red("prod")(self, axis, dtype, out, keepdims, **kw)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return _red("mean")(self, axis, dtype, out, keepdims, **kw)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        return _red("max", False)(self, axis, out, keepdims, **kw)

    def min(self, axis=None, out=None, keepdims=False, **kw):
        return _red("min", False)(self, axis, out, keepdims, **kw)

    def any(self, axis=None, out=None, keepdims=False, **kw):
        return _red("any", False)(self, axis, out, keepdims, **kw)

    def all(self, axis=None, out=None, keepdims=False, **kw):
        return _red("all", False)(self, axis, out, keepdims, **kw)

    def argmax(self, axis=None, out=None, keepdims=False):
        return argmax(self, axis, out, keepdims=keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return argmin(self, axis, out, keepdims=keepdims)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return var(self, axis, dtype, out, ddof, keepdims, **kw)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return std(self, axis, dtype, out, ddof, keepdims, **kw)

    # ---- indexing
    def __getitem__(self, key):
        return getitem(self, key)

    # ---- NumPy's protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        impl = FUNCTIONS.get(func)
        if impl is None:
            name = getattr(func, "__name__", repr(func))
            mod = getattr(func, "__module__", "numpy") or "numpy"
            mod = "np" if mod.startswith("numpy") and mod.count(".") <= 1 else mod
            raise UnsupportedError(-10, "%s.%s cannot be traced by smelt%s; what can: docs/python.md "
                                   "(NumPy functions)" % (mod, name, _at()))
        return impl(*args, **kwargs)


# Python's operators: (method name, operator, whether a reflected __r*__ too)
_OPERATORS = [("add", "add", True), ("sub", "sub", True), ("mul", "mul", True), ("truediv", "div", True),
              ("floordiv", "floor_div", True), ("mod", "mod", True), ("and", "bitwise_and", True),
              ("or", "bitwise_or", True), ("xor", "bitwise_xor", True), ("lshift", "left_shift", True),
              ("rshift", "right_shift", True), ("lt", "lt", False), ("le", "le", False), ("gt", "gt", False),
              ("ge", "ge", False), ("eq", "eq", False), ("ne", "ne", False)]
for _m, _op, _refl in _OPERATORS:
    setattr(Tracer, "__%s__" % _m, _binop(_op))
    if _refl:
        setattr(Tracer, "__r%s__" % _m, _binop(_op, True))
Tracer.__rpow__ = _binop("pow", True)


# ---- ufuncs --------------------------------------------------------------------------------------
_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                 "logical_and": "all", "logical_or": "any"}


def _no_out(kwargs, what):
    out = kwargs.pop("out", None)
    if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
        raise UnsupportedError(-10, "%s(..., out=...) inside a traced function%s: return the value instead "
                               "(the compiled function takes out= when called)" % (what, _at()))
    w = kwargs.pop("where", True)
    if w is not True:
        raise UnsupportedError(-10, "%s(..., where=...) cannot be traced%s: use np.where" % (what, _at()))


# NumPy 2 (from 2.1 on) keeps integer and bool dtypes through floor, ceil
# and trunc (the identity there); NumPy 1 computes them in floats.  The
# traced function follows the NumPy it runs with.
_INT_ROUNDING_KEEPS = np.floor(np.zeros(1, np.int32)).dtype == np.int32


def array_ufunc(ufunc, method, inputs, kwargs):
    name = ufunc.__name__
    kwargs = dict(kwargs)
    _no_out(kwargs, "np." + name)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("casting", None), kwargs.pop("order", None), kwargs.pop("subok", None)
    if method == "reduce":
        red = _UFUNC_REDUCE.get(name)
        if red is None:
            raise UnsupportedError(-10, "np.%s.reduce cannot be traced%s (add, multiply, maximum, minimum, "
                                   "logical_and and logical_or can)" % (name, _at()))
        kwargs.pop("initial", None)
        axis = kwargs.pop("axis", 0)
        return reduce(red, inputs[0], axis, kwargs.pop("keepdims", False), dtype)
    if method != "__call__":
        raise UnsupportedError(-10, "np.%s.%s cannot be traced%s" % (name, method, _at()))
    if kwargs:
        raise UnsupportedError(-10, "np.%s: argument %s cannot be traced%s" % (name, ", ".join(kwargs), _at()))
    if name == "matmul":
        return matmul(*inputs)
    if name == "positive":
        return lift(inputs[0], _trace_of(inputs))
    if name in ("floor", "ceil", "trunc") and _INT_ROUNDING_KEEPS and dtype is None:
        x = lift(inputs[0], _trace_of(inputs))
        if not D.is_float(x._dt):
            return x
    if dtype is not None:
        tr = _trace_of(inputs)
        inputs = [lift(x, tr).astype(dtype) for x in inputs]
    op = op_for_numpy_name(name)
    if op is None:
        raise UnsupportedError(-10, "np.%s has no smelt operator%s (`smelt info --ops` lists them)" % (name, _at()))
    return apply(lib_name(op), *inputs)


_names_by_id = {v: k for k, v in OPS.items()}


def lib_name(op):
    return _names_by_id[op]


# ---- NumPy functions (__array_function__) --------------------------------------------------------
FUNCTIONS = {}


def implements(*funcs):
    def reg(f):
        for fn in funcs:
            if fn is not None:
                FUNCTIONS[fn] = f
        return f
    return reg


def _red(opname, has_dtype=True):
    if has_dtype:
        def f(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
            kw["out"] = out
            _no_out(kw, "np." + opname)
            kw.pop("initial", None) if opname in ("sum", "prod") and kw.get("initial") is None else None
            if kw:
                raise UnsupportedError(-10, "np.%s: argument %s cannot be traced%s" % (opname, ", ".join(kw), _at()))
            return reduce(opname, a, axis, keepdims is True, dtype)
    else:
        def f(a, axis=None, out=None, keepdims=False, **kw):
            kw["out"] = out
            _no_out(kw, "np." + opname)
            if kw:
                raise UnsupportedError(-10, "np.%s: argument %s cannot be traced%s" % (opname, ", ".join(kw), _at()))
            return reduce(opname, a, axis, keepdims is True)
    return f


for _n in ("sum", "prod", "mean"):
    implements(getattr(np, _n))(_red(_n))
implements(np.max, np.amax)(_red("max", False))
implements(np.min, np.amin)(_red("min", False))
implements(np.any)(_red("any", False))
implements(np.all)(_red("all", False))
implements(getattr(np, "product", None))(_red("prod"))
implements(getattr(np, "alltrue", None))(_red("all", False))
implements(getattr(np, "sometrue", None))(_red("any", False))


@implements(np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    _no_out({"out": out}, "np.argmax")
    return reduce("argmax", a, axis, keepdims)


@implements(np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    _no_out({"out": out}, "np.argmin")
    return reduce("argmin", a, axis, keepdims)


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    _no_out(dict(kw, out=out), "np.var")
    tr = _trace_of([a])
    a = lift(a, tr)
    if dtype is not None:
        a = a.astype(dtype)
    m = reduce("mean", a, axis, True)
    d = a - m
    ax = _axes(axis) or list(range(a.ndim))
    n = int(np.prod([a.shape[i] for i in ax], dtype=np.int64))
    return reduce("sum", d * d, axis, keepdims) / max(n - ddof, 0)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return apply("sqrt", var(a, axis, dtype, out, ddof, keepdims, **kw))


@implements(np.where)
def where(condition, x=None, y=None):
    if x is None or y is None:
        raise UnsupportedError(-10, "np.where(condition) (the indices of nonzero elements) has a shape that "
                               "depends on the data and cannot be traced%s; np.where(condition, x, y) can" % _at())
    return apply("where", condition, x, y)


@implements(np.clip)
def clip(a, a_min=None, a_max=None, out=None, **kw):
    kw.pop("min", None), kw.pop("max", None)
    _no_out(dict(kw, out=out), "np.clip")
    if a_min is None and a_max is None:
        raise ValueError("np.clip: one of a_min and a_max must be given%s" % _at())
    if a_min is None:
        return apply("minimum", a, a_max)
    if a_max is None:
        return apply("maximum", a, a_min)
    return apply("clamp", a, a_min, a_max)


@implements(np.around, np.round, getattr(np, "round_", None))
def around(a, decimals=0, out=None):
    _no_out({"out": out}, "np.round")
    if decimals != 0:
        raise UnsupportedError(-10, "np.round(decimals=%r) cannot be traced%s (decimals=0 can)" % (decimals, _at()))
    return apply("round", a)


@implements(np.matmul)
def matmul(a, b, out=None, **kw):
    _no_out(dict(kw, out=out), "np.matmul")
    tr = _trace_of([a, b])
    a, b = lift(a, tr), lift(b, tr)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: an operand is a scalar (0-d)%s; use * instead" % _at())
    return tr.wrap(lib.smelt_matmul(tr.g, a._n, b._n), "matmul")


@implements(np.dot)
def dot(a, b, out=None):
    _no_out({"out": out}, "np.dot")
    tr = _trace_of([a, b])
    a, b = lift(a, tr), lift(b, tr)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim <= 2 and b.ndim <= 2:
        return matmul(a, b)
    raise UnsupportedError(-10, "np.dot of arrays of rank > 2 cannot be traced%s; use np.matmul / @" % _at())


@implements(np.reshape)
def reshape(a, newshape, order="C"):
    return lift(a, _trace_of([a])).reshape(newshape, order=order)


@implements(np.ravel)
def ravel(a, order="C"):
    return lift(a, _trace_of([a])).reshape(-1, order=order)


@implements(np.transpose)
def transpose(a, axes=None):
    return lift(a, _trace_of([a])).transpose(axes)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    a = lift(a, _trace_of([a]))
    perm = list(range(a.ndim))
    i, j = _index(axis1, "an axis") % max(a.ndim, 1), _index(axis2, "an axis") % max(a.ndim, 1)
    perm[i], perm[j] = perm[j], perm[i]
    return a.transpose(perm)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    a = lift(a, _trace_of([a]))
    src = [s % a.ndim for s in _axes(source)]
    dst = [d % a.ndim for d in _axes(destination)]
    if len(src) != len(dst):
        raise ValueError("np.moveaxis: source and destination must have the same number of axes%s" % _at())
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(order)


@implements(np.expand_dims)
def expand_dims(a, axis):
    a = lift(a, _trace_of([a]))
    axes = _axes(axis)
    nd = a.ndim + len(axes)
    for ax in sorted(x % nd for x in axes):
        a = a._tr.wrap(lib.smelt_expand_dims(a._tr.g, a._n, ax), "expand_dims")
    return a


@implements(np.squeeze)
def squeeze(a, axis=None):
    a = lift(a, _trace_of([a]))
    axes = [i for i, s in enumerate(a.shape) if s == 1] if axis is None else \
        [x % max(a.ndim, 1) for x in _axes(axis)]
    for ax in sorted(axes, reverse=True):
        a = a._tr.wrap(lib.smelt_squeeze(a._tr.g, a._n, ax), "squeeze")
    return a


@implements(np.broadcast_to)
def broadcast_to(a, shape, subok=False):
    a = lift(a, _trace_of([a]))
    shape = [shape] if isinstance(shape, int) else list(shape)
    sh = ffi.new(T["int64_t[]"], [_index(s, "a size") for s in shape] or [0])
    return a._tr.wrap(lib.smelt_broadcast_to(a._tr.g, a._n, len(shape), sh), "broadcast_to")


@implements(np.flip)
def flip(a, axis=None):
    a = lift(a, _trace_of([a]))
    for ax in (range(a.ndim) if axis is None else _axes(axis)):
        a = a._tr.wrap(lib.smelt_flip(a._tr.g, a._n, ax), "flip")
    return a


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    _no_out({"out": out}, "np.concatenate")
    arrays = list(arrays)
    tr = _trace_of(arrays)
    parts = [lift(x, tr) for x in arrays]
    if dtype is not None:
        parts = [p.astype(dtype) for p in parts]
    if axis is None:
        parts, axis = [p.reshape(-1) for p in parts], 0
    if len(parts) == 1:
        return parts[0]
    return tr.wrap(lib.smelt_concat(tr.g, len(parts), _nodes(parts), _index(axis, "an axis")), "concatenate")


# ---- indexed reads: read inside the kernel that uses them (docs/fusion.md, Indexed reads)
@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    _no_out({"out": out}, "np.take")
    if mode != "raise":
        raise UnsupportedError(-10, "np.take(mode=%r) cannot be traced%s (only mode='raise': an index out of "
                               "range is an error when the plan runs)" % (mode, _at()))
    tr = _trace_of([a, indices])
    a, x = lift(a, tr), lift(indices, tr)
    if axis is None:
        a, axis = a.reshape(-1), 0
    return tr.wrap(lib.smelt_take(tr.g, a._n, x._n, _index(axis, "an axis")), "take")


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis):
    tr = _trace_of([arr, indices])
    a, x = lift(arr, tr), lift(indices, tr)
    if axis is None:
        a, x, axis = a.reshape(-1), x.reshape(-1), 0
    return tr.wrap(lib.smelt_take_along_axis(tr.g, a._n, x._n, _index(axis, "an axis")), "take_along_axis")


@implements(np.tril)
def tril(m, k=0):
    m = lift(m, _trace_of([m]))
    return m._tr.wrap(lib.smelt_tril(m._tr.g, m._n, _index(k, "a diagonal")), "tril")


@implements(np.triu)
def triu(m, k=0):
    m = lift(m, _trace_of([m]))
    return m._tr.wrap(lib.smelt_triu(m._tr.g, m._n, _index(k, "a diagonal")), "triu")


def one_hot(indices, depth, dtype=np.float32):
    """indices[..., None] == arange(depth) as dtype (a negative index counts
    from the end, as ONNX OneHot); a composition that fuses"""
    tr = _trace_of([indices])
    x = lift(indices, tr)
    return tr.wrap(lib.smelt_one_hot(tr.g, x._n, _index(depth, "a depth"), D.to_smelt(np.dtype(dtype))), "one_hot")


@implements(np.stack)
def stack(arrays, axis=0, out=None, **kw):
    arrays = list(arrays)
    tr = _trace_of(arrays)
    parts = [lift(x, tr) for x in arrays]
    nd = parts[0].ndim + 1
    ax = _index(axis, "an axis") % nd
    return concatenate([expand_dims(p, ax) for p in parts], ax, out)


@implements(np.vstack)
def vstack(tup, **kw):
    tup = list(tup)
    tr = _trace_of(tup)
    parts = [lift(x, tr) for x in tup]
    return concatenate([p.reshape(1, -1) if p.ndim == 1 else p for p in parts], 0)


@implements(np.hstack)
def hstack(tup, **kw):
    tup = list(tup)
    tr = _trace_of(tup)
    parts = [lift(x, tr) for x in tup]
    return concatenate(parts, 0 if parts[0].ndim == 1 else 1)


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kw):
    a = lift(array, _trace_of([array]))
    if mode != "constant":
        raise UnsupportedError(-10, "np.pad(mode=%r) cannot be traced%s (mode='constant' can)" % (mode, _at()))
    cv = kw.pop("constant_values", 0)
    if kw:
        raise UnsupportedError(-10, "np.pad: argument %s cannot be traced%s" % (", ".join(kw), _at()))
    cvs = np.asarray(cv)
    if cvs.ndim and len(set(cvs.ravel().tolist())) > 1:
        raise UnsupportedError(-10, "np.pad: one constant value for every side can be traced, not %r%s" % (cv, _at()))
    value = float(cvs.ravel()[0]) if cvs.ndim else float(cvs)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (a.ndim, 2))
    widths = ffi.new(T["int64_t[]"], [int(v) for v in pw.ravel()] or [0])
    return a._tr.wrap(lib.smelt_pad(a._tr.g, a._n, widths, value), "pad")


def _filled(a, value, dtype, shape):
    tr = _trace_of([a])
    a = lift(a, tr)
    dt = a._dt if dtype is None else D.to_smelt(dtype)
    shape = a.shape if shape is None else ([shape] if isinstance(shape, int) else list(shape))
    c = tr.wrap(lib.smelt_const(tr.g, float(value), dt), "constant")
    sh = ffi.new(T["int64_t[]"], list(shape) or [0])
    return tr.wrap(lib.smelt_broadcast_to(tr.g, c._n, len(shape), sh), "full_like")


@implements(np.zeros_like, np.empty_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None):
    return _filled(a, 0, dtype, shape)


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None):
    return _filled(a, 1, dtype, shape)


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    if isinstance(fill_value, Tracer):
        return apply("add", zeros_like(a, dtype, shape=shape), fill_value)
    return _filled(a, fill_value, dtype, shape)


@implements(np.copy)
def copy(a, order="K", subok=False):
    return apply("copy", a)


@implements(np.shape)
def shape(a):
    return lift(a, _trace_of([a])).shape


@implements(np.ndim)
def ndim(a):
    return lift(a, _trace_of([a])).ndim


@implements(np.size)
def size(a, axis=None):
    a = lift(a, _trace_of([a]))
    return a.size if axis is None else a.shape[axis]


@implements(np.result_type)
def result_type(*arrays_and_dtypes):
    return np.result_type(*[a.dtype if isinstance(a, Tracer) else a for a in arrays_and_dtypes])


@implements(np.atleast_1d)
def atleast_1d(*arys):
    r = [a if a.ndim >= 1 else a.reshape(1) for a in (lift(x, _trace_of([x])) for x in arys)]
    return r[0] if len(r) == 1 else r


@implements(np.atleast_2d)
def atleast_2d(*arys):
    r = []
    for x in arys:
        a = lift(x, _trace_of([x]))
        r.append(a.reshape(1, 1) if a.ndim == 0 else a.reshape(1, -1) if a.ndim == 1 else a)
    return r[0] if len(r) == 1 else r


def window(fn, arrays, **kw):
    """A window or a scan of the expression language (src/frontends/expr-calls.c:
    conv, max_pool, avg_pool, global_max_pool, global_avg_pool, cumsum,
    cumprod) on traced arrays, its keywords integers or tuples of them."""
    tr = _trace_of(arrays)
    xs = [lift(a, tr) for a in arrays]
    names = ["a%d" % i for i in range(len(xs))]
    args = [k + "=" + (str(int(v)) if np.ndim(v) == 0 else "(" + ", ".join(str(int(e)) for e in v) + ",)")
            for k, v in kw.items() if v is not None]
    expr = "%s(%s)" % (fn, ", ".join(names + args))
    keep = [ffi.new(T["char[]"], n.encode()) for n in names]
    return tr.wrap(lib.smelt_expr(tr.g, expr.encode(), ffi.new(T["char *[]"], keep), _nodes(xs), len(xs)), fn)


def _scan(fn, a, axis, dtype, out):
    _no_out({"out": out}, "np." + fn)
    a = lift(a, _trace_of([a]))
    if dtype is not None:
        a = a.astype(dtype)
    r = window(fn, [a], axis=None if axis is None else _index(axis, "an axis"))
    return r if dtype is None else r.astype(dtype)


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    return _scan("cumsum", a, axis, dtype, out)


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    return _scan("cumprod", a, axis, dtype, out)


def _not_yet(fn, why):
    def f(*a, **k):
        raise UnsupportedError(-10, "np.%s cannot be traced by smelt yet (%s)%s; docs/python.md lists what "
                               "can" % (fn.__name__, why, _at()))
    FUNCTIONS[fn] = f


for _f in (np.sort, np.argsort, np.nonzero, np.unique, np.argwhere, np.flatnonzero):
    _not_yet(_f, "sorting, and shapes that depend on the data, are not smelt operators")
for _f in (np.einsum, np.tensordot, np.outer, np.inner, np.kron):
    _not_yet(_f, "use np.matmul / @ with reshapes and transposes")
for _f in (np.tile, np.repeat, np.roll):
    _not_yet(_f, "use np.concatenate or np.broadcast_to")


# ---- indexing --------------------------------------------------------------------------------------
def _int_index_array(k):
    """k as an integer index array (a Tracer, an ndarray or a list of
    integers), else None"""
    if isinstance(k, Tracer):
        return k if np.dtype(k.dtype).kind in "iu" else None
    if isinstance(k, (np.ndarray, list)):
        arr = np.asarray(k)
        return arr if arr.dtype.kind in "iu" and arr.size else None
    return None


def getitem(a, key):
    if not isinstance(key, tuple):
        key = (key,)
    # one integer array among full slices (W[ids], W[:, ids]): take along its axis, read inside the kernel
    arrs = [i for i, k in enumerate(key) if _int_index_array(k) is not None]
    if len(arrs) == 1 and Ellipsis not in key and all(
            i == arrs[0] or (isinstance(k, slice) and k == slice(None)) for i, k in enumerate(key)):
        return take(a, key[arrs[0]], axis=arrs[0])
    for k in key:
        if isinstance(k, (Tracer, np.ndarray, list)) or (isinstance(k, (bool, np.bool_))):
            raise UnsupportedError(-10, "indexing with an array (%s) cannot be traced yet%s; slices, integers, "
                                   "None and ... can; for a mask use np.where" % (type(k).__name__, _at()))
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > a.ndim:
        raise IndexError("too many indices: the array is %d-dimensional, but %d were indexed%s" % (a.ndim, n_real, _at()))
    full = []
    for k in key:
        if k is Ellipsis:
            full.extend([slice(None)] * (a.ndim - n_real))
        else:
            full.append(k)
    if Ellipsis not in key:
        full.extend([slice(None)] * (a.ndim - n_real))
    tr, x = a._tr, a
    axis, drop = 0, []
    for k in full:
        if k is None:
            x = tr.wrap(lib.smelt_expand_dims(tr.g, x._n, axis), "indexing (None)")
            axis += 1
        elif isinstance(k, slice):
            if k != slice(None):
                start = _NONE if k.start is None else _index(k.start, "a slice bound")
                stop = _NONE if k.stop is None else _index(k.stop, "a slice bound")
                step = 1 if k.step is None else _index(k.step, "a slice step")
                if step == 0:
                    raise ValueError("slice step cannot be zero")
                x = tr.wrap(lib.smelt_slice(tr.g, x._n, axis, start, stop, step), "slicing")
            axis += 1
        else:
            i = _index(k, "an index")
            n = x.shape[axis]
            if not -n <= i < n:
                raise IndexError("index %d is out of bounds for axis %d with size %d%s" % (i, axis, n, _at()))
            i %= n
            x = tr.wrap(lib.smelt_slice(tr.g, x._n, axis, i, i + 1, 1), "indexing")
            drop.append(axis)
            axis += 1
    for ax in reversed(drop):
        x = tr.wrap(lib.smelt_squeeze(tr.g, x._n, ax), "indexing")
    return x


_NONE = -(1 << 63)


__all__ = ["Tracer", "TraceState", "Error", "TracerError"]
