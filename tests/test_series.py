"""Taylor mode's fused recurrences (nestad/series.py): one primitive per recurrence or
Cauchy product of a jet's stack.  Their plain implementations give the bits of the
spelled-out rules they replace, their loops (numba's) the same numbers, every transform
applies their composition, and a staged jet holds one equation for each.  (Their Taylor
rules against truncated power series in mpmath: tests/test_taylor_primitives.py; their
derivative rules against finite differences: tests/test_registry.py.)"""
import importlib.util
import warnings

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import taylor_stack as ts

rng = np.random.default_rng(2026)


def _stack(K, shape, lo=-1.0, hi=1.0):
    """A stack of coefficients (K + 1, *shape), its primal row in [lo, hi]."""
    x = 0.7 * rng.normal(size=(K + 1,) + shape)
    x[0] = rng.uniform(lo, hi, size=shape)
    return x


def _calls(K, shape):
    """(fused primitive, arguments, parameters) of each kind, on stacks of ``shape``."""
    X, P = _stack(K, shape), _stack(K, shape, 1.5, 3.0)
    We, Wl = ts._grid(K, X, ts._exp_weight), ts._grid(K, X, ts._log_weight)
    i, j, grid = ts._pairs(K)
    out = []
    for whole in (True, False):
        out += [(ts.SERIES_EXP, (X, We), dict(whole=whole)),
                (ts.SERIES_LOG, (P, Wl), dict(whole=whole))]
        out += [(ts.SERIES_TRIG, (X, We), dict(whole=whole, sign=s, first=f))
                for s in (-1, 1) for f in (True, False)]
    out += [(ts.SERIES_DIVIDE, (X, P), {}), (ts.SERIES_DIVIDE, (X[:1], P), dict(stacked=False)),
            (ts.SERIES_MULTIPLY, (X, P, i, j, grid), {})]
    if len(shape) >= 2:
        B = _stack(K, shape[:-2] + shape[-1:] + shape[-2:-1])
        out.append((ts.SERIES_MATMUL, (X, B, i, j, grid), {}))
    return out


CASES = [(K, shape) for K in (2, 5, 9) for shape in ((), (3,), (2, 3), (2, 3, 2))]


@pytest.mark.parametrize("K,shape", CASES)
def test_plain_implementations_give_the_bits_of_the_spelled_out_rules(K, shape):
    for prim, args, params in _calls(K, shape):
        plain = prim.plain(*args, **params)
        composed = prim.composed(*args, **params)          # (nestad's array functions)
        assert plain.shape == composed.shape and plain.dtype == composed.dtype
        assert np.array_equal(plain, composed), (prim, params)


def test_stacks_that_broadcast():
    K = 4
    a, b = _stack(K, (2, 1)), _stack(K, (1, 3), 1.5, 3.0)
    i, j, grid = ts._pairs(K)
    for prim, args, params in ((ts.SERIES_DIVIDE, (a, b), {}), (ts.SERIES_DIVIDE, (a[:1], b), dict(stacked=False)),
                               (ts.SERIES_MULTIPLY, (a, b, i, j, grid), {}),
                               (ts.SERIES_MATMUL, (_stack(K, (2, 2, 3)), _stack(K, (1, 3, 2)), i, j, grid), {})):
        plain, composed = prim.plain(*args, **params), prim.composed(*args, **params)
        assert np.array_equal(plain, composed), prim
        if importlib.util.find_spec('numba') is not None:
            import numba
            loops = numba.njit(prim.plain.numba)(*args, **params)
            assert np.allclose(loops, plain, rtol=1e-13, atol=1e-13 * np.abs(plain).max()), prim


@pytest.mark.skipif(importlib.util.find_spec('numba') is None, reason="needs numba")
def test_the_loops_numba_compiles_give_the_same_numbers():
    import numba
    jitted = {}
    for K, shape in [(2, (3,)), (9, (2, 3)), (4, ())]:
        for prim, args, params in _calls(K, shape):
            fn = jitted.get(prim) or jitted.setdefault(prim, numba.njit(prim.plain.numba))
            got, want = fn(*args, **params), prim.plain(*args, **params)
            assert got.shape == want.shape and got.dtype == want.dtype
            # (sums in the same order; numba's exp, log, sin... are libm's, numpy's its own)
            scale = np.abs(want).reshape(K + 1, -1).max(axis=1).reshape((K + 1,) + (1,) * len(shape))
            assert np.all(np.abs(got - want) <= 1e-14 * (1 + scale)), (prim, params)


def program(t, x):
    """A jet's worth of every fused recurrence on arrays."""
    y = x + t * x[::-1]
    m = anp.reshape(anp.concatenate([y, y]), (2, 3))
    return [anp.exp(y) * anp.log(y + 2.0), anp.sin(y) / (anp.cosh(y) + y * y),
            anp.cos(y) - anp.sinh(y), 1.5 / (y + 3.0), m @ anp.transpose(m) * 0.5]


X0 = np.array([0.3, -0.4, 0.9])


def test_a_traced_jet_holds_one_equation_per_recurrence():
    K = 10
    jet = nd.derivatives(lambda t: program(t, X0), K)
    traced = nd.trace(jet, 0.1)
    eqns = traced.eqns
    fused = [e for e in eqns if getattr(e.op, 'qualname', '').startswith('series_')]
    assert {e.op.qualname for e in fused} == {'series_exp', 'series_log', 'series_trig',
                                              'series_divide', 'series_multiply', 'series_matmul'}
    # the spelled-out recurrences held about five equations per order each: 502 equations
    # here, 175 fused (110 of them each output's orders read out and scaled by k!)
    assert len(eqns) < 200, len(eqns)
    assert "_p_series_exp" in traced.source()


