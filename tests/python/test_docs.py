"""Every Python example of README.md and docs/python.md runs as written
(each block in a fresh interpreter, in an empty folder), and the README's
printed lines are what it shows."""
import os
import re
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_blocks(path):
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


BLOCKS = [(p, i, b) for p in ("README.md", "docs/python.md") for i, b in enumerate(python_blocks(p))]


def run(code, **extra_env):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **extra_env)
    with tempfile.TemporaryDirectory() as d:
        return subprocess.run([sys.executable, "-c", code], cwd=d, env=env, capture_output=True, text=True,
                              timeout=300)


def test_there_are_examples():
    assert len([b for b in BLOCKS if b[0] == "README.md"]) >= 1
    assert len([b for b in BLOCKS if b[0] == "docs/python.md"]) >= 5


@pytest.mark.parametrize("path,i,code", BLOCKS, ids=["%s-%d" % (p, i) for p, i, _ in BLOCKS])
def test_example_runs(path, i, code):
    extra = {}
    if "smelt.to_device" in code:  # a GPU example: on tests/fakecuda.c where there is no GPU
        from test_dlpack import _fake, nvrtc_usable
        lib = _fake()
        if not nvrtc_usable():
            if lib is None:
                pytest.skip("no GPU, and tests/fakecuda.c is not built")
            extra = dict(SMELT_CUDA_DRIVER_LIB=lib, SMELT_NVRTC_LIB=lib, SMELT_CUBLAS_LIB=lib)
    r = run(code, **extra)
    assert r.returncode == 0, "%s example %d failed:\n%s\n%s" % (path, i, r.stdout, r.stderr)
    if path == "README.md" and i == 0:
        assert r.stdout.splitlines() == ["1", "True", "TracerError"], r.stdout


def test_pip_install(tmp_path):
    """pip installs the package (no compiler, no network: Debian's setuptools),
    from a copy (pip builds in the source folder)."""
    import shutil
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), str(src), ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                        "--no-index", "--target", str(tmp_path / "site"), str(src)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and ("No module named pip" in r.stderr or "setuptools" in r.stderr):
        pytest.skip("pip or setuptools missing: %s" % r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, r.stderr
    import smelt
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), SMELT_LIBRARY=smelt.library_path)
    r = subprocess.run([sys.executable, "-c", "import smelt, numpy as np; print(smelt.__file__); "
                        "print(smelt.jit(lambda x: x * 2)(np.arange(3.0)))"],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert str(tmp_path / "site") in r.stdout and "[0. 2. 4.]" in r.stdout
