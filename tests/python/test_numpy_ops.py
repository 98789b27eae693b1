"""Generated from smelt's operator table (smelt_op_name, smelt_op_alias):
every elementwise operator x every dtype, called as NumPy's function of
the same name inside smelt.jit (or as smelt.ops.<name> where NumPy has
none), on fresh random inputs plus special values, against NumPy computing
in float64 (or exactly, for integers) and an independent float64
reference for smelt's own operators."""
import math
import os
import time
import zlib

import numpy as np
import pytest

import smelt
from smelt._tracer import ALIASES, ELEMWISE

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1e-30, -7.25]
_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _fma(a, b, c):
    """a * b + c rounded once (exact rationals where finite); integers wrap"""
    from fractions import Fraction
    if not np.issubdtype(a.dtype, np.floating):
        return a * b + c
    out = a * b + c
    for i in np.flatnonzero(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)):
        out[i] = float(Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i])))
    return out


RUN_SEED = int(os.environ.get("SMELT_TEST_SEED", str(int(time.time()) % 100000)))


def _logistic(u):
    """1 / (1 + exp(-u)) without overflow warnings' NaNs at the ends"""
    return np.where(u >= 0, 1 / (1 + np.exp(-np.abs(u))), np.exp(-np.abs(u)) / (1 + np.exp(-np.abs(u))))


def _times(a, p):
    """a * p with a * 0 = -0/0 at a = -inf/inf where p underflows to 0 there (the limits)"""
    return np.where(np.isinf(a) & (p == 0), np.copysign(0.0, a), a * p)


# smelt's operators NumPy has no function for: an independent float64 reference
OWN = {
    "rsqrt": lambda a: 1 / np.sqrt(a),
    "relu": lambda a: np.where(a < 0, 0, a),
    "sigmoid": lambda a: _logistic(a),
    "silu": lambda a: _times(a, _logistic(a)),
    "gelu": lambda a: _times(a, 0.5 * _erfc(-a / math.sqrt(2))),
    "gelu_tanh": lambda a: _times(a, _logistic(2 * math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))),
    "softplus": lambda a: np.logaddexp(0, a),
    "hardswish": lambda a: a * np.clip(a + 3, 0, 6) / 6,
    "ones_like": lambda a: np.ones_like(a),
    "clamp": lambda a, b, c: np.minimum(np.maximum(a, b), c),
    "fma": lambda a, b, c: _fma(a, b, c),
    "erf": lambda a: _erf(a),
    "erfc": lambda a: _erfc(a),
    "copy": lambda a: a,
}


FLOAT_OWN = {"rsqrt", "sigmoid", "silu", "gelu", "gelu_tanh", "softplus", "hardswish", "erf", "erfc"}


def numpy_function(name):
    """NumPy's function for a smelt operator: its own name or an alias
    (copy's alias conjugate turns bool into int8 in NumPy, a dtype smelt
    does not have: copy is checked against its own reference)."""
    if name == "copy":
        return None
    for cand in [name] + sorted(k for k, v in ALIASES.items() if v == name):
        f = getattr(np, cand, None)
        if isinstance(f, np.ufunc) and f.nout == 1:
            return f
    return {"round": np.around, "where": np.where, "clamp": np.clip}.get(name)


def arity(name):
    from smelt._lib import lib
    return lib.smelt_op_arity(ELEMWISE[name])


def inputs(name, dt, n, rng):
    out = []
    for k in range(arity(name)):
        if dt == np.bool_:
            a = rng.integers(0, 2, size=n).astype(np.bool_)
        elif np.issubdtype(dt, np.integer):
            lo, hi = (0, 255) if dt == np.uint8 else (-60, 60)
            a = rng.integers(lo, hi, size=n).astype(dt)
            if name in ("pow",) and k == 1:
                a = (np.abs(a.astype(np.int64)) % 5).astype(dt)
            if name in ("left_shift", "right_shift") and k == 1:
                a = (np.abs(a.astype(np.int64)) % 70).astype(dt)
        else:
            a = rng.uniform(-3, 3, size=n)
            a[: len(SPECIAL)] = np.roll(SPECIAL, k)
            a = a.astype(dt)
        out.append(a)
    return out


