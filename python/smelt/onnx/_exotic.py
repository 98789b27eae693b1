"""ONNX element types smelt has no dtype for, carried in smelt dtypes.

- float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz): their 8 bits in uint8.  To a
  float: a take from a 256-entry table of the values (exact).  From a float:
  ONNX 1.17's Cast rule (onnx.helper.float32_to_float8e4m3 / e5m2) written
  with elementwise operations on exactly representable values: the binade by
  comparisons against exact powers of two, the quantum of that binade, the
  magnitude divided by it (exact: a power of two) and rounded half to even,
  then the bits as small integers in float32 (exact).
- bfloat16: its 16 bits in int32.  To a float: sign, exponent from a
  256-entry table of powers of two (a take), mantissa / 128, NaN and inf.
  From a float: round to nearest even (onnxruntime's rule; onnx 1.17's
  reference Cast truncates), NaN -> 0x7FC0 (ONNX's float32_to_bfloat16).
- int4, uint4: their values in int64 (as the narrow integers of _convert).
  A cast to them clips then rounds half to even, as ONNX 1.17's reference
  (onnx.subbyte.float32_to_4bit_unpacked) does.
- uint64: its 64 bits in int64.  + - * wrap as uint64 (smelt's integer
  arithmetic is modular), bitwise operators are the same bits, a right
  shift is made logical, comparisons, Max and Min flip the sign bit, Mod is
  computed from int64 operations that never overflow, a uint64 exponent of
  Pow (float32 / float16 base) is exact, a cast to a float rounds once;
  other operators on uint64 are refused at load.

Only casts, quantization and data movement (Reshape, Transpose, Gather,
Concat, Slice, Where, ...) take float8, bfloat16 and int4 values; any other
operator on them is refused at load (UnsupportedOperator), never computed
on the carrier's bits.
"""
import numpy as np

FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ = 17, 18, 19, 20
BFLOAT16, UINT4, INT4, UINT64 = 16, 21, 22, 13
FLOAT8 = (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ)
INT4S = (UINT4, INT4)

# the carrier (a smelt dtype) of each type
_CARRIERS = {FLOAT8E4M3FN: np.dtype(np.uint8), FLOAT8E4M3FNUZ: np.dtype(np.uint8), FLOAT8E5M2: np.dtype(np.uint8),
             FLOAT8E5M2FNUZ: np.dtype(np.uint8), BFLOAT16: np.dtype(np.int32), UINT4: np.dtype(np.int64),
             INT4: np.dtype(np.int64), UINT64: np.dtype(np.int64)}
CARRIED = frozenset(_CARRIERS)

# float8 kinds: mantissa bits, exponent bias, the bits of the largest finite magnitude, of NaN (positive) and
# of inf (None: no inf), and uz (no negative zero; NaN is 0x80)
_F8 = {FLOAT8E4M3FN: (3, 7, 0x7E, 0x7F, None, False), FLOAT8E4M3FNUZ: (3, 8, 0x7F, 0x80, None, True),
       FLOAT8E5M2: (2, 15, 0x7B, 0x7F, 0x7C, False), FLOAT8E5M2FNUZ: (2, 16, 0x7F, 0x80, None, True)}

# operators that move or select values without computing on them: any carried type passes through
_MOVES = frozenset(["Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Concat",
                    "Split", "Slice", "Gather", "GatherElements", "GatherND", "Tile", "Where", "DepthToSpace",
                    "SpaceToDepth", "Pad", "Compress", "ReverseSequence", "Shape", "Size", "Constant",
                    "ConstantOfShape", "Trilu", "CenterCropPad"])
# operators exact on uint64's bits in int64 (two's complement arithmetic is modular)
_UINT64_SAME = frozenset(["Add", "Sub", "Mul", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Equal",
                          "Sum"])


def _unsupported(msg):
    from ._convert import UnsupportedOperator
    return UnsupportedOperator(msg)


def _name(t):
    import onnx
    return onnx.TensorProto.DataType.Name(t).lower()


def carrier(t):
    """the smelt dtype type t is carried in"""
    return _CARRIERS[t]


def np_dtype(t):
    """the NumPy dtype the onnx package (1.17) gives arrays of type t"""
    if t == UINT64:
        return np.dtype(np.uint64)
    from onnx import _custom_element_types as c
    return {FLOAT8E4M3FN: c.float8e4m3fn, FLOAT8E4M3FNUZ: c.float8e4m3fnuz, FLOAT8E5M2: c.float8e5m2,
            FLOAT8E5M2FNUZ: c.float8e5m2fnuz, BFLOAT16: c.bfloat16, UINT4: c.uint4, INT4: c.int4}[t]


