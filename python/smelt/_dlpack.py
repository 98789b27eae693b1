"""CUDA arrays in and out of smelt.jit through DLPack (the NVRTC backend).

In: an argument whose __dlpack_device__() is a CUDA device (kDLCUDA,
kDLCUDAManaged, kDLCUDAHost; device 0) is read through its __dlpack__
capsule: the DLManagedTensor's pointer, shape, strides and dtype become a
device tensor over the producer's memory (smelt_tensor_wrap_device), the
capsule is renamed "used_dltensor" (smelt owns it), and the managed
tensor's deleter is called once the run is over.  smelt.DeviceArray
arguments are read directly.

Out: a plan run with a device argument allocates its results on the device;
they come back as smelt.DeviceArray, whose __dlpack__ hands the memory to
another library (torch.from_dlpack, cupy.from_dlpack, smelt itself).

Streams: smelt's kernels run on its own non-blocking stream, and a run
returns when they have finished, so a result is ready on any stream: its
__dlpack__ accepts any stream= and never synchronises.  For inputs smelt
asks the producer for stream=1 (the legacy default stream, as the array
API standard defines for CUDA) and then waits for that stream on the host
before its own kernels, since a non-blocking stream does not wait for it.
"""
import ctypes
import os

import numpy as np

from . import _dtypes as D
from ._lib import T, BackendError, DtypeError, InvalidArgumentError, RuntimeFailure, context, ffi, lib, make_error
from ._tracer import ensure_usable, wrap_tensor

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
DEVICE_TYPES = (kDLCUDA, kDLCUDAHost, kDLCUDAManaged)


# ---- the DLPack structures (dlpack.h) ---------------------------------------------
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):  # DLPack 1.x ("dltensor_versioned")
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# capsule functions, as functions of their own (the shared ctypes.pythonapi's
# argtypes are left alone); the names passed must outlive the capsules
_api = ctypes.pythonapi
_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
_RawIsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_RawGetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(("PyCapsule_New", _api))
_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
_USED = b"used_dltensor"
_USED_V = b"used_dltensor_versioned"

# DLPack (code, bits) -> smelt dtype
_CODES = {(0, 32): D.I32, (0, 64): D.I64, (1, 8): D.U8, (2, 16): D.F16, (2, 32): D.F32, (2, 64): D.F64,
          (4, 16): D.BF16, (6, 8): D.BOOL}
_TO_DL = {v: k for k, v in _CODES.items()}
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex", 6: "bool"}


def device_of(x):
    """The DLPack device type of x when it is one smelt reads on the device
    (CUDA, CUDA managed, CUDA pinned host), else None."""
    if type(x) is DeviceArray:
        return kDLCUDA
    try:
        dev = x.__dlpack_device__()
        t = int(dev[0])
    except Exception:
        return None
    return t if t in DEVICE_TYPES else None


def _dtype_of(dl, what):
    code, bits, lanes = dl.code, dl.bits, dl.lanes
    if lanes != 1:
        raise DtypeError(-4, "%s: a DLPack array of %d-lane elements (%s%d x %d); smelt reads arrays of "
                         "1-lane elements" % (what, lanes, _CODE_NAMES.get(code, "code %d " % code), bits, lanes))
    dt = _CODES.get((code, bits))
    if dt is None:
        raise DtypeError(-4, "%s: DLPack dtype code %d (%s) with %d bits is not supported by smelt (it has %s, "
                         "bfloat16)" % (what, code, _CODE_NAMES.get(code, "unknown"), bits, D.SUPPORTED))
    return dt, D.to_numpy(dt)


def _contig(shape):
    st, n = [], 1
    for d in reversed(shape):
        st.append(n)
        n *= max(d, 1)
    return tuple(reversed(st))