CASES = [(name, dt) for name in sorted(ELEMWISE) if name != "barrier" for dt in DTYPES]


@pytest.mark.parametrize("name,dt", CASES, ids=["%s-%s" % (n, np.dtype(d).name) for n, d in CASES])
def test_operator_against_numpy(name, dt):
    seed = zlib.crc32(("%s-%s" % (name, np.dtype(dt).name)).encode()) ^ RUN_SEED
    rng = np.random.default_rng(seed)
    args = inputs(name, dt, 97, rng)
    npf = numpy_function(name)
    ref_fn = npf
    if npf is None and name in OWN:
        # smelt's own operators: those with float results in float64, the
        # others (relu, clamp, fma, copy, ones_like) in the inputs' dtype
        # (integers wrap, as NumPy's)
        ref_fn = lambda *a: OWN[name](*[x.astype(np.float64) if x.dtype != np.bool_ and name in FLOAT_OWN
                                        else x for x in a])
    assert ref_fn is not None, "no NumPy function and no reference for operator %s: add one to OWN" % name
    # what smelt gives: the NumPy spelling traced, or smelt.ops
    traced = (lambda *a: npf(*a)) if npf is not None else getattr(smelt.ops, name)
    try:
        y = smelt.jit(traced)(*args)
    except smelt.DtypeError as e:
        # smelt refuses the dtype: a clear error, and only where NumPy
        # cannot either or where the operator is float-only / integer-only
        msg = str(e)
        assert "does not support dtype" in msg or "not supported" in msg, msg
        pytest.skip("smelt: %s" % msg.splitlines()[0])
    with np.errstate(all="ignore"):
        try:
            want = ref_fn(*args)  # NumPy's dtype
        except (TypeError, ValueError) as e:
            pytest.skip("NumPy refuses %s on %s: %s" % (name, np.dtype(dt).name, e))
        want = np.asarray(want)
        if npf is not None:
            assert y.dtype == want.dtype, "%s: smelt gives %s, NumPy %s" % (name, y.dtype, want.dtype)
        if np.issubdtype(y.dtype, np.floating):
            exact = ref_fn(*[a.astype(np.float64) if np.issubdtype(a.dtype, np.floating) else a for a in args])
            exact = np.asarray(exact, dtype=np.float64)
            eps = float(np.finfo(y.dtype).eps)
            tol = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 8 * eps, np.dtype(np.float64): 16 * eps}[y.dtype]
            if name in ("tan", "pow", "fmod", "mod", "floor_div", "sinh", "cosh", "exp", "exp2", "expm1"):
                tol *= 4  # large arguments: a few more ULPs relative to a rounded input
            if not np.issubdtype(args[0].dtype, np.floating):
                exact = np.asarray(want, np.float64)  # integer inputs: NumPy's float result
            # an exact value beyond the dtype's range is its infinity (f16 pow: 0.02 ** -3)
            big = np.isfinite(exact) & np.isinf(exact.astype(y.dtype))
            exact = np.where(big, np.copysign(np.inf, exact), exact)
            # where the f64 reference is exact, NumPy's and smelt's agree within a few ULPs
            np.testing.assert_allclose(y.astype(np.float64), exact, rtol=tol, atol=tol * 1e-3 if name != "sin"
                                       else tol, equal_nan=True,
                                       err_msg="%s (SMELT_TEST_SEED=%d)" % (name, RUN_SEED))
            # signs of zeros and infinities exactly as NumPy
            both = np.isfinite(want) & (want == 0)
            np.testing.assert_array_equal(np.signbit(y[both]), np.signbit(want[both]), err_msg=name + " signed zero")
        else:
            np.testing.assert_array_equal(y, want, err_msg=name)


def test_every_operator_is_reached():
    """Each elementwise operator of the table runs on at least one dtype."""
    ran = set()
    for name, dt in CASES:
        args = inputs(name, dt, 16, np.random.default_rng(1))
        npf = numpy_function(name)
        fn = (lambda *a, f=npf: f(*a)) if npf is not None else getattr(smelt.ops, name)
        try:
            smelt.jit(fn)(*args)
            ran.add(name)
        except smelt.DtypeError:
            pass
    missing = sorted(set(n for n, _ in CASES) - ran)
    assert not missing, missing