def test_the_python_backend_stages_the_recurrences_spelled_out():
    """``stage``'s Python backend traces the spelled-out recurrences (straight-line code,
    faster there than the plain functions' loops), numba's and the tiered one the fused
    ones; every spelling gives the eager jet's bits."""
    K = 10
    jet = nd.derivatives(lambda t: program(t, X0), K)
    staged = nd.stage(jet)
    staged(0.1)
    got, want = staged(0.1), jet(0.1)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert np.array_equal(a, b)
    eqns = staged.programs()[0].eqns
    assert not any(getattr(e.op, 'qualname', '').startswith('series_') for e in eqns)
    assert len(eqns) > 400
    traced = nd.trace(jet, 0.1)
    assert all(np.array_equal(a, b) for g, w in zip(traced(0.1), want) for a, b in zip(g, w))


def test_nesting_applies_the_compositions():
    """derivative, gradient_r and jet of a jet, and vmap of one, against nested derivative."""
    K = 4

    def total(vs):
        out = 0.0
        for v in vs:
            out = out + anp.sum(v)
        return out

    def coeff(x, k=K):
        return total(nd.derivatives(lambda t: program(t, x), k)(0.0)[k])

    def nested(x, k=K):
        g = lambda t: total(program(t, x))   # noqa: E731
        for _ in range(k):
            g = nd.derivative(g)
        return g(0.0)
    assert np.allclose(coeff(X0), nested(X0), rtol=1e-12)
    assert np.allclose(nd.gradient_r(coeff)(X0), nd.gradient_r(nested)(X0), rtol=1e-10)
    assert np.allclose(nd.derivative(lambda s: coeff(X0 + s))(0.2),
                       nd.derivative(lambda s: nested(X0 + s))(0.2), rtol=1e-10)
    # a jet of a function holding a jet: the inner recurrences meet the outer jet's values
    outer = nd.derivatives(lambda s: coeff(X0 * (1 + s), 3), 2)(0.0)
    assert np.allclose(outer[2], nd.derivative(nd.derivative(lambda s: nested(X0 * (1 + s), 3)))(0.0),
                       rtol=1e-10)


def test_vmap_of_a_jet_uses_the_batch_rule():
    xs = np.array([[0.3, -0.4, 0.9], [0.1, 0.5, -0.2], [1.1, 0.2, 0.4]])
    K = 6
    per = [nd.derivatives(lambda t, x=x: program(t, x), K)(0.0) for x in xs]
    got = nd.vmap(lambda x: nd.derivatives(lambda t: program(t, x), K)(0.0))(xs)
    for k in range(K + 1):
        for v in range(5):
            assert np.allclose(got[k][v], np.stack([p[k][v] for p in per]), rtol=1e-13, atol=1e-13)

    # a batched numerator over an unbatched jet, and a product of a batched and an
    # unbatched jet: the unbatched stack gets an axis of length 1
    def mixed(x, t):
        y = X0 + t
        return [x / (y + 2.0), (x * t + 1.0) * (y * y), anp.reshape(anp.concatenate([x, y]), (2, 3)) @
                anp.reshape(anp.concatenate([y, y]), (3, 2))]
    per = [nd.derivatives(lambda t, x=x: mixed(x, t), K)(0.0) for x in xs]
    got = nd.vmap(lambda x: nd.derivatives(lambda t: mixed(x, t), K)(0.0))(xs)
    for k in range(K + 1):
        for v in range(3):
            assert np.allclose(got[k][v], np.stack([p[k][v] for p in per]), rtol=1e-13, atol=1e-13)


def test_float32_and_integer_stacks_keep_the_spelled_out_rules():
    x = np.linspace(0.5, 1.0, 3, dtype=np.float32)
    y, s = nd.jet(lambda a: anp.exp(a) * anp.log(a) / (a + 1), (x,), ((x, x, x),))
    assert y.dtype == np.float32 and all(t.dtype == np.float32 for t in s)
    staged = nd.stage(lambda a: nd.jet(lambda b: anp.exp(b) * b, (a,), ((a, a, a),)))
    staged(x)
    assert not any(getattr(e.op, 'qualname', '').startswith('series_') for e in staged.programs()[0].eqns)


@pytest.mark.skipif(importlib.util.find_spec('numba') is None, reason="needs numba")
def test_numba_compiles_the_loops_of_a_staged_jet():
    from nestad.staging.numba_backend import NumbaFallbackWarning
    jet = nd.derivatives(lambda t: program(t, X0), 5)
    fast, ref = nd.stage(jet, backend="numba"), nd.stage(jet)
    with warnings.catch_warnings():
        warnings.simplefilter('error', NumbaFallbackWarning)
        for _ in range(2):                              # traced, then compiled
            got, want = fast(0.3), ref(0.3)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert np.allclose(a, b, rtol=1e-13, atol=1e-13 * np.abs(b).max())
    c = next(iter(fast.cache.values()))[0]
    assert getattr(c.fn, 'dispatcher', c.fn).__class__.__name__ == 'CPUDispatcher'
