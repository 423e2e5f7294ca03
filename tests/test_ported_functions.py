"""The functions ported programs reach for: values equal numpy's and scipy's (the rules
are checked by tests/test_registry.py and test_scipy.py's rows, every mode, second
order), the variants of each, staged results, and the refusals."""
import numpy as np
import pytest
import scipy.linalg
import scipy.signal
import scipy.special
import scipy.stats

import nestad as nd
import nestad.numpy as anp
from nestad.extend import check_rules
from nestad.scipy import linalg as sla, signal, special, stats

R = np.random.default_rng(11)


@pytest.mark.parametrize('n, m', [(5, 3), (3, 5), (4, 4), (2, 7), (1, 1), (6, 1)])
@pytest.mark.parametrize('mode', ['full', 'same', 'valid'])
def test_numpy_convolve_and_correlate(n, m, mode):
    a, v = R.normal(size=n), R.normal(size=m)
    for ours, theirs in ((anp.convolve, np.convolve), (anp.correlate, np.correlate)):
        assert np.array_equal(ours(a, v, mode), theirs(a, v, mode))
        assert np.array_equal(theirs(anp.array(a) + 0.0 * nd.numpy.zeros(n), v, mode),
                              theirs(a, v, mode))           # numpy's own call dispatches
        check_rules(lambda a, v: ours(a, v, mode), a, v, order=2)


@pytest.mark.parametrize('sa, sb', [((5, 6), (3, 2)), ((3, 2), (5, 6)), ((7,), (3,)),
                                    ((3, 4, 5), (2, 2, 2))])
@pytest.mark.parametrize('mode', ['full', 'same', 'valid'])
def test_signal_convolve_is_scipys(sa, sb, mode):
    a, b = R.normal(size=sa), R.normal(size=sb)
    assert np.array_equal(signal.convolve(a, b, mode), scipy.signal.convolve(a, b, mode))
    if len(sa) < 3:
        check_rules(lambda a, b: signal.convolve(a, b, mode), a, b, order=2)


@pytest.mark.parametrize('mode', ['valid', 'full'])
def test_signal_convolve_with_axes_is_autograds(mode):
    """autograd's convnet convolves images (N, C, H, W) with kernels (C, K, h, w) over
    the last two axes, summing over channels."""
    ags = pytest.importorskip("autograd.scipy.signal")
    A, B = R.normal(size=(2, 3, 6, 6)), R.normal(size=(3, 4, 3, 3))
    kw = dict(axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode=mode)
    assert np.allclose(signal.convolve(A, B, **kw), ags.convolve(A, B, **kw), rtol=1e-14, atol=1e-14)
    check_rules(lambda A, B: signal.convolve(A, B, **kw), A[:1, :2, :4, :4], B[:2, :1, :2, :2])
    g = nd.gradient_r(lambda B: anp.sum(signal.convolve(A, B, **kw) ** 2))(B)
    staged = nd.stage(nd.gradient_r(lambda B: anp.sum(signal.convolve(A, B, **kw) ** 2)))
    assert np.allclose(staged(B), g) and np.allclose(staged(B), g)


def test_scipy_linalg_values_are_scipys():
    a = R.normal(size=(3, 3))
    spd = a @ a.T + np.eye(3)
    b, bm = R.normal(size=3), R.normal(size=(3, 2))
    assert np.array_equal(sla.expm(a), scipy.linalg.expm(a))
    assert np.array_equal(sla.sqrtm(spd), scipy.linalg.sqrtm(spd))
    assert np.array_equal(sla.solve_sylvester(a, spd, a.T),
                          scipy.linalg.solve_sylvester(a, spd, a.T))
    t = np.triu(a) + 3 * np.eye(3)
    for trans in (0, 1, 'T'):
        for lower in (False, True):
            for unit in (False, True):
                m = t.T if lower else t
                assert np.array_equal(sla.solve_triangular(m, bm, trans, lower, unit),
                                      scipy.linalg.solve_triangular(m, bm, trans, lower, unit))
                check_rules(lambda m, y: sla.solve_triangular(m, y, trans, lower, unit), m, b)
    for lower in (False, True):
        c, c0 = sla.cho_factor(spd, lower), scipy.linalg.cho_factor(spd, lower)
        assert np.array_equal(c[0], c0[0]) and c[1] == c0[1]
        assert np.array_equal(sla.cho_solve(c0, bm), scipy.linalg.cho_solve(c0, bm))
        check_rules(lambda s, y: sla.cho_solve(sla.cho_factor(s @ s.T + np.eye(3), lower), y), a, bm)
    ab = np.array([[0.0, 1.0, 0.5], [4.0, 5.0, 6.0], [0.3, 0.2, 0.0]])
    assert np.array_equal(sla.solve_banded((1, 1), ab, b), scipy.linalg.solve_banded((1, 1), ab, b))
    check_rules(lambda ab, b: sla.solve_banded((1, 1), ab, b), ab, b)


