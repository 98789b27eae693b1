"""smelt.onnx (python/smelt/onnx) through the pinned onnx package in
build/onnx-venv (scripts/onnx-conformance makes it): the checks on models
written with onnx.helper (tests/onnx-checks.py) and the whole node suite
against tests/onnx-expected-failures.txt.  Skipped when build/onnx-venv is
absent (this Python has no onnx of the pinned version)."""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VPY = os.path.join(ROOT, "build", "onnx-venv", "bin", "python")


def _venv_ok():
    if not os.path.exists(VPY):
        return False
    return subprocess.run([VPY, "-c", "import onnx, numpy, cffi"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _venv_ok(), reason="build/onnx-venv with onnx is absent "
                                "(scripts/onnx-conformance makes it)")


def _run(args, timeout):
    env = dict(os.environ)
    env.setdefault("SMELT_JIT_BACKEND", "TCC")
    p = subprocess.run([VPY] + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def test_onnx_checks():
    rc, out = _run([os.path.join(ROOT, "tests", "onnx-checks.py")], 300)
    assert rc == 0 and "onnx-checks:" in out and ", 0 failed" in out, out


def test_onnx_node_suite():
    rc, out = _run([os.path.join(ROOT, "scripts", "onnx-conformance"), "--quiet", "--expected",
                    os.path.join(ROOT, "tests", "onnx-expected-failures.txt")], 600)
    summary = [ln for ln in out.splitlines() if ln.startswith("onnx node tests:")]
    assert summary, out[-3000:]
    assert rc == 0, out[-3000:]
    passed = int(summary[0].split(":")[1].split()[0])
    assert passed >= 1085, summary[0]  # measured when the list was last changed: 1,087 of 1,288
