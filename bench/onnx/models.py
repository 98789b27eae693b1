"""ONNX models written with onnx.helper for the ONNX bench rows
(bench/onnx/bench_onnx.py) and the onnxruntime comparisons
(tests/onnx-ort.py): the bench's mlp and attention workloads (bench/bench.c
b_mlp, b_attention), a transformer encoder layer and a conv block (bench.c's
conv_bn_relu with its weights and batch-norm parameters initializers).

Each make_* returns (ModelProto, {input name: array}) with fresh random
inputs from rng; weights are initializers.
"""
import numpy as np
import onnx
from onnx import TensorProto as TP, helper, numpy_helper

OPSET = 17  # LayerNormalization is opset 17; every operator here is in onnxruntime's CPU kernels


def _model(nodes, name, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="smelt bench/onnx")
    m.ir_version = 8  # onnxruntime 1.20 reads up to 10
    onnx.checker.check_model(m)
    return m


def _vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def _w(rng, *shape, scale=None):
    s = scale if scale is not None else 1.0 / np.sqrt(shape[0])
    return (rng.standard_normal(shape) * s).astype(np.float32)


def _gelu_tanh(x, out, nodes, inits, p):
    """0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))), as exporters write it
    (opset 17 has no Gelu)."""
    inits[p + "c3"] = np.float32(0.044715)
    inits[p + "k"] = np.float32(0.7978845608028654)
    inits[p + "one"] = np.float32(1)
    inits[p + "half"] = np.float32(0.5)
    nodes += [helper.make_node("Mul", [x, x], [p + "x2"]), helper.make_node("Mul", [p + "x2", x], [p + "x3"]),
              helper.make_node("Mul", [p + "x3", p + "c3"], [p + "t0"]),
              helper.make_node("Add", [x, p + "t0"], [p + "t1"]), helper.make_node("Mul", [p + "t1", p + "k"], [p + "t2"]),
              helper.make_node("Tanh", [p + "t2"], [p + "t3"]), helper.make_node("Add", [p + "t3", p + "one"], [p + "t4"]),
              helper.make_node("Mul", [x, p + "half"], [p + "t5"]), helper.make_node("Mul", [p + "t5", p + "t4"], [out])]


def _gelu_erf(x, out, nodes, inits, p):
    """x * 0.5 * (1 + erf(x / sqrt(2))): torch.onnx's GELU before opset 20."""
    inits[p + "r2"] = np.float32(1.4142135623730951)
    inits[p + "one"] = np.float32(1)
    inits[p + "half"] = np.float32(0.5)
    nodes += [helper.make_node("Div", [x, p + "r2"], [p + "t0"]), helper.make_node("Erf", [p + "t0"], [p + "t1"]),
              helper.make_node("Add", [p + "t1", p + "one"], [p + "t2"]),
              helper.make_node("Mul", [x, p + "t2"], [p + "t3"]), helper.make_node("Mul", [p + "t3", p + "half"], [out])]


def make_mlp(rng, rows=2048, d=1024, h=4096):
    """bench.c's mlp: layernorm(gelu_tanh(x @ w1 + b1) @ w2 + b2 + x) * lw + lb."""
    inits = {"w1": _w(rng, d, h), "b1": _w(rng, h, scale=0.1), "w2": _w(rng, h, d), "b2": _w(rng, d, scale=0.1),
             "lw": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "lb": _w(rng, d, scale=0.1)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"])]
    _gelu_tanh("a1", "g", nodes, inits, "gelu_")
    nodes += [helper.make_node("MatMul", ["g", "w2"], ["m2"]), helper.make_node("Add", ["m2", "b2"], ["a2"]),
              helper.make_node("Add", ["a2", "x"], ["r"]),
              helper.make_node("LayerNormalization", ["r", "lw", "lb"], ["y"], axis=-1, epsilon=1e-5)]
    m = _model(nodes, "mlp", [_vi("x", TP.FLOAT, ["rows", d])], [_vi("y", TP.FLOAT, ["rows", d])], inits)
    return m, {"x": rng.standard_normal((rows, d)).astype(np.float32)}


def make_attention(rng, batch=8, heads=16, seq=512, dh=64):
    """bench.c's attention: softmax(q @ k^T / 8) @ v, heads merged to [batch, seq, heads*dh]."""
    inits = {"scale": np.float32(np.sqrt(dh)), "shape": np.array([0, 0, heads * dh], np.int64)}
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s0"]), helper.make_node("Div", ["s0", "scale"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"]),
             helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["ot", "shape"], ["y"])]
    shp = ["batch", heads, seq, dh]
    m = _model(nodes, "attention", [_vi(n, TP.FLOAT, shp) for n in "qkv"],
               [_vi("y", TP.FLOAT, ["batch", seq, heads * dh])], inits)
    return m, {n: rng.standard_normal((batch, heads, seq, dh)).astype(np.float32) for n in "qkv"}


