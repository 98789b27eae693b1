#!/usr/bin/env python3
"""onnxruntime on smelt's matrix-product and convolution workloads (mlp, attention, conv_bn_relu, conv1d_gelu) and embed_ln.

Run by `smelt-bench --peers` with the python of build/ort-venv (scripts/bench
--peers installs onnxruntime and onnx from PyPI there).  Each workload is an
ONNX graph of the same formula (bench/peers/peers.py's model_formula: MatMul,
Add, the tanh GELU written out, LayerNormalization; attention's Softmax;
Conv + BatchNormalization + Relu; Conv + the erf GELU written out +
GlobalMaxPool; Gather + Add + LayerNormalization with scale 1 and bias 0),
run on the CPU execution provider with intra_op_num_threads = --threads and
its default graph optimisations.  Prints one JSON object: ort_ms (the
ordinary call, session.run: new outputs), ort_out_ms (IO binding: inputs
bound once, the output bound to an array allocated once), ort_first_call_ms
(session creation + the first run), ort_version, ort_threads.  Other
workloads print no times.
"""
import json
import sys
import time


def model(name, shapes):
    from onnx import TensorProto, helper
    F = TensorProto.FLOAT
    nodes, inits = [], []

    def const(nm, v):
        inits.append(helper.make_tensor(nm, F, [], [float(v)]))
        return nm

    def op(kind, ins, **kw):
        out = "t%d" % len(nodes)
        nodes.append(helper.make_node(kind, ins, [out], **kw))
        return out

    if name == "mlp":
        ins = ["x", "w1", "b1", "w2", "b2", "lw", "lb"]
        h = op("Add", [op("MatMul", ["x", "w1"]), "b1"])
        h3 = op("Mul", [op("Mul", [h, h]), h])
        inner = op("Mul", [const("k", 0.7978845608028654), op("Add", [h, op("Mul", [const("c", 0.044715), h3])])])
        g = op("Mul", [op("Mul", [const("half", 0.5), h]), op("Add", [const("one", 1.0), op("Tanh", [inner])])])
        y = op("Add", [op("Add", [op("MatMul", [g, "w2"]), "b2"]), "x"])
        out = op("LayerNormalization", [y, "lw", "lb"], axis=-1, epsilon=1e-5)
        oshape = list(shapes[0])
    elif name == "attention":
        ins = ["q", "k", "v"]
        b, hh, t, d = shapes[0]
        s = op("Div", [op("MatMul", ["q", op("Transpose", ["k"], perm=[0, 1, 3, 2])]), const("eight", 8.0)])
        a = op("MatMul", [op("Softmax", [s], axis=-1), "v"])
        inits.append(helper.make_tensor("shape", TensorProto.INT64, [3], [b, t, hh * d]))
        out = op("Reshape", [op("Transpose", [a], perm=[0, 2, 1, 3]), "shape"])
        oshape = [b, t, hh * d]
    elif name == "conv_bn_relu":
        ins = ["x", "w", "scale", "shift", "mean", "var"]
        c = op("Conv", ["x", "w"], pads=[1, 1, 1, 1])
        out = op("Relu", [op("BatchNormalization", [c, "scale", "shift", "mean", "var"], epsilon=1e-5)])
        oshape = [shapes[0][0], shapes[1][0]] + list(shapes[0][2:])
    elif name == "conv1d_gelu":
        ins = ["x", "w", "b"]
        h = op("Conv", ["x", "w", "b"], pads=[2, 2], group=2)
        g = op("Mul", [op("Mul", [const("half", 0.5), h]),
                       op("Add", [const("one", 1.0), op("Erf", [op("Mul", [h, const("r2", 0.7071067811865476)])])])])
        out = op("GlobalMaxPool", [g])
        oshape = [shapes[0][0], shapes[1][0], 1]
    elif name == "embed_ln":
        ins = ["W", "ids", "P"]
        d = shapes[0][1]
        inits.append(helper.make_tensor("ones", F, [d], [1.0] * d))
        inits.append(helper.make_tensor("zeros", F, [d], [0.0] * d))
        x = op("Add", [op("Gather", ["W", "ids"], axis=0), "P"])
        out = op("LayerNormalization", [x, "ones", "zeros"], axis=-1, epsilon=1e-5)
        oshape = list(shapes[1]) + [d]
    else:
        return None, None
    nodes[-1].output[0] = "y"
    kind = lambda n: TensorProto.INT64 if n == "ids" else F
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, kind(n), list(s)) for n, s in zip(ins, shapes)],
                              [helper.make_tensor_value_info("y", F, oshape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString(), (ins, oshape)


def main():
    from peers import parse_args
    ap, a = parse_args(__doc__.splitlines()[0])
    out = {"workload": a.workload, "n": a.n}
    if a.workload not in ("mlp", "attention", "conv_bn_relu", "conv1d_gelu", "embed_ln"):
        print(json.dumps(out))
        return 0
    import numpy as np
    import onnxruntime as ort
    from peers import inputs, timeit

    args = inputs(a.workload, a.n, np.random.default_rng(1))
    blob, (names, oshape) = model(a.workload, [x.shape for x in args])
    so = ort.SessionOptions()
    if a.threads:
        so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    t0 = time.perf_counter()
    sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    feeds = dict(zip(names, args))
    sess.run(None, feeds)
    out["ort_first_call_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    out["ort_ms"] = round(timeit(lambda: sess.run(None, feeds), [], a.runs), 3)
    y = np.empty(oshape, np.float32)
    io = sess.io_binding()
    for nm, x in feeds.items():
        io.bind_cpu_input(nm, x)
    io.bind_output("y", "cpu", 0, np.float32, oshape, y.ctypes.data)
    out["ort_out_ms"] = round(timeit(lambda: sess.run_with_iobinding(io), [], a.runs), 3)
    ref = sess.run(None, feeds)[0]
    if not np.allclose(y, ref, rtol=1e-4, atol=1e-5):
        out["ort_note"] = "the bound output differs from session.run's"
    out.update(ort_version=ort.__version__, ort_threads=a.threads or None)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
