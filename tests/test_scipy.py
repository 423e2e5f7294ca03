"""nestad.scipy: values are scipy's; rules checked by check_rules (every mode, batched and
unbatched, against finite differences, to second order) on scalars and arrays; staged
results equal eager ones; derivatives scipy cannot give raise."""
import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

import nestad as nd
from nestad.extend import check_rules
from nestad.scipy import special as sp
from nestad.scipy import stats

X = np.array([0.3, 0.45, 0.7])       # inside every function's smooth domain below
POS = np.array([1.3, 2.1, 3.7])

# qualified name in the registry -> (function of differentiable arguments, arguments)
SCIPY_ROWS = {
    'scipy.special.polygamma': (lambda x: sp.polygamma(2, x), (POS,)),
    'scipy.special.digamma': (sp.digamma, (POS,)),
    'scipy.special.gammaln': (sp.gammaln, (POS,)),
    'scipy.special.gamma': (sp.gamma, (POS,)),
    'scipy.special.rgamma': (sp.rgamma, (POS,)),
    'scipy.special.beta': (sp.beta, (POS, POS[::-1])),
    'scipy.special.betaln': (sp.betaln, (POS, POS[::-1])),
    'scipy.special.gammainc': (lambda x: sp.gammainc(2.5, x), (POS,)),
    'scipy.special.gammaincc': (lambda x: sp.gammaincc(2.5, x), (POS,)),
    'scipy.special.betainc': (lambda x: sp.betainc(2.0, 3.0, x), (X,)),
    'scipy.special.erf': (sp.erf, (X,)),
    'scipy.special.erfc': (sp.erfc, (X,)),
    'scipy.special.erfinv': (sp.erfinv, (X,)),
    'scipy.special.erfcinv': (sp.erfcinv, (X,)),
    'scipy.special.erfcx': (sp.erfcx, (X - 0.5,)),
    'scipy.special.erfcx_derivative': (lambda x: sp.erfcx_derivative(2, x), (np.array([-0.2, 0.6, 3.0]),)),
    'scipy.special.expit': (sp.expit, (X - 0.5,)),
    'scipy.special.logit': (sp.logit, (X,)),
    'scipy.special.log_expit': (sp.log_expit, (X - 0.5,)),
    'scipy.special.xlogy': (sp.xlogy, (X, POS)),
    'scipy.special.xlog1py': (sp.xlog1py, (X, POS)),
    'scipy.special.iv': (lambda x: sp.iv(2, x), (POS,)),
    'scipy.special.ive': (lambda x: sp.ive(2, x), (POS,)),
    'scipy.special.ive_derivative': (lambda x: sp.ive_derivative(1, 2, x), (np.array([0.5, 3.0, -20.0]),)),
    'scipy.special.i0': (sp.i0, (X,)),
    'scipy.special.i1': (sp.i1, (X,)),
    'scipy.special.i0e': (sp.i0e, (X,)),
    'scipy.special.i1e': (sp.i1e, (X,)),
    'scipy.stats.norm.logpdf': (stats.norm.logpdf, (X, X[::-1], POS)),
    'scipy.stats.norm.pdf': (stats.norm.pdf, (X, X[::-1], POS)),
    'scipy.stats.norm.cdf': (stats.norm.cdf, (X, X[::-1], POS)),
    'scipy.stats.norm.logcdf': (stats.norm.logcdf, (X, X[::-1], POS)),
    'scipy.stats.norm.sf': (stats.norm.sf, (X, X[::-1], POS)),
    'scipy.stats.norm.logsf': (stats.norm.logsf, (X, X[::-1], POS)),
    'scipy.stats.t.logpdf': (stats.t.logpdf, (X, POS + 1.0, X[::-1], POS)),
    'scipy.stats.t.cdf': (lambda x, loc, scale: stats.t.cdf(x, 3.5, loc, scale), (X, X[::-1], POS)),
    'scipy.stats.gamma.logpdf': (lambda x, a, scale: stats.gamma.logpdf(x, a, 0.1, scale), (POS, POS[::-1], X + 1.0)),
    'scipy.stats.gamma.cdf': (lambda x, scale: stats.gamma.cdf(x, 2.5, 0.1, scale), (POS, X + 1.0)),
    'scipy.stats.beta.logpdf': (stats.beta.logpdf, (X, POS, POS[::-1])),
    'scipy.stats.beta.cdf': (lambda x: stats.beta.cdf(x, 2.0, 3.0), (X,)),
    'scipy.stats.poisson.logpmf': (lambda mu: stats.poisson.logpmf(np.array([1.0, 3.0, 4.0]), mu), (POS,)),
    'scipy.stats.poisson.cdf': (lambda mu: stats.poisson.cdf(np.array([1.0, 3.0, 4.0]), mu), (POS,)),
    'scipy.stats.chi2.logpdf': (stats.chi2.logpdf, (POS, POS[::-1] + 1.0)),
    'scipy.stats.chi2.cdf': (lambda x: stats.chi2.cdf(x, 3.0), (POS,)),
    'scipy.special.jv': (lambda x: sp.jv(1.5, x), (POS,)),
    'scipy.special.yv': (lambda x: sp.yv(0.5, x), (POS,)),
    'scipy.special.yn': (lambda x: sp.yn(2, x), (POS,)),
    'scipy.special.j0': (sp.j0, (POS,)),
    'scipy.special.j1': (sp.j1, (POS,)),
    'scipy.special.y0': (sp.y0, (POS,)),
    'scipy.special.y1': (sp.y1, (POS,)),
    'scipy.special.gammasgn': (sp.gammasgn, (X - 1.0,)),
    'scipy.special.multigammaln': (lambda a: sp.multigammaln(a, 3), (POS + 1.0,)),
}

