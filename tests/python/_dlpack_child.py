"""Device checks of DLPack interop, run by test_dlpack.py in a process of
their own on tests/fakecuda.c (SMELT_CUDA_DRIVER_LIB / SMELT_NVRTC_LIB name
it: the CUDA driver is probed once per process).  Also the test producer
both use: a DLPack producer written with ctypes that counts its deleter's
calls.  `python _dlpack_child.py NAME` runs check NAME; exit 0 when it
passes."""
import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

_api = ctypes.pythonapi
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(("PyCapsule_New", _api))
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))


sys.path.insert(0, os.path.join(ROOT, "python"))
from smelt._dlpack import DLDataType, DLDevice, DLTensor  # noqa: E402  (dlpack.h's structures)

DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


def capsule_state(cap):
    """'unused', 'used' or 'other': the capsule's name."""
    if _IsValid(cap, b"dltensor"):
        return "unused"
    return "used" if _IsValid(cap, b"used_dltensor") else "other"


class Producer:
    """A DLPack producer over memory at address ptr (device memory on the
    fake GPU): dtype (code, bits, lanes), shape, strides in elements (None:
    NULL strides), byte_offset.  .deleted counts the deleter's calls, .caps
    the capsules handed out, .streams the stream= values asked for."""

    def __init__(self, ptr, shape, code=2, bits=32, lanes=1, strides=None, byte_offset=0, device=(2, 0), keep=None):
        self.ptr, self.shape, self.strides, self.byte_offset = ptr, tuple(shape), strides, byte_offset
        self.code, self.bits, self.lanes, self.device = code, bits, lanes, device
        self.keep = keep  # what owns the memory
        self.deleted = 0
        self.caps, self.streams = [], []
        self._alive = []
        self._deleter = DELETER(self._delete)

    def _delete(self, addr):
        self.deleted += 1

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*self.shape)
        m = DLManagedTensor()
        t = m.dl_tensor
        t.data = self.ptr
        t.device = DLDevice(*self.device)
        t.ndim = n
        t.dtype = DLDataType(self.code, self.bits, self.lanes)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            strides = (ctypes.c_int64 * max(n, 1))(*self.strides)
            t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        else:
            strides = None
        t.byte_offset = self.byte_offset
        m.deleter = self._deleter
        self._alive.append((m, shape, strides))
        cap = _New(ctypes.addressof(m), b"dltensor", None)
        self.caps.append(cap)
        return cap


class Holder:
    """Any object that hands out another's capsule (forces the capsule path
    on a smelt.DeviceArray); keeps the capsules it gave."""

    def __init__(self, a):
        self.a = a
        self.caps = []

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __dlpack__(self, stream=None):
        cap = self.a.__dlpack__(stream=stream)
        self.caps.append(cap)
        return cap


# ---- the checks (on the fake GPU) ---------------------------------------------------
def _setup():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import smelt
    return smelt


