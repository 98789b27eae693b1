#!/usr/bin/env python3
"""smelt.onnx on models written here with onnx.helper: values against a
float64 NumPy reference, signatures, names, folding, load-time errors and
the backend interface.  Runs under build/onnx-venv's Python (the pinned
onnx); tests/python/test_onnx.py calls it.  Prints "onnx-checks: N checks,
F failed"."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("SMELT_JIT_BACKEND", "TCC")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import smelt.onnx  # noqa: E402
import smelt.onnx.backend as backend  # noqa: E402

rng = np.random.default_rng()
checks = failed = 0


def check(name, fn):
    global checks, failed
    checks += 1
    try:
        fn()
        print("ok   %s" % name)
    except Exception as e:  # noqa: BLE001
        failed += 1
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        if os.environ.get("ONNX_CHECKS_TRACE"):
            import traceback
            traceback.print_exc()


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# an MLP with a symbolic batch: MatMul, Add, Relu, Gemm, Softmax
W1, B1, W2, B2 = f32(16, 32), f32(32), f32(32, 10), f32(10)
mlp = model(
    [helper.make_node("MatMul", ["x", "W1"], ["h0"]), helper.make_node("Add", ["h0", "B1"], ["h1"]),
     helper.make_node("Relu", ["h1"], ["h2"]),
     helper.make_node("Gemm", ["h2", "W2", "B2"], ["z"], alpha=0.5, beta=2.0),
     helper.make_node("Softmax", ["z"], ["y"], axis=-1)],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
    [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(B1, "B1"), numpy_helper.from_array(W2, "W2"),
     numpy_helper.from_array(B2, "B2")])


def mlp_ref(x):
    x = x.astype(np.float64)
    h = np.maximum(x @ W1 + B1, 0)
    z = 0.5 * (h @ W2) + 2.0 * B2
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def t_mlp():
    f = smelt.onnx.load(mlp)
    for n in (4, 7, 4):
        x = f32(n, 16)
        (y,) = f(x)
        assert y.dtype == np.float32 and y.shape == (n, 10)
        np.testing.assert_allclose(y, mlp_ref(x), rtol=1e-4, atol=1e-6)
    assert f.stats()["plans"] == 2, f.stats()
    x = f32(3, 16)
    np.testing.assert_array_equal(f(x=x)[0], f(x)[0])  # by name


def t_path(tmp=os.environ.get("TMPDIR", "/tmp")):
    p = os.path.join(tmp, "smelt-onnx-check-%d.onnx" % os.getpid())
    onnx.save(mlp, p)
    try:
        x = f32(2, 16)
        np.testing.assert_allclose(smelt.onnx.load(p)(x)[0], mlp_ref(x), rtol=1e-4, atol=1e-6)
    finally:
        os.unlink(p)


def t_fold():
    # x [N, 6] -> Reshape to concat(shape(x)[:1], [2, 3]): shape arithmetic folded at the trace
    m = model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Slice", ["s", "zero", "one"], ["n"]),
         helper.make_node("Concat", ["n", "tail"], ["shape"], axis=0),
         helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("ConstantOfShape", ["shape"], ["c"], value=numpy_helper.from_array(np.array([1.5], np.float32))),
         helper.make_node("Mul", ["r", "c"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 3])],
        [numpy_helper.from_array(np.array([0], np.int64), "zero"),
         numpy_helper.from_array(np.array([1], np.int64), "one"),
         numpy_helper.from_array(np.array([2, 3], np.int64), "tail")])
    f = smelt.onnx.load(m)
    x = f32(5, 6)
    (y,) = f(x)
    np.testing.assert_array_equal(y, (x.reshape(5, 2, 3) * np.float32(1.5)))
    assert f.stats()["last"]["kernels"] == 1, f.stats()["last"]


def t_gather_on_shape():
    # torch.onnx's pattern: Shape -> Gather(0) -> Unsqueeze -> Concat -> Reshape (flatten all but the batch)
    m = model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
         helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
         helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
         helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Tanh", ["r"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])],
        [numpy_helper.from_array(np.array(0, np.int64), "i0"), numpy_helper.from_array(np.array([0], np.int64), "ax0"),
         numpy_helper.from_array(np.array([-1], np.int64), "m1")])
    f = smelt.onnx.load(m)
    for n in (2, 5):
        x = f32(n, 3, 4)
        np.testing.assert_allclose(f(x)[0], np.tanh(x.astype(np.float64)).reshape(n, 12), rtol=1e-5, atol=1e-6)
    # a Gather of the input's values (an embedding: Gather(W, ids) + P, then LayerNormalization): read inside
    # the one kernel; GatherElements too; an index out of range is an IndexError when it runs
    W = f32(10, 8)
    m2 = model([helper.make_node("Gather", ["W", "ids"], ["e"], name="emb", axis=0),
                helper.make_node("Add", ["e", "P"], ["x"]),
                helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5),
                helper.make_node("GatherElements", ["W", "sel"], ["z"], axis=1)],
               [helper.make_tensor_value_info("ids", TensorProto.INT64, [3, 4]),
                helper.make_tensor_value_info("sel", TensorProto.INT64, [10, 2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 8]),
                helper.make_tensor_value_info("z", TensorProto.FLOAT, [10, 2])],
               [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.ones(8, np.float32), "g"),
                numpy_helper.from_array(np.zeros(8, np.float32), "b"),
                numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(4, 8) / 32, "P")])
    f2 = smelt.onnx.load(m2)
    ids = np.array([[0, 9, -1, 3], [2, 2, 5, -10], [7, 1, 0, 4]], np.int64)
    sel = np.random.default_rng(1).integers(-8, 8, size=(10, 2))
    y, z = f2(ids, sel)
    x = W.astype(np.float64)[ids] + np.arange(32).reshape(4, 8) / 32
    c = x - x.mean(-1, keepdims=True)
    np.testing.assert_allclose(y, c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(z, np.take_along_axis(W, sel, 1))
    ids[1, 2] = 10
    try:
        f2(ids, sel)
    except IndexError as e:
        assert "take: index 10 is out of range" in str(e), e
    else:
        raise AssertionError("no error for an index out of range")


def t_elementwise_fused():
    # LayerNormalization + Gelu(erf) + Where: float64 reference, one signature
    m = model(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
         helper.make_node("Erf", ["n"], ["e"]),
         helper.make_node("Less", ["x", "zero"], ["neg"]),
         helper.make_node("Where", ["neg", "e", "n"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])],
        [numpy_helper.from_array(f32(64), "g"), numpy_helper.from_array(f32(64), "b"),
         numpy_helper.from_array(np.array(0, np.float32), "zero")])
    f = smelt.onnx.load(m)
    x = f32(8, 64)
    x[0, :3] = [np.inf, -np.inf, 0]
    x[1] = 1e3 * f32(64)
    (y,) = f(x)
    inits = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    xd = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        mu = xd.mean(-1, keepdims=True)
        var = ((xd - mu) ** 2).mean(-1, keepdims=True)
    n = (xd - mu) / np.sqrt(var + 1e-5) * inits["g"] + inits["b"]
    from math import erf
    with np.errstate(invalid="ignore"):
        ref = np.where(xd < 0, np.vectorize(erf)(n), n)
    ok = np.isfinite(x).all(-1)
    np.testing.assert_allclose(y[ok], ref[ok], rtol=2e-4, atol=2e-5)
    assert np.isnan(y[0]).all()  # inf in a row: its mean and variance are NaN, as NumPy's
    # one fused kernel (a row program: the layer norm's two reductions and the
    # elementwise work after them), and the same bits as every node its own kernel
    assert f.stats()["last"]["kernels"] == 1, f.explain()
    f0 = smelt.onnx.load(m, opt_level=0)
    assert f0(x)[0].tobytes() == y.tobytes()
    assert f0.stats()["last"]["kernels"] > 5


def refused(m, *words, what="no error at load"):
    """smelt.onnx.load(m) raises UnsupportedOperator (a NotImplementedError)
    whose message names every one of words"""
    try:
        smelt.onnx.load(m)
    except smelt.onnx.UnsupportedOperator as e:
        assert all(w in str(e) for w in words) and isinstance(e, NotImplementedError), e
    else:
        raise AssertionError(what)


def t_unsupported_op():
    m = model([helper.make_node("Relu", ["x"], ["r"], name="act"),
               helper.make_node("NonZero", ["r"], ["y"], name="running")],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
              [numpy_helper.from_array(np.array(0, np.int64), "ax")])
    refused(m, "'running'", "NonZero")


def t_unsupported_attr():
    m = model([helper.make_node("Resize", ["x", "", "s"], ["y"], name="area0", mode="area")],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 6, 6])],
              [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")], opset=13)
    refused(m, "area0", "Resize", "mode='area'")
    m2 = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
               [helper.make_tensor_value_info("y", TensorProto.STRING, [3])])
    refused(m2, "string", what="no error at load for a cast to string")


def t_backend():
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    rep = backend.prepare(mlp, "CPU")
    x = f32(3, 16)
    (y,) = rep.run([x])
    np.testing.assert_allclose(y, mlp_ref(x), rtol=1e-4, atol=1e-6)
    (y2,) = backend.run_node(helper.make_node("Sigmoid", ["a"], ["b"]), [x])
    np.testing.assert_allclose(y2, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-5)
    assert backend.is_compatible(mlp)


def t_wrong_inputs():
    f = smelt.onnx.load(mlp)
    for bad in [lambda: f(), lambda: f(f32(2, 16), f32(2, 16)), lambda: f(np.ones((2, 16), np.float64)),
                lambda: f(y=f32(2, 16))]:
        try:
            bad()
        except TypeError:
            pass
        else:
            raise AssertionError("no TypeError")



# ---- operators built as compositions, against ONNX's reference implementation (onnx.reference) on fresh
# random data
def vs_reference(node, feeds, consts=None, opset=19, rtol=1e-4, atol=1e-5):
    """One node run by smelt.onnx and by onnx.reference.ReferenceEvaluator:
    feeds are graph inputs, consts initializers (static values)."""
    from onnx.reference import ReferenceEvaluator
    consts = consts or {}
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output if o]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    g = helper.make_graph([node], "m", ins, outs, initializer=inits)
    ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])).run(None, feeds)
    outs = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(r.dtype), r.shape)
            for o, r in zip([o for o in node.output if o], ref)]
    g = helper.make_graph([node], "m", ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    got = smelt.onnx.load(m)(*feeds.values())
    for r, o in zip(ref, got):
        assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, o.shape, r.dtype, r.shape)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
    return got


def t_resize():
    x = f32(2, 3, 5, 7)
    roi0 = np.array([0.1, 0.25, 0.8, 0.9], np.float32)
    for mode in ("nearest", "linear", "cubic"):
        for ctm in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize"):
            for scales in ([1.0, 1.0, 1.7, 0.6], [1.0, 1.0, 0.5, 2.25]):
                extra = dict(nearest_mode=str(rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor",
                                                          "ceil"]))) if mode == "nearest" else \
                    dict(cubic_coeff_a=-0.5, exclude_outside=int(rng.integers(2))) if mode == "cubic" else {}
                if ctm == "tf_crop_and_resize":
                    extra["extrapolation_value"] = 2.5
                n = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode=mode,
                                     coordinate_transformation_mode=ctm, axes=[2, 3], **extra)
                vs_reference(n, {"x": x}, {"roi": roi0, "scales": np.array(scales[2:], np.float32)})
    # sizes, keep_aspect_ratio_policy, antialias, axes in the other order, all axes, integers (nearest)
    for policy in ("stretch", "not_larger", "not_smaller"):
        for mode, aa in (("nearest", 0), ("linear", 1), ("cubic", 1), ("linear", 0)):
            n = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=aa,
                                 keep_aspect_ratio_policy=policy, axes=[3, 2])
            vs_reference(n, {"x": x}, {"sizes": np.array([4, 3], np.int64)})
    n = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")
    vs_reference(n, {"x": x}, {"scales": np.array([1, 1.5, 2, 0.7], np.float32)})
    xi = rng.integers(-100, 100, (1, 2, 4, 6)).astype(np.int64)
    n = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    vs_reference(n, {"x": xi}, {"scales": np.array([1, 1, 2.5, 0.5], np.float32)})
    # Resize-10 (ONNX's reference lacks it): asymmetric coordinates, nearest rounds down
    m = model([helper.make_node("Resize", ["x", "scales"], ["y"], mode="nearest")],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 7, 9])],
              [numpy_helper.from_array(np.array([1, 1, 1.5, 1.4], np.float32), "scales")], opset=10)
    (y,) = smelt.onnx.load(m)(x)
    np.testing.assert_array_equal(y, x[:, :, np.floor(np.arange(7) / 1.5).astype(int)][:, :, :,
                                      np.floor(np.arange(9) / 1.4).astype(int)])



def conv_transpose_ref(x, w, b, s, d, pads, op, g):
    """ConvTranspose by its definition, in float64: every input element
    times the kernel added at (input position * stride + tap * dilation -
    pad before)."""
    ns = x.ndim - 2
    cin, mg, k = w.shape[0], w.shape[1], w.shape[2:]
    full = [s[i] * (x.shape[2 + i] - 1) + (k[i] - 1) * d[i] + 1 + op[i] for i in range(ns)]
    y = np.zeros((x.shape[0], g * mg, *full))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for c in range(cin):
        gi = c // (cin // g)
        for pos in np.ndindex(*x.shape[2:]):
            for tap in np.ndindex(*k):
                o = tuple(pos[i] * s[i] + tap[i] * d[i] for i in range(ns))
                y[(slice(None), slice(gi * mg, (gi + 1) * mg)) + o] += \
                    x64[(slice(None), c) + pos][:, None] * w64[(c, slice(None)) + tap][None, :]
    y = y[(slice(None), slice(None)) + tuple(slice(pads[i], full[i] - pads[ns + i]) for i in range(ns))]
    if b is not None:
        y = y + b.astype(np.float64).reshape((1, -1) + (1,) * ns)
    return y


def t_conv_transpose():
    for ns in (1, 2, 3):
        for trial in range(4 if ns < 3 else 2):
            g = int(rng.choice([1, 2]))
            cin, mg = 2 * g, int(rng.integers(1, 3))
            x = f32(2, cin, *rng.integers(2, 5, ns))
            w = f32(cin, mg, *rng.integers(1, 4, ns))
            b = f32(g * mg)
            s_ = [int(v) for v in rng.integers(1, 4, ns)]
            d_ = [int(v) for v in rng.integers(1, 3, ns)]
            pads = [int(v) for v in rng.integers(0, 2, 2 * ns)] if trial % 2 else [0] * (2 * ns)
            op_ = [int(rng.integers(0, max(v, dd))) for v, dd in zip(s_, d_)] if trial >= 2 else [0] * ns
            ref = conv_transpose_ref(x, w, b, s_, d_, pads, op_, g)
            m = model([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=s_, dilations=d_,
                                        pads=pads, output_padding=op_, group=g)],
                      [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in
                       (("x", x), ("w", w), ("b", b))],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ref.shape)])
            (y,) = smelt.onnx.load(m)(x, w, b)
            assert y.shape == ref.shape, (y.shape, ref.shape)
            np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    # auto_pad, output_shape (the full result placed at the start, cut or extended with zeros): against
    # ONNX's reference (one group: its grouped path is wrong)
    for mode in ("SAME_UPPER", "SAME_LOWER"):
        vs_reference(helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 3], auto_pad=mode),
                     {"x": f32(2, 3, 4, 3), "w": f32(3, 2, 3, 2)})
    vs_reference(helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], output_shape=[10, 8]),
                 {"x": f32(1, 1, 3, 3), "w": f32(1, 2, 3, 3)})


def t_windows_3d():
    x = f32(2, 3, 6, 5, 7)
    for trial in range(3):
        k = [int(v) for v in rng.integers(1, 4, 3)]
        attrs = dict(kernel_shape=k, strides=[int(v) for v in rng.integers(1, 3, 3)],
                     dilations=[int(v) for v in rng.integers(1, 3, 3)],
                     pads=[int(rng.integers(0, v)) if v > 1 else 0 for v in k] * 2)
        # MaxPool against a window loop (ONNX's reference fails on some pads with dilations)
        m = model([helper.make_node("MaxPool", ["x"], ["y"], **attrs)],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list("ncdhw"))])
        (y,) = smelt.onnx.load(m)(x)
        pads = attrs["pads"]
        xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[3 + i]) for i in range(3)], constant_values=-np.inf)
        out = [(xp.shape[2 + i] - (k[i] - 1) * attrs["dilations"][i] - 1) // attrs["strides"][i] + 1 for i in range(3)]
        ref = np.full(x.shape[:2] + tuple(out), -np.inf, np.float32)
        for o in np.ndindex(*out):
            for t in np.ndindex(*k):
                q = tuple(o[i] * attrs["strides"][i] + t[i] * attrs["dilations"][i] for i in range(3))
                ref[(slice(None), slice(None)) + o] = np.maximum(ref[(slice(None), slice(None)) + o],
                                                                 xp[(slice(None), slice(None)) + q])
        np.testing.assert_array_equal(y, ref)
        # ceil_mode where no window starts in the right padding (ONNX's reference keeps such a window, the
        # operator's definition drops it)
        span = [(n + attrs["pads"][i] + attrs["pads"][3 + i] - (k[i] - 1) * attrs["dilations"][i] - 1)
                for i, n in enumerate(x.shape[2:])]
        ceil_ok = all(-(-sp // st) * st < n + pb for sp, st, n, pb in
                      zip(span, attrs["strides"], x.shape[2:], attrs["pads"][:3]))
        for incl in (0, 1):
            for ceil in ((0, 1) if ceil_ok else (0,)):
                vs_reference(helper.make_node("AveragePool", ["x"], ["y"], count_include_pad=incl, ceil_mode=ceil,
                                              **attrs), {"x": x})
        vs_reference(helper.make_node("LpPool", ["x"], ["y"], p=int(rng.integers(1, 4)), **attrs), {"x": x})
        w = f32(4, 3, *k)
        del attrs["kernel_shape"]
        vs_reference(helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs), {"x": x, "w": w, "b": f32(4)})
    # 2-D average pool with dilations, LpPool over 1 and 2 axes with auto_pad
    x2 = f32(2, 3, 7, 6)
    vs_reference(helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], dilations=[2, 2], pads=[1, 1, 1, 0],
                                  strides=[2, 1]), {"x": x2})
    vs_reference(helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[3, 2], auto_pad="SAME_UPPER", p=2),
                 {"x": x2})
    vs_reference(helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[3], strides=[2], p=3),
                 {"x": f32(2, 3, 9)})



def t_grid_sample():
    x = f32(2, 3, 4, 5)
    grid = (rng.uniform(-1.3, 1.3, (2, 3, 6, 2))).astype(np.float32)
    for mode in ("linear", "nearest", "cubic"):
        for pad in ("zeros", "border", "reflection"):
            for align in (0, 1):
                vs_reference(helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad,
                                              align_corners=align), {"x": x, "g": grid}, opset=20)
    x3 = f32(1, 2, 3, 4, 3)
    grid3 = (rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3))).astype(np.float32)
    for mode in ("linear", "nearest"):
        vs_reference(helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode="reflection"),
                     {"x": x3, "g": grid3}, opset=20)
    # opset 16's names (bilinear, bicubic: ONNX's reference knows only 20's)
    (ref,) = vs_reference(helper.make_node("GridSample", ["x", "g"], ["y"], mode="cubic"), {"x": x, "g": grid},
                          opset=20)
    m = model([helper.make_node("GridSample", ["x", "g"], ["y"], mode="bicubic")],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
               helper.make_tensor_value_info("g", TensorProto.FLOAT, grid.shape)],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ref.shape)], opset=16)
    np.testing.assert_array_equal(smelt.onnx.load(m)(x, grid)[0], ref)



def scatter_ref(data, idx, upd, axis, kind):
    """ScatterElements by its definition, in order (the last write wins)."""
    out = data.copy()
    for p in np.ndindex(*idx.shape):
        q = list(p)
        q[axis] = idx[p] % data.shape[axis]
        q = tuple(q)
        out[q] = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply, "max": np.maximum,
                  "min": np.minimum}[kind](out[q], upd[p])
    return out


def t_scatter_gather_nd():
    for trial in range(6):
        data = f32(4, 5, 3)
        axis = int(rng.integers(-3, 3))
        ishape = [int(rng.integers(1, n + 1)) for n in data.shape]
        n = data.shape[axis]
        idx = rng.integers(-n, n, ishape).astype(np.int64)  # duplicates and negative indices
        upd = f32(*ishape)
        for kind in ("none", "add", "mul", "max", "min"):
            m = model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=axis, reduction=kind)],
                      [helper.make_tensor_value_info("d", TensorProto.FLOAT, data.shape),
                       helper.make_tensor_value_info("i", TensorProto.INT64, idx.shape),
                       helper.make_tensor_value_info("u", TensorProto.FLOAT, upd.shape)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, data.shape)], opset=18)
            (y,) = smelt.onnx.load(m)(data, idx, upd)
            np.testing.assert_allclose(y, scatter_ref(data, idx, upd, axis % 3, kind), rtol=1e-5, atol=1e-6)
    # ScatterND: rows or elements, duplicates (none: the last; the others reduce), integers
    for q in (1, 2, 3):
        data = rng.integers(-50, 50, (4, 3, 5)).astype(np.int64)
        idx = np.stack([rng.integers(-n, n, (2, 3)) for n in data.shape[:q]], -1).astype(np.int64)
        upd = rng.integers(-50, 50, idx.shape[:-1] + data.shape[q:]).astype(np.int64)
        for kind in ("none", "add", "mul", "max", "min"):
            y = vs_reference(helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=kind),
                             {"d": data, "i": idx, "u": upd}, opset=18) if kind in ("none", "add", "mul") else \
                None
            ref = data.copy()
            for p in np.ndindex(*idx.shape[:-1]):
                t = tuple(int(v) for v in idx[p])
                ref[t] = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply, "max": np.maximum,
                          "min": np.minimum}[kind](ref[t], upd[p])
            if y is None:
                m = model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=kind)],
                          [helper.make_tensor_value_info(k, TensorProto.INT64, v.shape) for k, v in
                           (("d", data), ("i", idx), ("u", upd))],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, data.shape)], opset=18)
                y = smelt.onnx.load(m)(data, idx, upd)
            np.testing.assert_array_equal(y[0], ref)
    # GatherND with batch_dims 0, 1, 2 and negative indices
    for b in (0, 1, 2):
        data = f32(3, 4, 5, 2)
        q = int(rng.integers(1, 4 - b + 1))
        idx = np.stack([rng.integers(-n, n, (3, 4, 2)[:b] + (2, 3)) for n in data.shape[b:b + q]], -1)
        vs_reference(helper.make_node("GatherND", ["d", "i"], ["y"], batch_dims=b),
                     {"d": data, "i": idx.astype(np.int64)})



def recurrent_ref(kind, x, w, r, b, lens, h0, c0, peep, direction, lbr=0, clip=None, input_forget=0):
    """RNN / GRU / LSTM by ONNX's equations in float64, one batch element
    and direction at a time (layout 0)."""
    sg = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)  # noqa: E731
    T, nb = x.shape[:2]
    hs = r.shape[-1]
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    y = np.zeros((T, len(dirs), nb, hs))
    yh = np.zeros((len(dirs), nb, hs))
    yc = np.zeros((len(dirs), nb, hs))
    for d, dr in enumerate(dirs):
        W, R = w[d].astype(np.float64), r[d].astype(np.float64)
        B = b[d].astype(np.float64) if b is not None else np.zeros(2 * R.shape[0])
        wb, rb = np.split(B, 2)
        for n in range(nb):
            L = T if lens is None else int(lens[n])
            h = h0[d, n].astype(np.float64) if h0 is not None else np.zeros(hs)
            cc = c0[d, n].astype(np.float64) if c0 is not None else np.zeros(hs)
            for t in (range(L) if dr == "forward" else range(L - 1, -1, -1)):
                xt = x[t, n].astype(np.float64)
                if kind == "RNN":
                    h = np.tanh(cl(W @ xt + wb + R @ h + rb))
                elif kind == "GRU":
                    gw, gr = W @ xt + wb, R @ h + rb
                    z = sg(cl(gw[:hs] + gr[:hs]))
                    rr = sg(cl(gw[hs:2 * hs] + gr[hs:2 * hs]))
                    if lbr:
                        hh = np.tanh(cl(gw[2 * hs:] + rr * gr[2 * hs:]))
                    else:
                        hh = np.tanh(cl(gw[2 * hs:] + R[2 * hs:] @ (rr * h) + rb[2 * hs:]))
                    h = (1 - z) * hh + z * h
                else:
                    g = W @ xt + wb + R @ h + rb
                    P = peep[d].astype(np.float64) if peep is not None else np.zeros(3 * hs)
                    i = sg(cl(g[:hs] + P[:hs] * cc))
                    f = 1 - i if input_forget else sg(cl(g[2 * hs:3 * hs] + P[2 * hs:] * cc))
                    cc = f * cc + i * np.tanh(cl(g[3 * hs:]))
                    o = sg(cl(g[hs:2 * hs] + P[hs:2 * hs] * cc))
                    h = o * np.tanh(cc)  # the cell state not clipped here (onnxruntime's reading of clip)
                y[t, d, n] = h
            yh[d, n], yc[d, n] = h, cc
    return y, yh, yc


def t_recurrent():
    for kind, G in (("RNN", 1), ("GRU", 3), ("LSTM", 4)):
        for direction in ("forward", "reverse", "bidirectional"):
            for trial in range(2):
                D = 2 if direction == "bidirectional" else 1
                T, nb, ni, hs = 5, 3, 4, 6
                x, w, r, b = f32(T, nb, ni), f32(D, G * hs, ni) * 0.5, f32(D, G * hs, hs) * 0.5, f32(D, 2 * G * hs)
                h0, c0, peep = f32(D, nb, hs), f32(D, nb, hs), f32(D, 3 * hs)
                lens = rng.integers(1, T + 1, nb).astype(np.int32) if trial else None
                attrs = dict(hidden_size=hs, direction=direction)
                extra = {}
                if trial:
                    attrs["clip"] = 1.5
                    if kind == "GRU":
                        attrs["linear_before_reset"] = extra["lbr"] = 1
                    if kind == "LSTM":
                        attrs["input_forget"] = extra["input_forget"] = 1
                layout = trial  # layout 1: batch first
                names = ["x", "w", "r", "b", "lens", "h0"] + (["c0", "p"] if kind == "LSTM" else [])
                vals = [np.transpose(x, (1, 0, 2)) if layout else x, w, r, b,
                        lens if lens is not None else np.full(nb, T, np.int32),
                        np.transpose(h0, (1, 0, 2)) if layout else h0] + \
                    ([np.transpose(c0, (1, 0, 2)) if layout else c0, peep] if kind == "LSTM" else [])
                outs = ["y", "yh"] + (["yc"] if kind == "LSTM" else [])
                ry, ryh, ryc = recurrent_ref(kind, x, w, r, b, lens, h0, c0 if kind == "LSTM" else None,
                                             peep if kind == "LSTM" else None, direction,
                                             clip=attrs.get("clip"), **extra)
                if layout:
                    ry, ryh, ryc = np.transpose(ry, (2, 0, 1, 3)), np.transpose(ryh, (1, 0, 2)), \
                        np.transpose(ryc, (1, 0, 2))
                refs = [ry, ryh, ryc][:len(outs)]
                m = model([helper.make_node(kind, names, outs, layout=layout, **attrs)],
                          [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                           for n, v in zip(names, vals)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, v.shape) for o, v in zip(outs, refs)],
                          opset=14)
                got = smelt.onnx.load(m)(*vals)
                for g, rf in zip(got, refs):
                    np.testing.assert_allclose(g, rf, rtol=1e-4, atol=1e-5, err_msg="%s %s %d" % (kind, direction,
                                                                                                 trial))



def t_topk_reverse_affine_col2im_bn():
    # TopK: ties (integers drawn from a few values) go to the lower index; largest and smallest; k = n
    for trial in range(4):
        x = rng.integers(0, 4, (3, 7, 5)).astype(np.float32) if trial % 2 else f32(3, 7, 5)
        axis = int(rng.integers(-3, 3))
        n = x.shape[axis]
        for k in (1, 3, n):
            for largest in (0, 1):
                node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
                if not trial % 2:
                    vs_reference(node, {"x": x}, {"k": np.array([k], np.int64)})
                    continue
                # ties: ONNX's rule (the lower index first), which its reference does not keep
                oshape = list(x.shape)
                oshape[axis] = k
                m = model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("v", TensorProto.FLOAT, oshape),
                           helper.make_tensor_value_info("i", TensorProto.INT64, oshape)],
                          [numpy_helper.from_array(np.array([k], np.int64), "k")])
                v, i = smelt.onnx.load(m)(x)
                order = np.take(np.argsort(-x if largest else x, axis=axis, kind="stable"), np.arange(k), axis=axis)
                np.testing.assert_array_equal(i, order)
                np.testing.assert_array_equal(v, np.take_along_axis(x, order, axis))
    xi = (rng.permutation(24) - 12).reshape(4, 6).astype(np.int64)  # distinct: ONNX's reference breaks ties otherwise
    vs_reference(helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=0), {"x": xi}, {"k": np.array([4], np.int64)})
    # ReverseSequence over either axis order
    for ba, ta in ((1, 0), (0, 1)):
        x = f32(5, 4, 3) if ta == 0 else f32(4, 5, 3)
        lens = rng.integers(1, 6, 4).astype(np.int64)
        vs_reference(helper.make_node("ReverseSequence", ["x", "l"], ["y"], batch_axis=ba, time_axis=ta),
                     {"x": x, "l": lens})
    # AffineGrid 2-D and 3-D
    for align in (0, 1):
        vs_reference(helper.make_node("AffineGrid", ["t", "s"], ["g"], align_corners=align),
                     {"t": f32(2, 2, 3)}, {"s": np.array([2, 3, 4, 5], np.int64)}, opset=20)
        vs_reference(helper.make_node("AffineGrid", ["t", "s"], ["g"], align_corners=align),
                     {"t": f32(2, 3, 4)}, {"s": np.array([2, 3, 3, 4, 5], np.int64)}, opset=20)
    # Col2Im: strides, dilations, pads, 3 spatial axes
    for img, blk, s_, d_, p_ in (([5, 6], [2, 3], [1, 2], [2, 1], [1, 0, 1, 2]), ([4, 5, 3], [2, 2, 1], [2, 1, 1],
                                                                                  [1, 2, 1], [0, 1, 0, 1, 0, 0])):
        ns = len(img)
        nblk = [(img[i] + p_[i] + p_[ns + i] - d_[i] * (blk[i] - 1) - 1) // s_[i] + 1 for i in range(ns)]
        x = f32(2, 3 * int(np.prod(blk)), int(np.prod(nblk)))
        vs_reference(helper.make_node("Col2Im", ["x", "i", "b"], ["y"], strides=s_, dilations=d_, pads=p_),
                     {"x": x}, {"i": np.array(img, np.int64), "b": np.array(blk, np.int64)})
    # BatchNormalization in training mode: the batch's statistics and the running ones
    x = f32(4, 3, 5, 2)
    vs_reference(helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                                  momentum=0.8, epsilon=1e-3),
                 {"x": x, "s": f32(3), "b": f32(3), "m": f32(3), "v": rng.uniform(0.5, 2, 3).astype(np.float32)},
                 opset=15)



def u8(*shape):
    return rng.integers(0, 256, shape).astype(np.uint8)


def t_quantization():
    x = f32(3, 4, 6) * 40
    for zp in (None, u8(), u8(4)):
        s = rng.uniform(0.1, 0.5, () if zp is None or zp.ndim == 0 else zp.shape).astype(np.float32)
        ins, consts = (["x", "s"], {"s": s}) if zp is None else (["x", "s", "z"], {"s": s, "z": zp})
        vs_reference(helper.make_node("QuantizeLinear", ins, ["y"], axis=1), {"x": x}, consts, opset=21, atol=0)
        q = u8(3, 4, 6)
        vs_reference(helper.make_node("DequantizeLinear", ins, ["y"], axis=1), {"x": q}, consts, opset=21)
    # blocked: one scale and zero point per 4 (then 2) elements along axis 2
    s, zp = rng.uniform(0.1, 0.5, (3, 4, 2)).astype(np.float32), u8(3, 4, 2)
    vs_reference(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=2, block_size=4), {"x": x},
                 {"s": s, "z": zp}, opset=21, atol=0)
    vs_reference(helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=2, block_size=4), {"x": u8(3, 4, 6)},
                 {"s": s, "z": zp}, opset=21)
    for xd in (x, np.abs(x), -np.abs(x)):
        vs_reference(helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"]), {"x": xd}, opset=11, atol=0)
    # integer products: exact (K = 300 exceeds float32's integers)
    a, b, za, zb = u8(2, 5, 300), u8(300, 7), u8(), u8()
    vs_reference(helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"]), {"a": a, "b": b},
                 {"za": za, "zb": zb}, opset=10, atol=0, rtol=0)
    # (y's scale from the products' range: ONNX's reference wraps where the operator saturates)
    acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    ys = np.float32(np.abs(acc).max() * 0.02 * 0.03 / 120)
    vs_reference(helper.make_node("QLinearMatMul", ["a", "as", "za", "b", "bs", "zb", "ys", "zy"], ["y"]),
                 {"a": a, "b": b}, {"as": np.float32(0.02), "za": za, "bs": np.float32(0.03), "zb": zb,
                                    "ys": ys, "zy": np.uint8(128)}, opset=10, atol=0, rtol=0)
    # per-row zero points of a and per-column ones of b, against the definition
    zr, zc = u8(5), u8(7)
    m = model([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
              [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape[1:]),
               helper.make_tensor_value_info("b", TensorProto.UINT8, b.shape)],
              [helper.make_tensor_value_info("y", TensorProto.INT32, (5, 7))],
              [numpy_helper.from_array(zr, "za"), numpy_helper.from_array(zc, "zb")], opset=10)
    (y,) = smelt.onnx.load(m)(a[0], b)
    ref = (a[0].astype(np.int64) - zr[:, None].astype(np.int64)) @ (b.astype(np.int64) - zc[None, :].astype(np.int64))
    np.testing.assert_array_equal(y, ref.astype(np.int32))
    xq, wq = u8(2, 4, 7, 6), u8(3, 4, 3, 2)
    vs_reference(helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], pads=[1, 0, 1, 1], strides=[2, 1]),
                 {"x": xq, "w": wq}, {"zx": u8(), "zw": u8()}, opset=10, atol=0, rtol=0)
    vs_reference(helper.make_node("QLinearConv", ["x", "xs", "zx", "w", "ws", "zw", "ys", "zy", "b"], ["y"],
                                  pads=[1, 1, 1, 1]),
                 {"x": xq, "w": wq}, {"xs": np.float32(0.05), "zx": u8(), "ws": np.float32(0.02), "zw": u8(),
                                      "ys": np.float32(1.5), "zy": np.uint8(128),
                                      "b": rng.integers(-500, 500, 3).astype(np.int32)},
                 opset=10, atol=0, rtol=0)



def t_dft_stft():
    for complex_in in (0, 1):
        x = f32(2, 9, 3, 2 if complex_in else 1)
        sig = x[..., 0].astype(np.float64) + (1j * x[..., 1] if complex_in else 0)
        for length in (None, 6, 12):
            for inverse in (0, 1):
                for onesided in ((0, 1) if not inverse else (0,)):
                    n = length or 9
                    ref = (np.fft.ifft if inverse else np.fft.fft)(sig, n=n, axis=1)
                    if onesided:
                        ref = ref[:, :n // 2 + 1]
                    ref = np.stack([ref.real, ref.imag], -1)
                    ins, consts = (["x", "n", "a"], {"n": np.array(length, np.int64)}) if length else \
                        (["x", "", "a"], {})
                    consts["a"] = np.array(1, np.int64)
                    m = model([helper.make_node("DFT", ins, ["y"], inverse=inverse, onesided=onesided)],
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ref.shape)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()], opset=20)
                    (y,) = smelt.onnx.load(m)(x)
                    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    # STFT: frames of a window, the last ones padded with zeros
    x = f32(2, 40, 1)
    win = np.hanning(10).astype(np.float32)
    for step, flen in ((4, 10), (7, 12)):
        ref = []
        for f in range(1 + (40 - flen) // step):
            fr = np.zeros((2, 10))
            seg = x[:, f * step: f * step + 10, 0]
            fr[:, :seg.shape[1]] = seg
            ref.append(np.fft.rfft(fr * win, n=flen, axis=1))
        ref = np.stack(ref, 1)
        ref = np.stack([ref.real, ref.imag], -1)
        m = model([helper.make_node("STFT", ["x", "s", "w", "l"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ref.shape)],
                  [numpy_helper.from_array(np.array(step, np.int64), "s"), numpy_helper.from_array(win, "w"),
                   numpy_helper.from_array(np.array(flen, np.int64), "l")], opset=17)
        (y,) = smelt.onnx.load(m)(x)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)



def t_narrow_integers():
    """int8, int16, uint16, uint32 carried in int64: chains where the
    narrow type wraps, against NumPy computing in that type"""
    T = {np.int8: TensorProto.INT8, np.int16: TensorProto.INT16, np.uint16: TensorProto.UINT16,
         np.uint32: TensorProto.UINT32}
    for dt in (np.int8, np.int16, np.uint16, np.uint32):
        info = np.iinfo(dt)
        a = rng.integers(info.min, int(info.max) + 1, (4, 5), dtype=np.int64).astype(dt)
        b = rng.integers(info.min, int(info.max) + 1, (4, 5), dtype=np.int64).astype(dt)
        b[b == 0] = 1
        x = (f32(4, 5) * 3 * float(info.max) / 4).astype(np.float32)
        nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Sub", ["s", "a"], ["d"]),
                 helper.make_node("Max", ["s", "b"], ["mx"]), helper.make_node("Div", ["a", "b"], ["q"]),
                 helper.make_node("Mod", ["a", "b"], ["md"], fmod=1 if info.min < 0 else 0),
                 helper.make_node("BitwiseXor", ["s", "b"], ["bx"]), helper.make_node("BitwiseNot", ["s"], ["bn"]),
                 helper.make_node("Cast", ["x"], ["c"], to=T[dt]), helper.make_node("Less", ["s", "a"], ["lt"]),
                 helper.make_node("ReduceSum", ["s"], ["rs"], keepdims=0)]
        outs = {"s": a + b, "d": a + b - a, "mx": np.maximum(a + b, b), "lt": (a + b) < a,
                "bx": (a + b) ^ b, "bn": ~(a + b), "rs": np.sum(a + b, axis=None, dtype=dt),
                "q": (np.trunc(a.astype(np.float64) / b).astype(np.int64)).astype(dt),
                "md": np.fmod(a, b) if info.min < 0 else np.mod(a, b),
                "c": np.trunc(x).astype(np.int64).astype(dt)}
        if dt != np.uint32:
            nodes.append(helper.make_node("Mul", ["a", "b"], ["p"]))
            outs["p"] = a * b
        if info.min == 0:
            sh = rng.integers(0, info.bits, (4, 5)).astype(dt)
            nodes.append(helper.make_node("BitShift", ["a", "sh"], ["shl"], direction="LEFT"))
            outs["shl"] = a << sh
        else:
            nodes.append(helper.make_node("Neg", ["s"], ["ng"]))
            outs["ng"] = -(a + b)
        feeds = {"a": a, "b": b, "x": x}
        if info.min == 0:
            feeds["sh"] = sh
        with np.errstate(all="ignore"):
            m = model(nodes, [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                              for k, v in feeds.items()],
                      [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                                     np.shape(v)) for k, v in outs.items()], opset=18)
        got = smelt.onnx.load(m)(**feeds)
        for (k, ref), g in zip(outs.items(), got):
            assert g.dtype == np.asarray(ref).dtype, (dt, k, g.dtype)
            np.testing.assert_array_equal(g, ref, err_msg="%s %s" % (dt.__name__, k))
    # quantization to int8 / int16 / uint16, dequantization from them
    x = f32(3, 8) * 300
    for dt in (np.int8, np.int16, np.uint16):
        zp = np.array(rng.integers(np.iinfo(dt).min // 2, np.iinfo(dt).max // 2), dt)
        vs_reference(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"]), {"x": x},
                     {"s": np.float32(0.7), "z": zp}, opset=21, atol=0)
        q = rng.integers(np.iinfo(dt).min, int(np.iinfo(dt).max) + 1, (3, 8)).astype(dt)
        vs_reference(helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"]), {"x": q},
                     {"s": np.float32(0.7), "z": zp}, opset=21)
    # refused where an int64 intermediate could overflow before the wrap
    m = model([helper.make_node("Mul", ["a", "a"], ["y"])],
              [helper.make_tensor_value_info("a", TensorProto.UINT32, [3])],
              [helper.make_tensor_value_info("y", TensorProto.UINT32, [3])])
    refused(m, "uint32", what="no error at load for a uint32 product")



# ---- types smelt has no dtype for, carried (python/smelt/onnx/_exotic.py): float8, bfloat16, int4, uint64
F8_KINDS = (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ)


def cast_model(src, dst, n, **attrs):
    """Cast x (src, [n]) to dst; and the same cast of a constant x (folded
    by NumPy at load) as a second output"""
    return model([helper.make_node("Cast", ["x"], ["y"], to=dst, **attrs)],
                 [helper.make_tensor_value_info("x", src, [n])], [helper.make_tensor_value_info("y", dst, [n])],
                 opset=19)


def f8_ref_to_float(t, bits):
    from onnx.numpy_helper import float8e4m3_to_float32, float8e5m2_to_float32
    return {TensorProto.FLOAT8E4M3FN: lambda b: float8e4m3_to_float32(b),
            TensorProto.FLOAT8E4M3FNUZ: lambda b: float8e4m3_to_float32(b, uz=True),
            TensorProto.FLOAT8E5M2: lambda b: float8e5m2_to_float32(b),
            TensorProto.FLOAT8E5M2FNUZ: lambda b: float8e5m2_to_float32(b, fn=True, uz=True)}[t](bits)


def f8_ref_from_float(t, x, sat):
    from onnx.helper import float32_to_float8e4m3 as e4, float32_to_float8e5m2 as e5
    f = {TensorProto.FLOAT8E4M3FN: lambda v: e4(v, saturate=sat), TensorProto.FLOAT8E4M3FNUZ:
         lambda v: e4(v, uz=True, saturate=sat), TensorProto.FLOAT8E5M2: lambda v: e5(v, saturate=sat),
         TensorProto.FLOAT8E5M2FNUZ: lambda v: e5(v, fn=True, uz=True, saturate=sat)}[t]
    return np.array([f(float(v)) for v in x], np.uint8)


def same_bits_or_nan(got, ref):
    """float arrays equal bit for bit, NaN for NaN (a NaN's sign and payload
    aside)"""
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan), np.nonzero(np.isnan(got) != nan)
    g, r = got[~nan], ref[~nan]
    bad = np.nonzero(g.view(np.uint8 if g.itemsize == 1 else np.uint16 if g.itemsize == 2 else np.uint32) !=
                     r.view(np.uint8 if r.itemsize == 1 else np.uint16 if r.itemsize == 2 else np.uint32))[0]
    assert bad.size == 0, "%d differ, first %r: %r != %r" % (bad.size, bad[:4], g[bad[:4]], r[bad[:4]])


def t_float8_to_float():
    """every one of the 256 bit patterns of each float8 kind to float32 and
    float16, against onnx's reference conversion"""
    from onnx import _custom_element_types as cet
    dts = {TensorProto.FLOAT8E4M3FN: cet.float8e4m3fn, TensorProto.FLOAT8E4M3FNUZ: cet.float8e4m3fnuz,
           TensorProto.FLOAT8E5M2: cet.float8e5m2, TensorProto.FLOAT8E5M2FNUZ: cet.float8e5m2fnuz}
    bits = np.arange(256, dtype=np.uint8)
    for t in F8_KINDS:
        ref = f8_ref_to_float(t, bits)
        for dst, npdt in ((TensorProto.FLOAT, np.float32), (TensorProto.FLOAT16, np.float16)):
            (got,) = smelt.onnx.load(cast_model(t, dst, 256))(bits.view(dts[t]))
            same_bits_or_nan(got, ref.astype(npdt))
        assert int(np.isnan(ref).sum()) == {TensorProto.FLOAT8E4M3FN: 2, TensorProto.FLOAT8E5M2: 6}.get(t, 1)
    # data movement on the bits: Transpose, Concat with an initializer and a Constant, Gather, then a Cast
    t = TensorProto.FLOAT8E5M2
    xb = rng.integers(0, 256, (3, 4)).astype(np.uint8)
    cb = rng.integers(0, 256, (4, 2)).astype(np.uint8)
    kb = rng.integers(0, 256, (4, 1)).astype(np.uint8)
    m = model([helper.make_node("Transpose", ["x"], ["xt"]),
               helper.make_node("Constant", [], ["k"],
                                value=helper.make_tensor("kv", t, [4, 1], kb.tobytes(), raw=True)),
               helper.make_node("Concat", ["xt", "c", "k"], ["xc"], axis=1),
               helper.make_node("Gather", ["xc", "i"], ["xg"], axis=0),
               helper.make_node("Cast", ["xg"], ["y"], to=TensorProto.FLOAT)],
              [helper.make_tensor_value_info("x", t, [3, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])],
              [helper.make_tensor("c", t, [4, 2], cb.tobytes(), raw=True),  # (the bits; a list would be values)
               numpy_helper.from_array(np.array([3, 1], np.int64), "i")], opset=19)
    (got,) = smelt.onnx.load(m)(xb.view(dts[t]))
    same_bits_or_nan(got, f8_ref_to_float(t, np.concatenate([xb.T, cb, kb], axis=1)[[3, 1]]))