# Functions written with differentiable functions (no primitive of their own).
COMPOSITES = {
    'logsumexp b': (lambda a, b: sp.logsumexp(a, b=b), (X, POS)),
    'logsumexp axis': (lambda a: sp.logsumexp(a, axis=1, keepdims=True), (np.outer(X, POS),)),
    'mvn logpdf': (lambda x, m, c: stats.multivariate_normal.logpdf(x, m, c),
                   (X, X[::-1], np.diag(POS) + 0.1)),
    'dirichlet logpdf': (lambda x, a: stats.dirichlet.logpdf(x, a), (X / X.sum(), POS)),
    't pdf': (lambda x: stats.t.pdf(x, 3.5), (X,)),
    'gamma pdf': (lambda x: stats.gamma.pdf(x, 2.5), (POS,)),
    'beta pdf': (lambda x: stats.beta.pdf(x, 2.0, 3.0), (X,)),
    'poisson pmf': (lambda mu: stats.poisson.pmf(np.array([1.0, 3.0, 4.0]), mu), (POS,)),
    'chi2 pdf': (lambda x: stats.chi2.pdf(x, 3.0), (POS,)),
    'mvn entropy': (lambda c: stats.multivariate_normal.entropy(None, c @ c.T),
                    (np.diag(POS) + 0.1,)),
    'mvn logpdf singular': (lambda x, m: stats.multivariate_normal.logpdf(
        x, m, np.outer(X, X) + np.outer(POS, POS), allow_singular=True), (X + POS, X - POS)),
}


@pytest.mark.parametrize('name', sorted(SCIPY_ROWS))
def test_rules_on_arrays_and_scalars(name):
    fn, args = SCIPY_ROWS[name]
    check_rules(fn, *args, order=2)
    check_rules(fn, *[float(a[1]) for a in args], order=2)


@pytest.mark.parametrize('name', sorted(COMPOSITES))
def test_composites(name):
    fn, args = COMPOSITES[name]
    check_rules(fn, *args, order=2)


@pytest.mark.parametrize('name, ours, theirs, args', [
    ('gammaln', sp.gammaln, scipy.special.gammaln, (POS,)),
    ('polygamma', lambda x: sp.polygamma(3, x), lambda x: scipy.special.polygamma(3, x), (POS,)),
    ('erfinv', sp.erfinv, scipy.special.erfinv, (X,)),
    ('xlogy', sp.xlogy, scipy.special.xlogy, (np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 3.0]))),
    ('i1e', sp.i1e, scipy.special.i1e, (X - 0.5,)),
    ('logsumexp', lambda a: sp.logsumexp(a, b=POS), lambda a: scipy.special.logsumexp(a, b=POS), (X,)),
    ('norm.logcdf', stats.norm.logcdf, scipy.stats.norm.logcdf, (X * 10 - 8,)),
    ('t.logpdf', lambda x: stats.t.logpdf(x, 3.5, 0.2, 1.5), lambda x: scipy.stats.t.logpdf(x, 3.5, 0.2, 1.5), (X,)),
    ('mvn', lambda x: stats.multivariate_normal.logpdf(x, X[::-1], np.diag(POS)),
     lambda x: scipy.stats.multivariate_normal.logpdf(x, X[::-1], np.diag(POS)), (X,)),
    ('dirichlet', lambda a: stats.dirichlet.logpdf(X / X.sum(), a),
     lambda a: scipy.stats.dirichlet.logpdf(X / X.sum(), a), (POS,)),
])
def test_values_are_scipys(name, ours, theirs, args):
    assert np.allclose(ours(*args), theirs(*args), rtol=1e-13, atol=1e-15)