def to_carrier(a, t):
    """a NumPy array of type t (onnx's representation: the custom dtypes of
    onnx._custom_element_types, int4 unpacked) as its carrier"""
    a = np.ascontiguousarray(a)
    if t in FLOAT8:
        return a.view(np.uint8).copy() if a.dtype.itemsize == 1 else a.astype(np.uint8)
    if t == BFLOAT16:
        return (a.view(np.uint16) if a.dtype.itemsize == 2 else a.astype(np.uint16)).astype(np.int32)
    if t == INT4:
        return (a.view(np.int8) if a.dtype.itemsize == 1 else a).astype(np.int64)
    if t == UINT4:
        return (a.view(np.uint8) if a.dtype.itemsize == 1 else a).astype(np.int64)
    return a.astype(np.uint64, copy=False).view(np.int64)  # UINT64


def from_carrier(a, t):
    """a carrier array as onnx's representation of type t"""
    a = np.ascontiguousarray(a)
    if t in FLOAT8:
        return a.astype(np.uint8).view(np_dtype(t))
    if t == BFLOAT16:
        return a.astype(np.uint16).view(np_dtype(t))
    if t == INT4:
        return a.astype(np.int8).view(np_dtype(t))
    if t == UINT4:
        return a.astype(np.uint8).view(np_dtype(t))
    return a.astype(np.int64, copy=False).view(np.uint64)


# ---- helpers on traced and known arrays ---------------------------------------------------------------
def _astype(x, dt):
    from ._convert import astype
    return astype(x, dt)


def _f32(v):
    return np.float32(v)


def _negative(x):
    """x < 0, -0.0 and -inf included (1 / -0.0 is -inf); False for NaN"""
    with np.errstate(all="ignore"):
        return np.logical_or(x < _f32(0), np.reciprocal(x) < _f32(0))


# ---- float8 ---------------------------------------------------------------------------------------------
def f8_table(t):
    """the 256 values of float8 kind t (float64, exact), NaN and inf as ONNX
    defines them"""
    mb, bias, maxb, nanb, infb, uz = _F8[t]
    v = np.empty(256, np.float64)
    for b in range(256):
        s, mag = b >> 7, b & 0x7F
        e, m = mag >> mb, mag & ((1 << mb) - 1)
        x = (m / (1 << mb)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mb)) * 2.0 ** (e - bias)
        v[b] = -x if s else x
    for b in range(256):
        mag = b & 0x7F
        if uz:
            if b == 0x80:
                v[b] = np.nan
        elif mag > maxb:
            v[b] = (np.inf if b < 128 else -np.inf) if (infb is not None and mag == infb) else np.nan
    return v


_TABLES = {}


def _table(t, dt):
    k = (t, np.dtype(dt).str)
    if k not in _TABLES:
        _TABLES[k] = f8_table(t).astype(dt)
    return _TABLES[k]


def f8_to_float(bits, t, dt=np.float32):
    """float8 bits (uint8) as values of float dtype dt: a take from the table"""
    from ._convert import is_traced
    idx = _astype(bits, np.int64)
    tab = _table(t, dt)
    if not is_traced(idx):
        return np.take(tab, np.asarray(idx))
    from .. import _tracer
    return _tracer.take(tab, idx, axis=0)


