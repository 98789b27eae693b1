"""tests/onnx-ort.py: smelt.onnx against onnxruntime and smelt's float64
reference (build/ort-venv, scripts/onnx-conformance --setup-ort; skipped,
and counted as skipped, when absent), and the ONNX file exported by
scikit-learn against scikit-learn's own predictions (build/onnx-venv)."""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tests", "onnx-ort.py")


def _py(venv, mods):
    vpy = os.path.join(ROOT, "build", venv, "bin", "python")
    if os.path.exists(vpy) and subprocess.run([vpy, "-c", "import " + mods], capture_output=True).returncode == 0:
        return vpy
    return None


ORT_PY = _py("ort-venv", "onnx, onnxruntime, numpy, cffi")
ONNX_PY = _py("onnx-venv", "onnx, numpy, cffi")


def _run(vpy, *args):
    env = dict(os.environ)
    env.setdefault("SMELT_JIT_BACKEND", "TCC")
    p = subprocess.run([vpy, SCRIPT] + list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    last = [ln for ln in out.splitlines() if ln.startswith("onnx-ort:") and "checks" in ln]
    assert p.returncode == 0 and last and ", 0 failed" in last[0], out[-4000:]
    return out


@pytest.mark.skipif(ORT_PY is None, reason="build/ort-venv with onnxruntime is absent "
                    "(scripts/onnx-conformance --setup-ort makes it)")
def test_against_onnxruntime():
    out = _run(ORT_PY)
    # every model was compared with onnxruntime (skips: only what smelt.onnx refuses at load)
    assert "onnxruntime 1.20.1" in out and "the comparison with onnxruntime" not in out, out[-3000:]
    assert out.count("smelt-ort") >= 5, out[-3000:]


@pytest.mark.skipif(ONNX_PY is None, reason="build/onnx-venv with onnx is absent (scripts/onnx-conformance makes it)")
def test_exported_model_against_sklearn_and_float64():
    out = _run(ONNX_PY, "--no-ort")
    assert "smelt vs scikit-learn's predict" in out, out[-3000:]


@pytest.mark.skipif(ORT_PY is None, reason="build/ort-venv with onnxruntime is absent "
                    "(scripts/onnx-conformance --setup-ort makes it)")
def test_bench_rows():
    """scripts/bench --onnx --peers's script at a small size: a row per
    workload with kernels, both times and outputs that agree."""
    import json
    p = subprocess.run([ORT_PY, os.path.join(ROOT, "bench", "onnx", "bench_onnx.py"), "--peers", "--json",
                        "--n", "256K", "--runs", "1", "--workload", "mlp", "--workload", "attention"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, SMELT_JIT_BACKEND="TCC"))
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert [r["workload"] for r in rows] == ["onnx_mlp", "onnx_attention"], p.stdout
    for r in rows:
        assert r["kernels"] >= 1 and r["smelt_ms"] > 0 and r["ort_ms"] > 0, r
        assert r["max_rel_diff"] < 1e-4, r