# ---- arguments ---------------------------------------------------------------------
class DeviceLeaf:
    """A device array argument of one call: its layout, and what the run
    needs (the device pointer, or the DeviceArray).  release() ends smelt's
    use: the wrapped tensor is freed and the producer's deleter called."""

    __slots__ = ("array", "managed", "deleter", "dt", "dtype", "shape", "estrides", "ptr", "key", "tensor",
                 "what")

    def __init__(self, x, what="argument"):
        self.array = self.managed = self.deleter = self.tensor = None
        self.what = "%s (%s)" % (what, type(x).__name__)
        if type(x) is DeviceArray:
            self.array = x
            self.dt, self.dtype, self.shape = x._dt, x.dtype, x.shape
            self.estrides = _contig(x.shape)
            self.ptr = None
        else:
            self._consume(x)
        self.key = (self.dtype, self.shape, self.estrides, "cuda")

    def _consume(self, x):
        dev = x.__dlpack_device__()
        kind, dev_id = int(dev[0]), int(dev[1])
        try:
            cap = x.__dlpack__(stream=1 if kind != kDLCUDAHost else None)
        except TypeError:  # a producer without the stream keyword
            cap = x.__dlpack__()
        if _IsValid(cap, _NAME):
            addr = _GetPointer(cap, _NAME)
            _SetName(cap, _USED)  # consumed: smelt calls the deleter
            m = DLManagedTensor.from_address(addr)
        elif _IsValid(cap, _NAME_V):
            addr = _GetPointer(cap, _NAME_V)
            _SetName(cap, _USED_V)
            m = DLManagedTensorVersioned.from_address(addr)
        else:
            raise InvalidArgumentError(-1, "%s: __dlpack__ returned %r, not a DLPack capsule (\"dltensor\") "
                                       "that was not consumed before" % (self.what, cap))
        self.managed, self.deleter = addr, m.deleter
        try:
            t = m.dl_tensor
            if t.device.device_type != kind or t.device.device_id != dev_id:
                raise InvalidArgumentError(-1, "%s: __dlpack_device__ says %s but the capsule's tensor is on "
                                           "(%d, %d)" % (self.what, (kind, dev_id), t.device.device_type,
                                                         t.device.device_id))
            if dev_id != 0:
                raise InvalidArgumentError(-1, "%s is on CUDA device %d; smelt runs on device 0" % (self.what, dev_id))
            self.dt, self.dtype = _dtype_of(t.dtype, self.what)
            if not 0 <= t.ndim <= 8:
                raise InvalidArgumentError(-3, "%s: rank %d (smelt takes 0 to 8)" % (self.what, t.ndim))
            self.shape = tuple(t.shape[i] for i in range(t.ndim))
            self.estrides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else _contig(self.shape)
            self.ptr = (t.data or 0) + t.byte_offset
        except BaseException:
            self.release()
            raise

    def standin(self):
        """A host array of this dtype and shape that owns no memory: the
        trace reads dtype and shape only."""
        return np.lib.stride_tricks.as_strided(np.empty(1, self.dtype), self.shape, (0,) * len(self.shape))

    def wrap(self, ctx):
        """The device tensor the run reads."""
        if self.array is not None:
            return self.array._t
        shape = ffi.new(T["int64_t[]"], list(self.shape) or [0])
        strides = ffi.new(T["int64_t[]"], list(self.estrides) or [0])
        out = ffi.new(T["smelt_tensor **"])
        st = lib.smelt_tensor_wrap_device(ctx.ptr, self.dt, len(self.shape), shape, strides,
                                          ffi.cast(T["void *"], self.ptr), out)
        if st:
            raise make_error(st, "%s: %s" % (self.what, ctx.errmsg()))
        self.tensor = out[0]
        return self.tensor

    def release(self):
        t, self.tensor = self.tensor, None
        if t is not None:
            lib.smelt_tensor_free(t)  # the tensor only: the memory is the producer's
        m, self.managed = self.managed, None
        d, self.deleter = self.deleter, None
        self.array = None
        if m is not None and d:
            d(m)

    __del__ = release


def standins(leaves):
    """leaves with each device leaf replaced by a host stand-in of its dtype
    and shape (leaves itself when there is none)."""
    if not any(type(a) is DeviceLeaf for a in leaves):
        return leaves
    return [a.standin() if type(a) is DeviceLeaf else a for a in leaves]


# ---- the producer's stream ---------------------------------------------------------
_driver = None


