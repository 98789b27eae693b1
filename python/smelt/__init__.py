"""smelt: fuse NumPy functions into kernels compiled while the program runs.

    import numpy as np, smelt

    @smelt.jit
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

docs/python.md documents every function.
"""
import os as _os
import sys as _sys


def _choose_blas_kernels():
    """OpenBLAS picks its kernels when it is loaded, which NumPy does on
    import; 0.3.21 takes a Zen 5 for a Prescott (SSE3: 4x slower matrix
    products).  Before NumPy is imported, make the choice libsmelt makes
    before it loads OpenBLAS itself (src/runtime/blas.c): AVX-512's kernels
    on an x86-64-v4 CPU, AVX2's on v3, unless the user set
    OPENBLAS_CORETYPE."""
    if "numpy" in _sys.modules or _os.environ.get("OPENBLAS_CORETYPE"):
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    flags = set(flags)
    if {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx2", "fma", "bmi2"} <= flags:
        _os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif {"avx2", "fma", "bmi1", "bmi2", "movbe"} <= flags:
        _os.environ["OPENBLAS_CORETYPE"] = "Haswell"


_choose_blas_kernels()
from ._lib import (Error, InvalidArgumentError, ShapeError, DtypeError, BackendError, CompileError,
                   RuntimeFailure, UnsupportedError, TracerError, library_path)
from ._jit import Function, jit, trace, exclude_from_trace
from ._evaluate import evaluate
from ._grad import grad, value_and_grad
from ._graph import load, backends, set_threads, get_threads, info
from ._dlpack import DeviceArray, to_device
from . import ops

__version__ = "0.1.0"
__all__ = ["jit", "trace", "grad", "value_and_grad", "exclude_from_trace", "evaluate", "load", "backends", "set_threads", "get_threads",
           "info", "Function", "DeviceArray", "to_device", "Error", "InvalidArgumentError", "ShapeError", "DtypeError", "BackendError",
           "CompileError", "RuntimeFailure", "UnsupportedError", "TracerError"]