def float_to_f8(x, t, saturate=True):
    """float32 x as float8 kind t's bits (uint8), ONNX 1.17's Cast: round to
    nearest even; beyond the largest finite value (after rounding) and at
    +-inf, the largest finite value (saturate) or inf / NaN; NaN gives NaN
    (positive: a NaN's sign is not read).  Unsaturated, two ranges follow
    onnx 1.17's reference and onnxruntime 1.20.1 rather than the operator's
    table: e4m3fn [480, 496) gives 448, e5m2 [61440, 65536) NaN.
    Every step is exact in float32: a binade by comparisons with powers of
    two, its quantum, the magnitude / quantum rounded half to even, the bits
    as small integers."""
    mb, bias, maxb, nanb, infb, uz = _F8[t]
    x = _astype(x, np.float32)
    a = np.abs(x)
    emin = 1 - bias                                   # the smallest normal exponent
    etop = int(np.floor(np.log2(float(f8_table(t)[maxb])))) + 1  # the binade past the largest finite value
    a = np.minimum(a, _f32(2.0 ** (etop + 1)))        # larger ones overflow anyway (NaN stays NaN)
    q = None
    base = None
    for k in range(emin + 1, etop + 1):
        ge = a >= _f32(2.0 ** k)
        q = np.where(ge, _f32(2.0 ** (k - mb)), _f32(2.0 ** (emin - mb)) if q is None else q)
        base = np.where(ge, _f32((k + bias - 1) << mb), _f32(0) if base is None else base)
    mag = base + np.rint(a / q)                       # the bits of |x| rounded, possibly past the largest
    over = mag > _f32(maxb)
    if saturate:
        big = _f32(maxb)
    else:
        big = _f32(infb if infb is not None else nanb)
    mag = np.where(over, big, mag)
    if not saturate and t == FLOAT8E4M3FN:
        # onnx 1.17's reference (and onnxruntime 1.20.1) give 448, not NaN, from 480 (exclusive of 496 and up)
        mag = np.where(np.logical_and(a >= _f32(480), a < _f32(496)), _f32(maxb), mag)
    if not saturate and t == FLOAT8E5M2:
        # ... and NaN (with x's sign), not inf, from 61440 (rounded up past 57344) below 65536
        mag = np.where(np.logical_and(a >= _f32(61440), a < _f32(65536)), _f32(nanb), mag)
    neg = _negative(x)
    if uz:
        # no negative zero; NaN (and, unsaturated, overflow) is 0x80 without a sign
        signed = np.logical_and(neg, mag != _f32(0))
        if not saturate:
            signed = np.logical_and(signed, np.logical_not(over))
    else:
        signed = neg
    bits = np.where(signed, mag + _f32(128), mag)
    bits = np.where(np.isnan(x), _f32(nanb), bits)
    return _astype(bits, np.uint8)


# ---- bfloat16 ---------------------------------------------------------------------------------------------
_BF16_POW2 = None


def bf16_to_float(bits, dt=np.float32):
    """bfloat16 bits (int32, 0..65535) as float values: sign, the exponent's
    power of two from a table (a take), 1 + mantissa / 128 (0 + for the
    subnormals), inf and NaN"""
    global _BF16_POW2
    from ._convert import is_traced
    if _BF16_POW2 is None:
        p = np.array([2.0 ** (max(e, 1) - 127) for e in range(256)], np.float64)
        p[255] = np.inf
        _BF16_POW2 = p.astype(np.float32)
    b = _astype(bits, np.int64)
    e = np.bitwise_and(np.right_shift(b, np.int64(7)), np.int64(255))
    m = _astype(np.bitwise_and(b, np.int64(127)), np.float32)
    s = np.bitwise_and(b, np.int64(0x8000)) != np.int64(0)
    if is_traced(e):
        from .. import _tracer
        p = _tracer.take(_BF16_POW2, e, axis=0)
    else:
        p = np.take(_BF16_POW2, np.asarray(e))
    frac = m / _f32(128)
    v = np.where(e == np.int64(0), frac, frac + _f32(1)) * p
    v = np.where(np.logical_and(e == np.int64(255), m != _f32(0)), _f32(np.nan), v)
    v = np.where(s, -v, v)
    return _astype(v, dt)


def float_to_bf16(x):
    """float32 x as bfloat16 bits (int32): round to nearest even, NaN ->
    0x7FC0.  The exponent by halving steps (multiplications by powers of
    two, exact), the significand times 128 rounded half to even."""
    x = _astype(x, np.float32)
    a = np.abs(x)
    s, e = a, None
    for k in (64, 32, 16, 8, 4, 2, 1):                # a >= 1: s in [1, 2), e = floor(log2 a)
        ge = s >= _f32(2.0 ** k)
        s = np.where(ge, s * _f32(2.0 ** -k), s)
        e = np.where(ge, _f32(k), _f32(0)) if e is None else np.where(ge, e + _f32(k), e)
    for k in (64, 32, 16, 8, 4, 2, 1):                # a < 1 (normal): s in [1, 2)
        lt = s < _f32(2.0 ** (1 - k))
        s = np.where(lt, s * _f32(2.0 ** k), s)
        e = np.where(lt, e - _f32(k), e)
    normal = a >= _f32(2.0 ** -126)
    mag_n = (e + _f32(126)) * _f32(128) + np.rint(s * _f32(128))
    mag_s = np.rint(a * _f32(2.0 ** 66) * _f32(2.0 ** 67))  # subnormal: a / 2^-133
    mag = np.where(normal, mag_n, mag_s)
    mag = np.where(np.isinf(a), _f32(0x7F80), mag)
    bits = np.where(_negative(x), mag + _f32(0x8000), mag)
    bits = np.where(np.isnan(x), _f32(0x7FC0), bits)
    return _astype(bits, np.int32)


