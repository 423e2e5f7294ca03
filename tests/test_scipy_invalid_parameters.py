"""Distributions at parameters outside their domain: scipy's value is nan, so every derivative
is nan (or refused), in every mode and order, eager and staged; never the formula's number
(norm.logpdf(0.3, 0.1, s) at s = -1 had the value nan and the gradient 0.96).
multivariate_normal and dirichlet raise scipy's ValueError where scipy does."""
import math

import numpy as np
import pytest

pytest.importorskip('scipy')

import nestad as nd  # noqa: E402
from nestad.errors import NestadError  # noqa: E402
from nestad.scipy import stats  # noqa: E402

# (method, valid arguments, {argument index: invalid values}, indices scipy gives no
# derivative for (refused by name))
CASES = []
for _m in ('logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf'):
    CASES.append((f'norm.{_m}', getattr(stats.norm, _m), (0.3, 0.1, 2.0), {2: (-1.0, 0.0)}, ()))
for _m in ('logpdf', 'pdf', 'cdf', 'logcdf'):
    CASES.append((f't.{_m}', getattr(stats.t, _m), (0.3, 3.0, 0.1, 2.0),
                  {1: (-1.0, 0.0), 3: (-1.0,)}, (1,) if 'cdf' in _m else ()))
for _m in ('logpdf', 'pdf', 'cdf'):
    CASES.append((f'gamma.{_m}', getattr(stats.gamma, _m), (1.3, 2.5, 0.1, 2.0),
                  {1: (-1.0, 0.0), 3: (-2.0,)}, (1,) if _m == 'cdf' else ()))
    CASES.append((f'beta.{_m}', getattr(stats.beta, _m), (0.3, 2.5, 1.5),
                  {1: (-1.0,), 2: (0.0,)}, (1, 2) if _m == 'cdf' else ()))
for _m in ('logpmf', 'pmf', 'cdf'):
    CASES.append((f'poisson.{_m}', getattr(stats.poisson, _m), (2.0, 1.5), {1: (-1.0,)}, (0,)))
for _m in ('logpdf', 'pdf'):
    CASES.append((f'chi2.{_m}', getattr(stats.chi2, _m), (1.3, 3.0), {1: (-1.0, 0.0)}, ()))


def _towers(f):
    """First and second derivatives in every mode and pairing, eager and staged."""
    d, g = nd.derivative, nd.gradient_r
    yield 'derivative', d(f)
    yield 'gradient_r', g(f)
    yield 'ff', d(d(f))
    yield 'fr', d(g(f))
    yield 'rf', g(d(f))
    yield 'rr', g(g(f))
    yield 'staged gradient_r', nd.stage(g(f))
    yield 'staged fr', nd.stage(d(g(f)))


def _points():
    for name, fn, valid, invalid, refused in CASES:
        for j, values in invalid.items():
            for v in values:
                args = list(valid)
                args[j] = v
                yield pytest.param(name, fn, tuple(args), refused, id=f"{name}-arg{j}={v}")


@pytest.mark.parametrize('name, fn, args, refused', list(_points()))
def test_a_nan_value_has_nan_derivatives(name, fn, args, refused):
    assert math.isnan(fn(*args)), f"{name}{args} is not nan: the case is no invalid parameter"
    for i in range(len(args)):
        def f(v, i=i):
            a = list(args)
            a[i] = v
            return fn(*a)
        for mode, d in _towers(f):
            if i in refused:
                with pytest.raises(NestadError, match="no derivative with respect to"):
                    d(args[i])
                continue
            got = d(args[i])
            assert math.isnan(got), f"{name}{args}: {mode} in argument {i} gives {got}, not nan"


@pytest.mark.parametrize('name, fn, valid, invalid, refused', CASES, ids=[c[0] for c in CASES])
def test_only_the_invalid_entries_are_nan(name, fn, valid, invalid, refused):
    """On arrays, valid entries keep their (finite) derivatives beside an invalid one."""
    j, values = next(iter(invalid.items()))
    param = np.array([valid[j], values[0], valid[j]])
    for i in (k for k in range(len(valid)) if k not in refused):
        def f(v, i=i):
            a = list(valid)
            a[j] = param
            a[i] = v
            return nd.numpy.sum(fn(*a) * np.array([1.0, 1.0, 1.0]))
        x0 = param if i == j else valid[i]
        for batched, grad in ((False, nd.gradient_r(f)), (True, nd.gradient_f(f)),
                              (False, nd.stage(nd.gradient_r(f)))):
            g = np.asarray(grad(x0))
            if i != j:
                assert np.isnan(g), (name, i, g)   # one nan entry in the sum: nan
                continue
            assert np.isnan(g[1]), (name, i, g)
            if not batched:         # (a batched forward pass spreads a nan to every direction)
                assert np.all(np.isfinite(g[[0, 2]])), (name, i, g)


def test_valid_parameters_are_unchanged():
    g = nd.gradient_r(lambda s: stats.norm.logpdf(0.3, 0.1, s))(2.0)
    assert math.isclose(g, ((0.2 / 2.0) ** 2 - 1.0) / 2.0)
    f = lambda s: stats.norm.logpdf(0.3, 0.1, s)       # noqa: E731
    assert math.isnan(nd.gradient_r(f)(-1.0)) and math.isnan(nd.derivative(f)(-1.0))


def test_multivariate_normal_refuses_a_covariance_that_is_not_positive_definite():
    x = np.array([0.3, 0.2])
    for cov in (np.diag([1.0, -1.0]), -np.eye(2), np.array([[1.0, 2.0], [2.0, 1.0]])):
        with pytest.raises(ValueError, match="symmetric positive definite.*pass a valid cov"):
            stats.multivariate_normal.logpdf(x, None, cov)
        with pytest.raises(ValueError, match="symmetric positive definite"):
            nd.gradient_r(lambda m: stats.multivariate_normal.logpdf(x, m, cov))(np.zeros(2))


def test_dirichlet_refuses_parameters_and_points_scipy_refuses():
    with pytest.raises(ValueError, match="alpha must be greater than 0"):
        nd.gradient_r(lambda a: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a))(
            np.array([1.0, -2.0, 3.0]))
    with pytest.raises(ValueError, match=r"entries of x must lie in \[0, 1\]"):
        stats.dirichlet.logpdf(np.array([-0.2, 0.7, 0.5]), np.array([1.0, 2.0, 3.0]))
    g = nd.gradient_r(lambda a: stats.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a))(
        np.array([1.0, 2.0, 3.0]))
    assert np.all(np.isfinite(g))
