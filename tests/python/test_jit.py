"""smelt.jit on plain NumPy functions: values against NumPy (float64
references), kernel counts, views, pytrees, out=, donation, static
arguments, errors."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import smelt

rng = np.random.default_rng(20261128)


def rand(*shape, dtype=np.float32):
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def softmax_np(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_softmax_one_kernel_and_values():
    f = smelt.jit(softmax_np)
    x = rand(64, 100)
    y = f(x)
    ref = softmax_np(x.astype(np.float64))
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-7)
    assert f.stats()["last"]["kernels"] == 1
    assert "smelt_rows_" in f.explain()


def test_layernorm_and_cached_plan():
    def layernorm(x, g, b):
        m = x.mean(axis=-1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * g + b
    f = smelt.jit(layernorm)
    x, g, b = rand(32, 256), rand(256), rand(256)
    for _ in range(3):
        x = rand(32, 256)
        y = f(x, g, b)
        ref = layernorm(x.astype(np.float64), g.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    s = f.stats()
    assert s["traces"] == 1 and s["plans"] == 1 and s["calls"] == 3
    assert s["last"]["kernels"] == 1
    f(rand(8, 256), g, b)  # a new shape: a new trace
    assert f.stats()["traces"] == 2


def test_fused_equals_unfused_bitwise():
    def fn(a, b, c):
        return np.where(a > 0, a * b, np.exp(c)) + 1 - np.tanh(b) * np.sqrt(np.abs(c))
    a, b, c = rand(1000), rand(1000), rand(1000)
    y3 = smelt.jit(fn)(a, b, c)
    y0 = smelt.jit(fn, opt_level=0)(a, b, c)
    assert y3.tobytes() == y0.tobytes()


def test_bitwise_equal_to_the_c_tool(tmp_path):
    """The same expression through smelt's CLI (a C plan) gives the same bits."""
    exe = os.path.join(os.path.dirname(smelt.library_path), "smelt")
    if not os.path.exists(exe):
        pytest.skip("build/smelt not built")
    a, b, c = rand(500), rand(500), rand(500)
    for n, v in zip("abc", (a, b, c)):
        np.save(tmp_path / (n + ".npy"), v)
    out = tmp_path / "out.npy"
    subprocess.run([exe, "eval", "where(a > 0, a*b, exp(c)) + 1", "--backend", "TCC", "a=%s" % (tmp_path / "a.npy"),
                    "b=%s" % (tmp_path / "b.npy"), "c=%s" % (tmp_path / "c.npy"), "-o", str(out)], check=True)
    y = smelt.jit(lambda a, b, c: np.where(a > 0, a * b, np.exp(c)) + 1)(a, b, c)
    assert np.load(out).tobytes() == y.tobytes()


def test_strided_inputs_are_read_where_they_lie():
    f = smelt.jit(lambda a, b: a * 2 + b)
    m = rand(64, 48)
    for a in (m.T, m[::2, ::3].T[:, :16], m[::-1], m[:, 5]):
        bb = rand(*a.shape)
        np.testing.assert_array_equal(f(a, bb), a * np.float32(2) + bb)
    assert f.stats()["plans"] == 4


def test_broadcasting_and_dtypes():
    f = smelt.jit(lambda a, b: a + b)
    a = rand(4, 1, 3)
    b = rng.integers(-5, 5, size=(5, 1)).astype(np.int32)
    y = f(a, b)
    ref = a + b  # f32 + i32 -> f64
    assert y.dtype == ref.dtype == np.float64
    np.testing.assert_array_equal(y, ref)
    g = smelt.jit(lambda x: x * 2.5)
    assert g(rand(3)).dtype == np.float32  # a weak Python scalar keeps f32
    assert g(np.arange(3, dtype=np.int64)).dtype == np.float64