# ---- int4 -------------------------------------------------------------------------------------------------
def to_int4(x, t):
    """x (any carried or smelt value, not float8/bf16 bits) clipped to
    int4 / uint4's range, then rounded half to even (ONNX 1.17's rule), in
    int64"""
    lo, hi = (-8, 7) if t == INT4 else (0, 15)
    if np.dtype(x.dtype).kind == "f":
        x = np.rint(np.clip(x, np.dtype(x.dtype).type(lo), np.dtype(x.dtype).type(hi)))
        return _astype(x, np.int64)
    if np.dtype(x.dtype) == np.bool_:
        return _astype(x, np.int64)
    x = _astype(x, np.int64)
    return np.clip(x, np.int64(lo), np.int64(hi))


# ---- uint64 in int64 ------------------------------------------------------------------------------------
# (0-d arrays: captured with every bit, whatever the tracer makes of NumPy scalars)
_SIGN = np.array(-2 ** 63, np.int64)
_LOW32 = np.array(0xFFFFFFFF, np.int64)
_MAX63 = np.array(2 ** 63 - 1, np.int64)


def u64_flip(a):
    """a's bits with the sign bit flipped: signed order = uint64 order"""
    return np.bitwise_xor(a, _SIGN)


def u64_less(a, b):
    return u64_flip(a) < u64_flip(b)


def u64_max(a, b):
    return np.where(u64_less(a, b), b, a)


def u64_min(a, b):
    return np.where(u64_less(b, a), b, a)


def u64_shift_right(a, s):
    """logical right shift (s any uint64; >= 64 gives 0)"""
    one = np.int64(1)
    half = np.bitwise_and(np.right_shift(a, one), _MAX63)  # a >>> 1, non-negative
    return np.where(s == np.int64(0), a, np.right_shift(half, s - one))


def u64_mod(a, b):
    """a mod b for uint64 a, b (bits in int64), every step in int64 without
    overflow; b == 0 gives 0 (NumPy's)."""
    one, zero = np.int64(1), np.int64(0)
    # b >= 2^63 (negative as int64): a mod b = a if a < b else a - b (both >= 2^63 there: no overflow)
    big = np.where(u64_less(a, b), a, a - b)
    # b < 2^63: r1 = (a >>> 1) mod b, then a mod b = (2 r1 + (a & 1)) mod b, < 2 b
    bp = np.where(b < zero, one, b)
    half = np.bitwise_and(np.right_shift(a, one), _MAX63)
    r1 = np.mod(half, bp)
    c = np.bitwise_and(a, one)
    t = r1 + c - bp                                   # in [-b, 0]
    ge = t + r1 >= zero                               # 2 r1 + c >= b
    r1s = np.where(ge, zero, r1)                      # (so that 2 r1 + c is formed only where it is < b)
    small = np.where(ge, t + r1, r1s + r1s + c)
    return np.where(b < zero, big, np.where(b == zero, zero, small))


def u64_to_f64(a):
    """uint64 bits (int64) as float64, rounded to nearest even: the high and
    low 32 bits are exact in float64, their sum rounds once"""
    hi = _astype(u64_shift_right(a, np.int64(32)), np.float64)
    lo = _astype(np.bitwise_and(a, _LOW32), np.float64)
    return hi * np.float64(2.0 ** 32) + lo


def u64_to_float(a, dt):
    """uint64 as float dtype dt, one rounding: for float32 / float16 the low
    11 bits are first made sticky (rounded to odd), so that the float64 is
    exact and its rounding to the narrower type is the one of the integer"""
    dt = np.dtype(dt)
    if dt == np.float64:
        return u64_to_f64(a)
    low = np.int64(0x7FF)
    sticky = np.where(np.bitwise_and(a, low) != np.int64(0), np.int64(0x800), np.int64(0))
    odd = np.bitwise_or(np.bitwise_and(a, np.bitwise_not(low)), sticky)
    big = u64_shift_right(a, np.int64(53)) != np.int64(0)
    f = u64_to_f64(np.where(big, odd, a))
    return _astype(_astype(f, np.float32), dt)