def test_second_derivatives_in_every_pairing_and_staged():
    D = {'f': nd.derivative, 'r': nd.gradient_r}
    want = scipy.special.polygamma(2, 2.5)            # d2/dx2 digamma
    for p in ('ff', 'fr', 'rf', 'rr'):
        op = D[p[0]](D[p[1]](sp.digamma))
        assert math.isclose(op(2.5), want, rel_tol=1e-12)
        assert nd.stage(op)(2.5) == op(2.5)
    g = nd.gradient_r(lambda s: nd.numpy.sum(stats.norm.logpdf(X, 0.2, s)))
    assert nd.stage(g)(1.7) == g(1.7)


def test_derivatives_scipy_cannot_give_raise():
    with pytest.raises(nd.NestadError, match="shape"):
        nd.derivative(lambda a: sp.gammainc(a, 2.0))(1.5)
    with pytest.raises(nd.NestadError, match="integer order"):
        nd.gradient_r(lambda n: sp.polygamma(n, 2.0))(1.0)
    with pytest.raises(nd.NestadError, match="shape"):
        nd.derivative(lambda a: stats.gamma.cdf(2.0, a))(1.5)
    # the other argument still differentiates
    assert math.isclose(nd.derivative(lambda x: sp.gammainc(2.0, x))(1.5),
                        1.5 * math.exp(-1.5), rel_tol=1e-12)


# ---------------------------------------------------------------- special points (found by fuzzing
# against mpmath): each rule is exact at the points where its formula is 0 * inf or 0 / 0

PAIRINGS = {'ff': (nd.derivative, nd.derivative), 'fr': (nd.derivative, nd.gradient_r),
            'rf': (nd.gradient_r, nd.derivative), 'rr': (nd.gradient_r, nd.gradient_r)}

EXACT_AT_SPECIAL_POINTS = [   # (name, f, x, f'(x), f''(x))
    ('rgamma at 0', sp.rgamma, 0.0, 1.0, 2 * 0.5772156649015329),      # was nan: -0 * digamma(0)
    ('rgamma at -2', sp.rgamma, -2.0, 2.0, None),
    ('rgamma at -1', sp.rgamma, -1.0, -1.0, None),
    ('gammainc(1, x) at 0', lambda x: sp.gammainc(1.0, x), 0.0, 1.0, -1.0),        # was nan
    ('gammainc(2, x) at 0', lambda x: sp.gammainc(2.0, x), 0.0, 0.0, 1.0),         # f'' was nan
    ('gammaincc(1, x) at 0', lambda x: sp.gammaincc(1.0, x), 0.0, -1.0, 1.0),
    ('betainc(1, 2, x) at 0', lambda x: sp.betainc(1.0, 2.0, x), 0.0, 2.0, -2.0),  # was nan
    ('betainc(2, 1, x) at 1', lambda x: sp.betainc(2.0, 1.0, x), 1.0, 2.0, 2.0),
    ('betainc(2, 3, x) at 0', lambda x: sp.betainc(2.0, 3.0, x), 0.0, 0.0, 12.0),
    ('expit at 40', sp.expit, 40.0, math.exp(-40) / (1 + math.exp(-40)) ** 2, None),  # was 0
    ('chi2.logpdf(x, 2) at 0', lambda x: stats.chi2.logpdf(x, 2.0), 0.0, -0.5, 0.0),  # raised
    ('gamma.logpdf(x, 1) at 0', lambda x: stats.gamma.logpdf(x, 1.0), 0.0, -1.0, 0.0),
    ('beta.logpdf(x, 1, 2) at 0', lambda x: stats.beta.logpdf(x, 1.0, 2.0), 0.0, -1.0, -1.0),
    ('beta.logpdf(x, 2, 1) at 1', lambda x: stats.beta.logpdf(x, 2.0, 1.0), 1.0, 1.0, -1.0),
    ('poisson.logpmf(0, mu) at 0', lambda m: stats.poisson.logpmf(0.0, m), 0.0, -1.0, 0.0),
    ('gamma.cdf(x, 1) at 0', lambda x: stats.gamma.cdf(x, 1.0), 0.0, 1.0, -1.0),
    ('gamma.cdf(x, 2) at 0', lambda x: stats.gamma.cdf(x, 2.0), 0.0, 0.0, 1.0),        # f'' was nan
    ('beta.cdf(x, 1, 2) at 0', lambda x: stats.beta.cdf(x, 1.0, 2.0), 0.0, 2.0, -2.0),
    ('beta.cdf(x, 3, 171.5) at 1', lambda x: stats.beta.cdf(x, 3.0, 171.5), 1.0, 0.0, 0.0),
    # digamma(a) - digamma(a + b) cancelled for b small beside a (0.3% off at b = 1e-12)
    ('betaln(a, 1e-12) in a', lambda a: sp.betaln(a, 1e-12), 10.0, -1.0516633568168022e-13,
     1.1049834970800907e-14),
    ('beta(1e-12, b) in b', lambda b: sp.beta(1e-12, b), 1.948815309566029, -0.6662859570380562, None),
]


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('name, f, x, d1, d2', EXACT_AT_SPECIAL_POINTS,
                         ids=[c[0] for c in EXACT_AT_SPECIAL_POINTS])
