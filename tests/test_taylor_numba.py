"""Staged jets compiled by numba (benchmarks/taylor.py's ode and gmm programs, small)."""
import warnings

import numpy as np

import nestad as nd
from nestad.staging.numba_backend import NumbaFallbackWarning

anp = nd.numpy


def test_numba_compiles_a_staged_jet_with_concatenate_and_2d_indexing():
    # the Taylor program of a concatenate (the primitive takes ``*xs, axis``, which numba's
    # np.concatenate does not: it fell back to Python) of a constant and of jets, along
    # both axes, and a column gather by an index array
    x0, v = np.linspace(0.5, 1.5, 6).reshape(2, 3), np.cos(np.arange(6.0)).reshape(2, 3)
    cols = np.array([2, 0, 0, 1])

    def f(t):
        x = x0 + t * v
        a = anp.concatenate([np.zeros((2, 1)), x * x], axis=1)[:, cols]
        return anp.sum(a) + anp.sum(anp.concatenate([x[0], x[1] * t]))

    fast, ref = nd.stage(nd.derivatives(f, 2), backend="numba"), nd.stage(nd.derivatives(f, 2))
    want = nd.derivatives(f, 2)(0.2)
    with warnings.catch_warnings():
        warnings.simplefilter('error', NumbaFallbackWarning)
        for _ in range(2):                              # traced, then compiled
            got = fast(0.2)
            assert got == ref(0.2)     # bit for bit
    for g, w in zip(got, want):
        assert abs(g - w) <= 1e-13 * abs(w)
    c = next(iter(fast.cache.values()))[0]
    assert getattr(c.fn, 'dispatcher', c.fn).__class__.__name__ == 'CPUDispatcher'
