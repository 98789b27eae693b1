"""CUDA arrays through DLPack (docs/python.md, Interop): the errors here,
in this process (no GPU needed); the device runs on tests/fakecuda.c in
processes of their own (_dlpack_child.py), since the CUDA driver is probed
once per process."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import smelt
from smelt import _dlpack
from _dlpack_child import HERE, ROOT, Producer, _Capsuled, capsule_state


def nvrtc_usable():
    return _dlpack.nvrtc_reason(smelt._lib.context()) is None


def host_producer(shape=(4, 5), **kw):
    """A producer that claims a CUDA device for host memory: only errors
    raised before any memory is read are checked with it."""
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return Producer(a.__array_interface__["data"][0], shape, keep=a, **kw)


def test_device_array_on_cpu_backend():
    p = host_producer()
    f = smelt.jit(lambda a: a + 1, backend="TCC")
    with pytest.raises(smelt.Error, match="backend='NVRTC'") as e:
        f(p)
    assert "runs on TCC" in str(e.value)
    if not nvrtc_usable():  # the NVRTC backend's own reason too
        assert isinstance(e.value, smelt.BackendError) and "not available" in str(e.value)
    assert p.deleted == 1 and capsule_state(p.caps[0]) == "used"
    # the host path still works for the same function
    x = np.ones((4, 5), np.float32)
    assert f(x).tobytes() == (x + 1).tobytes()


@pytest.mark.parametrize("code,bits,lanes,msg", [
    (2, 32, 4, "4-lane elements"),     # a float32x4 vector type
    (5, 64, 1, "code 5 \\(complex\\)"),  # complex64
    (9, 32, 1, "code 9 \\(unknown\\)"),
    (0, 16, 1, "code 0 \\(int\\) with 16 bits"),
])
def test_dlpack_dtype_errors(code, bits, lanes, msg):
    p = host_producer(code=code, bits=bits, lanes=lanes)
    with pytest.raises(smelt.DtypeError, match=msg):
        smelt.jit(lambda a: a * 2, backend="TCC")(p)
    assert p.deleted == 1, "the deleter must run once, also when the array is refused"
    assert capsule_state(p.caps[0]) == "used"


def test_device_array_other_device_and_stale_capsule():
    p = host_producer(device=(2, 1))
    with pytest.raises(smelt.InvalidArgumentError, match="CUDA device 1; smelt runs on device 0"):
        smelt.jit(lambda a: a * 2, backend="TCC")(p)
    assert p.deleted == 1

    with pytest.raises(smelt.InvalidArgumentError, match="not consumed before"):  # a capsule consumed before
        smelt.jit(lambda a: a * 2, backend="TCC")(_Capsuled(p.caps[0]))
    assert p.deleted == 1


def test_device_array_elsewhere_is_a_clear_error():
    p = host_producer()
    with pytest.raises(TypeError, match="backend='NVRTC'"):
        smelt.evaluate("a + 1", local_dict={"a": p})
    assert p.deleted == 0  # not consumed: no capsule taken


@pytest.mark.skipif("nvrtc_usable()", reason="the NVRTC backend is usable here")
def test_no_gpu():
    with pytest.raises(smelt.BackendError, match="NVRTC"):
        smelt.to_device(np.ones(3, np.float32))
    p = host_producer()
    with pytest.raises(smelt.BackendError, match="backend='NVRTC'.*NVRTC backend cannot run"):
        smelt.jit(lambda a: a - 1)(p)  # AUTO (or TCC) on a machine without a GPU
    assert p.deleted == 1
    with pytest.raises(TypeError, match="to_device"):
        smelt.DeviceArray()


def _fake():
    lib = os.environ.get("SMELT_TEST_FAKECUDA")
    if not lib:
        base = os.path.dirname(os.environ.get("SMELT_LIBRARY") or os.path.join(ROOT, "build", "libsmelt.so"))
        lib = os.path.join(base, "tests", "libsmelt-fakecuda.so")
    return lib if os.path.exists(lib) else None


@pytest.mark.parametrize("check", ["round_trip", "producer", "mixed"])
@pytest.mark.parametrize("where", ["fake", "gpu"])
def test_device(check, where):
    """The checks of _dlpack_child.py on tests/fakecuda.c, and on this
    machine's GPU where it has one."""
    if where == "fake":
        lib = _fake()
        if lib is None:
            pytest.skip("tests/fakecuda.c is not built (build/tests/libsmelt-fakecuda.so)")
        if shutil.which("c++") is None:
            pytest.skip("no host C++ compiler for the fake NVRTC")
        env = dict(os.environ, SMELT_CUDA_DRIVER_LIB=lib, SMELT_NVRTC_LIB=lib, SMELT_CUBLAS_LIB=lib)
    else:
        if not nvrtc_usable():
            pytest.skip("no GPU: %s" % _dlpack.nvrtc_reason(smelt._lib.context()))
        env = dict(os.environ)
    r = subprocess.run([sys.executable, os.path.join(HERE, "_dlpack_child.py"), check], env=env,
                       capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, "check %s failed:\n%s\n%s" % (check, r.stdout, r.stderr)
    assert ("ok " + check) in r.stdout
    assert "Exception ignored" not in r.stderr, r.stderr  # a callback that failed quietly