def f32_specials_and_random(n):
    """random float32 of every magnitude and sign, ties and near-ties of
    float8 and bfloat16 (few low bits set), subnormals, +-0, +-inf, NaN"""
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    bits[: n // 4] &= np.uint32(0xFFF80000)             # ties and exact values of float8 (and bf16)
    bits[n // 4: n // 2] &= np.uint32(0xFFFF8000)       # bf16 ties
    bits[n // 2: n // 2 + 64] |= np.uint32(1)           # just above a tie
    x = bits.view(np.float32).copy()
    x[n // 2 + 64: 3 * n // 4] = (rng.standard_normal(n // 4 - 64) * 10.0 ** rng.integers(-12, 6, n // 4 - 64)) \
        .astype(np.float32)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 2.0 ** -10, 2.0 ** -17, 448, 464, 465, 480,
                   495.9, 496, 240, 57344, 61439, 61440, 65536, 3.4e38, -3.4e38, 2.0 ** -126, 2.0 ** -133,
                   3 * 2.0 ** -134, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8], np.float32)
    x[-len(sp):] = sp
    return np.where(np.isnan(x), np.float32(np.nan), x)  # (a NaN's sign is not read: positive NaNs only)


def t_float_to_float8():
    """float32 (random, ties, subnormals, overflow, +-inf, NaN) and float16
    to each float8 kind, saturate 1 and 0, against onnx's reference (every
    output bit), traced and folded at load alike"""
    x = f32_specials_and_random(4096)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16)
    for t in F8_KINDS:
        for sat in (1, 0):
            for src, v in ((TensorProto.FLOAT, x), (TensorProto.FLOAT16, h)):
                ref = f8_ref_from_float(t, v.astype(np.float32), bool(sat))
                (got,) = smelt.onnx.load(cast_model(src, t, len(v), saturate=sat))(v)
                bad = np.nonzero(got.view(np.uint8) != ref)[0]
                assert bad.size == 0, (t, sat, v[bad[:4]], got.view(np.uint8)[bad[:4]], ref[bad[:4]])
            # folded: the cast of an initializer, computed by NumPy at load with the same code
            m = model([helper.make_node("Cast", ["c"], ["y"], to=t, saturate=sat)], [],
                      [helper.make_tensor_value_info("y", t, [64])], [numpy_helper.from_array(x[-64:], "c")],
                      opset=19)
            (got,) = smelt.onnx.load(m)()
            assert np.array_equal(got.view(np.uint8), f8_ref_from_float(t, x[-64:], bool(sat))), (t, sat)


def t_bfloat16():
    """bfloat16 to float32: every one of the 65536 patterns (the reference:
    the bits shifted up); float32 to bfloat16: round to nearest even (onnx's
    float32_to_bfloat16 without truncation), NaN 0x7FC0, on random values,
    ties, subnormals and specials"""
    from onnx import _custom_element_types as cet
    from onnx.helper import float32_to_bfloat16
    bits = np.arange(65536, dtype=np.uint32)
    ref = (bits << 16).view(np.float32)
    (got,) = smelt.onnx.load(cast_model(TensorProto.BFLOAT16, TensorProto.FLOAT, 65536))(
        bits.astype(np.uint16).view(cet.bfloat16))
    same_bits_or_nan(got, ref)
    x = f32_specials_and_random(8192)
    (got,) = smelt.onnx.load(cast_model(TensorProto.FLOAT, TensorProto.BFLOAT16, len(x)))(x)
    assert got.dtype == cet.bfloat16 and got.dtype.descr[0][0] == "bfloat16"
    ref = np.array([float32_to_bfloat16(float(v)) for v in x], np.uint16)
    bad = np.nonzero(got.view(np.uint16) != ref)[0]
    assert bad.size == 0, (x[bad[:4]], got.view(np.uint16)[bad[:4]], ref[bad[:4]])


def t_int4_and_quantization():
    """casts to int4 / uint4 clip then round half to even (onnx 1.17's
    reference); QuantizeLinear to int4, uint4 and float8 and back, against
    the reference"""
    from onnx import _custom_element_types as cet
    x = np.concatenate([f32(200) * 6, np.arange(-10, 10.5, 0.5, dtype=np.float32)])
    for t, dt, lo, hi in ((TensorProto.INT4, cet.int4, -8, 7), (TensorProto.UINT4, cet.uint4, 0, 15)):
        (got,) = smelt.onnx.load(cast_model(TensorProto.FLOAT, t, len(x)))(x)
        assert got.dtype == dt and got.dtype.descr[0][0] == dt.descr[0][0]
        np.testing.assert_array_equal(got.view(dt.base), np.rint(np.clip(x, lo, hi)))
        back = smelt.onnx.load(cast_model(t, TensorProto.FLOAT, len(x)))(got)[0]
        np.testing.assert_array_equal(back, np.rint(np.clip(x, lo, hi)))
    from onnx.reference import ReferenceEvaluator
    xq = f32(4, 6) * 40
    for t, zp in ((TensorProto.INT4, -2), (TensorProto.UINT4, 3), (TensorProto.FLOAT8E4M3FN, 0),
                  (TensorProto.FLOAT8E5M2, 0)):
        z = helper.make_tensor("z", t, [], [zp])
        sc_ = numpy_helper.from_array(np.float32(1.7), "s")
        mq = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                   [helper.make_tensor_value_info("q", t, [4, 6])], [sc_, z], opset=21)
        (ref,) = ReferenceEvaluator(mq).run(None, {"x": xq})  # (int4 comes back as plain int8 / uint8)
        (got,) = smelt.onnx.load(mq)(xq)
        base = np.int8 if t == TensorProto.INT4 else np.uint8
        assert np.array_equal(got.view(base), ref.view(base)), (t, got.view(base), ref.view(base))
        md = model([helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                   [helper.make_tensor_value_info("q", t, [4, 6])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])], [sc_, z], opset=21)
        (ref_y,) = ReferenceEvaluator(md).run(None, {"q": got})
        np.testing.assert_array_equal(smelt.onnx.load(md)(got)[0], ref_y)
    # output_dtype instead of a zero point; float8 unsaturated
    for t, sat in ((TensorProto.INT4, 1), (TensorProto.UINT4, 1), (TensorProto.FLOAT8E5M2FNUZ, 0),
                   (TensorProto.FLOAT8E4M3FN, 0)):
        mq = model([helper.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=t, saturate=sat)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                   [helper.make_tensor_value_info("q", t, [4, 6])],
                   [numpy_helper.from_array(np.float32(0.3), "s")], opset=21)
        (ref,) = ReferenceEvaluator(mq).run(None, {"x": xq * 100})
        (got,) = smelt.onnx.load(mq)(xq * 100)
        base = np.int8 if t == TensorProto.INT4 else np.uint8
        assert np.array_equal(got.view(base), ref.view(base)), (t, got.view(base), ref.view(base))


