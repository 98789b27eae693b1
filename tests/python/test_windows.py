"""Windows and scans from Python: np.cumsum / np.cumprod traced (NumPy's
order, the same bits), smelt.ops.conv / max_pool / avg_pool / global pools
against a direct NumPy computation, eager and traced, fused with what
follows (kernel counts)."""
import numpy as np
import pytest

import smelt
import smelt.ops as ops


def _conv_ref(x, w, b, s, p, d, groups):
    """ONNX Conv in float64, 2-D (NCHW), pads (top, left, bottom, right)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - (kh - 1) * d[0] - 1) // s[0] + 1
    ow = (wd - (kw - 1) * d[1] - 1) // s[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for i in range(kh):
        for j in range(kw):
            v = x[:, :, i * d[0]:i * d[0] + (oh - 1) * s[0] + 1:s[0], j * d[1]:j * d[1] + (ow - 1) * s[1] + 1:s[1]]
            for g in range(groups):
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", v[:, g * cg:(g + 1) * cg],
                                                         w[g * og:(g + 1) * og, :, i, j].astype(np.float64))
    return out + (0 if b is None else b.reshape(1, -1, 1, 1))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", [((2, 4, 9, 8), (6, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
                                  ((1, 6, 10, 9), (6, 1, 3, 3), (2, 2), (1, 0, 1, 2), (1, 2), 6),
                                  ((2, 4, 7, 7), (4, 2, 2, 3), (1, 2), (0, 0, 0, 0), (2, 1), 2)])
def test_conv_bias_relu(dt, case):
    xs, ws, s, p, d, groups = case
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xs).astype(dt), rng.standard_normal(ws).astype(dt)
    b = rng.standard_normal(ws[0]).astype(dt)
    want = np.maximum(_conv_ref(x, w, b, s, p, d, groups), 0)
    f = smelt.jit(lambda x, w, b: ops.relu(ops.conv(x, w, b, strides=s, pads=p, dilations=d, groups=groups)))
    got = f(x, w, b)
    assert got.dtype == dt and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4 if dt == np.float32 else 1e-12, atol=1e-4 if dt == np.float32 else 1e-12)
    eager = ops.conv(x, w, b, strides=s, pads=p, dilations=d, groups=groups)
    np.testing.assert_allclose(np.maximum(eager, 0), got, rtol=1e-5, atol=1e-5)


def test_conv1d_and_pools():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 20)).astype(np.float32)
    w = rng.standard_normal((5, 3, 4)).astype(np.float32)
    y = ops.conv(x, w, pads=(1, 2))
    want = _conv_ref(x[:, :, None], w[:, :, None], None, (1, 1), (0, 1, 0, 2), (1, 1), 1)[:, :, 0]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    x4 = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    xp = np.pad(x4, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.stack([xp[:, :, i:i + 9:2, j:j + 7:2] for i in range(3) for j in range(3)]).max(0)
    np.testing.assert_array_equal(ops.max_pool(x4, 3, strides=2, pads=1), want)
    want = np.stack([x4[:, :, i:i + 7:2, j:j + 7:2] for i in range(2) for j in range(2)]).mean(0)
    np.testing.assert_allclose(ops.avg_pool(x4, 2, strides=2), want, rtol=1e-6)
    np.testing.assert_array_equal(ops.global_max_pool(x4), x4.max(axis=(2, 3), keepdims=True))
    np.testing.assert_allclose(ops.global_avg_pool(x4), x4.mean(axis=(2, 3), keepdims=True), rtol=1e-6)


def test_pool_fused_with_what_follows():
    f = smelt.jit(lambda x: ops.max_pool(x, 2, strides=2) * 2 + 1)
    x = np.random.default_rng(9).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(f(x), np.maximum.reduce([x[:, :, i::2, j::2] for i in range(2)
                                                           for j in range(2)]) * np.float32(2) + np.float32(1))
    assert f.stats()["last"]["kernels"] == 1


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_])
@pytest.mark.parametrize("fn", [np.cumsum, np.cumprod])
def test_cumsum_cumprod_numpy_bits(dt, fn):
    rng = np.random.default_rng(10)
    x = (rng.uniform(0.5, 1.5, (4, 33)) if fn is np.cumprod else rng.uniform(-3, 3, (4, 33))).astype(dt)
    for axis in (0, 1, -1, None):
        got = smelt.jit(lambda a: fn(a, axis=axis))(x)
        want = fn(x, axis=axis)
        if np.dtype(dt).kind in "iub":  # NumPy: platform integers (u8 -> u64; smelt has i64)
            want = want.astype(np.int64)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_grads_of_strided_grouped_conv_and_cumprod():
    """smelt.grad through a strided, grouped conv and a cumprod with zeros,
    against the transpose of the float64 reference's linear map (each is
    linear in x, in w and in each element of a)."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((2, 4, 7, 6)), rng.standard_normal((6, 2, 3, 2))
    r = rng.standard_normal(_conv_ref(x, w, None, (2, 1), (1, 0, 1, 1), (1, 2), 2).shape)
    loss = lambda x, w: np.sum(ops.conv(x, w, strides=(2, 1), pads=(1, 0, 1, 1), dilations=(1, 2), groups=2) * r)
    dx, dw = smelt.grad(loss, argnums=(0, 1))(x, w)
    ref = lambda x, w: np.sum(_conv_ref(x, w, None, (2, 1), (1, 0, 1, 1), (1, 2), 2) * r)
    for arr, got, k in ((x, dx, 0), (w, dw, 1)):
        want = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            e = np.zeros_like(arr)
            e[i] = 1
            want[i] = ref(x + e, w) - ref(x, w) if k == 0 else ref(x, w + e) - ref(x, w)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    a = rng.standard_normal((3, 5))
    a[0, 1] = a[1, 0] = a[1, 3] = 0.0
    ra = rng.standard_normal((3, 5))
    got = smelt.grad(lambda a: np.sum(np.cumprod(a, axis=1) * ra))(a)
    want = np.zeros_like(a)
    for i in np.ndindex(a.shape):  # d/da_i of sum_j r_j prod_{k<=j} a_k = sum_{j>=i} r_j prod_{k<=j, k!=i} a_k
        for j in range(i[1], 5):
            want[i] += ra[i[0], j] * np.prod([a[i[0], k] for k in range(j + 1) if k != i[1]])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
