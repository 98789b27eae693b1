"""smelt: fuse NumPy functions into kernels compiled while the program runs.

    import numpy as np, smelt

    @smelt.jit
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

docs/python.md documents every function.
"""
from ._lib import (Error, InvalidArgumentError, ShapeError, DtypeError, BackendError, CompileError,
                   RuntimeFailure, UnsupportedError, TracerError, library_path)
from ._jit import Function, jit, trace, exclude_from_trace
from ._evaluate import evaluate
from ._grad import grad, value_and_grad
from ._graph import load, backends, set_threads, get_threads, info
from . import ops

__version__ = "0.1.0"
__all__ = ["jit", "trace", "grad", "value_and_grad", "exclude_from_trace", "evaluate", "load", "backends", "set_threads", "get_threads",
           "info", "Function", "Error", "InvalidArgumentError", "ShapeError", "DtypeError", "BackendError",
           "CompileError", "RuntimeFailure", "UnsupportedError", "TracerError"]
