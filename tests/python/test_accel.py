"""The optional accelerator (python/smelt/_accel.c, build/_smelt_accel*.so):
the cached call of a smelt.jit function in C gives what the Python path
gives, and hands every case it does not take back to that path."""
import threading

import numpy as np
import pytest

import smelt
from smelt import _jit

pytestmark = pytest.mark.skipif(_jit._accel is None, reason="the accelerator is not built (no Python headers) "
                                "or SMELT_ACCEL=0")
rng = np.random.default_rng()
f32 = np.float32


def fma(a, b, c):
    return a * b + c


def both(f, *args):
    """f's result through the accelerator and through the Python path."""
    r = f(*args)
    acc, f._acc = f._acc, None
    try:
        p = f(*args)
    finally:
        f._acc = acc
    return r, p


def test_taken_and_equal():
    f = smelt.jit(fma)
    a, b, c = (rng.standard_normal(1000).astype(f32) for _ in range(3))
    a[:4] = [np.inf, -np.inf, np.nan, -0.0]
    f(a, b, c)  # traces, compiles, enters the table
    assert len(f._acc) == 1
    for _ in range(3):
        r, p = both(f, a, b, c)
        assert type(r) is np.ndarray and r.dtype == f32 and r.shape == (1000,)
        assert np.array_equal(r, p, equal_nan=True)
        assert np.array_equal(r, a * b + c, equal_nan=True)
    assert f.stats()["calls"] == 7 and f._last.acc[8] == 3


def test_signatures_views_and_last():
    f = smelt.jit(fma)
    m = rng.standard_normal((30, 40)).astype(f32)
    cases = [(m, m, m), (m.T, m.T, m.T), (m[::2, ::-3], m[::2, ::-3], m[1::2, ::3]),
             (m.astype(np.float64), m.astype(np.float64), m.astype(np.float64)), (m[0], m[1], m[2])]
    for _ in range(2):
        for a, b, c in cases:
            r, p = both(f, a, b, c)
            assert np.array_equal(r, p) and np.array_equal(r, a * b + c)
            assert f._last.out_specs[0][0] == a.shape  # explain() describes the last call
    assert len(f._acc) == len(cases)


def test_falls_back():
    f = smelt.jit(fma)
    a, b, c = (rng.standard_normal(64).astype(f32) for _ in range(3))
    f(a, b, c)
    f(a, b, c)
    # a Python scalar, a subclass, keywords, out=: the Python path
    assert np.array_equal(f(a, b, 2.0), a * b + f32(2.0))
    assert np.array_equal(f(a, b, 2.0), a * b + f32(2.0))

    class Sub(np.ndarray):
        pass
    assert np.array_equal(np.asarray(f(a.view(Sub), b, c)), a * b + c)
    assert np.array_equal(f(a, b, c=c), a * b + c)
    # unaligned memory of the same signature: the C run refuses, the Python path copies
    raw = np.empty(64 * 4 + 1, np.uint8)[1:].view(f32)
    raw[:] = a
    assert not raw.flags.aligned
    assert np.array_equal(f(raw, b, c), a * b + c)
    # several outputs, a dict: the Python path every time
    g = smelt.jit(lambda a, b: {"s": a + b, "d": a - b})
    for _ in range(2):
        r = g(a, b)
        assert np.array_equal(r["s"], a + b) and np.array_equal(r["d"], a - b)
    assert not g._acc


def test_out_taken_and_refused():
    """out= of the output's shape and dtype, C-contiguous and aligned: written
    in place by the C path; anything else: the Python path, which writes a
    strided out= as it lies and raises for a wrong one."""
    f = smelt.jit(fma)
    a, b, c = (rng.standard_normal((8, 16)).astype(f32) for _ in range(3))
    a[0, :3] = [np.inf, np.nan, -0.0]
    want = a * b + c
    o = np.full_like(a, 7)
    assert f(a, b, c, out=o) is o and np.array_equal(o, want, equal_nan=True)
    assert len(f._acc) == 1
    calls = f._last.acc[8]
    o2 = np.full_like(a, 7)
    assert f(a, b, c, out=o2) is o2 and np.array_equal(o2, want, equal_nan=True)
    assert f._last.acc[8] == calls + 1  # the C path took it
    big = np.full((8, 32), 7, f32)
    v = big[:, ::2]  # strided: the Python path writes it where it lies
    assert f(a, b, c, out=v) is v and np.array_equal(v, want, equal_nan=True) and np.all(big[:, 1::2] == 7)
    assert f._last.acc[8] == calls + 1
    raw = np.empty(8 * 16 * 4 + 1, np.uint8)[1:].view(f32).reshape(8, 16)  # unaligned
    with pytest.raises(ValueError):
        f(a, b, c, out=raw)
    for bad in (np.empty((8, 15), f32), np.empty((8, 16), np.float64), np.empty((16, 8), f32)):
        with pytest.raises(ValueError):
            f(a, b, c, out=bad)
    ro = np.empty_like(a)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        f(a, b, c, out=ro)
    with pytest.raises(TypeError):
        f(a, b, c, out=3.0)
    assert f._last.acc[8] == calls + 1


def test_captured_array_read_each_call():
    w = rng.standard_normal(50).astype(f32)
    f = smelt.jit(lambda x: x * w)
    x = rng.standard_normal(50).astype(f32)
    f(x)
    assert np.array_equal(f(x), x * w)
    w *= 3  # in place: the next call reads it
    assert np.array_equal(f(x), x * w)


def test_threads():
    f = smelt.jit(fma)
    bad = []

    def work(seed):
        r = np.random.default_rng(seed)
        for n in (100, 5000, 100000) * 20:
            a, b, c = (r.standard_normal(n).astype(f32) for _ in range(3))
            if not np.array_equal(f(a, b, c), a * b + c):
                bad.append(n)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad
