"""A smelt.jit function as dask's block function on a local multi-process
scheduler: the function is pickled to each worker process, which traces
and compiles it again (plans stay in their process)."""
import pickle

import numpy as np
import pytest

import smelt

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")


@smelt.jit
def block_fn(x, y):
    return np.tanh(x) * y + 1


@smelt.jit
def gelu_block(x):
    return smelt.ops.gelu(x) * 2


def test_pickles_by_name():
    assert pickle.loads(pickle.dumps(block_fn)) is block_fn


def test_map_blocks_on_processes():
    rng = np.random.default_rng(7)
    x = rng.standard_normal(40000).astype(np.float32)
    y = rng.standard_normal(40000).astype(np.float32)
    dx = da.from_array(x, chunks=5000)
    dy = da.from_array(y, chunks=5000)
    r = da.map_blocks(lambda a, b: block_fn(a, b), dx, dy, dtype=np.float32)
    g = dx.map_blocks(gelu_block, dtype=np.float32)
    with dask.config.set(scheduler="processes", num_workers=2):
        got, got_g = dask.compute(r, g)
    # the same bits as in this process
    assert got.tobytes() == block_fn(x, y).tobytes()
    assert got_g.tobytes() == gelu_block(x).tobytes()


def test_blockwise_threads():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((300, 200)).astype(np.float32)
    dx = da.from_array(x, chunks=(100, 200))
    sm = smelt.jit(lambda a: np.exp(a - a.max(axis=1, keepdims=True)) /
                   np.exp(a - a.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True))
    r = da.blockwise(sm, "ij", dx, "ij", dtype=np.float32)
    with dask.config.set(scheduler="threads", num_workers=2):
        got = r.compute()
    np.testing.assert_allclose(got.sum(axis=1), 1, rtol=1e-5)
    assert got.tobytes() == sm(x).tobytes()