def t_uint64():
    """uint64 carried in int64: Max, Min, shifts, bitwise operators, Mod,
    comparisons, + - * on values from 2^63 up, against NumPy's uint64;
    Pow's uint64 exponent; casts to and from float"""
    n = 64
    big = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
    a = np.concatenate([big[:n // 2] | np.uint64(2 ** 63), big[n // 2:] >> np.uint64(40),
                        np.array([0, 1, 2 ** 63, 2 ** 64 - 1, 2 ** 63 - 1, 7], np.uint64)])
    b = np.concatenate([big[::-1][:n // 2] >> np.uint64(rng.integers(0, 64)), big[:n // 2] | np.uint64(2 ** 63),
                        np.array([2 ** 64 - 1, 2 ** 63, 1, 3, 0, 2 ** 63 + 5], np.uint64)])
    s = rng.integers(0, 70, len(a)).astype(np.uint64)
    s[:3] = [0, 63, 2 ** 63]
    U = TensorProto.UINT64
    ops = {"mx": ("Max", {}, np.maximum(a, b)), "mn": ("Min", {}, np.minimum(a, b)),
           "an": ("BitwiseAnd", {}, a & b), "or": ("BitwiseOr", {}, a | b), "xo": ("BitwiseXor", {}, a ^ b),
           "md": None, "ad": ("Add", {}, a + b), "sb": ("Sub", {}, a - b),
           "mu": ("Mul", {}, a * b), "lt": ("Less", {}, a < b), "ge": ("GreaterOrEqual", {}, a >= b),
           "eq": ("Equal", {}, a == b)}
    with np.errstate(all="ignore"):
        shl = np.where(s < 64, a << np.minimum(s, np.uint64(63)), np.uint64(0))
        shr = np.where(s < 64, a >> np.minimum(s, np.uint64(63)), np.uint64(0))
        ops["md"] = ("Mod", {}, np.where(b == 0, np.uint64(0), np.mod(a, np.where(b == 0, np.uint64(1), b))))
    nodes = [helper.make_node(o, ["a", "b"], [k], **at) for k, (o, at, _) in ops.items()]
    nodes += [helper.make_node("BitShift", ["a", "s"], ["sl"], direction="LEFT"),
              helper.make_node("BitShift", ["a", "s"], ["sr"], direction="RIGHT"),
              helper.make_node("Cast", ["a"], ["f64"], to=TensorProto.DOUBLE),
              helper.make_node("Cast", ["a"], ["f32"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["f64"], ["back"], to=U)]  # (2^64 - 1 becomes 2^64: out of range, as NumPy's)
    outs = {k: r for k, (_, _, r) in ops.items()}
    with np.errstate(all="ignore"):
        outs.update(sl=shl, sr=shr, f64=a.astype(np.float64), f32=a.astype(np.float32),
                    back=a.astype(np.float64).astype(np.uint64))
    m = model(nodes, [helper.make_tensor_value_info(k, U, [len(a)]) for k in "abs"],
              [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), [len(a)])
               for k, v in outs.items()], opset=18)
    got = smelt.onnx.load(m)(a, b, s)
    for (k, ref), g in zip(outs.items(), got):
        assert g.dtype == ref.dtype, (k, g.dtype, ref.dtype)
        if k == "back":
            g, ref = g[a < np.uint64(2 ** 64 - 1024)], ref[a < np.uint64(2 ** 64 - 1024)]
        np.testing.assert_array_equal(g, ref, err_msg=k)
    # Pow of float32 to a uint64 exponent: NumPy's (through float64) where the exponent is exact there; from
    # 2^53 the parity decides the sign of a negative base (NumPy's rounded float64 exponent loses it)
    base = np.array([-1, -1, 1.0000001, 0.9999999, -2, 0.5, -0.0, 3], np.float32)
    ex = np.array([2 ** 63 + 1, 2 ** 64 - 2, 2 ** 60, 2 ** 60, 2 ** 63 + 3, 3, 2 ** 63 + 1, 20], np.uint64)
    m = model([helper.make_node("Pow", ["x", "e"], ["y"])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8]),
               helper.make_tensor_value_info("e", U, [8])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    (y,) = smelt.onnx.load(m)(base, ex)
    np.testing.assert_array_equal(y, np.array([-1, 1, np.inf, 0, -np.inf, 0.125, -0.0, 3486784401], np.float32))
    assert np.signbit(y[6])


def t_carried_types_refused():
    """operators that would compute on a carried type's bits are refused at
    load, naming the operator and the type"""
    m = model([helper.make_node("Add", ["a", "a"], ["y"], name="sum8")],
              [helper.make_tensor_value_info("a", TensorProto.FLOAT8E4M3FN, [3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [3])], opset=19)
    refused(m, "sum8", "Add", "float8e4m3fn", what="no error at load for Add on float8")
    m = model([helper.make_node("Div", ["a", "a"], ["y"], name="q64")],
              [helper.make_tensor_value_info("a", TensorProto.UINT64, [3])],
              [helper.make_tensor_value_info("y", TensorProto.UINT64, [3])])
    refused(m, "q64", "Div", "uint64", what="no error at load for Div on uint64")
    m = model([helper.make_node("Pow", ["x", "e"], ["y"], name="p64")],
              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3]),
               helper.make_tensor_value_info("e", TensorProto.UINT64, [3])],
              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3])])
    refused(m, "p64", "Pow", "float64", what="no error at load for Pow of float64 to uint64")