def test_derivatives_at_special_points_in_every_mode(name, f, x, d1, d2):
    for op in (nd.derivative, nd.gradient_r, nd.gradient_f, lambda f: nd.stage(nd.gradient_r(f))):
        assert math.isclose(op(f)(x), d1, rel_tol=1e-13, abs_tol=1e-300), (name, op)
    got = nd.gradient_r(lambda v: anp_sum(f(v)))(np.array([x, x]))     # arrays too
    assert np.allclose(got, d1, rtol=1e-13, atol=0)
    if d2 is not None:
        for pairing, (outer, inner) in PAIRINGS.items():
            assert math.isclose(outer(inner(f))(x), d2, rel_tol=1e-12, abs_tol=1e-15), (name, pairing)


def anp_sum(v):
    return nd.numpy.sum(v)


@pytest.mark.parametrize('fn', [sp.xlogy, sp.xlog1py])
def test_mixed_second_derivative_of_xlogy_at_x_zero(fn):
    # The y-partial was where(x == 0, 0, x / y): its derivative in x, 1/y, was 0 at x = 0,
    # so the Hessian was not symmetric ([[0, 0.5], [0, 0]] at (0, 2) for xlogy).
    y = 2.0
    inv = 1 / y if fn is sp.xlogy else 1 / (1 + y)
    for outer, inner in PAIRINGS.values():
        assert math.isclose(outer(lambda x: inner(lambda y: fn(x, y))(2.0))(0.0), inv, rel_tol=1e-15)
        assert math.isclose(outer(lambda y: inner(lambda x: fn(x, y))(0.0))(2.0), inv, rel_tol=1e-15)
    H = nd.hessian(lambda v: fn(v[0], v[1]))(np.array([0.0, y]))
    assert np.allclose(H, [[0.0, inv], [inv, -0.0]], rtol=1e-15, atol=0)
    assert nd.gradient_r(lambda y: fn(0.0, y))(0.0 if fn is sp.xlogy else -1.0) == 0.0


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
def test_extreme_parameters_give_ieee_answers_not_python_errors():
    # rules computed (z ** 2) and (2 df df u) on Python floats: OverflowError and
    # ZeroDivisionError where numpy gives inf or nan
    assert math.isnan(nd.gradient_r(lambda s: stats.norm.pdf(-5.58, 0.88, s))(1e-300))
    assert nd.gradient_r(lambda d: stats.t.logpdf(-5.6, d, -4.5, 1e8))(1e-300) == math.inf


@pytest.mark.parametrize('x, scale, exact', [(-0.5, 1e-6, 500000000002.0000452518722),
                                              (-40.0, 1.0, 40.02496884720726372)])
def test_normal_log_cdf_derivative_in_the_far_tail(x, scale, exact):
    # exp(logpdf - logcdf) cancelled: 2.6e-5 relative at z = -5e5 (JAX's is off by 3e-6);
    # sqrt(2/pi) / erfcx(-z/sqrt(2)) does not.  Exact values from mpmath.
    for op in (nd.gradient_r, nd.gradient_f):
        assert math.isclose(op(lambda x: stats.norm.logcdf(x, 0.0, scale))(x), exact, rel_tol=1e-14)
        assert math.isclose(op(lambda x: stats.norm.logsf(x, 0.0, scale))(-x), -exact, rel_tol=1e-14)
