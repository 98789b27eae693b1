"""smelt.evaluate: numexpr's evaluate on smelt's expression language.

The expression is parsed by the library (smelt_expr, docs/expressions.md);
this module only finds the names it reads, binds them to arrays (inputs)
or Python numbers (weak scalars, as NumPy 2 treats them), and caches one
plan per expression and signature.
"""
import re
import sys

import numpy as np

from . import _dtypes as D
from ._lib import T, context, ffi, lib, make_error
from ._jit import as_array
from ._tracer import data_ptr, ensure_usable, wrap_tensor

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = {"and", "or", "not", "None", "True", "False", "axis", "keepdims", "if", "else", "in", "is"}
_names_cache = {}
_plans = {}
_MAX_PLANS = 1024


def _names(ex):
    """The identifiers an expression may read: not followed by '(', not a
    keyword, not part of a number (1e5) or a keyword argument."""
    r = _names_cache.get(ex)
    if r is None:
        found = []
        for m in _NAME.finditer(ex):
            s, e = m.span()
            if s > 0 and (ex[s - 1].isdigit() or ex[s - 1] == "."):
                continue
            rest = ex[e:].lstrip()
            if rest.startswith("(") or (rest.startswith("=") and not rest.startswith("==")):
                continue
            n = m.group()
            if n not in _KEYWORDS and n not in found:
                found.append(n)
        r = _names_cache[ex] = tuple(found)
    return r


class _Entry:
    __slots__ = ("g", "plan", "in_arr", "out_arr", "shape", "dtype", "keep", "in_t", "out_t", "outs_cache")


def evaluate(ex, local_dict=None, global_dict=None, out=None, order="K", casting="safe", **kwargs):
    """Evaluate an expression on arrays, as numexpr.evaluate: names are
    looked up in local_dict, then global_dict (by default the caller's
    locals and globals).  Arrays are inputs; Python numbers are weak
    scalars (NEP 50).  out=: an array of the result's dtype and shape to
    write into.  One plan per expression and signature, cached."""
    if not isinstance(ex, str):
        raise TypeError("evaluate: the expression must be a str")
    names = _names(ex)
    frame = None
    if local_dict is None or global_dict is None:
        frame = sys._getframe(1)
    ld = frame.f_locals if local_dict is None else local_dict
    gd = frame.f_globals if global_dict is None else global_dict
    arrays, key = [], [ex]
    bound = []
    for n in names:
        if n in ld:
            v = ld[n]
        elif n in gd:
            v = gd[n]
        else:
            continue  # a name smelt knows (inf, nan, pi) or an error the parser reports
        if isinstance(v, (bool, int, float)) and not isinstance(v, np.generic):
            key.append((n, type(v), v))
            bound.append((n, v))
        else:
            a = v if type(v) is np.ndarray else as_array(v)
            if not a.flags.aligned or a.dtype.byteorder == ">":
                a = ensure_usable(a, n)
            arrays.append(a)
            key.append((n, a.dtype, a.shape, a.strides))
            bound.append((n, None))
    key = tuple(key)
    e = _plans.get(key)
    if e is None:
        e = _build(ex, bound, arrays)
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        _plans[key] = e
    ptrs = [data_ptr(a) for a in arrays]
    out_arr = e.out_arr
    if out is None:
        res = np.empty(e.shape, e.dtype)
    else:
        if not isinstance(out, np.ndarray) or out.shape != e.shape or out.dtype != e.dtype:
            raise ValueError("evaluate: out must be an array of dtype %s and shape %s" % (e.dtype, e.shape))
        if not out.flags.writeable:
            raise ValueError("evaluate: out is read-only")
        res = out
        if out.strides != e.out_t[1]:
            c = e.outs_cache.get(out.strides)
            if c is None:
                c = e.outs_cache[out.strides] = (lambda t: (ffi.new(T["smelt_tensor *[]"], [t]), t))(
                    wrap_tensor(context(), ensure_usable(out, "out")))
            out_arr = c[0]
    ptrs.append(data_ptr(res))
    ctx = context()
    with ctx.lock:
        st = lib.smelt_plan_run_rebind(e.plan, len(arrays), e.in_arr, 1, out_arr, ptrs)
    if st:
        raise make_error(st, "evaluate(%r): %s" % (ex, ctx.errmsg()))
    return res


def _build(ex, bound, arrays):
    ctx = context()
    e = _Entry()
    p = ffi.new(T["smelt_graph **"])
    ctx.check(lib.smelt_graph_new(ctx.ptr, p), "smelt_graph_new")
    g = e.g = ffi.gc(p[0], lib.smelt_graph_free)
    keep = []
    names, nodes = [], []
    it = iter(arrays)
    in_t = []
    for n, v in bound:
        nm = ffi.new(T["char[]"], n.encode())
        keep.append(nm)
        if v is None:
            a = ensure_usable(next(it), n)
            sh = ffi.new(T["int64_t[]"], list(a.shape) or [0])
            node = lib.smelt_input(g, nm, D.to_smelt(a.dtype, n), a.ndim, sh)
            in_t.append(wrap_tensor(ctx, a))
        elif isinstance(v, bool):
            node = lib.smelt_const(g, float(v), D.BOOL)
        else:
            if isinstance(v, int) and abs(v) > 1 << 53:
                raise OverflowError("evaluate: %s = %d is not exact as a double" % (n, v))
            node = lib.smelt_scalar(g, float(v))
        if node == ffi.NULL:
            raise make_error(lib.smelt_graph_status(g), ffi.string(lib.smelt_graph_errmsg(g)).decode())
        names.append(nm)
        nodes.append(node)
    r = lib.smelt_expr(g, ex.encode(), ffi.new(T["char *[]"], names or [ffi.NULL]),
                       ffi.new(T["smelt_node *[]"], nodes or [ffi.NULL]), len(names))
    if r == ffi.NULL:
        st = lib.smelt_graph_status(g) or -9
        raise make_error(st, ffi.string(lib.smelt_graph_errmsg(g)).decode("utf-8", "replace"))
    nd = lib.smelt_node_ndim(r)
    sp = lib.smelt_node_shape(r)
    e.shape = tuple(int(sp[i]) for i in range(nd))
    e.dtype = D.to_numpy(lib.smelt_node_dtype(r))
    opts = ffi.new(T["smelt_plan_opts *"])
    lib.smelt_plan_opts_init(opts)
    pp = ffi.new(T["smelt_plan **"])
    with ctx.lock:
        st = lib.smelt_plan_new(ctx.ptr, g, 1, ffi.new(T["smelt_node *[]"], [r]), opts, pp)
    if st:
        raise make_error(st, "evaluate(%r): %s" % (ex, ctx.errmsg()))
    e.plan = ffi.gc(pp[0], lib.smelt_plan_free)
    e.in_t = in_t
    e.in_arr = ffi.new(T["smelt_tensor *[]"], in_t or [ffi.NULL])
    tmp = np.empty(e.shape, e.dtype)
    t = wrap_tensor(ctx, tmp)
    e.out_t = (t, tmp.strides)
    e.out_arr = ffi.new(T["smelt_tensor *[]"], [t])
    e.outs_cache = {}
    e.keep = keep
    return e