def t_training_optimizers():
    """Adagrad, Adam, Momentum (ai.onnx.preview.training) on two tensors,
    at t = 0 and t > 0, against ONNX's reference"""
    from onnx.reference import ReferenceEvaluator
    for op_type, per, attrs in (("Adagrad", 3, dict(decay_factor=0.1, epsilon=1e-3, norm_coefficient=0.01)),
                                ("Adam", 4, dict(alpha=0.9, beta=0.8, epsilon=1e-3, norm_coefficient=0.01,
                                                 norm_coefficient_post=0.02)),
                                ("Momentum", 3, dict(alpha=0.9, beta=0.7, norm_coefficient=0.01, mode="standard")),
                                ("Momentum", 3, dict(alpha=0.9, beta=0.7, norm_coefficient=0.01, mode="nesterov"))):
        tensors = [f32(3, 2) if k % 2 == 0 else f32(4) for k in range(2 * (per))]
        tensors = [np.abs(v) if (op_type == "Adagrad" and k >= 4) or (op_type == "Adam" and k >= 6) else v
                   for k, v in enumerate(tensors)]
        names = ["t%d" % k for k in range(len(tensors))]
        n_out = 2 * (per - 1)
        outs = ["o%d" % k for k in range(n_out)]
        for t in (0, 3):
            feeds = {"r": np.array(0.1, np.float32), "t": np.array(t, np.int64)}
            feeds.update(zip(names, tensors))
            node = helper.make_node(op_type, list(feeds), outs, domain="ai.onnx.preview.training", **attrs)
            g = helper.make_graph([node], "m", [helper.make_tensor_value_info(
                k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
                                  [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.preview.training", 1)])
            ref = ReferenceEvaluator(m).run(None, feeds)
            got = smelt.onnx.load(m)(*feeds.values())
            for r, o in zip(ref, got):
                np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6, err_msg="%s t=%d" % (op_type, t))



def t_more_ops():
    # Einsum with '...' and diagonals, against NumPy's einsum in float64
    for eq, shapes in (("...ii->...i", [(2, 3, 4, 4)]), ("ii", [(5, 5)]),
                       ("b...ij,b...jk->b...ik", [(2, 3, 4, 5), (2, 3, 5, 2)]), ("iij,jk", [(3, 3, 4), (4, 2)]),
                       ("...i,...i", [(3, 4), (4,)])):
        xs = [f32(*sh) for sh in shapes]
        ref = np.einsum(eq, *[x.astype(np.float64) for x in xs])
        m = model([helper.make_node("Einsum", ["x%d" % i for i in range(len(xs))], ["y"], equation=eq)],
                  [helper.make_tensor_value_info("x%d" % i, TensorProto.FLOAT, x.shape) for i, x in enumerate(xs)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ref.shape)], opset=12)
        (y,) = smelt.onnx.load(m)(*xs)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5, err_msg=eq)
    # Det (pivoting: a zero leading entry), MaxPool's Indices (both storage orders), MaxUnpool, Compress
    a = f32(3, 4, 4)
    a[0, 0, 0] = 0
    a[1] = a[1, [1, 0, 2, 3]] * 0 + a[1, [0, 0, 2, 3]]  # singular
    vs_reference(helper.make_node("Det", ["a"], ["d"]), {"a": a}, rtol=1e-4, atol=1e-5)
    x = f32(2, 3, 7, 6)
    x[0, 0, :2, :2] = 1.0  # ties in a window: the first position
    for so in (0, 1):
        vs_reference(helper.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=[3, 2], strides=[2, 2],
                                      pads=[1, 0, 1, 1], storage_order=so), {"x": x})
    # MaxUnpool: its indices address the shape the pool inverts ((n - 1) * stride + kernel - pads), placed at the
    # start of output_shape
    v, i = vs_reference(helper.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=[2, 2], strides=[2, 2]),
                        {"x": x[:, :, :6]})
    vs_reference(helper.make_node("MaxUnpool", ["v", "i", "s"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
                 {"v": v, "i": i}, {"s": np.array([2, 3, 8, 7], np.int64)})
    for axis in (None, 1):
        cond = rng.integers(0, 2, 5).astype(np.bool_)
        kw = {} if axis is None else {"axis": axis}
        vs_reference(helper.make_node("Compress", ["x", "c"], ["y"], **kw), {"x": f32(3, 6)}, {"c": cond})



def t_if():
    """If: branches reading the enclosing graph's values; a condition known
    at the trace runs one branch, one computed from the inputs selects"""
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 4])],
                               initializer=[numpy_helper.from_array(np.array(2, np.float32), "two")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 4])])
    x = f32(3, 4)
    # a condition from the data: both branches, a select
    m = model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
               helper.make_node("Greater", ["s", "zero"], ["c"]),
               helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
              [numpy_helper.from_array(np.array(0, np.float32), "zero")], opset=13)
    f = smelt.onnx.load(m)
    for sign in (1, -1):
        xs = np.abs(x) * sign
        np.testing.assert_array_equal(f(xs)[0], xs * 2 if sign > 0 else -xs)
    # a condition from a shape: one branch, whose outputs may differ in shape from the other's
    else2 = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [])])
    m = model([helper.make_node("Shape", ["x"], ["sh"]), helper.make_node("Size", ["sh"], ["r"]),
               helper.make_node("Equal", ["r", "two_i"], ["c"]),
               helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else2)],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
              [numpy_helper.from_array(np.array(2, np.int64), "two_i")], opset=13)
    np.testing.assert_array_equal(smelt.onnx.load(m)(x)[0], x * 2)