def float_to_u64(x):
    """a float as uint64 bits: truncated; from 2^63 up through x - 2^63
    (exact) with the sign bit set"""
    x64 = _astype(x, np.float64)
    two63 = np.float64(2.0 ** 63)
    hi = x64 >= two63
    small = _astype(np.where(hi, np.float64(0), x64), np.int64)
    large = np.bitwise_or(_astype(np.where(hi, x64 - two63, np.float64(0)), np.int64), _SIGN)
    return np.where(hi, large, small)


# ---- values of one type as another (Cast) --------------------------------------------------------------
def cast(x, src, dst, saturate=True):
    """x of ONNX type src (carried where src is carried) as type dst
    (carried where dst is): ONNX 1.17's Cast"""
    from ._convert import _np_dtype
    if src == dst:
        return x
    # the value: floats for float8 and bfloat16, ints for int4, a float or the bits for uint64
    if src in FLOAT8:
        v = f8_to_float(x, src, np.float16 if dst == 10 else np.float32)
    elif src == BFLOAT16:
        v = bf16_to_float(x)
    else:
        v = x
    if dst in FLOAT8:
        if src == UINT64:
            v = u64_to_float(v, np.float32)
        return float_to_f8(_astype(v, np.float32), dst, saturate)
    if dst == BFLOAT16:
        if src == UINT64:
            v = u64_to_float(v, np.float32)
        return float_to_bf16(_astype(v, np.float32))
    if dst in INT4S:
        if src == UINT64:
            v = u64_to_float(v, np.float64)
        return to_int4(v, dst)
    if dst == UINT64:
        if np.dtype(v.dtype).kind == "f":
            return float_to_u64(v)
        return _astype(v, np.int64)
    out = _np_dtype(dst)
    if src == UINT64:
        if out.kind == "f":
            return u64_to_float(v, out)
        if out == np.bool_:
            return v != np.int64(0)
    return _astype(v, out)


# ---- the operators ----------------------------------------------------------------------------------------
def _cast_node(ts, to, A):
    def f(c, ins, A_):
        return cast(ins[0], ts[0], to, bool(A.get("saturate", 1)))
    return f


def _quantize_node(tq, A):
    """QuantizeLinear to float8 (x / scale cast with saturate; the zero
    point is 0 by ONNX's rule) or to int4 / uint4 (rint(x / scale) + zero
    point, clipped)"""
    from ._convert import _q_param, astype

    def f(c, ins, A_):
        x, s = ins[0], ins[1]
        zp = ins[2] if len(ins) > 2 and ins[2] is not None else None
        axis, block = A.get("axis", 1), int(A.get("block_size", 0))
        v = x / _q_param(s, x, axis, block)
        if tq in FLOAT8:
            return float_to_f8(v, tq, bool(A.get("saturate", 1)))
        r = np.rint(v)
        if zp is not None:
            r = r + astype(_q_param(zp, x, axis, block), np.dtype(r.dtype))
        return to_int4(r, tq)
    return f


def _dequantize_node(tx, A):
    from ._convert import _q_param, astype

    def f(c, ins, A_):
        x, s = ins[0], ins[1]
        zp = ins[2] if len(ins) > 2 and ins[2] is not None else None
        axis, block = A.get("axis", 1), int(A.get("block_size", 0))
        if tx in FLOAT8:
            d = f8_to_float(x, tx)                    # (a float8 zero point is 0 by ONNX's rule)
        else:
            d = astype(x, np.float32)
            if zp is not None:
                d = d - astype(_q_param(zp, x, axis, block), np.float32)
        return astype(d * astype(_q_param(s, x, axis, block), np.float32), np.dtype(s.dtype))
    return f


def _u64_node(op, A, fn):
    if op == "Max" or op == "Min":
        g = u64_max if op == "Max" else u64_min

        def f(c, ins, A_):
            r = ins[0]
            for x in ins[1:]:
                r = g(r, x)
            return r
        return f
    if op == "BitShift":
        if A.get("direction") == "RIGHT":
            return lambda c, ins, A_: u64_shift_right(ins[0], ins[1])
        return fn                                     # a left shift is the same bits (counts >= 64 give 0)
    if op == "Mod":
        return lambda c, ins, A_: u64_mod(ins[0], ins[1])
    cmp = {"Less": lambda a, b: u64_less(a, b), "Greater": lambda a, b: u64_less(b, a),
           "LessOrEqual": lambda a, b: np.logical_not(u64_less(b, a)),
           "GreaterOrEqual": lambda a, b: np.logical_not(u64_less(a, b))}.get(op)
    if cmp is not None:
        return lambda c, ins, A_: cmp(ins[0], ins[1])
    return fn


