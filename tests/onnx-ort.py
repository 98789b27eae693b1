#!/usr/bin/env python3
"""smelt.onnx against onnxruntime and against smelt's float64 reference.

    tests/onnx-ort.py [--no-ort]   (under build/ort-venv/bin/python: onnx + onnxruntime, pinned;
                                    scripts/onnx-conformance --setup-ort makes it)

Models: the ONNX file exported by scikit-learn (tests/onnx-models, made by
make-sklearn-model; also checked against scikit-learn's own predictions),
and the bench's ONNX workloads at small sizes (bench/onnx/models.py: mlp,
attention, the transformer encoder layer with and without its embedding
Gather, the conv block Conv + BatchNormalization + Relu), and operators
built as compositions (a ConvTranspose + Resize + GridSample block,
bidirectional LSTM and GRU with sequence lengths).  Fresh random inputs (the seed is printed; SMELT_TEST_SEED=N
repeats a run) plus special values where the model allows.  For each:

  - smelt's f32 result has ONNX's dtype and shape;
  - its error against the float64 reference (the same model with every
    float tensor made double, run by smelt) is at most 4x onnxruntime's
    error against that reference, or within a few f32 ulps of the output's
    scale;
  - smelt and onnxruntime agree within rtol 1e-4 (of the output's scale);
  - fused (opt_level 3) and unfused (opt_level 0) plans give the same bits;
    where a batch-norm folds into a conv's constant weights (opt_level >= 1:
    other roundings), the unfused plan is opt_level 1's, and opt_level 0's
    error against the reference is at most 4x opt_level 3's.

Without onnxruntime the comparisons with it are skipped, counted and
printed, never passed.  Last line: "onnx-ort: N checks, F failed, S skipped".
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench", "onnx"))
import smelt  # noqa: E402
import smelt.onnx  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import models  # noqa: E402

ort, ORT_WHY = None, "--no-ort"
if "--no-ort" not in sys.argv[1:]:
    try:
        import onnxruntime as ort
    except ImportError as e:
        ORT_WHY = str(e)

SEED = int(os.environ.get("SMELT_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
print("onnx-ort: seed %d (SMELT_TEST_SEED=%d repeats this run); onnxruntime %s"
      % (SEED, SEED, ort.__version__ if ort else "absent"))
rng = np.random.default_rng(SEED)
n_ok = n_fail = n_skip = 0


def check(cond, what):
    global n_ok, n_fail
    if cond:
        n_ok += 1
    else:
        n_fail += 1
        print("FAIL", what)


def skip(what):
    global n_skip
    n_skip += 1
    print("SKIP", what)


def ort_run(m, feeds):
    so = ort.SessionOptions()
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def compare(name, m, feeds, extra_ref=None, folds=0):
    """folds: the convolutions whose batch-norm smelt folds into the weights
    at opt_level >= 1 (other roundings than opt_level 0's: the unfused plan
    compared bit for bit is then opt_level 1's, opt_level 0's within the
    tolerance)."""
    try:
        f = smelt.onnx.load(m)
    except smelt.onnx.UnsupportedOperator as e:
        skip("%s: smelt.onnx refuses it at load: %s" % (name, e))
        return
    outs = f(**feeds)
    f0 = smelt.onnx.load(m, opt_level=1 if folds else 0)
    outs0 = f0(**feeds)
    check(f.stats()["last"]["conv_folded"] == folds, "%s: %d convolutions folded, expected %d"
          % (name, f.stats()["last"]["conv_folded"], folds))
    outs00 = smelt.onnx.load(m, opt_level=0)(**feeds) if folds else outs0
    d = models.to_double(m)
    ref = smelt.onnx.load(d)(**{k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()})
    ro = ort_run(m, feeds) if ort else None
    kern = f.stats()["last"]["kernels"]
    for j, (y, y0, y00, r) in enumerate(zip(outs, outs0, outs00, ref)):
        o = m.graph.output[j]
        want = onnx.helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)
        check(y.dtype == want and y.shape == r.shape, "%s output %d: %s%s, the reference %s%s"
              % (name, j, y.dtype, y.shape, want, r.shape))
        check(np.array_equal(y, y0, equal_nan=True), "%s output %d: fused and unfused plans differ (max %g)"
              % (name, j, np.max(np.abs(y.astype(np.float64) - y0))))
        scale = max(float(np.max(np.abs(r))), 1e-30)
        es = float(np.max(np.abs(y - r))) / scale
        floor = 64 * np.finfo(np.float32).eps
        e0 = float(np.max(np.abs(y00 - r))) / scale
        check(e0 <= max(4 * es, floor), "%s output %d: opt_level 0's error %.3g, opt_level 3's %.3g"
              % (name, j, e0, es))
        if ro is None:
            check(es <= floor * 4, "%s output %d: error %.3g of the output's scale against the float64 reference"
                  % (name, j, es))
            skip("%s output %d: the comparison with onnxruntime (%s)" % (name, j, ORT_WHY))
            print("  %-22s kernels %3d  smelt err %.2e  (no onnxruntime)" % (name, kern, es))
            continue
        yo = ro[j]
        eo = float(np.max(np.abs(yo - r))) / scale
        eso = float(np.max(np.abs(y - yo))) / scale
        check(yo.dtype == y.dtype and yo.shape == y.shape, "%s output %d: onnxruntime gives %s%s, smelt %s%s"
              % (name, j, yo.dtype, yo.shape, y.dtype, y.shape))
        check(es <= max(4 * eo, floor), "%s output %d: smelt's error %.3g against the float64 reference, "
              "onnxruntime's %.3g (of the output's scale %.3g)" % (name, j, es, eo, scale))
        check(eso <= 1e-4, "%s output %d: smelt and onnxruntime differ by %.3g of the output's scale" % (name, j, eso))
        print("  %-22s kernels %3d  max error / scale: smelt %.2e  onnxruntime %.2e  smelt-ort %.2e"
              % (name, kern, es, eo, eso))
    if extra_ref is not None:
        extra_ref(outs)


# ---- an ONNX file exported by scikit-learn (skl2onnx) ----------------------------------
sk = onnx.load(os.path.join(ROOT, "tests", "onnx-models", "sklearn_pca_mlp.onnx"))
data = np.load(os.path.join(ROOT, "tests", "onnx-models", "sklearn_pca_mlp.npz"))
check({o.domain for o in sk.graph.node} <= {""} and sk.producer_name == "skl2onnx",
      "the scikit-learn model is skl2onnx's, in the default domain")


def sk_pred(outs):
    pred = outs[0].reshape(-1).astype(np.float64)
    err = np.max(np.abs(pred - data["pred"])) / np.max(np.abs(data["pred"]))
    check(err < 1e-5, "scikit-learn model: smelt's predictions differ from scikit-learn's by %.3g (relative)" % err)
    print("  %-22s smelt vs scikit-learn's predict (float64): %.2e" % ("sklearn_pca_mlp", err))


compare("sklearn_pca_mlp", sk, {"X": data["X"]}, sk_pred)
Xr = rng.standard_normal((37, 10)).astype(np.float32) * 0.05  # another batch size: a new signature
Xr[0] = 0
Xr[1, :] = [1e3, -1e3, 0, -0.0, 1e-30, 5, -5, 0.1, 2, 3]  # tanh saturated
compare("sklearn_pca_mlp(rand)", sk, {"X": Xr})

# ---- the bench's ONNX workloads, small --------------------------------------------------
m, feeds = models.make_mlp(rng, rows=33, d=64, h=256)
feeds["x"][0] = 0  # a row of zeros: layernorm of the residual alone
feeds["x"][1] *= 100
compare("mlp", m, feeds)
m, feeds = models.make_attention(rng, batch=2, heads=3, seq=40, dh=16)
feeds["q"][0, 0, 0] = 30  # a peaked softmax row
compare("attention", m, feeds)
m, feeds = models.make_encoder(rng, batch=3, seq=24, d=48, heads=6, vocab=50, gather=False)
compare("encoder (no gather)", m, feeds)
m, feeds = models.make_encoder(rng, batch=3, seq=24, d=48, heads=6, vocab=50, gather=True)
compare("encoder (gather)", m, feeds)
m, feeds = models.make_conv_block(rng, batch=2, c=8, hw=13, o=12)
compare("conv block", m, feeds, folds=1)

# ---- operators smelt.onnx builds as compositions: a decoder block (ConvTranspose, Resize, GridSample), recurrent
# layers (bidirectional, with sequence lengths) -----------------------------------------------------------
H = onnx.helper
TP = onnx.TensorProto


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def one_node_model(nodes, feeds, outs, inits, opset=20):
    g = H.make_graph(nodes, "m", [H.make_tensor_value_info(k, H.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                                  for k, v in feeds.items()],
                     [H.make_tensor_value_info(o, TP.FLOAT, None) for o in outs],
                     initializer=[onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return H.make_model(g, opset_imports=[H.make_opsetid("", opset)])


m = one_node_model([H.make_node("ConvTranspose", ["x", "w", "b"], ["t"], strides=[2, 2], pads=[1, 1, 0, 0],
                                output_padding=[1, 0]),
                    H.make_node("Relu", ["t"], ["r"]),
                    H.make_node("Resize", ["r", "", "sc"], ["z"], mode="cubic", exclude_outside=1),
                    H.make_node("GridSample", ["z", "g"], ["y"], mode="linear", padding_mode="reflection")],
                   {"x": f32(2, 6, 7, 5), "g": rng.uniform(-1.1, 1.1, (2, 9, 8, 2)).astype(np.float32)}, ["y"],
                   {"w": f32(6, 4, 3, 3) * 0.3, "b": f32(4), "sc": np.array([1, 1, 1.5, 0.75], np.float32)})
compare("decoder block", m, {"x": f32(2, 6, 7, 5), "g": rng.uniform(-1.1, 1.1, (2, 9, 8, 2)).astype(np.float32)})
for kind, G in (("LSTM", 4), ("GRU", 3)):
    T, nb, ni, hs = 7, 3, 5, 6
    inits = {"w": f32(2, G * hs, ni) * 0.5, "r": f32(2, G * hs, hs) * 0.5, "b": f32(2, 2 * G * hs) * 0.5}
    feeds = {"x": f32(T, nb, ni), "lens": rng.integers(1, T + 1, nb).astype(np.int32)}
    outs = ["y", "yh"] + (["yc"] if kind == "LSTM" else [])
    m = one_node_model([H.make_node(kind, ["x", "w", "r", "b", "lens"], outs, hidden_size=hs,
                                    direction="bidirectional", clip=2.0)], feeds, outs, inits, opset=14)
    compare("%s bidirectional" % kind, m, feeds)

print("onnx-ort: %d checks, %d failed, %d skipped" % (n_ok + n_fail, n_fail, n_skip))
sys.exit(1 if n_fail else 0)