def seq_info(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_value_info(name, helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(elem, shape)))


def t_sequences():
    """Sequences: a list of arrays in, a list out; their operators against
    NumPy on Python lists; a new length is a new plan; positions out of range
    are an error naming the node"""
    body = helper.make_graph([helper.make_node("Mul", ["e", "e"], ["sq"])], "square",
                             [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])],
                             [helper.make_tensor_value_info("sq", TensorProto.FLOAT, [2, 3])])
    m = model([helper.make_node("SequenceMap", ["xs"], ["sqs"], body=body),
               helper.make_node("SequenceInsert", ["sqs", "t", "zero"], ["ins"]),   # at the front
               helper.make_node("SequenceErase", ["ins", "minus1"], ["er"]),        # the last one
               helper.make_node("SequenceAt", ["er", "minus1"], ["last"]),
               helper.make_node("SequenceLength", ["er"], ["n"]),
               helper.make_node("ConcatFromSequence", ["er"], ["cat"], axis=0),
               helper.make_node("ConcatFromSequence", ["er"], ["st"], axis=-1, new_axis=1),
               helper.make_node("SplitToSequence", ["t"], ["parts"], axis=1, keepdims=0)],
              [seq_info("xs", shape=[2, 3]), helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
              [seq_info("er", shape=[2, 3]), helper.make_tensor_value_info("last", TensorProto.FLOAT, [2, 3]),
               helper.make_tensor_value_info("n", TensorProto.INT64, []),
               helper.make_tensor_value_info("cat", TensorProto.FLOAT, ["r", 3]),
               helper.make_tensor_value_info("st", TensorProto.FLOAT, [2, 3, "n"]), seq_info("parts", shape=[2])],
              [numpy_helper.from_array(np.array(0, np.int64), "zero"),
               numpy_helper.from_array(np.array(-1, np.int64), "minus1")], opset=17)
    f = smelt.onnx.load(m)
    for n in (3, 4, 3):
        xs = [f32(2, 3) for _ in range(n)]
        t = f32(2, 3)
        er, last, ln, cat, st, parts = f(xs, t)
        ref = [t.astype(np.float64)] + [x.astype(np.float64) ** 2 for x in xs][:-1]
        assert isinstance(er, list) and len(er) == n and isinstance(parts, list) and len(parts) == 3, (er, parts)
        for a, r in zip(er, ref):
            assert a.dtype == np.float32 and a.shape == (2, 3)
            np.testing.assert_allclose(a, r, rtol=1e-6)
        np.testing.assert_allclose(last, ref[-1], rtol=1e-6)
        assert ln.dtype == np.int64 and ln.shape == () and int(ln) == n
        np.testing.assert_allclose(cat, np.concatenate(ref, 0), rtol=1e-6)
        np.testing.assert_allclose(st, np.stack(ref, -1), rtol=1e-6)
        for j, p in enumerate(parts):
            np.testing.assert_array_equal(p, t[:, j])
    assert f.stats()["plans"] == 2, f.stats()  # lengths 3 and 4
    # a sequence input's element dtype is checked at the call
    try:
        f([f32(2, 3).astype(np.float64)], t)
    except TypeError as e:
        assert "element 0" in str(e), e
    else:
        raise AssertionError("no TypeError for a float64 element")
    # a position out of range: an error naming the node, at the first call
    m = model([helper.make_node("SequenceAt", ["xs", "p"], ["y"], name="pick")],
              [seq_info("xs", shape=[4]), helper.make_tensor_value_info("p", TensorProto.INT64, [])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], opset=17)
    f = smelt.onnx.load(m)
    xs = [f32(4), f32(4)]
    np.testing.assert_array_equal(f(xs, np.array(-2, np.int64))[0], xs[0])
    for p in (2, -3):
        try:
            f(xs, np.array(p, np.int64))
        except IndexError as e:
            assert "'pick'" in str(e) and "SequenceAt" in str(e) and "position %d" % p in str(e), e
        else:
            raise AssertionError("no IndexError for position %d" % p)


def t_optionals():
    """Optionals: None in and out where empty; OptionalHasElement is known
    at the trace; OptionalGetElement of an empty one names the node"""
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))
    m = model([helper.make_node("OptionalHasElement", ["o"], ["has"]),
               helper.make_node("Identity", ["o"], ["same"]),
               helper.make_node("If", ["has"], ["y"], name="choose",
                                then_branch=helper.make_graph(
                                    [helper.make_node("OptionalGetElement", ["o"], ["v"], name="get"),
                                     helper.make_node("Add", ["v", "x"], ["t"])], "then", [],
                                    [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])]),
                                else_branch=helper.make_graph(
                                    [helper.make_node("Neg", ["x"], ["e"])], "else", [],
                                    [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])]))],
              [helper.make_value_info("o", opt_t), helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
              [helper.make_tensor_value_info("has", TensorProto.BOOL, []), helper.make_value_info("same", opt_t),
               helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], opset=18)
    f = smelt.onnx.load(m)
    x, o = f32(3), f32(3)
    has, same, y = f(o, x)
    assert has.dtype == np.bool_ and has.shape == () and bool(has)
    np.testing.assert_array_equal(same, o)
    np.testing.assert_allclose(y, o.astype(np.float64) + x, rtol=1e-6)
    has, same, y = f(None, x)
    assert not bool(has) and same is None
    np.testing.assert_array_equal(y, -x)
    m = model([helper.make_node("OptionalGetElement", ["o"], ["v"], name="unwrap")],
              [helper.make_value_info("o", opt_t)], [helper.make_tensor_value_info("v", TensorProto.FLOAT, [3])],
              opset=18)
    try:
        smelt.onnx.load(m)(None)
    except ValueError as e:
        assert "'unwrap'" in str(e) and "empty" in str(e), e
    else:
        raise AssertionError("no error for an empty optional")


