"""Hostile input to the Python surface gives exceptions, never a crash or
a hang: random token soups to smelt.evaluate, random argument kinds and
shapes to compiled functions, random graph-file bytes to smelt.load.  A
short fixed run here (the seed is printed on failure); a crash would kill
the test process, which the runner reports as a failure."""
import os

import numpy as np
import pytest

import smelt

TOKENS = ["a", "b", "x", "1", "2.5", "-", "+", "*", "/", "**", "//", "%", "(", ")", ",", "sum", "exp", "where",
          "axis=", "keepdims=True", "<", ">", "==", "&", "|", "~", "not", "and", "float32", "[", "]", ":", "1e400",
          "nan", "inf", "max", "reshape", "transpose", "None", "'", "\\", "\x00", "é", "  "]
ALLOWED = (smelt.Error, SyntaxError, TypeError, ValueError, OverflowError, KeyError, IndexError, NotImplementedError,
           MemoryError, ZeroDivisionError)


def test_evaluate_token_soup():
    rng = np.random.default_rng(int(os.environ.get("SMELT_TEST_SEED", "11")))
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4)
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    ok = bad = 0
    for _ in range(400):
        ex = " ".join(rng.choice(TOKENS, size=int(rng.integers(1, 9))))
        try:
            r = smelt.evaluate(ex, {"a": a, "b": b, "x": x}, {})
            assert isinstance(r, np.ndarray)
            ok += 1
        except ALLOWED:
            bad += 1
    assert ok + bad == 400 and bad > 0


def test_jit_argument_soup():
    rng = np.random.default_rng(12)
    kinds = [lambda: rng.standard_normal(int(rng.integers(0, 5))).astype(np.float32),
             lambda: np.zeros((2, 0, 3), np.float64), lambda: np.ones((3, 1), np.int32), lambda: 3,
             lambda: 2.5, lambda: None, lambda: "s", lambda: [1, 2], lambda: {"k": np.ones(2)},
             lambda: np.ones(3, np.int8), lambda: np.ones(3, np.complex64), lambda: object(),
             lambda: np.ones((2, 3), np.float32).T, lambda: np.float16(1.5), lambda: True]
    fns = [lambda p, q: p + q, lambda p, q: np.sum(p * q, axis=0), lambda p, q: p @ q,
           lambda p, q: np.where(p > 0, p, q), lambda p, q: p[0] - q, lambda p, q: np.concatenate([p, q])]
    for i in range(300):
        f = smelt.jit(fns[i % len(fns)])
        p, q = kinds[int(rng.integers(len(kinds)))](), kinds[int(rng.integers(len(kinds)))]()
        try:
            f(p, q)
        except ALLOWED:
            pass


def test_load_garbage(tmp_path):
    rng = np.random.default_rng(13)
    good = tmp_path / "g.smelt"
    f = smelt.jit(lambda x: np.tanh(x) + 1)
    f(np.ones(3, np.float32))
    f.dump(str(good))
    data = bytearray(good.read_bytes())
    for i in range(100):
        d = bytearray(data)
        for _ in range(int(rng.integers(1, 6))):
            d[int(rng.integers(len(d)))] = int(rng.integers(256))
        p = tmp_path / ("m%d.smelt" % i)
        p.write_bytes(bytes(d))
        try:
            smelt.load(str(p))(np.ones(3, np.float32))
        except ALLOWED + (OSError,):
            pass
    with pytest.raises(ALLOWED + (OSError,)):
        smelt.load(str(tmp_path / "missing.smelt"))