def test_expm_derivative_is_the_frechet_derivative():
    a, e = R.normal(size=(3, 3)), R.normal(size=(3, 3))
    assert np.allclose(nd.jvp(sla.expm, (a,), (e,))[1], scipy.linalg.expm_frechet(a, e)[1],
                       rtol=1e-12)


def test_staged_linalg_equals_eager():
    a = R.normal(size=(3, 3)) * 0.3
    spd = a @ a.T + np.eye(3)
    f = lambda a: anp.sum(sla.expm(a) * sla.sqrtm(spd + a @ a.T))     # noqa: E731
    staged = nd.stage(nd.gradient_r(f))
    staged(a)
    assert np.allclose(staged(a), nd.gradient_r(f)(a), rtol=1e-13)


def test_bessel_and_gamma_values_are_scipys():
    x = np.array([0.3, 1.7, 4.2, 11.0])
    for name in ('j0', 'j1', 'y0', 'y1', 'gammasgn'):
        assert np.array_equal(getattr(special, name)(x), getattr(scipy.special, name)(x))
    assert np.array_equal(special.jn(3, x), scipy.special.jn(3, x))
    assert np.array_equal(special.yn(2, x), scipy.special.yn(2, x))
    assert np.array_equal(special.multigammaln(x + 2, 3), scipy.special.multigammaln(x + 2, 3))
    assert nd.derivative(scipy.special.j0)(1.0) == -scipy.special.j1(1.0)   # scipy's own call
    assert nd.derivative(special.gammasgn)(-1.5) == 0.0
    with pytest.raises(nd.NestadError, match="no derivative with respect to n: it is an integer order"):
        nd.derivative(lambda n: special.yn(n, 2.0))(2.0)


def test_stats_additions_are_scipys():
    x = np.array([0.5, 2.0, 7.0])
    assert np.array_equal(stats.chi2.cdf(x, 3.0), scipy.stats.chi2.cdf(x, 3.0))
    assert np.array_equal(stats.chi2.pdf(x, 3.0), np.exp(scipy.stats.chi2.logpdf(x, 3.0)))
    with pytest.raises(nd.NestadError, match="stats.chi2.cdf has no derivative with respect to df"):
        nd.derivative(lambda df: stats.chi2.cdf(2.0, df))(3.0)
    a = R.normal(size=(3, 3))
    cov = a @ a.T + np.eye(3)
    assert np.isclose(stats.multivariate_normal.entropy(None, cov),
                      scipy.stats.multivariate_normal.entropy(None, cov), rtol=1e-14)
    assert np.isclose(stats.multivariate_normal.entropy(cov=2.0),
                      scipy.stats.multivariate_normal.entropy(cov=2.0), rtol=1e-14)


def test_multivariate_normal_singular():
    b = R.normal(size=(3, 2))
    cov = b @ b.T                                      # rank 2
    x, m = b @ np.array([0.3, -0.2]), b @ np.array([0.1, 0.4])
    assert np.isclose(stats.multivariate_normal.logpdf(x, m, cov, allow_singular=True),
                      scipy.stats.multivariate_normal.logpdf(x, m, cov, allow_singular=True),
                      rtol=1e-13)
    assert np.isclose(stats.multivariate_normal.entropy(None, cov),
                      scipy.stats.multivariate_normal.entropy(None, cov), rtol=1e-13)
    with pytest.raises(np.linalg.LinAlgError, match="singular; pass allow_singular=True"):
        stats.multivariate_normal.logpdf(x, m, cov)
    with pytest.raises(ValueError, match="symmetric positive definite .semidefinite with allow_singular=True"):
        stats.multivariate_normal.logpdf(x, m, -cov - np.eye(3), allow_singular=True)