def t_scan():
    """Scan (opset 9+) unrolled: reverse input and output directions, other
    axes, two states, against a NumPy loop in float64"""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "W"], ["hw"]), helper.make_node("Add", ["hw", "xt"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h2"]), helper.make_node("Add", ["acc", "xt"], ["acc2"]),
         helper.make_node("Mul", ["h2", "ut"], ["y"])], "cell",
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 5]),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2, 5]),
         helper.make_tensor_value_info("xt", TensorProto.FLOAT, [2, 5]),
         helper.make_tensor_value_info("ut", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("h2", TensorProto.FLOAT, [2, 5]),
         helper.make_tensor_value_info("acc2", TensorProto.FLOAT, [2, 5]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    W = (f32(5, 5) * 0.5).astype(np.float32)
    T = 6
    m = model([helper.make_node("Scan", ["h0", "a0", "x", "u"], ["hT", "aT", "ys"], body=body, num_scan_inputs=2,
                                scan_input_axes=[1, 0], scan_input_directions=[1, 0],
                                scan_output_axes=[-1], scan_output_directions=[1])],
              [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [2, 5]),
               helper.make_tensor_value_info("a0", TensorProto.FLOAT, [2, 5]),
               helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, T, 5]),
               helper.make_tensor_value_info("u", TensorProto.FLOAT, [T, 2, 5])],
              [helper.make_tensor_value_info("hT", TensorProto.FLOAT, [2, 5]),
               helper.make_tensor_value_info("aT", TensorProto.FLOAT, [2, 5]),
               helper.make_tensor_value_info("ys", TensorProto.FLOAT, [2, 5, T])],
              [numpy_helper.from_array(W, "W")], opset=16)
    h0, a0, x, u = f32(2, 5), f32(2, 5), f32(2, T, 5), f32(T, 2, 5)
    hT, aT, ys = smelt.onnx.load(m)(h0, a0, x, u)
    h, a, outs = h0.astype(np.float64), a0.astype(np.float64), []
    for t in range(T):
        xt = x[:, T - 1 - t].astype(np.float64)  # input 0 read in reverse
        h = np.tanh(h @ W + xt)
        a = a + xt
        outs.append(h * u[t])
    ref_ys = np.stack(outs[::-1], axis=-1)  # output 0 written in reverse
    np.testing.assert_allclose(hT, h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(aT, a, rtol=1e-5, atol=1e-6)
    assert ys.shape == (2, 5, T), ys.shape
    np.testing.assert_allclose(ys, ref_ys, rtol=1e-5, atol=1e-6)


def t_if_sequences():
    """If on a condition computed from the inputs: both branches run and
    each tensor is selected, sequences element by element; branches whose
    sequences differ in length are an error naming the node"""
    def branch(name, op, n):
        nodes = [helper.make_node(op, ["x"], ["%s%d" % (name, i)]) for i in range(n)]
        nodes.append(helper.make_node("SequenceConstruct", ["%s%d" % (name, i) for i in range(n)], [name]))
        return helper.make_graph(nodes, name, [], [seq_info(name, shape=[4])])

    def m(n_else):
        return model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                      helper.make_node("Greater", ["s", "zero"], ["c"]),
                      helper.make_node("If", ["c"], ["y"], name="fork", then_branch=branch("t", "Exp", 2),
                                       else_branch=branch("e", "Neg", n_else))],
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [seq_info("y", shape=[4])],
                     [numpy_helper.from_array(np.array(0, np.float32), "zero")], opset=16)
    f = smelt.onnx.load(m(2))
    x = f32(4)
    for xs in (np.abs(x), -np.abs(x)):
        y = f(xs)[0]
        ref = np.exp(xs.astype(np.float64)) if xs.sum() > 0 else -xs
        assert isinstance(y, list) and len(y) == 2
        for v in y:
            np.testing.assert_allclose(v, ref, rtol=1e-6)
    assert f.stats()["plans"] == 1  # the condition is not part of the signature
    try:
        smelt.onnx.load(m(3))(x)
    except smelt.UnsupportedError as e:
        assert "'fork'" in str(e) and "sequence" in str(e), e
    else:
        raise AssertionError("no error for branches of different lengths")