def test_integer_ops_match_numpy():
    a = rng.integers(-100, 100, size=200).astype(np.int64)
    b = rng.integers(1, 9, size=200).astype(np.int64)
    f = smelt.jit(lambda a, b: (a // b, a % b, a & b, a | 3, a ^ b, -a, a << 2, a >> 1, a * b - 7))
    for y, r in zip(f(a, b), (a // b, a % b, a & b, a | 3, a ^ b, -a, a << 2, a >> 1, a * b - 7)):
        assert y.dtype == r.dtype
        np.testing.assert_array_equal(y, r)


def test_reductions_axes_keepdims():
    x = rand(6, 7, 8)
    cases = [
        (lambda x: x.sum(), lambda x: x.sum()),
        (lambda x: np.sum(x, axis=1), lambda x: x.sum(axis=1)),
        (lambda x: np.mean(x, axis=(0, 2), keepdims=True), lambda x: x.mean(axis=(0, 2), keepdims=True)),
        (lambda x: np.max(x, axis=-1), lambda x: x.max(axis=-1)),
        (lambda x: np.min(x, 0), lambda x: x.min(0)),
        (lambda x: np.prod(x[:2, :2, :3], axis=2), lambda x: x[:2, :2, :3].prod(axis=2)),
        (lambda x: np.add.reduce(x, axis=1), lambda x: x.sum(axis=1)),
        (lambda x: np.var(x, axis=1), lambda x: x.var(axis=1)),
        (lambda x: x.std(axis=-1, ddof=1), lambda x: x.std(axis=-1, ddof=1)),
    ]
    for fn, ref in cases:
        y = smelt.jit(fn)(x)
        r = ref(x.astype(np.float64))
        assert y.shape == r.shape
        np.testing.assert_allclose(y, r, rtol=2e-5, atol=2e-5)
    i = smelt.jit(lambda x: (np.argmax(x, axis=1), x.argmin(), np.any(x > 1.9), np.all(x > -3, axis=0)))(x)
    for y, r in zip(i, (np.argmax(x, axis=1), x.argmin(), np.any(x > 1.9), np.all(x > -3, axis=0))):
        np.testing.assert_array_equal(y, r)


def test_layout_functions():
    x = rand(3, 4, 5)
    cases = [
        lambda x: x.T, lambda x: np.transpose(x, (1, 0, 2)), lambda x: x.reshape(12, 5),
        lambda x: x.reshape(-1), lambda x: np.swapaxes(x, 0, 2), lambda x: np.moveaxis(x, 0, -1),
        lambda x: x[None, 1:, ::2, -1], lambda x: x[..., 2], lambda x: x[1], lambda x: np.flip(x, 1),
        lambda x: np.expand_dims(x, (0, 2)), lambda x: np.squeeze(x[:, :1, :]),
        lambda x: np.broadcast_to(x[:, :1, :], (3, 4, 5)), lambda x: np.concatenate([x, x * 2], axis=1),
        lambda x: np.stack([x, -x], axis=1), lambda x: np.pad(x, ((1, 0), (0, 2), (1, 1)), constant_values=3.0),
        lambda x: x.ravel()[::7], lambda x: np.vstack([x[0], x[1]]), lambda x: np.hstack([x[0], x[1]]),
        lambda x: np.clip(x, -0.5, 0.5), lambda x: np.clip(x, None, 0.1), lambda x: x.astype(np.int32),
        lambda x: np.zeros_like(x) + np.ones_like(x, dtype=np.float64) + np.full_like(x, 3),
        lambda x: [row.sum() for row in x][2],
    ]
    for fn in cases:
        y = smelt.jit(fn)(x)
        r = fn(x)
        assert y.shape == r.shape and y.dtype == r.dtype, fn
        np.testing.assert_allclose(y, r, rtol=1e-6, atol=1e-6)


def test_matmul_reads_subnormal_operands_as_zero():
    """GELU's tail (x * sigmoid of a large negative) is subnormal in f32; a
    product reads subnormal operands as zero (x86's DAZ, for the BLAS call
    only: each one costs the CPU an assist, docs/numerics.md): with normal
    operands of ordinary size the sums are the same bits as with the
    subnormals flushed and within the float64 reference's tolerance; a row
    of subnormals times 1e30 is 0, where the exact product is about 1e-9."""
    import platform
    rng = np.random.default_rng(21)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 48)).astype(np.float32)
    sub = rng.random(a.shape) < 0.2
    a[sub] = (rng.uniform(1e-45, 1e-38, sub.sum()) * np.sign(rng.standard_normal(sub.sum()))).astype(np.float32)
    assert np.count_nonzero((a != 0) & (np.abs(a) < np.finfo(np.float32).tiny)) > 1000
    f = smelt.jit(lambda x, y: x @ y)
    got = f(a, b)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    if platform.machine() in ("x86_64", "AMD64"):
        flushed = np.where(np.abs(a) < np.finfo(np.float32).tiny, np.float32(0), a)
        assert np.array_equal(got, f(flushed, b))
        tiny_row = np.full((1, 96), 1e-39, np.float32)
        assert np.all(f(tiny_row, np.full((96, 4), 1e30, np.float32)) == 0)


def test_matmul_and_epilogue():
    def mlp(x, w, b):
        return np.maximum(x @ w + b, 0)
    x, w, b = rand(16, 32), rand(32, 8), rand(8)
    f = smelt.jit(mlp)
    np.testing.assert_allclose(f(x, w, b), mlp(x.astype(np.float64), w.astype(np.float64), b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(smelt.jit(lambda a, b: np.dot(a, b))(x, w), x.astype(np.float64) @ w, rtol=1e-5,
                               atol=1e-5)


def test_pytrees_static_and_scalars():
    @smelt.jit(static_argnames=("axis",))
    def f(params, x, scale, axis):
        return {"y": (x * params["w"] + params["b"]).sum(axis=axis) * scale, "n": 3}
    p = {"w": rand(4, 5), "b": rand(5)}
    x = rand(4, 5)
    r = f(p, x, 2.0, axis=1)
    assert r["n"] == 3
    np.testing.assert_allclose(r["y"], ((x * p["w"] + p["b"]).sum(axis=1) * 2.0), rtol=1e-6)
    f(p, x, 2.0, axis=0)
    assert f.stats()["traces"] == 2
    # a NumPy scalar argument is a traced 0-d input: no new trace per value
    g = smelt.jit(lambda x, s: x * s)
    g(x, np.float32(2))
    np.testing.assert_array_equal(g(x, np.float32(3)), x * np.float32(3))
    assert g.stats()["traces"] == 1


def test_out_anywhere_in_a_line(monkeypatch):
    """out= arrays that start anywhere in a 64-byte line (NumPy's own start
    16 bytes past one): the CC kernels store up to the first line boundary
    apart and stream from there (SMELT_STREAM_STORES=1 forces streaming at
    this size); every offset gives the bits of an aligned output, and
    nothing is written outside the output."""
    monkeypatch.setenv("SMELT_STREAM_STORES", "1")
    x = rand(97, 1000)
    cases = [(softmax_np, x, softmax_np(x.astype(np.float64))),
             (lambda a: np.tanh(a) * 0.5 + a * a, x, np.tanh(x.astype(np.float64)) * 0.5 + x.astype(np.float64) ** 2)]
    for fn, arg, ref in cases:
        f = smelt.jit(fn, backend="CC")
        n = arg.size
        buf = np.empty(n + 32, np.float32)
        s = (-buf.ctypes.data % 64) // 4
        first = None
        for off in range(16):
            buf[:] = np.nan
            o = buf[s + off:s + off + n].reshape(arg.shape)
            assert (o.ctypes.data - buf[s:].ctypes.data) == 4 * off
            f(arg, out=o)
            f.wait()
            assert f.stats()["last"]["backend"] == "CC"
            if first is None:
                first = o.copy()
                np.testing.assert_allclose(first, ref, rtol=2e-6, atol=1e-6)
            np.testing.assert_array_equal(o, first)
            assert np.isnan(buf[:s + off]).all() and np.isnan(buf[s + off + n:]).all()


def test_out_and_donation():
    f = smelt.jit(lambda a, b: a * b + 1)
    a, b = rand(100), rand(100)
    o = np.empty(100, np.float32)
    r = f(a, b, out=o)
    assert r is o
    np.testing.assert_array_equal(o, a * b + 1)
    with pytest.raises(ValueError):
        f(a, b, out=np.empty(99, np.float32))

    def adam(p, m, v, g):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        return p - 0.01 * m / (np.sqrt(v) + 1e-8), m, v
    step = smelt.jit(adam, donate_argnums=(0, 1, 2))
    p, m, v, g = rand(1000), rand(1000), np.abs(rand(1000)), rand(1000)
    ref = adam(p.copy(), m.copy(), v.copy(), g)
    ids = (id(p), id(m), id(v))
    p2, m2, v2 = step(p, m, v, g)
    assert (id(p2), id(m2), id(v2)) == ids  # written in place
    for y, r in zip((p2, m2, v2), ref):
        np.testing.assert_allclose(y, r, rtol=1e-6, atol=1e-7)
    assert step.stats()["last"]["donated_inplace"] == 3


def test_captured_arrays_are_read_each_call():
    w = rand(10)
    f = smelt.jit(lambda x: x * w)
    x = rand(10)
    np.testing.assert_array_equal(f(x), x * w)
    w[:] = 5
    np.testing.assert_array_equal(f(x), x * 5)
    c = smelt.jit(lambda x: x * w, capture_as_const=True)
    c(x)
    w[:] = 7
    np.testing.assert_array_equal(c(x), x * 5)  # the value at the trace


def test_tracer_errors_name_the_line():
    def bad(x):
        if x.sum() > 0:  # the line the error names
            return x
        return -x
    with pytest.raises(smelt.TracerError) as e:
        smelt.jit(bad)(rand(3))
    msg = str(e.value)
    assert "test_jit.py" in msg and "if x.sum() > 0" in msg and "np.where" in msg
    with pytest.raises(smelt.TracerError):
        smelt.jit(lambda x: float(x[0]))(rand(3))
    with pytest.raises(smelt.TracerError):
        smelt.jit(lambda x: np.asarray(x))(rand(3))

    def assign(x):
        x[0] = 1
        return x
    with pytest.raises(smelt.TracerError, match="np.where"):
        smelt.jit(assign)(rand(3))


def test_unsupported_functions_are_errors():
    with pytest.raises(smelt.UnsupportedError, match=r"np\.sort.*test_jit\.py"):
        smelt.jit(lambda x: np.sort(x))(rand(3))
    with pytest.raises(smelt.UnsupportedError, match="fmax"):
        smelt.jit(lambda x: np.fmax(x, 0))(rand(3))
    with pytest.raises(smelt.UnsupportedError, match="indexing with an array"):
        smelt.jit(lambda x: x[np.array([True, False, True])])(rand(3))
    with pytest.raises(smelt.ShapeError):
        smelt.jit(lambda a, b: a + b)(rand(3), rand(4))
    with pytest.raises(smelt.DtypeError, match="complex128 is not supported"):
        smelt.jit(lambda a: a + 1)(np.ones(3, np.complex128))
    with pytest.raises(IndexError):
        smelt.jit(lambda a: a[5])(rand(3))
    with pytest.raises(smelt.InvalidArgumentError):
        smelt.jit(lambda a: a, backend="NOPE")


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e38, 3.0], np.float32)
    f = smelt.jit(lambda x: (np.maximum(x, 0), np.abs(x), np.isnan(x), np.isinf(x), np.sign(x), x * 0))
    with np.errstate(invalid="ignore"):
        refs = (np.maximum(x, 0), np.abs(x), np.isnan(x), np.isinf(x), np.sign(x), x * 0)
    for y, r in zip(f(x), refs):
        np.testing.assert_array_equal(y, r)


def test_trace_megengine_names_and_dump_load(tmp_path):
    @smelt.trace(symbolic=False, capture_as_const=True)
    def f(x):
        return np.tanh(x) * 2 + 1
    x = rand(50)
    y1 = f(x)  # op by op
    y2 = f(x)  # the fused plan
    assert y1.tobytes() == y2.tobytes()
    path = str(tmp_path / "f.smelt")
    f.dump(path)
    g = smelt.load(path)
    assert g(x).tobytes() == y2.tobytes()
    assert g(rand(7)).shape == (7,)  # one plan for every shape of the rank


def test_exclude_from_trace_runs_each_call():
    calls = []

    @smelt.exclude_from_trace
    def noise(n):
        calls.append(n)
        return np.full(n, float(len(calls)), np.float32)

    f = smelt.trace(lambda x: x + noise(x.shape[0]))
    x = rand(4)
    np.testing.assert_array_equal(f(x), x + 1)
    np.testing.assert_array_equal(f(x), x + 2)
    assert len(calls) == 2


def test_evaluate_like_numexpr():
    a, b, c = rand(1000), rand(1000), rand(1000)
    np.testing.assert_array_equal(smelt.evaluate("a*b+c"), a * b + c)
    np.testing.assert_allclose(smelt.evaluate("where(a > 0, a*b, exp(c)) + 1"),
                               np.where(a > 0, a * b, np.exp(c.astype(np.float64))) + 1, rtol=1e-6)
    s = 2.5
    assert smelt.evaluate("a * s").dtype == np.float32
    o = np.empty_like(a)
    assert smelt.evaluate("a - b", out=o) is o
    np.testing.assert_array_equal(o, a - b)
    np.testing.assert_array_equal(smelt.evaluate("x + 1", local_dict={"x": b}), b + 1)
    np.testing.assert_allclose(smelt.evaluate("sum(a * b)"), np.sum(a.astype(np.float64) * b), rtol=1e-5)
    with pytest.raises(SyntaxError):
        smelt.evaluate("a +* b")


def test_dlpack_and_array_interface():
    x = rand(20)
    y = smelt.jit(lambda a: a + 1)(x)
    z = np.from_dlpack(y)
    np.testing.assert_array_equal(z, x + 1)

    class Iface:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self.a = a
    np.testing.assert_array_equal(smelt.jit(lambda a: a * 3)(Iface(x)), x * 3)


def test_pickle_and_methods():
    f = smelt.jit(softmax_np)
    g = pickle.loads(pickle.dumps(f))
    x = rand(3, 5)
    assert g(x).tobytes() == f(x).tobytes()

    class Layer:
        def __init__(self):
            self.w = rand(5)

        @smelt.jit
        def __call__(self, x):
            return x * self.w
    L = Layer()
    np.testing.assert_array_equal(L(x), x * L.w)


def test_ops_namespace():
    x = rand(100).astype(np.float64)
    np.testing.assert_allclose(smelt.ops.sigmoid(x), 1 / (1 + np.exp(-x)), rtol=1e-15)
    np.testing.assert_allclose(smelt.jit(lambda x: smelt.ops.relu(x) + smelt.ops.gelu(x))(x),
                               np.maximum(x, 0) + 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / 2 ** 0.5)),
                               rtol=1e-14, atol=1e-15)