def test_interp_meshgrid_unique_real():
    xp = np.sort(R.uniform(0, 5, size=6))
    fp = R.normal(size=6)
    x = np.array([-1.0, 0.5, 1.7, 2.2, 4.0, 9.0, xp[2], xp[-1], np.nan])
    assert np.array_equal(anp.interp(x + 0 * anp.array(x), xp, fp), np.interp(x, xp, fp),
                          equal_nan=True)
    assert np.array_equal(anp.interp(x, xp, fp, left=-5.0, right=5.0), np.interp(x, xp, fp, -5.0, 5.0),
                          equal_nan=True)
    check_rules(lambda x, xp, fp: anp.interp(x, xp, fp), np.array([0.5, 1.7, 2.2, 4.0]), xp, fp)
    g = nd.gradient_r(lambda x: anp.sum(anp.interp(x, xp, fp)))(np.array([-1.0, 9.0, xp[2]]))
    slope = (fp[3] - fp[2]) / (xp[3] - xp[2])
    assert np.array_equal(g[:2], [0.0, 0.0]) and np.isclose(g[2], slope)   # right-hand at a knot
    staged = nd.stage(lambda fp: anp.interp(x, xp, fp))
    assert np.array_equal(staged(fp), np.interp(x, xp, fp), equal_nan=True)
    with pytest.raises(nd.StagingError, match="interp of a traced x.*static_argnums"):
        nd.stage(lambda x: anp.interp(x, xp, fp))(x)
    for indexing in ('xy', 'ij'):
        for sparse in (False, True):
            ours = anp.meshgrid(np.arange(3.0), np.arange(2.0), np.arange(4.0), indexing=indexing,
                                sparse=sparse)
            theirs = np.meshgrid(np.arange(3.0), np.arange(2.0), np.arange(4.0), indexing=indexing,
                                 sparse=sparse)
            assert all(np.array_equal(o, t) for o, t in zip(ours, theirs))
    j = nd.jacobian_r(lambda v: anp.meshgrid(v, v[:2])[0])(np.arange(3.0))
    assert j.shape == (2, 3, 3) and np.array_equal(j[1], np.eye(3))
    a = np.array([3.0, 1.0, 3.0, 2.0])
    for kw in ({}, dict(return_counts=True), dict(return_index=True, return_inverse=True)):
        ours, theirs = anp.unique(a, **kw), np.unique(a, **kw)
        assert all(np.array_equal(o, t) for o, t in zip(ours, theirs)) if kw else \
            np.array_equal(ours, theirs)
    assert np.array_equal(nd.gradient_r(lambda a: anp.sum(anp.unique(a) ** 2))(a), [6.0, 2.0, 0.0, 4.0])
    with pytest.raises(nd.StagingError, match="unique: the number of distinct values depends"):
        nd.stage(anp.unique)(a)
    assert nd.derivative(lambda x: anp.real(x) * anp.conj(x) + anp.imag(x))(3.0) == 6.0
    assert np.array_equal(anp.imag(np.ones(2)), np.zeros(2))


def test_sqrtm_refuses_a_complex_root():
    with pytest.raises(nd.InvalidInputError, match="no real square root.*symmetric positive definite"):
        sla.sqrtm(np.array([[-1.0, 0.0], [0.0, 1.0]]))


def test_integrate_odeint_before_and_after_the_solvers(monkeypatch):
    """Before nestad.solvers exists, importing odeint says it is coming; once it exists,
    scipy's call (func(y, t, *args), args a tuple) goes to nestad.solvers.odeint (here a
    stand-in module that records the call, so both states are tested now)."""
    import importlib
    import sys
    import types
    import nestad.scipy.integrate as integrate
    if 'nestad.solvers' not in sys.modules and importlib.util.find_spec('nestad.solvers') is None:
        with pytest.raises(ImportError, match="odeint is nestad's ODE integrator.*nestad.solvers"):
            from nestad.scipy.integrate import odeint  # noqa: F401
    calls = []
    solvers = types.ModuleType('nestad.solvers')
    solvers.odeint = lambda f, y0, t, *params, **kw: calls.append((f, y0, t, params, kw)) or 'y'
    monkeypatch.setitem(sys.modules, 'nestad.solvers', solvers)
    try:
        importlib.reload(integrate)
        f = lambda y, t, a, b: a * y + b                                   # noqa: E731
        assert integrate.odeint(f, 1.0, [0.0, 1.0], args=(2.0, 3.0), rtol=1e-9) == 'y'
        assert calls == [(f, 1.0, [0.0, 1.0], (2.0, 3.0), {'rtol': 1e-9})]
        with pytest.raises(nd.InvalidInputError, match="args must be a tuple"):
            integrate.odeint(f, 1.0, [0.0, 1.0], args=[2.0, 3.0])
        with pytest.raises(nd.InvalidInputError, match="does not take Dfun"):
            integrate.odeint(f, 1.0, [0.0, 1.0], Dfun=None)
    finally:
        monkeypatch.undo()
        if 'nestad.solvers' not in sys.modules:
            vars(integrate).pop('odeint', None)      # (reload keeps the stand-in's function)
        importlib.reload(integrate)