def loop_model(m_input, cond_from_state=False, name="repeat"):
    """a Loop doubling a state and collecting it; its trip count an input"""
    body_nodes = [helper.make_node("Add", ["v", "v"], ["v2"]), helper.make_node("Identity", ["v2"], ["sc"])]
    if cond_from_state:  # while sum(v) < 100
        body_nodes += [helper.make_node("ReduceSum", ["v2"], ["s"], keepdims=0),
                       helper.make_node("Less", ["s", "hundred"], ["c2"])]
    else:
        body_nodes.append(helper.make_node("Identity", ["c"], ["c2"]))
    body = helper.make_graph(body_nodes, "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v", TensorProto.FLOAT, [3])],
                             [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v2", TensorProto.FLOAT, [3]),
                              helper.make_tensor_value_info("sc", TensorProto.FLOAT, [3])])
    return model([helper.make_node("Loop", [m_input, "yes" if cond_from_state else "", "x"], ["y", "ys"], body=body,
                                   name=name)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])]
                 + ([helper.make_tensor_value_info("m", TensorProto.INT64, [])] if m_input == "m" else []),
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
                  helper.make_tensor_value_info("ys", TensorProto.FLOAT, ["n", 3])],
                 [numpy_helper.from_array(np.array(100, np.float32), "hundred"),
                  numpy_helper.from_array(np.array(True), "yes")]
                 + ([numpy_helper.from_array(np.array(20000, np.int64), "big")] if m_input == "big" else []),
                 opset=16)


