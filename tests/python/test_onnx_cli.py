"""`smelt run model.onnx` and `smelt explain model.onnx` (the C tool execs
python -m smelt.onnx): outputs against a float64 NumPy reference, the .npy
files --out writes, explain's kernels, and the errors (one line, exit 1 for
bad input, 2 for bad usage).  The models are written by the pinned onnx in
build/onnx-venv (skipped, and counted as skipped, when it is absent)."""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VPY = os.path.join(ROOT, "build", "onnx-venv", "bin", "python")
SMELT = os.environ.get("SMELT_EXE") or os.path.join(ROOT, "build", "smelt")


def _venv_ok():
    return os.path.exists(VPY) and subprocess.run([VPY, "-c", "import onnx, numpy, cffi"],
                                                  capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _venv_ok() or not os.path.exists(SMELT),
                                reason="build/onnx-venv with onnx (scripts/onnx-conformance --setup) or the smelt "
                                "tool is absent")

MODELS = r'''
import sys, onnx
from onnx import helper, TensorProto as TP, numpy_helper
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]))
# y = gelu(x @ W + b) * 0.5, z = reduce_sum(y, axis 1): a symbolic batch
W = rng.standard_normal((6, 5)).astype(np.float32)
b = rng.standard_normal(5).astype(np.float32)
np.save(d + "/W.npy", W); np.save(d + "/b.npy", b)
nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Mul", ["a", "half"], ["a2"]), helper.make_node("Erf", ["a2s"], ["e"]),
         helper.make_node("Mul", ["a", "sqrt1_2"], ["a2s"]),
         helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["a2", "e1"], ["y"]),
         helper.make_node("ReduceSum", ["y", "ax"], ["z"], keepdims=0)]
nodes = [nodes[i] for i in (0, 1, 2, 4, 3, 5, 6, 7)]
inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(np.float32(0.5), "half"), numpy_helper.from_array(np.float32(1), "one"),
         numpy_helper.from_array(np.float32(0.7071067811865476), "sqrt1_2"),
         numpy_helper.from_array(np.array([1], np.int64), "ax")]
g = helper.make_graph(nodes, "gelu_mlp", [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 6])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, ["N", 5]),
                       helper.make_tensor_value_info("z", TP.FLOAT, ["N"])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/mlp.onnx")
# two inputs, static shapes
g = helper.make_graph([helper.make_node("Sub", ["p", "q"], ["r"])], "sub",
                      [helper.make_tensor_value_info("p", TP.FLOAT, [2, 3]),
                       helper.make_tensor_value_info("q", TP.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("r", TP.FLOAT, [2, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/sub.onnx")
# an operator smelt.onnx does not convert
g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"], name="nz")], "nz",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [4])],
                      [helper.make_tensor_value_info("y", TP.INT64, [1, None])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/nonzero.onnx")
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("onnx-cli"))
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    p = subprocess.run([VPY, "-c", MODELS, d, str(seed)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return d, np.random.default_rng(seed)


def smelt(*args, cwd=None):
    env = dict(os.environ, SMELT_JIT_BACKEND="TCC")
    env.pop("SMELT_PYTHON", None)
    p = subprocess.run([SMELT] + list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr


def _ref(d, x):
    from math import erf
    W, b = np.load(d + "/W.npy").astype(np.float64), np.load(d + "/b.npy").astype(np.float64)
    a = x.astype(np.float64) @ W + b
    y = a * 0.5 * (1 + np.vectorize(erf)(a / np.sqrt(2)))
    return y, y.sum(axis=1)


def test_run_out_dir(models):
    d, rng = models
    for n in (3, 17):  # a symbolic batch: two signatures
        x = rng.standard_normal((n, 6)).astype(np.float32)
        x[0, :3] = [0, -0.0, 40]  # special values
        np.save(d + "/x.npy", x)
        out = os.path.join(d, "out%d" % n)
        rc, so, se = smelt("run", d + "/mlp.onnx", "x=" + d + "/x.npy", "--out", out)
        assert rc == 0, se
        assert "y: float32[%d, 5] -> " % n in so and "z: float32[%d] -> " % n in so, so
        y, z = np.load(out + "/y.npy"), np.load(out + "/z.npy")
        ry, rz = _ref(d, x)
        assert y.dtype == np.float32 and y.shape == (n, 5) and z.shape == (n,)
        np.testing.assert_allclose(y, ry, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(z, rz, rtol=2e-5, atol=1e-4)


def test_run_prints_and_bare_input(models):
    d, rng = models
    x = rng.standard_normal((2, 6)).astype(np.float32)
    np.save(d + "/x2.npy", x)
    rc, so, se = smelt("run", d + "/mlp.onnx", d + "/x2.npy", "--time")  # one input: no name needed
    assert rc == 0, se
    assert so.startswith("y: float32[2, 5]\n") and "\nz: float32[2]\n" in so, so
    assert "first call" in se and "kernel(s)" in se, se
    p, q = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    np.save(d + "/p.npy", p), np.save(d + "/q.npy", q)
    rc, so, se = smelt("run", "--out", d + "/o2", d + "/sub.onnx", "q=" + d + "/q.npy", "p=" + d + "/p.npy")
    assert rc == 0, se
    assert np.array_equal(np.load(d + "/o2/r.npy"), p - q)


def test_explain(models):
    d, _ = models
    rc, so, se = smelt("explain", d + "/mlp.onnx", "x=f32[8,6]")
    assert rc == 0, se
    assert "inputs: x float32[8, 6]" in so and "outputs: y, z" in so, so
    assert "operators: Add 2, Erf 1, MatMul 1, Mul 3, ReduceSum 1" in so, so
    k = int(so.split("kernels per inference: ")[1].split()[0])
    assert 1 <= k <= 3, so
    assert "plan: opt_level 3" in so and "kernel 0 " in so, so
    rc, so2, se = smelt("explain", d + "/mlp.onnx", "x=f32[8,6]", "--source")
    assert rc == 0 and len(so2) > len(so) and "// ----" in so2, se
    rc, so, se = smelt("explain", d + "/sub.onnx")  # static shapes: no inputs needed
    assert rc == 0 and "inputs: p float32[2, 3], q float32[2, 3]" in so and "kernels per inference: 1" in so, so + se


@pytest.mark.parametrize("args,code,words", [
    (["run", "{d}/mlp.onnx"], 1, "input 'x' (float32[N, 6]) is not given"),
    (["explain", "{d}/mlp.onnx"], 1, "x=DTYPE[SHAPE]"),
    (["run", "{d}/nonzero.onnx", "x={d}/x.npy"], 1, "node 0 'nz' (NonZero): operator NonZero is not supported"),
    (["run", "{d}/missing.onnx"], 1, "missing.onnx: no such file"),
    (["run", "{d}/x.npy.onnx"], 1, "no such file"),
    (["run", "{d}/mlp.onnx", "y={d}/x.npy"], 1, "the model has no input 'y' (its inputs: x)"),
    (["run", "{d}/mlp.onnx", "x={d}/nothere.npy"], 1, "nothere.npy: no such file"),
    (["run", "{d}/mlp.onnx", "x={d}/mlp.onnx"], 1, "not a .npy file"),
    (["run", "{d}/mlp.onnx", "x={d}/ints.npy"], 1, "input 'x' is int64, the model wants float32"),
    (["run", "{d}/mlp.onnx", "x={d}/x.npy", "--opt-level", "7"], 2, "--opt-level is 0, 1, 2 or 3"),
    (["run", "{d}/mlp.onnx", "x={d}/x.npy", "--bogus"], 2, "unknown option '--bogus'"),
    (["run", "{d}/mlp.onnx", "x=f32[2,6]"], 2, "run needs a .npy file"),
    (["explain", "{d}/mlp.onnx", "x=q9[2]"], 1, "unknown dtype 'q9'"),
    (["run", "{d}/mlp.onnx", "x={d}/x.npy", "--backend", "NOPE"], 1, "NOPE"),
    (["run", "{d}/garbage.onnx"], 1, "garbage.onnx: not an ONNX model"),
])
def test_errors(models, args, code, words):
    d, _ = models
    np.save(d + "/ints.npy", np.arange(12).reshape(2, 6))
    with open(d + "/garbage.onnx", "wb") as f:
        f.write(b"\x08\x07garbage-not-a-protobuf\xff\xff")
    rc, so, se = smelt(*[a.format(d=d) for a in args])
    assert rc == code, (rc, so, se)
    lines = se.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("smelt: error: ") and words in lines[0], se
    assert "Traceback" not in se


def test_help_and_no_python(models):
    d, _ = models
    rc, so, se = smelt("run", d + "/mlp.onnx", "--help")
    assert rc == 0 and "usage: smelt run MODEL.onnx" in so, se
    env = dict(os.environ, SMELT_PYTHON="/nonexistent/python")
    p = subprocess.run([SMELT, "run", d + "/mlp.onnx"], capture_output=True, text=True, env=env)
    assert p.returncode == 1 and "cannot start /nonexistent/python" in p.stderr, p.stderr
    # a Python without the onnx package: a clear message, exit 1
    env = dict(os.environ, SMELT_PYTHON=sys.executable)
    p = subprocess.run([SMELT, "run", d + "/mlp.onnx", "x=" + d + "/x.npy"], capture_output=True, text=True,
                       env=env)
    try:
        import onnx  # noqa: F401
        has_onnx = True
    except ImportError:
        has_onnx = False
    if not has_onnx:
        assert p.returncode == 1 and "needs the onnx package" in p.stderr, p.stderr
