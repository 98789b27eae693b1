"""Indexed reads in the Python package: np.take, np.take_along_axis,
integer-array indexing (W[ids], W[:, ids]), np.tril, np.triu and
smelt.ops.one_hot against NumPy on fresh random data, every value dtype x
index dtype; an index out of range is an IndexError naming the operator
and the index (NumPy's own error for the same call is an IndexError too)."""
import numpy as np
import pytest

import smelt

VDT = [np.float32, np.float64, np.int32, np.int64]
IDT = [np.int32, np.int64]


def rng(seed):
    return np.random.default_rng(seed)


def rand(r, shape, dt):
    if np.issubdtype(dt, np.floating):
        return (r.standard_normal(shape) + 0.5).astype(dt)
    return r.integers(-50, 50, size=shape).astype(dt)


@pytest.mark.parametrize("vdt", VDT)
@pytest.mark.parametrize("idt", IDT)
def test_take_and_indexing(vdt, idt):
    r = rng(hash((vdt, idt)) & 0xffff)
    for rank in (1, 2, 3):
        a = rand(r, tuple(r.integers(1, 6, size=rank)), vdt)
        for ax in range(rank):
            n = a.shape[ax]
            ids = r.integers(-n, n, size=(3, 2)).astype(idt)
            got = smelt.jit(lambda a, i: np.take(a, i, axis=ax) * 2)(a, ids)
            np.testing.assert_array_equal(got, np.take(a, ids, axis=ax) * 2)
            key = tuple([slice(None)] * ax)
            got = smelt.jit(lambda a, i: a[key + (i,)] + 1)(a, ids)
            np.testing.assert_array_equal(got, a[key + (ids,)] + 1)
        got = smelt.jit(lambda a, i: np.take(a, i))(a, ids % a.size)  # no axis: a flattened
        np.testing.assert_array_equal(got, np.take(a, ids % a.size))


@pytest.mark.parametrize("vdt", VDT)
@pytest.mark.parametrize("idt", IDT)
def test_take_along_axis(vdt, idt):
    r = rng(7 + (hash((vdt, idt)) & 0xfff))
    for rank in (1, 2, 3):
        a = rand(r, tuple(r.integers(1, 6, size=rank)), vdt)
        for ax in range(rank):
            shape = list(a.shape)
            shape[ax] = 4
            ids = r.integers(-a.shape[ax], a.shape[ax], size=shape).astype(idt)
            got = smelt.jit(lambda a, i: np.take_along_axis(a, i, axis=ax) - 3)(a, ids)
            np.testing.assert_array_equal(got, np.take_along_axis(a, ids, axis=ax) - 3)


def test_embedding_layernorm_is_one_kernel():
    r = rng(3)
    W = rand(r, (100, 32), np.float32)
    P = rand(r, (16, 32), np.float32)
    ids = r.integers(0, 100, size=(4, 16))

    def f(W, ids, P):
        x = W[ids] + P
        m = x.mean(axis=-1, keepdims=True)
        c = x - m
        return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5)

    jf = smelt.jit(f)
    np.testing.assert_allclose(jf(W, ids, P), f(W.astype(np.float64), ids, P), rtol=1e-4, atol=1e-5)
    assert ", 1 kernel" in jf.explain(W, ids, P)


def test_bad_index_is_an_index_error():
    W = np.arange(12.0).reshape(4, 3)
    f = smelt.jit(lambda W, i: W[i] * 2)
    with pytest.raises(IndexError, match="take: index 4 is out of range"):
        f(W, np.array([0, 4]))
    with pytest.raises(IndexError, match="index -5"):
        f(W, np.array([-5, 1]))
    np.testing.assert_array_equal(f(W, np.array([-4, 3])), W[[-4, 3]] * 2)  # the plan runs again


def test_tril_triu_one_hot():
    r = rng(5)
    a = rand(r, (2, 5, 6), np.float32)
    for k in (-2, 0, 1):
        np.testing.assert_array_equal(smelt.jit(lambda a: np.tril(a, k))(a), np.tril(a, k))
        np.testing.assert_array_equal(smelt.jit(lambda a: np.triu(a, k) * 2)(a), np.triu(a, k) * 2)
    x = r.integers(-4, 4, size=(3, 5))
    want = (np.where(x < 0, x + 4, x)[..., None] == np.arange(4)).astype(np.float32)
    np.testing.assert_array_equal(smelt.ops.one_hot(x, 4), want)
    got = smelt.jit(lambda x: smelt.ops.one_hot(x, 4, np.float64) * 3)(x)
    np.testing.assert_array_equal(got, want * 3)