def t_loop():
    """Loop unrolled when its trip count is known (a graph input made a
    static input: a new count is a new plan); a condition from loop-carried
    values is refused at load; more than 10,000 iterations is an error"""
    f = smelt.onnx.load(loop_model("m"))
    x = f32(3)
    for n in (3, 5, 3):
        y, ys = f(x, np.array(n, np.int64))
        np.testing.assert_allclose(y, x * 2.0 ** n, rtol=1e-6)
        np.testing.assert_allclose(ys, np.stack([x * 2.0 ** (k + 1) for k in range(n)]), rtol=1e-6)
    assert f.stats()["plans"] == 2, f.stats()
    # a value the body needs known (a Reshape's shape), carried from a graph input: a static input
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["sh"], ["sh2"]),
                              helper.make_node("Reshape", ["x", "sh"], ["r"]), helper.make_node("Add", ["r", "r"], ["o"])],
                             "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                      helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                      helper.make_tensor_value_info("sh", TensorProto.INT64, [2])],
                             [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("sh2", TensorProto.INT64, [2]),
                              helper.make_tensor_value_info("o", TensorProto.FLOAT, [None, None])])
    f = smelt.onnx.load(model([helper.make_node("Loop", ["two", "", "shape"], ["shf", "os"], body=body)],
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("shf", TensorProto.INT64, [2]),
                               helper.make_tensor_value_info("os", TensorProto.FLOAT, [2, None, None])],
                              [numpy_helper.from_array(np.array(2, np.int64), "two")], opset=16))
    assert f.static_inputs == (1,), f.static_inputs
    x6 = f32(6)
    for sh in ((2, 3), (3, 2)):
        shf, os_ = f(x6, np.array(sh, np.int64))
        np.testing.assert_array_equal(shf, sh)
        np.testing.assert_array_equal(os_, np.stack([x6.reshape(sh) * 2] * 2))
    refused(loop_model("", cond_from_state=True, name="until"), "'until'", "Loop", "loop-carried", "(v)")
    try:
        smelt.onnx.load(loop_model("big"))(x)
    except smelt.UnsupportedError as e:
        assert "'repeat'" in str(e) and "10000" in str(e), e
    else:
        raise AssertionError("no error for 20000 iterations")


def t_deform_conv():
    """DeformConv (groups, offset groups, mask, strides, pads, dilations;
    offsets reaching outside the input) against ONNX's reference"""
    x = f32(1, 4, 5, 6)
    for g, go, s_, d_, p_, with_mask in ((1, 1, [1, 1], [1, 1], [0, 0, 0, 0], False),
                                         (2, 2, [2, 1], [1, 2], [1, 0, 1, 1], True)):
        kh, kw = 2, 3
        oh = (5 + p_[0] + p_[2] - d_[0] * (kh - 1) - 1) // s_[0] + 1
        ow = (6 + p_[1] + p_[3] - d_[1] * (kw - 1) - 1) // s_[1] + 1
        w = f32(4, 4 // g, kh, kw)
        off = (f32(1, go * kh * kw * 2, oh, ow) * 1.5).astype(np.float32)
        feeds = {"x": x, "w": w, "o": off, "b": f32(4)}
        ins = ["x", "w", "o", "b"]
        if with_mask:
            feeds["m"] = rng.uniform(0, 1, (1, go * kh * kw, oh, ow)).astype(np.float32)
            ins.append("m")
        vs_reference(helper.make_node("DeformConv", ins, ["y"], group=g, offset_group=go, strides=s_, dilations=d_,
                                      pads=p_, kernel_shape=[kh, kw]), feeds, opset=19)


for name, fn in list(globals().items()):
    if name.startswith("t_") and callable(fn):
        check(name[2:], fn)
print("onnx-checks: %d checks, %d failed" % (checks, failed))
sys.exit(1 if failed else 0)
