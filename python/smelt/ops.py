"""Every elementwise operator of smelt's table by its own name, for the
ones NumPy has no function for (sigmoid, silu, gelu, gelu_tanh, softplus,
relu, rsqrt, hardswish, clamp, fma, ...):

    y = smelt.ops.gelu(x)          # in a traced function: a node
    y = smelt.ops.gelu(np_array)   # outside one: compiled and run at once

The names are read from the library's operator table (smelt_op_name).
"""
from ._tracer import ELEMWISE, Tracer, apply, window, _trace_of

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


# windows (smelt_conv, smelt_max_pool, smelt_avg_pool: include/smelt.h), over
# NCW / NCHW arrays: strides, dilations an integer or one per spatial axis;
# pads an integer, one per axis, or (before..., after...) as ONNX's
def _window(fn, arrays, kw):
    if _trace_of(arrays) is not None:
        return window(fn, arrays, **kw)
    key = (fn, len(arrays), tuple(sorted((k, str(v)) for k, v in kw.items())))
    f = _compiled.get(key)
    if f is None:
        from ._jit import jit
        f = _compiled[key] = jit(lambda *a: window(fn, list(a), **kw))
    return f(*arrays)


def conv(x, w, b=None, strides=1, pads=0, dilations=1, groups=1):
    """ONNX's Conv (a cross-correlation) of x [N, C, (H,) W] with weights w
    [O, C / groups, (KH,) KW] plus bias b [O]: the taps' products over
    shifted views of the input (f32 on AVX-512 CPUs: smelt's own kernel;
    otherwise BLAS, one product a tap), the elementwise work after it fused."""
    arrays = [x, w] + ([b] if b is not None else [])
    return _window("conv", arrays, dict(strides=strides, pads=pads, dilations=dilations, groups=groups))


def max_pool(x, kernel, strides=1, pads=0, dilations=1, ceil_mode=False):
    """ONNX's MaxPool over the spatial axes of x [N, C, (H,) W]."""
    return _window("max_pool", [x], dict(kernel=kernel, strides=strides, pads=pads, dilations=dilations,
                                         ceil_mode=int(bool(ceil_mode))))


def avg_pool(x, kernel, strides=1, pads=0, ceil_mode=False, count_include_pad=False):
    """ONNX's AveragePool over the spatial axes of x [N, C, (H,) W]."""
    return _window("avg_pool", [x], dict(kernel=kernel, strides=strides, pads=pads, ceil_mode=int(bool(ceil_mode)),
                                         count_include_pad=int(bool(count_include_pad))))


def global_max_pool(x):
    return _window("global_max_pool", [x], {})


def global_avg_pool(x):
    return _window("global_avg_pool", [x], {})


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


__all__ = sorted(ELEMWISE) + ["conv", "max_pool", "avg_pool", "global_max_pool", "global_avg_pool", "one_hot"]
del _name