def rand(rng, *shape, dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    specials = np.array([0.0, -0.0, 1e30, -1e-30, np.inf, -np.inf, np.nan], dtype)
    flat[:len(specials)] = specials[:flat.size]
    return x


def arith(a):  # elementwise arithmetic only: the same bits on every backend
    return np.maximum(a * 3.0 - 1.0, a) / 2.0 + a * a


def arith2(a, b):
    return a * b + 1.0


def check_round_trip(smelt):
    rng = np.random.default_rng(41)
    x = rand(rng, 257, 33)
    f = smelt.jit(arith, backend="NVRTC")
    ref = smelt.jit(arith, backend="TCC")(x)
    d = smelt.to_device(x)
    assert type(d) is smelt.DeviceArray and d.shape == x.shape and d.dtype == np.float32
    assert d.__dlpack_device__() == (2, 0)
    assert d.numpy().tobytes() == x.tobytes()
    y = f(d)
    assert type(y) is smelt.DeviceArray, type(y)
    assert y.shape == (257, 33) and y.dtype == np.float32
    assert y.numpy().tobytes() == ref.tobytes(), "NVRTC (fake GPU) and TCC differ"
    assert np.asarray(y).tobytes() == ref.tobytes()
    assert y.__cuda_array_interface__["data"][0] == y.data_ptr
    assert f.stats()["last"]["backend"] == "NVRTC"
    # a result read by smelt again: directly, and through its own capsule
    g = smelt.jit(lambda a: a * 0.5 + 2.0, backend="NVRTC")
    ref2 = smelt.jit(lambda a: a * 0.5 + 2.0, backend="TCC")(ref)
    z = g(y)
    assert type(z) is smelt.DeviceArray and z.numpy().tobytes() == ref2.tobytes()
    h = Holder(y)
    z2 = g(h)
    assert z2.numpy().tobytes() == ref2.tobytes()
    assert len(h.caps) == 1 and capsule_state(h.caps[0]) == "used"
    from smelt import _dlpack
    assert not _dlpack._exported, "smelt did not call the deleter of the capsule it consumed"
    # a capsule dropped unconsumed: its destructor calls the deleter; the array stays
    cap = y.__dlpack__(stream=None)
    assert capsule_state(cap) == "unused" and len(_dlpack._exported) == 1
    del cap
    assert not _dlpack._exported
    assert y.numpy().tobytes() == ref.tobytes()
    # keywords of the array API standard; NumPy refuses a CUDA array without leaking it
    cap = y.__dlpack__(stream=7, max_version=(1, 0), dl_device=(2, 0), copy=False)
    assert capsule_state(cap) == "unused"
    del cap
    for kw in ({"dl_device": (1, 0)}, {"copy": True}):
        try:
            y.__dlpack__(**kw)
            raise AssertionError("no error for %r" % kw)
        except BufferError:
            pass
    if _dlpack.destructor_in_c()[1]:  # NumPy drops the capsule with its error set: a C destructor keeps it
        try:
            np.from_dlpack(y)
            raise AssertionError("NumPy read a CUDA array")
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass
        assert not _dlpack._exported
    # the array outlives its DeviceArray while a capsule holds it
    cap = z.__dlpack__()
    del z
    w = g(_Capsuled(cap))
    assert w.numpy().tobytes() == smelt.jit(lambda a: a * 0.5 + 2.0, backend="TCC")(ref2).tobytes()
    assert not _dlpack._exported
    # several results, in the function's structure
    m = smelt.jit(lambda a: {"p": a + 1.0, "q": (a * 2.0, a - a)}, backend="NVRTC")(d)
    assert type(m["p"]) is smelt.DeviceArray and type(m["q"][1]) is smelt.DeviceArray
    assert m["q"][0].numpy().tobytes() == (x * np.float32(2)).tobytes()
    assert m["p"].numpy().tobytes() == (x + np.float32(1)).tobytes()


class _Capsuled:
    """A producer that hands out one capsule taken before."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        return self.cap


def check_producer(smelt):
    rng = np.random.default_rng(42)
    x = rand(rng, 64, 33)
    src = smelt.to_device(x)
    f = smelt.jit(arith, backend="NVRTC")
    fh = smelt.jit(arith, backend="TCC")
    cases = [  # (shape, strides in elements or None, byte offset, the host view it is)
        ((64, 33), None, 0, x),
        ((64, 33), (33, 1), 0, x),
        ((33, 64), (1, 33), 0, x.T),
        ((31, 33), (66, 1), 33 * 4, x[1::2][:31]),
        ((29, 16), (1, 132), 4 * 4, x[::4, 4:].T),
    ]
    for shape, strides, off, view in cases:
        assert view.shape == shape
        p = Producer(src.data_ptr, shape, strides=strides, byte_offset=off, keep=src)
        y = f(p)
        assert y.numpy().tobytes() == fh(view).tobytes(), (shape, strides, off)
        assert p.deleted == 1, "deleter called %d times" % p.deleted
        assert len(p.caps) == 1 and capsule_state(p.caps[0]) == "used"
        assert p.streams == [1], p.streams  # the legacy default stream (docs/python.md)
    # a CUDA array given to a CPU plan: an error naming the fix; the deleter still runs once
    p = Producer(src.data_ptr, (64, 33), keep=src)
    try:
        smelt.jit(arith, backend="TCC")(p)
        raise AssertionError("no error")
    except smelt.InvalidArgumentError as e:
        assert "backend='NVRTC'" in str(e) and "runs on TCC" in str(e), e
    assert p.deleted == 1 and capsule_state(p.caps[0]) == "used"
    # managed memory reads the same way
    p = Producer(src.data_ptr, (64, 33), device=(13, 0), keep=src)
    assert f(p).numpy().tobytes() == fh(x).tobytes() and p.deleted == 1
    # int32 and float64
    xi = rng.integers(-1000, 1000, (10, 7)).astype(np.int32)
    di = smelt.to_device(xi)
    pi = Producer(di.data_ptr, (10, 7), code=0, bits=32, keep=di)
    r = smelt.jit(lambda a: a * 3 - 7, backend="NVRTC")(pi)
    assert r.dtype == np.int32 and r.numpy().tobytes() == (xi * 3 - 7).astype(np.int32).tobytes()
    xd = rand(rng, 9, dtype=np.float64)
    dd = smelt.to_device(xd)
    pd = Producer(dd.data_ptr, (9,), code=2, bits=64, keep=dd)
    assert smelt.jit(arith, backend="NVRTC")(pd).numpy().tobytes() == smelt.jit(arith, backend="TCC")(xd).tobytes()


def check_mixed(smelt):
    rng = np.random.default_rng(43)
    x, b = rand(rng, 100, 20), rng.standard_normal(20).astype(np.float32)
    f = smelt.jit(arith2, backend="NVRTC")
    ref = smelt.jit(arith2, backend="TCC")(x, b)
    y = f(smelt.to_device(x), b)  # a host array beside a device one: copied in by the executor
    assert type(y) is smelt.DeviceArray and y.numpy().tobytes() == ref.tobytes()
    y = f(x, smelt.to_device(b))
    assert type(y) is smelt.DeviceArray and y.numpy().tobytes() == ref.tobytes()
    h = f(x, b)  # host arrays only: host results (staged through the device)
    assert type(h) is np.ndarray and h.tobytes() == ref.tobytes()
    # a captured host array and a device argument
    w = rng.standard_normal(20).astype(np.float32)
    fc = smelt.jit(lambda a: a * w, backend="NVRTC")
    assert fc(smelt.to_device(x)).numpy().tobytes() == (x * w).tobytes()
    try:
        f(smelt.to_device(x), b, out=np.empty_like(x))
        raise AssertionError("no error")
    except TypeError as e:
        assert "out=" in str(e)
    # exp on the device against float64 (math: within a few ulps, not bitwise)
    e = smelt.jit(lambda a: np.exp(a), backend="NVRTC")(smelt.to_device(x)).numpy()
    fin = np.isfinite(x)
    with np.errstate(over="ignore"):  # exp(1e30): inf in both
        np.testing.assert_allclose(e[fin], np.exp(x[fin].astype(np.float64)), rtol=4e-7 * 8)


CHECKS = {"round_trip": check_round_trip, "producer": check_producer, "mixed": check_mixed}

if __name__ == "__main__":
    smelt = _setup()
    CHECKS[sys.argv[1]](smelt)
    print("ok", sys.argv[1])
