"""smelt.grad / smelt.value_and_grad on plain NumPy functions: against
central finite differences in float64, composed with jit, second order,
pytrees, and a whole training step (forward, softmax cross-entropy,
backward, Adam with donated parameters) as one plan that trains."""
import numpy as np
import pytest

import smelt

rng = np.random.default_rng(46)


def fd(f, x, eps=1e-6):
    """Central differences of a scalar function of one float64 array."""
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


FUNCS = [
    lambda x: np.sum(np.tanh(x) * x),
    lambda x: np.mean(np.exp(x - x.max(axis=-1, keepdims=True)) ** 2),
    lambda x: np.sum(np.log1p(x * x) / (1 + np.abs(x) + 0.5)),
    lambda x: np.sum(np.sqrt(x * x + 1) * np.sin(x.T).T),
    lambda x: np.sum((x @ x.T) ** 2) / 10,
    lambda x: np.sum(np.where(x > 0.1, x * 3, -x) + smelt.ops.gelu(x) + smelt.ops.sigmoid(x)),
    lambda x: np.sum(np.concatenate([x[:, :2], x * 2], axis=1) ** 2) + np.sum(np.pad(x, 1) * 0.5),
    lambda x: np.var(x, axis=0).sum() + x.std(),
]


@pytest.mark.parametrize("k", range(len(FUNCS)))
def test_against_finite_differences(k):
    f = FUNCS[k]
    x = rng.uniform(-1.5, 1.5, size=(3, 4))
    g = smelt.grad(f)(x)
    assert g.shape == x.shape and g.dtype == np.float64
    ref = fd(lambda v: float(smelt.jit(f)(v)), x)
    np.testing.assert_allclose(g, ref, rtol=1e-6, atol=1e-7)


def test_value_and_grad_pytrees_and_argnums():
    def loss(params, x, y):
        h = np.maximum(x @ params["w1"] + params["b1"], 0)
        p = h @ params["w2"]
        return np.mean((p - y) ** 2)
    params = {"w1": rng.standard_normal((5, 8)), "b1": rng.standard_normal(8), "w2": rng.standard_normal((8, 1))}
    x, y = rng.standard_normal((16, 5)), rng.standard_normal((16, 1))
    v, g = smelt.value_and_grad(loss)(params, x, y)
    assert set(g) == {"w1", "b1", "w2"}
    assert abs(float(v) - loss(params, x, y)) < 1e-12
    for k in params:
        def fk(a, k=k):
            q = dict(params)
            q[k] = a
            return loss(q, x, y)
        np.testing.assert_allclose(g[k], fd(fk, params[k]), rtol=1e-6, atol=1e-8)
    gx, gy = smelt.grad(loss, argnums=(1, 2))(params, x, y)
    np.testing.assert_allclose(gy, fd(lambda a: loss(params, x, a), y), rtol=1e-6, atol=1e-8)
    with pytest.raises(smelt.DtypeError):
        smelt.grad(lambda a, b: np.sum(a * b))(np.arange(3), np.ones(3))


def test_second_order_and_jit_composition():
    f = lambda x: np.sum(np.sin(x))
    x = rng.uniform(-2, 2, size=10)
    np.testing.assert_allclose(smelt.grad(f)(x), np.cos(x), rtol=1e-14)
    gg = smelt.grad(lambda x: np.sum(smelt.grad(f)(x)))
    np.testing.assert_allclose(gg(x), -np.sin(x), rtol=1e-13, atol=1e-15)
    jg = smelt.jit(smelt.grad(f))
    np.testing.assert_array_equal(jg(x), smelt.grad(f)(x))

    @smelt.jit
    def step(x):
        return x - 0.1 * smelt.grad(f)(x)
    np.testing.assert_allclose(step(x), x - 0.1 * np.cos(x), rtol=1e-14)
    (v, aux), g = smelt.value_and_grad(lambda x: (np.sum(x * x), x * 2), has_aux=True)(x)
    np.testing.assert_allclose(aux, x * 2)
    np.testing.assert_allclose(g, 2 * x)


def test_training_step_is_one_plan_that_trains():
    n, d, h, c = 256, 20, 32, 3
    X = rng.standard_normal((n, d)).astype(np.float32)
    labels = np.argmax(X[:, :c] * 2 + 0.1 * rng.standard_normal((n, c)), axis=1)
    Y = np.eye(c, dtype=np.float32)[labels]
    init = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
    params = [init(d, h), np.zeros(h, np.float32), init(h, c), np.zeros(c, np.float32)]
    ms = [np.zeros_like(p) for p in params]
    vs = [np.zeros_like(p) for p in params]

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        z = np.maximum(x @ w1 + b1, 0) @ w2 + b2
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return -np.mean(np.sum(y * logp, axis=1))

    @smelt.jit(donate_argnums=(0, 1, 2))
    def train_step(params, ms, vs, x, y):
        l, g = smelt.value_and_grad(loss)(params, x, y)
        new_p, new_m, new_v = [], [], []
        for p, m, v, gi in zip(params, ms, vs, g):
            m = 0.9 * m + 0.1 * gi
            v = 0.999 * v + 0.001 * gi * gi
            new_p.append(p - 0.01 * m / (np.sqrt(v) + 1e-8))
            new_m.append(m)
            new_v.append(v)
        return new_p, new_m, new_v, l

    losses = []
    for _ in range(150):
        params, ms, vs, l = train_step(params, ms, vs, X, Y)
        losses.append(float(l))
    assert losses[-1] < 0.5 * losses[0], (losses[0], losses[-1])
    s = train_step.stats()
    assert s["traces"] == 1 and s["plans"] == 1
    assert s["last"]["donated_inplace"] >= 4  # the parameters' updates in place