def _pow_u64_exponent(c, ins, A):
    """a float32 / float16 base to a uint64 exponent, in float64 as NumPy
    computes float32 ** uint64: the exponent is exact in float64 below 2^53;
    from 2^53 a float32 base other than +-1 gives 0 or inf at any such
    exponent, and +-1 its sign by the exponent's parity, which the float64
    would lose: those exponents are taken as 2^53 - 1 (odd) or 2^53 (even)"""
    from ._convert import astype
    a, b = ins
    e = u64_to_f64(b)
    huge = u64_shift_right(b, np.int64(53)) != np.int64(0)
    odd = np.bitwise_and(b, np.int64(1)) != np.int64(0)
    e = np.where(huge, np.where(odd, np.float64(2.0 ** 53 - 1), np.float64(2.0 ** 53)), e)
    return astype(np.power(astype(a, np.float64), e), np.dtype(a.dtype))


def hook(label, node, attrs, elem, fn):
    """The function that runs node where it reads or makes a carried type
    (None where it does not: _convert's own), or UnsupportedOperator."""
    op = node.op_type
    ts_in = [elem.get(n) if n else None for n in node.input]
    ts_out = [elem.get(n) if n else None for n in node.output]
    carried = [t for t in ts_in + ts_out if t in CARRIED]
    if not carried:
        return None
    for o, t in zip(node.output, ts_out):
        if o and t is None:
            raise _unsupported("%s: output %r has no known type (a model with %s values needs every value's "
                               "type)" % (label, o, _name(carried[0])))
    if op in ("Cast", "CastLike"):
        to = attrs["to"] if op == "Cast" else ts_in[1]
        if ts_in[0] is None:
            raise _unsupported("%s: input %r has no known type" % (label, node.input[0]))
        return _cast_node(ts_in, to, attrs)
    if op == "QuantizeLinear" and ts_out[0] in CARRIED:
        if ts_out[0] == UINT64:
            raise _unsupported("%s: QuantizeLinear to uint64 is not supported" % label)
        return _quantize_node(ts_out[0], attrs)
    if op == "DequantizeLinear" and ts_in[0] in CARRIED:
        if ts_in[0] == UINT64:
            raise _unsupported("%s: DequantizeLinear from uint64 is not supported" % label)
        return _dequantize_node(ts_in[0], attrs)
    if op in _MOVES:
        return _moves(fn, ts_out)
    if all(t == UINT64 for t in carried):
        if op == "Pow" and ts_in[1] == UINT64 and ts_in[0] != UINT64:
            if ts_in[0] in (1, 10):  # FLOAT, FLOAT16
                return _pow_u64_exponent
            raise _unsupported("%s: Pow of a %s base to a uint64 exponent is not supported (exact for float32 "
                               "and float16 bases only: a float64 base near 1 needs every bit of an exponent "
                               "from 2^53)" % (label, "float64" if ts_in[0] == 11 else _name(ts_in[0] or 0)))
        if op in _UINT64_SAME or op in ("Max", "Min", "BitShift", "Mod", "Less", "Greater", "LessOrEqual",
                                        "GreaterOrEqual"):
            return _u64_node(op, attrs, fn)
        raise _unsupported("%s: %s on uint64 is not supported (uint64 is carried in int64: bitwise operators, "
                           "shifts, + - *, comparisons, Max, Min, Mod, casts and data movement are exact; "
                           "this one is not made exact for values from 2^63)" % (label, op))
    raise _unsupported("%s: %s on %s is not supported (%s is carried as its bits: casts, quantization and data "
                       "movement only)" % (label, op, _name(carried[0]), _name(carried[0])))


def _moves(fn, ts_out):
    """a data-movement operator on carriers; known arrays of onnx's custom
    dtypes (a Constant's value) made carriers"""
    from ._convert import is_traced

    def f(c, ins, A):
        r = fn(c, ins, A)
        one = not isinstance(r, (list, tuple))
        rs = [r] if one else list(r)
        for i, (v, t) in enumerate(zip(rs, ts_out)):
            if t in CARRIED and v is not None and not is_traced(v):
                v = np.asarray(v)
                if v.dtype.fields or v.dtype != carrier(t):  # (onnx's custom dtypes compare equal to uint8)
                    rs[i] = to_carrier(v, t)
        return rs[0] if one else rs
    return f