def test_threads_and_info():
    old = smelt.get_threads()
    smelt.set_threads(1)
    assert smelt.get_threads() == 1
    smelt.set_threads(old)
    assert "TCC" in smelt.backends()
    assert "library:" in smelt.info()


def test_unaligned_and_byteswapped_arguments():
    f = smelt.jit(lambda a, b: a * b + 1)
    buf = np.zeros(4 * 101 + 1, np.uint8)
    a = np.frombuffer(buf.data, dtype=np.float32, count=100, offset=1)  # not aligned
    assert not a.flags.aligned
    b = rand(100)
    np.testing.assert_array_equal(f(np.ascontiguousarray(a), b), a * b + 1)  # traced aligned
    np.testing.assert_array_equal(f(a, b), a * b + 1)  # the same signature, unaligned: copied
    for _ in range(2):  # traced, then the cached entry
        big = rand(100).astype(">f4")
        np.testing.assert_array_equal(f(big, b), big.astype(np.float32) * b + 1)


def test_attention_runs_as_a_batch_chain():
    """softmax(q k^T) v traced from NumPy: the product, the softmax and the
    second product run as one batch chain (docs/fusion.md), with the same
    bits as the kernels one after the other, close to float64"""
    # 64 matrices: at least two a thread up to 32 cores (auto's rule)
    q, k, v = (rng.standard_normal((4, 16, 40, 16)).astype(np.float32) for _ in range(3))

    def att(q, k, v):
        s = q @ k.transpose(0, 1, 3, 2) * np.float32(0.25)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v
    f = smelt.jit(att)
    got = f(q, k, v)
    assert f.stats()["last"]["batch_chains"] == 1
    qd, kd, vd = (x.astype(np.float64) for x in (q, k, v))
    s = qd @ kd.transpose(0, 1, 3, 2) * 0.25
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(axis=-1, keepdims=True)) @ vd, rtol=1e-5, atol=1e-6)


def test_int64_scalars_beyond_2_53_keep_every_bit():
    """a NumPy int64 scalar that a double cannot hold (2^63 - 1, 2^53 + 1)
    is a constant of every bit, not its double's rounding"""
    a = rng.integers(-2 ** 62, 2 ** 62, 16, dtype=np.int64)
    a[:3] = [0, -1, -2 ** 63]

    def f(a):
        return np.bitwise_and(a, np.int64(2 ** 63 - 1)) + np.int64(2 ** 53 + 1), a ^ np.int64(-(2 ** 60) - 3)
    got = smelt.jit(f)(a)
    for g, r in zip(got, f(a)):
        np.testing.assert_array_equal(g, r)
