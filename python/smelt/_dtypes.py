"""NumPy dtypes <-> smelt dtypes (include/smelt.h's enum smelt_dtype)."""
import numpy as np

from ._lib import DtypeError

F32, F64, I32, I64, U8, BOOL, F16, BF16 = range(8)

_np_to_smelt = {
    np.dtype(np.float32): F32, np.dtype(np.float64): F64, np.dtype(np.int32): I32,
    np.dtype(np.int64): I64, np.dtype(np.uint8): U8, np.dtype(np.bool_): BOOL,
    np.dtype(np.float16): F16,
}
try:  # bfloat16 where a package gives NumPy one (ml_dtypes, as JAX uses)
    import ml_dtypes  # noqa: F401
    _np_to_smelt[np.dtype("bfloat16")] = BF16
except Exception:
    pass
_smelt_to_np = {v: k for k, v in _np_to_smelt.items()}
# by dtype.char too: the key of a cached call (a dict lookup on a str)
char_to_smelt = {k.char: v for k, v in _np_to_smelt.items()}

SUPPORTED = "float32, float64, float16, int32, int64, uint8, bool"


def to_smelt(dtype, what="array"):
    """smelt's dtype for a NumPy dtype (anything np.dtype accepts)."""
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise DtypeError(-4, "%s: %r is not a dtype" % (what, dtype)) from None
    if d.byteorder == ">" or (d.byteorder == "=" and not np.little_endian):
        d = d.newbyteorder("<")
    dt = _np_to_smelt.get(d)
    if dt is None:
        raise DtypeError(-4, "%s: dtype %s is not supported by smelt (it has %s); convert it "
                         "first, e.g. x.astype(np.float32)" % (what, d, SUPPORTED))
    return dt


def to_numpy(dt):
    d = _smelt_to_np.get(dt)
    if d is None:
        raise DtypeError(-4, "smelt dtype %d has no NumPy dtype here (bf16 needs ml_dtypes)" % dt)
    return d


def is_float(dt):
    return dt in (F32, F64, F16, BF16)
