#!/usr/bin/env python3
"""End-to-end tests of the `smelt` command-line tool against NumPy.

    test-cli.py PATH/TO/smelt

Inputs are fresh random arrays (the seed is printed; SMELT_TEST_SEED=N
repeats a run) written with numpy.save; results are compared with what
NumPy computes from the same expression.  Also: printing, graph files
(`smelt run`), `smelt explain`, `smelt info`, --help, --time, --dump, and
the error messages and exit statuses (0 ok, 1 bad input, 2 bad usage).

Needs NumPy in the interpreter that runs it (meson uses /usr/bin/python3);
without it the test is skipped (exit status 77).
"""
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("test-cli: skipped: numpy is not installed for %s" % sys.executable)
    sys.exit(77)

SMELT = os.path.abspath(sys.argv[1])
SEED = int(os.environ.get("SMELT_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
rng = np.random.default_rng(SEED)
print("test-cli: seed %d (SMELT_TEST_SEED=%d repeats this run)" % (SEED, SEED))

from checks import check, done  # noqa: E402 (tests/checks.py)


TMP = tempfile.mkdtemp(prefix="smelt-cli-")
BASE_ENV = dict(os.environ)
BASE_ENV["SMELT_JIT_BACKEND"] = "TCC"  # deterministic and fast; one run below uses AUTO
BASE_ENV["SMELT_CACHE_DIR"] = os.path.join(TMP, "cache")
BASE_ENV.pop("MGB_JIT_BACKEND", None)
BASE_ENV.pop("SMELT_DUMP_DIR", None)


def smelt(*args, env=None):
    e = dict(BASE_ENV)
    if env:
        for k, v in env.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
    p = subprocess.run([SMELT] + list(args), capture_output=True, text=True, cwd=TMP, env=e)
    return p.returncode, p.stdout, p.stderr


def path(name):
    return os.path.join(TMP, name)


def save(name, arr):
    np.save(path(name), arr)
    return "%s=%s" % (name.split(".")[0], path(name))


def nonzero_normal(shape, dtype):
    x = rng.standard_normal(shape)
    x[np.abs(x) < 1e-3] = 0.5
    return x.astype(dtype)


# ---- data -------------------------------------------------------------------------
S = (50, 40)
data = {
    "a": nonzero_normal(S, np.float32),
    "b": nonzero_normal(S, np.float32),
    "c": nonzero_normal((40,), np.float32),
    "d": nonzero_normal(S, np.float64),
    "i": rng.integers(-1000, 1000, S).astype(np.int32),
    "j": rng.integers(1, 100, S).astype(np.int32),
    "k": rng.integers(-2**40, 2**40, (40,)).astype(np.int64),
    "u": rng.integers(1, 256, S).astype(np.uint8),
    "m": rng.integers(0, 2, S).astype(np.bool_),
    "h": nonzero_normal(S, np.float16),
}
ARGS = {n: save(n + ".npy", v) for n, v in data.items()}

NS = {
    "where": np.where, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "exp": np.exp,
    "sqrt": np.sqrt, "abs": np.abs, "arctan2": np.arctan2, "maximum": np.maximum,
    "minimum": np.minimum, "log1p": np.log1p, "expm1": np.expm1, "floor": np.floor,
    "ceil": np.ceil, "log": np.log, "arcsin": np.arcsin, "power": np.power,
    "float16": lambda x: np.asarray(x).astype(np.float16),
    "sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min, "amax": np.amax,
    "amin": np.amin, "argmax": np.argmax, "argmin": np.argmin, "any": np.any, "all": np.all,
}


def close(got, want, what, f32=False):
    """Equal dtype and shape; integers and bool exact; floats within a few
    units of the precision (f32's if f32 values took part, f16's for f16
    results), relative to the result's magnitude (cancellation)."""
    check(got.shape == want.shape, "%s: shape %s, NumPy %s" % (what, got.shape, want.shape))
    check(got.dtype == want.dtype, "%s: dtype %s, NumPy %s" % (what, got.dtype, want.dtype))
    if got.shape != want.shape:
        return
    if got.dtype.kind == "f":
        eps = np.finfo(np.float16 if got.dtype == np.float16 else
                       np.float32 if f32 or got.dtype == np.float32 else np.float64).eps
        finite = np.abs(want[np.isfinite(want)]) if want.size else np.zeros(1)
        scale = max(1.0, float(finite.max()) if finite.size else 1.0)
        ok = np.allclose(got, want, rtol=8 * eps, atol=8 * eps * scale, equal_nan=True)
        with np.errstate(all="ignore"):
            err = np.nanmax(np.abs(got.astype(np.float64) - want)) if got.size else 0
        check(ok, "%s: max error %g" % (what, err))
    else:
        check(np.array_equal(got, want), "%s: %d elements differ" % (what, np.sum(got != want)))


def eval_case(expr, names, extra=()):
    out = path("out.npy")
    if os.path.exists(out):
        os.remove(out)
    rc, so, se = smelt("eval", expr, *[ARGS[n] for n in names], "-o", out, *extra)
    check(rc == 0, "eval %r: exit %d: %s" % (expr, rc, se))
    if rc:
        return
    with np.errstate(all="ignore"):
        want = eval(expr, dict(NS), {n: data[n] for n in names})
    close(np.load(out), np.asarray(want), "eval %r" % expr, any(data[n].dtype == np.float32 for n in names))


# ---- eval against NumPy ----------------------------------------------------------------
cases = [
    ("where(a > 0, a*b, exp(c)) + 1", "abc"),
    ("sin(a)**2 + cos(b)**2 - tanh(c)", "abc"),
    ("a * 2.5 + d", "ad"),
    ("arctan2(a, b) + sqrt(abs(d))", "abd"),
    ("(i // 3 + j % 7 - (i << 2)) ^ (k & 255)", "ijk"),
    ("i // -3 + k % 7 - (j >> 1)", "ijk"),
    ("(m & (a > b)) | ~m", "abm"),
    ("u + 7", "u"),
    ("u * 3 - 1", "u"),
    ("maximum(a, b) - minimum(c, 0.5)", "abc"),
    ("log1p(abs(a)) * expm1(b / 4)", "ab"),
    ("floor(d) + ceil(a)", "ad"),
    ("where(m, i, k)", "ikm"),
    ("-a ** 2", "a"),
    ("a / i", "ai"),
    ("i * 2.5", "i"),
    ("where(a > 0.5, 1, 0)", "a"),
    ("(a > b) == m", "abm"),
    ("a < b", "ab"),
    ("~i | 5", "i"),
    ("d ** 2 - d * 3 + 0.5", "d"),
    ("power(abs(a) + 1, 1.5) - i", "ai"),
    # float16: stored as f16, computed in f32 and rounded, as NumPy's float16 loops do
    ("h * 2 + 1", "h"),
    ("sin(h) + h / 3", "h"),
    ("sqrt(u) + exp(m)", "um"),
    ("h + a", "ah"),
    ("h * i", "hi"),
    ("where(h > 0, h, float16(a))", "ah"),
    # reductions (NumPy's f32 sums are pairwise in f32, smelt's in f64: within the tolerance)
    ("sum(a, axis=1)", "a"),
    ("sum(i)", "i"),
    ("max(a, axis=-1, keepdims=True) - a", "a"),
    ("mean(i, axis=0) + mean(d, axis=(0, 1))", "di"),
    ("argmax(d, axis=0) - argmin(a, axis=0, keepdims=True) + argmax(a)", "ad"),
    ("prod(m, axis=0) + sum(j, 1, keepdims=True)", "jm"),
    ("any(a > 2, axis=0) & all(u > 1)", "au"),
    ("sum(h, axis=0) + min(h, axis=0)", "h"),
    ("amax(a) - amin(b, 0)", "ab"),
    ("exp(a - max(a, axis=-1, keepdims=True)) / sum(exp(a - max(a, axis=-1, keepdims=True)), axis=-1, keepdims=True)", "a"),
]
for expr, names in cases:
    eval_case(expr, names)

# NumPy's semantics on special values, bit for bit (the sign of zero too), on
# the TCC and CC tiers: what NumPy 1.24 (this machine's) and NumPy 2 agree on
# (tests/numpy-answers.h holds NumPy 2's answers where they differ)
SPECIAL = [0.0, -0.0, 1.0, np.nan, -0.0, 2.0, np.inf, -np.inf, 0.5, -7.5]
SPECIAL2 = [-0.0, 0.0, np.nan, 1.0, -0.0, -3.0, np.inf, 1.0, 0.0, 2.0]
BIG = [2.0**31, 2**31 + 5, 2.0**40 + 3, 2.0**62, -1.0, -3.7, 255.9, 256.5, np.nan, 2**31 - 1.0, -2.0**31 - 1, 1e300]
sdata = {
    "hz": np.array(SPECIAL, np.float16), "hy": np.array(SPECIAL2, np.float16),
    "dz": np.array(SPECIAL, np.float64), "dy": np.array(SPECIAL2, np.float64),
    "big": np.array(BIG, np.float64), "p": np.array([True, True, False, False]), "q": np.array([True, False, True, False]),
    "iz": np.array([7, -7, 7, -7, 5, -2**31, 0, 2**31 - 1], np.int32), "iy": np.array([3, 3, -3, 0, -1, -1, 5, 2], np.int32),
    "uz": np.array([0, 1, 2, 255], np.uint8),
}
for n, v in sdata.items():
    ARGS[n] = save(n + ".npy", v)
SNS = dict(NS, uint8=lambda x: np.asarray(x).astype(np.uint8), float32=lambda x: np.asarray(x).astype(np.float32),
           bitwise_and=np.bitwise_and, bitwise_or=np.bitwise_or, bitwise_xor=np.bitwise_xor, invert=np.invert,
           bitwise_not=np.bitwise_not, fmod=np.fmod, reciprocal=np.reciprocal, rint=np.rint, round=np.round,
           copy=np.copy, conj=np.conj, ones_like=np.ones_like)
semantics = [
    ("maximum(hz, hy)", ["hz", "hy"]), ("minimum(hz, hy)", ["hz", "hy"]),
    ("maximum(dz, dy)", ["dz", "dy"]), ("minimum(dy, dz)", ["dz", "dy"]),
    ("uint8(big)", ["big"]), ("uint8(float32(big))", ["big"]), ("uint8(hz * 1000)", ["hz"]),
    ("bitwise_and(p, q)", "pq"), ("bitwise_or(p, q)", "pq"), ("bitwise_xor(p, q)", "pq"),
    ("invert(p)", "p"), ("bitwise_not(q)", "q"),
    ("fmod(iz, iy)", ["iz", "iy"]), ("fmod(dz, dy)", ["dz", "dy"]), ("fmod(hz, hy)", ["hz", "hy"]),
    ("reciprocal(iz)", ["iz"]), ("reciprocal(uz)", ["uz"]), ("rint(iz)", ["iz"]), ("round(p)", ["p"]),
    ("rint(q)", ["q"]), ("copy(dz) + conj(dy)", ["dz", "dy"]), ("ones_like(uz)", ["uz"]), ("ones_like(hz)", ["hz"]),
]
for tier in ("TCC", "CC"):
    for expr, names in semantics:
        out = path("sem.npy")
        if os.path.exists(out):
            os.remove(out)
        rc, so, se = smelt("eval", expr, *[ARGS[n] for n in names], "-o", out, env={"SMELT_JIT_BACKEND": tier})
        what = "%s: %s" % (tier, expr)
        check(rc == 0, "%s: exit %d: %s" % (what, rc, se))
        if rc:
            continue
        with np.errstate(all="ignore"):
            want = np.asarray(eval(expr, dict(SNS), {n: sdata[n] for n in names}))
        got = np.load(out)
        check(got.dtype == want.dtype and got.shape == want.shape, "%s: %s %s, NumPy %s %s" % (what, got.dtype, got.shape, want.dtype, want.shape))
        if got.dtype != want.dtype or got.shape != want.shape:
            continue
        if got.dtype.kind == "f":
            same = (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))
        else:
            same = got == want
        check(bool(np.all(same)), "%s: %s, NumPy %s" % (what, got.tolist(), want.tolist()))

# opt levels and thread counts give the same results
for lvl in ("0", "1", "2"):
    eval_case("where(a > 0, a*b, exp(c)) + 1 + 2*3", "abc", ("--opt-level", lvl))
eval_case("sin(a) + d", "ad", ("--threads", "1"))
eval_case("sin(a) + d", "ad", ("-O2",))

# float16 results: exactly NumPy's for + - * / (both compute in f32 and round once)
out = path("hout.npy")
rc, so, se = smelt("eval", "(h - 0.5) * h / 3", ARGS["h"], "-o", out)
check(rc == 0, "float16 eval: %s" % se)
if rc == 0:
    h = data["h"]
    want = (h - np.float16(0.5)) * h / np.float16(3)
    got = np.load(out)
    check(got.dtype == np.float16 and np.array_equal(got.view(np.uint16), want.view(np.uint16)),
          "float16 arithmetic is bitwise NumPy's: %d differ" % np.sum(got != want))
np.save(path("hnp.npy"), data["h"])
rc, so, se = smelt("eval", "h", ARGS["h"], "-o", path("hsm.npy"))
check(rc == 0 and open(path("hsm.npy"), "rb").read() == open(path("hnp.npy"), "rb").read(),
      "a float16 array round-trips byte for byte: %s" % se)
rc, so, se = smelt("eval", "bfloat16(x)", save("x.npy", np.array([1.5, -2.0, 3.25, 0.1], np.float32)))
check(rc == 0 and so == "[1.5 -2.0 3.25 0.1]\n", "print bf16: %r %s" % (so, se))
rc, so, se = smelt("eval", "float16(x) * 3", save("x.npy", np.array([30000, 2.5, -1e-9], np.float32)))
check(rc == 0 and so == "[inf 7.5 -0.0]\n", "f16 overflow and underflow: %r %s" % (so, se))

# NumPy's layouts: Fortran order, big-endian, 0-d, empty
F = np.asfortranarray(nonzero_normal((6, 7), np.float64))
BE = nonzero_normal((6, 7), ">f4")
rc, so, se = smelt("eval", "f * 2 + e", save("f.npy", F), save("e.npy", BE), "-o", path("fe.npy"))
check(rc == 0, "fortran/big-endian inputs: exit %d: %s" % (rc, se))
if rc == 0:
    close(np.load(path("fe.npy")), F * 2 + BE.astype(np.float32), "fortran/big-endian inputs")
rc, so, se = smelt("eval", "z + 1", save("z.npy", np.float64(2.5)), "-o", path("z1.npy"))
check(rc == 0 and np.load(path("z1.npy")).shape == () and np.load(path("z1.npy")) == 3.5, "0-d input: %s" % se)
rc, so, se = smelt("eval", "y * 2", save("y.npy", np.zeros((0, 3), np.float32)), "-o", path("y2.npy"))
check(rc == 0 and np.load(path("y2.npy")).shape == (0, 3), "empty input: %s" % se)

# ---- printing ----------------------------------------------------------------------------
rc, so, se = smelt("eval", "x", save("x.npy", np.array([1.5, -2.0, 3.25], np.float32)))
check(rc == 0 and so == "[1.5 -2.0 3.25]\n", "print f32: %r %s" % (so, se))
rc, so, se = smelt("eval", "x + 1", save("x.npy", np.array([[1, 2], [3, 4]], np.int32)))
check(rc == 0 and so == "[[2 3]\n [4 5]]\n", "print 2-D: %r" % so)
rc, so, se = smelt("eval", "x > 2", save("x.npy", np.array([1, 3], np.int64)))
check(rc == 0 and so == "[False True]\n", "print bool: %r" % so)
rc, so, se = smelt("eval", "2 ** 10")
check(rc == 0 and so == "1024\n", "print a scalar: %r %s" % (so, se))
rc, so, se = smelt("eval", "0.1 + 0.2")
check(rc == 0 and so == "0.30000000000000004\n", "shortest round-trip float: %r" % so)
rc, so, se = smelt("eval", "x * 2", save("x.npy", nonzero_normal((40, 50), np.float64)))
check(rc == 0 and "..." in so and len(so.splitlines()) < 30, "large results are summarised: %d lines" % len(so.splitlines()))

# ---- graph files: eval --save-graph, run, explain ------------------------------------------
g = path("g.smelt")
rc, so, se = smelt("eval", "where(a > 0, a*b, exp(c)) + 1", ARGS["a"], ARGS["b"], ARGS["c"], "--save-graph", g, "-o", path("o.npy"))
check(rc == 0 and os.path.exists(g), "--save-graph: %s" % se)
check(open(g).read().startswith("smelt-graph 1\n"), "graph file header")
a2, b2, c2 = nonzero_normal((7, 9), np.float32), nonzero_normal((7, 9), np.float32), nonzero_normal((9,), np.float32)
rc, so, se = smelt("run", g, save("a2.npy", a2).replace("a2=", "a="), save("b2.npy", b2).replace("b2=", "b="),
                   save("c2.npy", c2).replace("c2=", "c="), "-o", path("r.npy"))
check(rc == 0, "run: exit %d: %s" % (rc, se))
if rc == 0:
    close(np.load(path("r.npy")), np.where(a2 > 0, a2 * b2, np.exp(c2)) + 1, "run on new data")

two = path("two.smelt")
with open(two, "w") as f:
    f.write("smelt-graph 1\n%0 = input \"x\" f64 [5]\n%1 = exp %0 : f64 [5]\n"
            "%2 = neg %0 : f64 [5]\noutput %1\noutput %2\n")
xv = nonzero_normal((5,), np.float64)
xa = save("xv.npy", xv).replace("xv=", "x=")
rc, so, se = smelt("run", two, xa, "-o", path("o1.npy"), "-o", path("o2.npy"))
check(rc == 0, "run with two outputs: %s" % se)
if rc == 0:
    close(np.load(path("o1.npy")), np.exp(xv), "output 1")
    close(np.load(path("o2.npy")), -xv, "output 2")
rc, so, se = smelt("run", two, xa)
check(rc == 0 and so.count("output") == 2, "run prints every output: %r" % so)

rc, so, se = smelt("explain", "where(a > 0, a*b, exp(c)) + 1 + 2*3", "a=f32[1000,1000]", "b=f32[1000,1000]", "c=f32[1000]")
check(rc == 0, "explain: exit %d: %s" % (rc, se))
for needle in ("== graph", "== plan ==", "what each stage did", "constant folding", "fusion",
               "kernel 0", "void smelt_ew_", "2 kernels"):
    check(needle in so, "explain output lacks %r" % needle)
rc, so, se = smelt("explain", "sin(a) * b", ARGS["a"], ARGS["b"], "--no-source", "--opt-level", "0")
check(rc == 0 and "void smelt_ew_" not in so and "2 operators in 2 kernels" in so, "explain --no-source -O0: %r" % so[-400:])
check("none at opt-level 0" in so and "dead code" not in so, "explain -O0 says no pass ran: %r" % so[-600:])
rc, so, se = smelt("explain", "sin(a) * b", ARGS["a"], ARGS["b"], "--no-source")
check(rc == 0 and "dead code" in so and "none at opt-level 0" not in so,
      "explain at opt_level 3 reports the passes, not 'none at opt-level 0': %r" % so[-600:])
rc, so, se = smelt("explain", g)
check(rc == 0 and "kernel" in so, "explain a graph file: %s" % se)
rc, so, se = smelt("explain", g, "a=f32[2,2]", "b=f32[2,2]", "c=f32[2]", "--full-source")
check(rc == 0 and "typedef" in so, "explain GRAPH with inputs, --full-source: %s" % se)

# a batch-norm after a conv with constant weights (a graph file: constant lines): folded into the
# weights at opt_level >= 1, and explain says so; the results of opt_level 3 and 0 against float64
cbn = path("conv_bn.smelt")
with open(cbn, "w") as fh:
    fh.write("""smelt-graph 1
%0 = input "x" f32 [2, 2, 4, 4]
%1 = constant f32 [3, 2, 1, 1] [0.5, -1, 2, 0.25, -0.75, 1.5]
%2 = reshape %0 [2, 1, 2, 16] : f32 [2, 1, 2, 16]
%3 = conv_taps %2 %1 [1, 1, 1, 1, 1, 4, 4, 4] : f32 [2, 3, 4, 4]
%4 = constant f32 [3, 1, 1] [0.125, -0.5, 1]
%5 = sub %3 %4 : f32 [2, 3, 4, 4]
%6 = constant f32 [3, 1, 1] [2, 0.5, -1.5]
%7 = mul %5 %6 : f32 [2, 3, 4, 4]
%8 = relu %7 : f32 [2, 3, 4, 4]
output %8
""")
rc, so, se = smelt("explain", cbn, "x=f32[2,2,4,4]", "--no-source")
check(rc == 0 and "conv scale/shift folded 1" in so and "conv scale/shift        1 convolution" in so and
      "[add relu]" in so, "explain: the batch-norm folded into the conv: %r %s" % (so[-900:], se))
rc, so, se = smelt("explain", cbn, "x=f32[2,2,4,4]", "--no-source", "--opt-level", "0")
check(rc == 0 and "conv scale/shift" not in so, "explain -O0: nothing folded: %r" % so[-600:])
xc = nonzero_normal((2, 2, 4, 4), np.float32)
xarg = "x=" + save("xc.npy", xc).split("=", 1)[1]
wc = np.array([0.5, -1, 2, 0.25, -0.75, 1.5]).reshape(3, 2)
want = np.maximum((np.einsum("oc,nchw->nohw", wc, xc.astype(np.float64)) - np.array([0.125, -0.5, 1])[:, None, None])
                  * np.array([2, 0.5, -1.5])[:, None, None], 0)
for lvl in ("3", "0"):
    rc, so, se = smelt("run", cbn, xarg, "-o", path("cbn.npy"), "--opt-level", lvl)
    check(rc == 0, "run the conv + batch-norm graph at opt_level %s: %s" % (lvl, se))
    if rc == 0:
        close(np.load(path("cbn.npy")), want.astype(np.float32), "conv + batch-norm, opt_level " + lvl, f32=True)

# ---- --time, --dump, AUTO ----------------------------------------------------------------
rc, so, se = smelt("eval", "where(a > 0, a*b, exp(c)) + 1", ARGS["a"], ARGS["b"], ARGS["c"], "-o", path("t.npy"), "--time")
check(rc == 0 and "compile" in so and "unfused" in so and "run" in so, "--time: %r %s" % (so, se))
dump = path("dump")
rc, so, se = smelt("eval", "sin(a) + b", ARGS["a"], ARGS["b"], "-o", path("t.npy"), "--dump", dump)
check(rc == 0 and os.path.exists(os.path.join(dump, "graph.smelt")) and
      any(n.endswith(".c") for n in os.listdir(dump)), "--dump: %s" % (os.listdir(dump) if os.path.isdir(dump) else se))
rc, so, se = smelt("eval", "sin(a) + b", ARGS["a"], ARGS["b"], "-o", path("t.npy"), "--time", env={"SMELT_JIT_BACKEND": None})
check(rc == 0, "AUTO backend with --time: %s" % se)
if rc == 0:
    close(np.load(path("t.npy")), np.sin(data["a"]) + data["b"], "AUTO backend")

# ---- explain --backend NVRTC: the CUDA source and NVRTC's verdict, GPU or not -------------
rc, so, se = smelt("explain", "where(a > 0, a*b, exp(b)) + 1", "a=f32[64,8]", "b=f32[1,8]",
                   "--backend", "NVRTC")
nvrtc_line = smelt("info")[1].split("NVRTC", 1)[1].split("\n", 1)[0]
gpu = "not available" not in nvrtc_line
if rc == 0 and not gpu:
    check("accepted" in so and "__global__" in so and ", 0 rejected" in so,
          "explain --backend NVRTC prints the CUDA kernels NVRTC accepted: %r" % so[-400:])
elif not gpu:  # no libnvrtc on this machine: a clear error
    check(rc == 1 and "NVRTC" in se, "explain --backend NVRTC without NVRTC: %r" % se)
else:  # a GPU: the plan for it, its kernels' CUDA source, and eval runs there
    check(rc == 0 and "[NVRTC]" in so and "__global__" in so,
          "explain --backend NVRTC on a GPU: %r %r" % (so[:1200], se))
    rc, so, se = smelt("eval", "sin(a) + b", ARGS["a"], ARGS["b"], "-o", path("g.npy"), "--backend", "NVRTC")
    check(rc == 0, "eval --backend NVRTC on a GPU: %s" % se)
    if rc == 0:
        close(np.load(path("g.npy")), np.sin(data["a"]) + data["b"], "NVRTC backend")

# ---- info, help, version -----------------------------------------------------------------
rc, so, se = smelt("info")
check(rc == 0, "info: %s" % se)
for needle in ("smelt 0.1.0", "TCC", "CC", "NVRTC", "threads", "SMELT_CACHE_DIR", "SMELT_CACHE ", "persistent",
               "dtypes: f32 f64 i32 i64 u8 bool f16 bf16"):
    check(needle in so, "info lacks %r" % needle)
rc, so, se = smelt("info", env={"SMELT_CACHE": "0"})
check(rc == 0 and "off" in so, "info with SMELT_CACHE=0: %r" % so)
# a cache folder others can write is not used, and info and explain say so
open_dir = path("open-cache")
os.mkdir(open_dir)
os.chmod(open_dir, 0o777)
rc, so, se = smelt("info", env={"SMELT_CACHE_DIR": open_dir})
check(rc == 0 and "writable by group or others" in so, "info with a cache folder of mode 777: %r" % so)
if shutil.which("cc"):
    rc, so, se = smelt("explain", "a * 2 + 1", "a=f32[8]", "--backend", "CC", "--no-source",
                       env={"SMELT_CACHE_DIR": open_dir})
    check(rc == 0 and "warning: persistent kernel cache not used" in so, "explain with a cache of mode 777: %r %s" % (so, se))
    check(os.listdir(open_dir) == [], "entries were written to a cache folder of mode 777: %r" % os.listdir(open_dir))
rc, so, se = smelt("info", "--ops")
check(rc == 0 and "bitwise_and" in so and "where" in so, "info --ops")
check("sum(x, axis, keepdims)" in so and "argmax(x, axis, keepdims)" in so and "exp(x)" in so, "info --ops: %r" % so)
for cmd in ([], ["eval"], ["run"], ["explain"], ["info"]):
    rc, so, se = smelt(*(cmd + ["--help"]))
    check(rc == 0 and so.startswith("usage: smelt") and not se, "%s --help" % " ".join(["smelt"] + cmd))
rc, so, se = smelt("help", "explain")
check(rc == 0 and so.startswith("usage: smelt explain"), "smelt help explain")
rc, so, se = smelt("--version")
check(rc == 0 and so.startswith("smelt "), "--version")

# ---- errors: messages and exit statuses ------------------------------------------------------
bad = path("bad.npy")
with open(bad, "wb") as f:
    f.write(b"this is not an npy file at all")
np.save(path("short.npy"), np.ones(3, np.int16))
with open(path("notgraph.smelt"), "w") as f:
    f.write("hello\n")
np.save(path("i8.npy"), np.ones((7, 9), np.int32))
# hostile shapes: a zero dimension must not hide the size of the others
hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }"
hdr += b" " * (63 - (10 + len(hdr)) % 64) + b"\n"
with open(path("huge.npy"), "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr)
with open(path("huge.smelt"), "w") as f:
    f.write('smelt-graph 1\n%0 = input "a" f32 [4611686018427387904, 4611686018427387904]\n'
            '%1 = neg %0 f32 [4611686018427387904, 4611686018427387904]\noutput %1\n')

errors = [
    # (args, exit status, text the first stderr line contains)
    ([], 2, "usage: smelt"),
    (["frobnicate"], 2, "smelt: error: unknown command 'frobnicate'"),
    (["eval"], 2, "smelt: error: no expression given"),
    (["eval", "a +* b", ARGS["a"], ARGS["b"]], 1, "smelt: error: unexpected '*' at column 4"),
    (["eval", "a + q", ARGS["a"]], 1, "smelt: error: unknown name 'q' at column 5"),
    (["eval", "foo(a)", ARGS["a"]], 1, "smelt: error: unknown function 'foo' at column 1"),
    (["eval", "sin(a, a)", ARGS["a"]], 1, "sin() takes 1 argument, got 2 at column 1"),
    (["eval", "a & 1", ARGS["a"]], 1, "bitwise_and does not support dtype f32 at column 3"),
    (["eval", "a + c", ARGS["a"], "c=" + path("y.npy")], 1, "not broadcastable"),
    (["eval", "a", "a=" + path("missing.npy")], 1, "input 'a': cannot open"),
    (["eval", "a", "a=" + bad], 1, "not a .npy file"),
    (["eval", "a", "a=" + path("short.npy")], 1, "unsupported dtype '<i2'"),
    (["eval", "bfloat16(a)", ARGS["a"], "-o", path("bf.npy")], 1, "NumPy has no bf16 dtype"),
    (["eval", "a", "a"], 2, "'a' is not name=file.npy"),
    (["eval", "a", "1a=x.npy"], 2, "is not name=file.npy"),
    (["eval", "a", ARGS["a"], ARGS["a"]], 2, "input 'a' is given twice"),
    (["eval", "a", ARGS["a"], "--opt-level", "7"], 2, "--opt-level needs a number in 0..3"),
    (["eval", "a", ARGS["a"], "--opt-level"], 2, "--opt-level needs a value"),
    (["eval", "a", ARGS["a"], "--bogus"], 2, "unknown option '--bogus'"),
    (["eval", "-a", ARGS["a"]], 2, "an expression that looks like an option goes after '--'"),
    (["eval", "a", ARGS["a"], "--time=yes"], 2, "--time takes no value"),
    (["eval", "a", ARGS["a"], "--backend", "HALIDE"], 2, "unknown backend 'HALIDE'"),
    *([] if gpu else [(["eval", "a", ARGS["a"], "--backend", "NVRTC"], 1, "NVRTC")]),
    (["eval", "a", ARGS["a"], "-o", path("x.npy"), "-o", path("y.npy")], 2, "give -o once"),
    (["eval", "a", ARGS["a"], "-o", "/nonexistent-dir/x.npy"], 1, "for writing"),
    (["eval", "a", ARGS["a"], "--save-graph", "/nonexistent-dir/g.smelt"], 1, "for writing"),
    (["run"], 2, "no graph file given"),
    (["run", g, ARGS["a"], ARGS["b"]], 2, "input 'c' (f32 [40]) is not given"),
    (["run", g, ARGS["a"], ARGS["b"], ARGS["c"], ARGS["d"]], 2, "the graph has no input 'd'"),
    (["run", g, "a=" + path("i8.npy"), ARGS["b"], ARGS["c"]], 1, "input 'a': the graph takes f32"),
    (["run", two, xa, "-o", path("o1.npy")], 2, "give -o 2 times or not at all"),
    (["run", path("missing.smelt")], 1, "cannot open"),
    (["run", path("notgraph.smelt")], 1, "not a smelt graph file"),
    (["explain"], 2, "no expression or graph file given"),
    (["explain", "a * 2", "a=f32[3,x]"], 2, "not a valid DTYPE[SHAPE]"),
    (["explain", "a * 2", "a=f99[3]"], 2, "not a valid DTYPE[SHAPE]"),
    (["explain", "a * 2", "a=f32[3]", "--time"], 2, "unknown option '--time'"),
    (["info", "extra"], 2, "unexpected argument 'extra'"),
    (["explain", "a + 1", "a=f32[4611686018427387904,4611686018427387904]"], 1,
     "shape (4611686018427387904, 4611686018427387904) is too large"),
    (["explain", "a + 1", "a=f32[0,4611686018427387904,4611686018427387904]"], 1, "is too large"),
    (["explain", "a + 1", "a=f32[3,-1]"], 2, "not a valid DTYPE[SHAPE]"),
    (["explain", path("huge.smelt")], 1, "is too large"),
    (["eval", "a + 1", "a=" + path("huge.npy")], 1, "shape (0, 4611686018427387904, 4611686018427387904) is too large"),
]
for args, status, text in errors:
    rc, so, se = smelt(*args)
    what = "smelt %s" % " ".join(args)
    check(rc == status, "%s: exit %d, expected %d (stderr %r)" % (what, rc, status, se))
    lines = se.splitlines()
    check(bool(lines) and text in lines[0], "%s: stderr %r lacks %r" % (what, se, text))
    if status and args:
        check(lines[0].startswith("smelt: "), "%s: the error line does not start with 'smelt: ': %r" % (what, se))
        check(len(lines) in (1, 3), "%s: %d lines on stderr: %r" % (what, len(lines), se))
        check(so == "", "%s: output on stdout besides the error: %r" % (what, so))

# the caret line of an expression error
rc, so, se = smelt("eval", "a + * b", ARGS["a"], ARGS["b"])
lines = se.splitlines()
check(lines == ["smelt: error: unexpected '*' at column 5", "  a + * b", "      ^"], "caret lines: %r" % lines)
# an expression that starts with '-' after '--'
rc, so, se = smelt("eval", "-o", path("neg.npy"), "--", "-a", ARGS["a"])
check(rc == 0, "'--' before an expression: %s" % se)
if rc == 0:
    close(np.load(path("neg.npy")), -data["a"], "-a")

# ---- inputs given inline, NumPy-style printing, the rough edges of issue 14 ---------------
rc, so, se = smelt("eval", "a * 2", "a=arange:i32[2,3]")
check(rc == 0 and so == "[[0 2 4]\n [6 8 10]]\n", "arange input: %r %s" % (so, se))
rc, so, se = smelt("eval", "a + b", "a=zeros:f32[3]", "b=ones:f64[3]")
check(rc == 0 and so == "[1.0 1.0 1.0]\n", "zeros/ones inputs: %r %s" % (so, se))
rc, so, se = smelt("eval", "a", "a=random:f32[1000]", "-o", path("rnd.npy"))
rnd = np.load(path("rnd.npy")) if rc == 0 else None
check(rnd is not None and rnd.dtype == np.float32 and rnd.shape == (1000,) and rnd.min() >= -1 and
      rnd.max() < 1 and len(np.unique(rnd)) > 900, "random input: uniform in [-1, 1): %s" % se)
rc2, so, se = smelt("eval", "a", "a=random:f32[1000]", "-o", path("rnd2.npy"))
check(rc2 == 0 and rnd is not None and np.array_equal(np.load(path("rnd2.npy")), rnd),
      "random inputs are the same on every run")
rc, so, se = smelt("eval", "a", "a=random:bool[64]", "-o", path("rb.npy"))
check(rc == 0 and set(np.load(path("rb.npy")).tolist()) == {False, True}, "random bool: %s" % se)

# floats print as NumPy prints a scalar: 10.0 (not 1e+01), 1e+16, 0.0001, 1e-05
vals32 = np.array([10, 71, 1e10, 123456789, 0.001, 1e-5, -2.5, 1e16, 0.1, 3e-4], np.float32)
vals64 = np.array([10, 1e15, 1e16, 0.1 + 0.2, 1e-4, 1.5e-5, -0.0, 123456789], np.float64)
# (NumPy 1, Debian 12's; NumPy 2 switches f32 scalars to scientific notation from 1e8)
numpy1 = int(np.__version__.split(".")[0]) < 2
for vals in (vals32, vals64) if numpy1 else (vals64,):
    rc, so, se = smelt("eval", "v", save("v.npy", vals))
    want = "[" + " ".join(str(x) for x in vals) + "]"
    check(rc == 0 and " ".join(so.split()) == want, "prints as NumPy's scalars: %r, NumPy %r" % (so, want))

rc, so, se = smelt("explain", "a + 1", "a=f32[5]", "--no-source")
check(rc == 0 and "1 kernel\n" in so and "1 operator [" in so and "1 kernels" not in so and
      "1 operators" not in so, "singular counts: %r" % so)

# --time under AUTO times what it says: both plans on the optimising tier
# (NVRTC where there is a GPU)
nvrtc_info = smelt("info")[1]
auto_tier = "NVRTC" if gpu else "CC"
if gpu or "CC     available" in nvrtc_info:
    rc, so, se = smelt("eval", "sin(a) * b + 1", "a=random:f32[256,256]", "b=random:f32[256]",
                       "-o", path("t.npy"), "--time", env={"SMELT_JIT_BACKEND": None})
    run_line = [l for l in so.splitlines() if l.startswith("run")]
    check(rc == 0 and run_line and "fused" in run_line[0] and run_line[0].count(" on " + auto_tier) == 2,
          "--time under AUTO times the %s kernels of both plans: %r %s" % (auto_tier, so, se))

# SMELT_DUMP_DIR naming a missing folder: created, as --dump does
dd = path("dumps/deeper")
rc, so, se = smelt("eval", "a * 3", "a=arange:f32[4]", env={"SMELT_DUMP_DIR": dd})
check(rc == 0 and os.path.isdir(dd) and any(n.endswith(".c") for n in os.listdir(dd)),
      "SMELT_DUMP_DIR is created: %s" % se)
rc, so, se = smelt("explain", "a * 3", "a=f32[4]", "--no-source", env={"SMELT_DUMP_DIR": "/proc/nope"})
check(rc == 0 and "warning: SMELT_DUMP_DIR='/proc/nope'" in so, "unusable SMELT_DUMP_DIR is a warning: %r" % so)

# bad cache settings: a warning, the default kept; false/no/off turn it off
rc, so, se = smelt("info", env={"SMELT_CACHE_MAX_MB": "abc"})
check(rc == 0 and "warning: SMELT_CACHE_MAX_MB='abc'" in so and "512 MiB" in so, "info warns: %r" % so)
# settings that were ignored in silence: smelt info names them
for var, val in [("SMELT_BLOCKS_ISA", "x86-64-v9"), ("SMELT_STREAM_STORES", "2"),
                 ("SMELT_CC_MARCH", "native -fplugin=/x"), ("SMELT_TEMPLATE_DIR", "/nonexistent"),
                 ("SMELT_BLAS_LIB", "/etc/passwd"), ("SMELT_CC_TIMEOUT", "abc")]:
    rc, so, se = smelt("info", env={var: val})
    check(rc == 0 and ("warning: %s='%s' is not" % (var, val)) in so, "info names %s=%s: %r" % (var, val, so))
for word in ("false", "no", "off"):
    rc, so, se = smelt("info", env={"SMELT_CACHE": word})
    check(rc == 0 and "persistent           off: turned off by SMELT_CACHE=" + word in so,
          "SMELT_CACHE=%s turns the cache off: %r" % (word, so))
rc, so, se = smelt("info")
check("not available: backend" not in so, "info says 'not available' once: %r" % so)

# explain with NVRTC: --no-source leaves out the sources; SMELT_JIT_BACKEND=NVRTC does what --backend does
if not gpu:
    r1 = smelt("explain", "a * 2 + 1", "a=f32[10]", "--backend", "NVRTC", "--no-source")
    r2 = smelt("explain", "a * 2 + 1", "a=f32[10]", "--no-source", env={"SMELT_JIT_BACKEND": "NVRTC"})
    r3 = smelt("explain", "a * 2 + 1", "a=f32[10]", "--no-source", env={"SMELT_JIT_BACKEND": None,
                                                                       "MGB_JIT_BACKEND": "NVRTC"})
    check(r1[0] == r2[0] == r3[0] and "__global__" not in r1[1] and "__global__" not in r2[1],
          "explain NVRTC --no-source, by option or variable: %r / %r" % (r1[1][-300:], r2[1][-300:]))
    scrub = lambda t: "".join(c for c in t if not c.isdigit())  # compile times differ
    check(scrub(r1[1]) == scrub(r2[1]) == scrub(r3[1]) and scrub(r1[2]) == scrub(r2[2]),
          "SMELT_JIT_BACKEND=NVRTC explain == --backend NVRTC: %r %r" % (r1[2], r2[2]))

np.save(path("arr.npy"), np.arange(3.0))
many = ["x%d=zeros:f32[1]" % i for i in range(70)]
errors2 = [
    (["eval", "sigmod(a)", "a=arange:f32[3]"], 1, "did you mean sigmoid? smelt info --ops"),
    (["eval", "a @ a", "a=arange:f32[3,2]"], 1, "matmul: (3, 2) @ (3, 2): the inner dimensions differ (2 and 3)"),
    (["eval", "a.sum()", "a=arange:f32[3]"], 1, "methods such as a.sum() are not supported (write sum(a))"),
    (["eval", "a[3]", "a=arange:f32[3]"], 1, "index 3 at column 3 is out of bounds for axis 0 of size 3"),
    (["eval", "median(a, axis=0)", "a=arange:f32[3]"], 1, "this reduction is not supported yet"),
    (["eval", "sum(a, axis=1)", "a=arange:f32[3]"], 1, "sum: axis 1 is out of bounds for an array of rank 1"),
    (["eval", "max(a, axis=0)", "a=arange:f32[0]"], 1, "max of an empty array"),
    (["eval", "x0"] + many, 2, "at most 64 name=value inputs"),
    (["eval", "a", "a=zeros:f32[1,1,1,1,1,1,1,1,1]"], 2, "at most 8 dimensions"),
    (["explain", "a", "a=f32[1,1,1,1,1,1,1,1,1]"], 2, "at most 8 dimensions"),
    (["eval", "a", "a=f32[3]"], 2, "no values: use a .npy file, or random:f32[3]"),
    (["eval", "a", "a=random:f99[3]"], 2, "not a valid random:DTYPE[SHAPE]"),
    (["run", path("arr.npy")], 1, "arr.npy is a .npy file, not a graph file"),
    (["explain", path("arr.npy")], 1, "arr.npy is a .npy file, not a graph file"),
]
for args, status, text in errors2:
    rc, so, se = smelt(*args)
    what = "smelt %s" % " ".join(args)[:120]
    lines = se.splitlines()
    check(rc == status and bool(lines) and text in lines[0] and lines[0].startswith("smelt: error: "),
          "%s: exit %d (expected %d), stderr %r lacks %r" % (what, rc, status, se, text))

# files smelt writes are what NumPy writes
np.save(path("np.npy"), data["d"])
rc, so, se = smelt("eval", "d", ARGS["d"], "-o", path("sm.npy"))
check(rc == 0 and open(path("sm.npy"), "rb").read() == open(path("np.npy"), "rb").read(),
      "smelt writes the same bytes as numpy.save")

# a FIFO given as a graph file, or named by a graph file's constant, and a
# folder given as a .npy input: errors at once (a FIFO used to block run and
# explain forever; a folder was "an empty file")
os.mkfifo(path("g-fifo.smelt"))
os.mkfifo(path("c-fifo.npy"))
with open(path("g-const.smelt"), "w") as f:
    f.write('smelt-graph 1\n%0 = input "x" f32 [70]\n%1 = constant f32 [70] "c-fifo.npy"\n'
            '%2 = add %0 %1 : f32 [70]\noutput %2\n')
os.mkdir(path("a-folder.npy"))
for args, text in [(["run", path("g-fifo.smelt")], "not a regular file"),
                   (["explain", path("g-fifo.smelt")], "not a regular file"),
                   (["explain", path("g-const.smelt")], "not a regular file"),
                   (["run", path("g-const.smelt"), "x=random:f32[70]"], "not a regular file"),
                   (["eval", "a + 1", "a=" + path("a-folder.npy")], "directory")]:
    try:
        p = subprocess.run([SMELT] + args, capture_output=True, text=True, cwd=TMP, env=BASE_ENV, timeout=20)
        rc, se = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, se = None, "(still running after 20 s)"
    check(rc == 1 and text in se, "smelt %s: exit %r, stderr %r lacks %r" % (" ".join(args), rc, se, text))

# ** 0.5 on a float array is NumPy's sqrt (-0.0 stays -0.0, -inf gives nan),
# not power (0.0, inf)
pos = rng.uniform(0.5, 4, 16)
save("pos.npy", pos)
for expr, want in [("(a * -0.0) ** 0.5", (pos * -0.0) ** 0.5), ("(a * -inf) ** 0.5", np.full(16, np.nan)),
                   ("a ** 0.5", pos ** 0.5)]:
    rc, so, se = smelt("eval", expr, "a=" + path("pos.npy"), "-o", path("pw.npy"))
    got = np.load(path("pw.npy")) if rc == 0 else None
    check(got is not None and np.array_equal(got, want, equal_nan=True) and
          np.array_equal(np.signbit(got) & ~np.isnan(got), np.signbit(want) & ~np.isnan(want)), "%s: %r vs NumPy's %r (%s)" % (expr, got, want, se))

shutil.rmtree(TMP, ignore_errors=True)
done("test-cli")
