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
__all__ = sorted(ELEMWISE)
del _name