def make_encoder(rng, batch=8, seq=128, d=384, heads=6, vocab=1000, gather=True):
    """A post-LN transformer encoder layer (BERT's): an embedding Gather of
    token ids plus position embeddings and a layernorm (gather=False: the
    embedded input x [batch, seq, d] instead), masked multi-head attention
    (mask [batch, seq], 1 keep / 0 padding, added as -10000), residual and
    layernorm, a GELU(erf) MLP (4d), residual and layernorm."""
    dh, ff = d // heads, 4 * d
    inits = {"wq": _w(rng, d, d), "bq": _w(rng, d, scale=0.1), "wk": _w(rng, d, d), "bk": _w(rng, d, scale=0.1),
             "wv": _w(rng, d, d), "bv": _w(rng, d, scale=0.1), "wo": _w(rng, d, d), "bo": _w(rng, d, scale=0.1),
             "w1": _w(rng, d, ff), "b1": _w(rng, ff, scale=0.1), "w2": _w(rng, ff, d), "b2": _w(rng, d, scale=0.1),
             "ln1w": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "ln1b": _w(rng, d, scale=0.1),
             "ln2w": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32), "ln2b": _w(rng, d, scale=0.1),
             "split_heads": np.array([0, 0, heads, dh], np.int64), "merge": np.array([0, 0, d], np.int64),
             "rsd": np.float32(1 / np.sqrt(dh)), "one": np.float32(1), "neg": np.float32(-10000.0),
             "ax12": np.array([1, 2], np.int64)}
    nodes = []
    inputs = []
    feeds = {}
    if gather:
        inits["emb"] = _w(rng, vocab, d, scale=1.0)
        inits["pos"] = _w(rng, seq, d, scale=0.1)
        inits["ln0w"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        inits["ln0b"] = _w(rng, d, scale=0.1)
        nodes += [helper.make_node("Gather", ["emb", "ids"], ["e0"], axis=0),
                  helper.make_node("Add", ["e0", "pos"], ["e1"]),
                  helper.make_node("LayerNormalization", ["e1", "ln0w", "ln0b"], ["x"], axis=-1, epsilon=1e-12)]
        inputs.append(_vi("ids", TP.INT64, ["batch", seq]))
        feeds["ids"] = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    else:
        inputs.append(_vi("x", TP.FLOAT, ["batch", seq, d]))
        feeds["x"] = rng.standard_normal((batch, seq, d)).astype(np.float32)
    inputs.append(_vi("mask", TP.FLOAT, ["batch", seq]))
    mask = np.ones((batch, seq), np.float32)
    for b in range(batch):  # padding at the end of some rows
        mask[b, seq - int(rng.integers(0, seq // 4)):] = 0
    feeds["mask"] = mask
    for n in "qkv":
        nodes += [helper.make_node("MatMul", ["x", "w" + n], [n + "0"]),
                  helper.make_node("Add", [n + "0", "b" + n], [n + "1"]),
                  helper.make_node("Reshape", [n + "1", "split_heads"], [n + "2"]),
                  helper.make_node("Transpose", [n + "2"], [n + "h"], perm=[0, 2, 3, 1] if n == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["qh", "kh"], ["s0"]), helper.make_node("Mul", ["s0", "rsd"], ["s1"]),
              helper.make_node("Sub", ["one", "mask"], ["m0"]), helper.make_node("Mul", ["m0", "neg"], ["m1"]),
              helper.make_node("Unsqueeze", ["m1", "ax12"], ["m2"]), helper.make_node("Add", ["s1", "m2"], ["s2"]),
              helper.make_node("Softmax", ["s2"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "vh"], ["o0"]),
              helper.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["o1", "merge"], ["o2"]), helper.make_node("MatMul", ["o2", "wo"], ["o3"]),
              helper.make_node("Add", ["o3", "bo"], ["o4"]), helper.make_node("Add", ["o4", "x"], ["r1"]),
              helper.make_node("LayerNormalization", ["r1", "ln1w", "ln1b"], ["x1"], axis=-1, epsilon=1e-12),
              helper.make_node("MatMul", ["x1", "w1"], ["f0"]), helper.make_node("Add", ["f0", "b1"], ["f1"])]
    _gelu_erf("f1", "f2", nodes, inits, "gelu_")
    nodes += [helper.make_node("MatMul", ["f2", "w2"], ["f3"]), helper.make_node("Add", ["f3", "b2"], ["f4"]),
              helper.make_node("Add", ["f4", "x1"], ["r2"]),
              helper.make_node("LayerNormalization", ["r2", "ln2w", "ln2b"], ["y"], axis=-1, epsilon=1e-12)]
    m = _model(nodes, "encoder" if gather else "encoder_nogather", inputs, [_vi("y", TP.FLOAT, ["batch", seq, d])],
               inits)
    return m, feeds


def make_conv_block(rng, batch=8, c=64, hw=56, o=64):
    """Conv(c -> o, 3x3, pads 1, bias) + BatchNormalization + Relu on x
    [batch, c, hw, hw] (bench.c's conv_bn_relu at 8, 64, 56): the weights,
    the bias and the batch-norm's scale, shift, mean and variance are
    initializers, so smelt folds the batch-norm into the conv's weights
    (src/passes/convfold.c)."""
    inits = {"w": _w(rng, o, c, 3, 3, scale=1.0 / np.sqrt(9 * c)), "b": _w(rng, o, scale=0.1),
             "gamma": (1 + 0.1 * rng.standard_normal(o)).astype(np.float32), "beta": _w(rng, o, scale=0.1),
             "mean": _w(rng, o, scale=0.1), "var": (0.5 + rng.random(o)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c0", "gamma", "beta", "mean", "var"], ["c1"], epsilon=1e-5),
             helper.make_node("Relu", ["c1"], ["y"])]
    m = _model(nodes, "conv_block", [_vi("x", TP.FLOAT, ["batch", c, hw, hw])],
               [_vi("y", TP.FLOAT, ["batch", o, hw, hw])], inits)
    return m, {"x": rng.standard_normal((batch, c, hw, hw)).astype(np.float32)}


def to_double(model):
    """The model in float64: every float32 tensor type, initializer,
    Constant and Cast target made double (a float64 reference of the same
    graph)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TP.FLOAT:
            vi.type.tensor_type.elem_type = TP.DOUBLE
    for i, t in enumerate(g.initializer):
        if t.data_type == TP.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TP.FLOAT:
                a.i = TP.DOUBLE
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TP.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
    return m