def _sync_legacy_stream():
    """Wait on the host for CUDA's legacy default stream in device 0's
    primary context (smelt's), where producers were asked to order their
    work (stream=1)."""
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL(os.environ.get("SMELT_CUDA_DRIVER_LIB") or "libcuda.so.1")
    d = _driver
    dev, cctx, old = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()

    def check(st, call):
        if st:
            raise RuntimeFailure(-7, "CUDA: %s failed (%d) while waiting for the DLPack producer's stream" % (call, st))
    check(d.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(d.cuDevicePrimaryCtxRetain(ctypes.byref(cctx), dev), "cuDevicePrimaryCtxRetain")
    try:
        check(d.cuCtxPushCurrent_v2(cctx), "cuCtxPushCurrent")
        try:
            check(d.cuStreamSynchronize(ctypes.c_void_p(1)), "cuStreamSynchronize(CU_STREAM_LEGACY)")
        finally:
            d.cuCtxPopCurrent_v2(ctypes.byref(old))
    finally:
        d.cuDevicePrimaryCtxRelease_v2(dev)


# ---- running a plan on device arguments --------------------------------------------
def _plan_backend(plan):
    s = ffi.new(T["smelt_plan_stats *"])
    lib.smelt_plan_get_stats(plan, s)
    return ffi.string(s.backend).decode() if s.backend != ffi.NULL else "?"


def nvrtc_reason(ctx):
    """None when the NVRTC backend is usable, else why not."""
    with ctx.lock:
        if lib.smelt_backend_check(ctx.ptr, b"NVRTC") == 0:
            return None
        return ctx.errmsg()


def run(e, leaves, out):
    """Run entry e of a compiled function on leaves, some of them device
    arrays: host arrays are staged by the executor, results are
    DeviceArrays."""
    ctx = e.tr.ctx
    try:
        if out is not None:
            raise TypeError("out=: results of a call with device arrays are new smelt.DeviceArrays; out= is not "
                            "taken")
        if e.dev is True:
            e.dev = _plan_backend(e.plan)
        if e.dev != "NVRTC":
            first = next(a for a in leaves if type(a) is DeviceLeaf)
            why = nvrtc_reason(ctx)
            fix = "compile the function with smelt.jit(..., backend='NVRTC') to run it on the GPU, or copy " \
                  "the array to the host first"
            if why is None:
                raise InvalidArgumentError(-1, "%s: %s is a CUDA array, and this plan runs on %s (host memory): %s"
                                           % (e.tr.fname, first.what, e.dev, fix))
            raise BackendError(-5, "%s: %s is a CUDA array, and this plan runs on %s (host memory): %s; here "
                               "the NVRTC backend cannot run: %s" % (e.tr.fname, first.what, e.dev, fix, why))
        keep, ts, foreign = [], [], False
        for a in leaves:
            if type(a) is DeviceLeaf:
                foreign = foreign or a.array is None
                ts.append(a.wrap(ctx))
            else:  # a host array: the executor copies it in
                a = ensure_usable(a, "argument")
                keep.append(a)
                ts.append(wrap_tensor(ctx, a))
        res = {}
        for item in e.tr.extra:  # captured arrays and exclude_from_trace results: host arrays
            if item[0] == "capture":
                a = item[1]
            else:
                cb, i = item[1], item[2]
                if cb not in res:
                    res[cb] = cb.call_again()
                a = res[cb][i]
            a = ensure_usable(a, "captured array")
            keep.append(a)
            ts.append(wrap_tensor(ctx, a))
        plan = e.plan
        if e.eager_pending:
            plan = e.plan0
            e.eager_pending = False
        ins = ffi.new(T["smelt_tensor *[]"], ts or [ffi.NULL])
        outs = ffi.new(T["smelt_tensor *[]"], max(e.n_out, 1))
        e.calls += 1
        with e.lock:
            if foreign:
                _sync_legacy_stream()
            st = lib.smelt_plan_run(plan, len(ts), ins, e.n_out, outs)
            msg = ctx.errmsg() if st else None
        if st:
            raise make_error(st, "running %s: %s" % (e.tr.fname, msg))
        return [DeviceArray._own(outs[j]) for j in range(e.n_out)]
    finally:
        with e.lock:
            for a in leaves:
                if type(a) is DeviceLeaf:
                    a.release()


# ---- results -----------------------------------------------------------------------
_exported = {}  # manager_ctx -> (DLManagedTensor, shape, strides, DeviceArray): alive while a consumer holds it


def _deleter(addr):
    m = DLManagedTensor.from_address(addr)
    _exported.pop(m.manager_ctx, None)


def _capsule_destructor(cap):
    if _RawIsValid(cap, _NAME):  # never consumed: the producer's deleter is ours to call
        addr = _RawGetPointer(cap, _NAME)
        DLManagedTensor.from_address(addr).deleter(addr)


_DELETER = DELETER(_deleter)
_DESTRUCTOR = DESTRUCTOR(_capsule_destructor)
_destructor = None


def destructor_in_c():
    """The address of the capsules' destructor, and whether it is the
    accelerator's (C) one.  Without the accelerator it is written in Python:
    a capsule dropped unconsumed while an exception is pending (a consumer
    refusing the array) then loses that exception to a SystemError."""
    global _destructor
    if _destructor is None:
        from ._jit import _accel
        if _accel is not None and hasattr(_accel, "dlpack_destructor"):
            _destructor = (_accel.dlpack_destructor(), True)
        else:
            _destructor = (ctypes.cast(_DESTRUCTOR, ctypes.c_void_p).value, False)
    return _destructor


def _free(t, lock):
    with lock:
        lib.smelt_tensor_free(t)


class DeviceArray:
    """An array in GPU memory (CUDA device 0) owned by smelt: the result of a
    function run on the device, or smelt.to_device(x).  .shape, .dtype,
    .numpy() (a host copy), __dlpack__ / __dlpack_device__ (another library
    reads it without a copy), __cuda_array_interface__.  Its memory is freed
    when it and every DLPack capsule taken from it are gone."""

    __slots__ = ("_t", "shape", "dtype", "_dt", "__weakref__")

    def __init__(self, *a, **k):
        raise TypeError("smelt.DeviceArray is made by smelt.to_device(x) and by functions run on the device")

    @classmethod
    def _own(cls, t):
        self = object.__new__(cls)
        self._dt = lib.smelt_tensor_dtype(t)
        self.dtype = D.to_numpy(self._dt)
        sh = lib.smelt_tensor_shape(t)
        self.shape = tuple(sh[i] for i in range(lib.smelt_tensor_ndim(t)))
        ctx = context()
        self._t = ffi.gc(t, lambda p, lock=ctx.lock: _free(p, lock))
        return self

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    data_ptr = property(lambda self: int(ffi.cast("uintptr_t", lib.smelt_tensor_data(self._t))),
                        doc="the CUDA device pointer of the first element")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        return "smelt.DeviceArray(shape=%s, dtype=%s, device='cuda:0')" % (self.shape, self.dtype)

    def numpy(self):
        """A NumPy copy of the array."""
        ctx = context()
        out = np.empty(self.shape, self.dtype)
        with ctx.lock:
            h = wrap_tensor(ctx, out)
            st = lib.smelt_tensor_copy_to_host(h, self._t)
            msg = ctx.errmsg() if st else None
        if st:
            raise make_error(st, "DeviceArray.numpy: %s" % msg)
        return out

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("a smelt.DeviceArray is in GPU memory: NumPy can only have a copy of it")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __dlpack_device__(self):
        return (kDLCUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A "dltensor" capsule over this array's device memory, no copy.
        Any stream= is fine: smelt's kernels finished before the array was
        returned.  The memory stays alive until the consumer calls the
        deleter (or the capsule is dropped unconsumed)."""
        if dl_device is not None and tuple(dl_device) != (kDLCUDA, 0):
            raise BufferError("smelt.DeviceArray is on CUDA device 0, not %r" % (tuple(dl_device),))
        if copy:
            raise BufferError("smelt.DeviceArray exports its memory without a copy (copy=True is not done)")
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(n, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(n, 1))(*_contig(self.shape))
        m = DLManagedTensor()
        t = m.dl_tensor
        t.data = lib_ptr = int(ffi.cast("uintptr_t", lib.smelt_tensor_data(self._t)))
        t.device = DLDevice(kDLCUDA, 0)
        t.ndim = n
        code, bits = _TO_DL[self._dt]
        t.dtype = DLDataType(code, bits, 1)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = 0
        key = ctypes.addressof(m)
        m.manager_ctx = key
        m.deleter = _DELETER
        _exported[key] = (m, shape, strides, self, lib_ptr)
        return _New(key, _NAME, destructor_in_c()[0])

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3, "strides": None,
                "data": (self.data_ptr, False), "stream": None}


def to_device(x):
    """A smelt.DeviceArray with a copy of x (a NumPy array or anything
    np.asarray takes) on the GPU (CUDA device 0, the NVRTC backend)."""
    if type(x) is DeviceArray:
        return x
    a = ensure_usable(np.asarray(x), "smelt.to_device")
    ctx = context()
    dt = D.to_smelt(a.dtype, "smelt.to_device")
    shape = ffi.new(T["int64_t[]"], list(a.shape) or [0])
    out = ffi.new(T["smelt_tensor **"])
    with ctx.lock:
        st = lib.smelt_tensor_new_device(ctx.ptr, dt, a.ndim, shape, out)
        if not st:
            d = DeviceArray._own(out[0])
            st = lib.smelt_tensor_copy_from_host(d._t, wrap_tensor(ctx, a))
        msg = ctx.errmsg() if st else None
    if st:
        raise make_error(st, "smelt.to_device: %s" % msg)
    return d
