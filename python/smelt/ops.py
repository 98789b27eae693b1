"""Every elementwise operator of smelt's table by its own name, for the
ones NumPy has no function for (sigmoid, silu, gelu, gelu_tanh, softplus,
relu, rsqrt, hardswish, clamp, fma, ...):

    y = smelt.ops.gelu(x)          # in a traced function: a node
    y = smelt.ops.gelu(np_array)   # outside one: compiled and run at once

The names are read from the library's operator table (smelt_op_name).
"""
from ._tracer import ELEMWISE, Tracer, apply, _trace_of

_compiled = {}


def _make(name):
    def op(*args):
        if _trace_of(args) is not None:
            return apply(name, *args)
        f = _compiled.get(name)
        if f is None:
            from ._jit import jit
            f = _compiled[name] = jit(lambda *a: apply(name, *a))
        return f(*args)
    op.__name__ = name
    op.__doc__ = "smelt's `%s` operator (src/ir/ops.def), elementwise, NumPy broadcasting" % name
    return op


for _name in ELEMWISE:
    globals()[_name] = _make(_name)


def one_hot(indices, depth, dtype=None):
    """indices[..., None] == arange(depth), as dtype (float32 by default; a
    negative index counts from the end, as ONNX OneHot): in a traced
    function a node that fuses into the kernel that reads it; outside one,
    compiled and run at once."""
    import numpy as np
    from . import _tracer
    dt = np.float32 if dtype is None else dtype
    if _trace_of([indices]) is not None:
        return _tracer.one_hot(indices, depth, dt)
    key = ("one_hot", int(depth), np.dtype(dt).str)
    f = _compiled.get(key)
    if f is None:
        from ._jit import jit
        f = _compiled[key] = jit(lambda x: _tracer.one_hot(x, depth, dt))
    return f(indices)


__all__ = sorted(ELEMWISE) + ["one_hot"]
del _name
