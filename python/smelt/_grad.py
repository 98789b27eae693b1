"""smelt.grad and smelt.value_and_grad: reverse-mode gradients of plain
NumPy functions, built by the library's gradient pass (smelt_grad,
docs/grad.md) into the same graph as the function, so the forward and
backward fuse and plan as one.

Inside a trace (a smelt.jit function) they add the gradient's nodes to the
trace's graph; called on arrays they compile themselves with smelt.jit.
They compose: grad of grad, jit of grad, grad inside jit.
"""
import functools

import numpy as np

from . import _dtypes as D
from ._lib import T, DtypeError, ffi, lib, make_error, text
from ._tracer import Tracer, current, lift, _at


def _leaves(x, out):
    """Flatten a pytree of arrays/tracers (tuples, lists, dicts) into out;
    returns a function that rebuilds the structure from an iterator."""
    if isinstance(x, (tuple, list)):
        subs = [_leaves(v, out) for v in x]
        t = type(x)
        return lambda it: t(s(it) for s in subs)
    if isinstance(x, dict):
        ks = sorted(x)
        subs = [_leaves(x[k], out) for k in ks]
        return lambda it: {k: s(it) for k, s in zip(ks, subs)}
    out.append(x)
    return lambda it: next(it)


def _grads(tr, loss, wrt):
    n = len(wrt)
    outs = ffi.new(T["smelt_node *[]"], n or 1)
    nodes = ffi.new(T["smelt_node *[]"], [w._n for w in wrt] or [ffi.NULL])
    st = lib.smelt_grad(tr.g, loss._n, n, nodes, outs)
    if st:
        raise make_error(st, "grad%s: %s" % (_at(), tr.ctx.errmsg() or text(lib.smelt_graph_errmsg(tr.g))))
    return [Tracer(tr, outs[i]) for i in range(n)]


def _compiled(wrapper, what):
    """Called on arrays (outside a trace), wrapper compiles itself with
    smelt.jit once and runs that."""
    f = wrapper.__dict__.get("_jitted")
    if f is None:
        from ._jit import Function
        f = wrapper._jitted = Function(wrapper, name="%s(%s)" % (what, getattr(wrapper, "__name__", "fn")))
    return f


def value_and_grad(fn, argnums=0, has_aux=False):
    """A function that returns (fn(*args), the gradient of fn's value with
    respect to the arguments argnums (an int, or a tuple: a tuple of
    gradients)), as jax.value_and_grad.  fn returns a float value of one
    element (any rank), or (value, aux) with has_aux=True.  Arguments may
    be pytrees (dicts, lists, tuples) of float arrays: the gradient has the
    same structure.  Integer and bool arguments have no gradient (an error:
    leave them out of argnums)."""
    multi = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multi else (argnums,)

    @functools.wraps(fn)
    def vg(*args, **kwargs):
        tr = current()
        if tr is None:
            return _compiled(vg, "value_and_grad")(*args, **kwargs)
        for i in nums:
            if not -len(args) <= i < len(args):
                raise ValueError("grad: argnums %d is out of range for %d positional arguments" % (i, len(args)))
        args = list(args)
        builders, wrt = [], []
        for i in nums:
            leaves = []
            b = _leaves(args[i], leaves)
            lifted = [lift(x, tr) for x in leaves]
            for x in lifted:
                if not D.is_float(x._dt):
                    raise DtypeError(-4, "grad: argument %d holds a %s value, which has no gradient%s; differentiate "
                                     "with respect to float arguments only" % (i, x.dtype, _at()))
            args[i] = b(iter(lifted))
            builders.append((b, len(lifted)))
            wrt += lifted
        r = fn(*args, **kwargs)
        value, aux = (r if has_aux else (r, None))
        if has_aux and not (isinstance(r, tuple) and len(r) == 2):
            raise TypeError("grad(has_aux=True): the function must return (value, aux)")
        value = lift(value, tr)
        if value.size != 1 or not D.is_float(value._dt):
            raise TypeError("grad: the function must return a float value of one element, not %s%s; use "
                            "smelt_grad_ct's vector-Jacobian product for others" % (value._sig(), _at()))
        gs = iter(_grads(tr, value, wrt))
        grads = [b(gs) for b, _ in builders]
        g = tuple(grads) if multi else grads[0]
        return ((value, aux), g) if has_aux else (value, g)
    return vg


def grad(fn, argnums=0, has_aux=False):
    """The gradient of fn (a float value of one element) with respect to
    the arguments argnums, as jax.grad; with has_aux=True: (gradient, aux)."""
    vg = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def g(*args, **kwargs):
        if current() is None:
            return _compiled(g, "grad")(*args, **kwargs)
        if has_aux:
            (_, aux), gr = vg(*args, **kwargs)
            return gr, aux
        return vg(*args, **kwargs)[1]
    return g
