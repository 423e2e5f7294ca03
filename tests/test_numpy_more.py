"""The numpy functions nestad.numpy builds from its differentiable ones (nestad/numpy/_more.py):
numpy's values, through nestad.numpy and through numpy's own call on a nestad value, and
derivatives checked by check_rules (gradient_r, gradient_f, jvp per direction against each
other and central differences; second order in all four pairings)."""
import math

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.extend import check_rules

R = np.random.default_rng(11)
V = R.uniform(-1.0, 1.0, size=5)
M = R.uniform(-1.0, 1.0, size=(3, 4))
T = R.uniform(-1.0, 1.0, size=(2, 3, 4))
W = V[::-1] + np.array([0.3, -0.2, 0.25, 0.1, -0.4])   # no ties with V

# name: (numpy's function, nestad.numpy's, arguments); the first argument is differentiated
# in the value test, every argument in check_rules
CASES = {
    'rad2deg': (np.rad2deg, anp.rad2deg, (V,)),
    'degrees': (np.degrees, anp.degrees, (V,)),
    'deg2rad': (np.deg2rad, anp.deg2rad, (V * 90,)),
    'radians': (np.radians, anp.radians, (V * 90,)),
    'fabs': (np.fabs, anp.fabs, (V,)),
    'sinc': (np.sinc, anp.sinc, (np.array([-1.7, -0.2, 0.05, 0.31, 0.9]),)),
    'logaddexp2': (np.logaddexp2, anp.logaddexp2, (V, M[:, :1] * 3)),
    'rot90': (np.rot90, anp.rot90, (M,)),
    'rot90 k=3 axes=(2, 0)': (lambda a: np.rot90(a, 3, (2, 0)),
                              lambda a: anp.rot90(a, 3, (2, 0)), (T,)),
    'rot90 k=-2': (lambda a: np.rot90(a, -2), lambda a: anp.rot90(a, -2), (M,)),
    'atleast_3d 1-d': (np.atleast_3d, anp.atleast_3d, (V,)),
    'atleast_3d 2-d': (np.atleast_3d, anp.atleast_3d, (M,)),
    'rollaxis': (lambda a: np.rollaxis(a, 2, 0), lambda a: anp.rollaxis(a, 2, 0), (T,)),
    'rollaxis start=3': (lambda a: np.rollaxis(a, 0, 3), lambda a: anp.rollaxis(a, 0, 3), (T,)),
    'select': (lambda a, b: np.select([a > 0, b > 0.5], [a, b * 2], default=-1.0),
               lambda a, b: anp.select([nd.primal_value(a) > 0, nd.primal_value(b) > 0.5],
                                       [a, b * 2], default=-1.0), (V, V[::-1])),
    'pad': (lambda a: np.pad(a, ((1, 2), (0, 1)), constant_values=0.5),
            lambda a: anp.pad(a, ((1, 2), (0, 1)), constant_values=0.5), (M,)),
    'pad int width': (lambda a: np.pad(a, 2), lambda a: anp.pad(a, 2), (V,)),
    'column_stack': (lambda a, b: np.column_stack([a, b]),
                     lambda a, b: anp.column_stack([a, b]), (V, V * 2)),
    'column_stack 2-d': (lambda a, b: np.column_stack([a, b]),
                         lambda a, b: anp.column_stack([a, b]), (M, M[:, :2])),
    'fmax': (np.fmax, anp.fmax, (V, W)),
    'fmin': (np.fmin, anp.fmin, (V, W)),
    'gradient 1-d': (np.gradient, anp.gradient, (V,)),
    'gradient axis 1, spacing': (lambda a: np.gradient(a, 0.5, axis=1),
                                 lambda a: anp.gradient(a, 0.5, axis=1), (M,)),
    'partition': (lambda a: np.partition(a, 2), lambda a: anp.partition(a, 2), (V,)),
    'partition axis 0': (lambda a: np.partition(a, 1, axis=0),
                         lambda a: anp.partition(a, 1, axis=0), (M,)),
}

@pytest.mark.parametrize('name', sorted(CASES))
def test_values_are_numpys(name):
    np_fn, nd_fn, args = CASES[name]
    expected = np_fn(*args)
    got = nd_fn(*args)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-16 if name != 'sinc' else 4e-16,
                               atol=0)
    assert np.shape(got) == np.shape(expected)


@pytest.mark.parametrize('name', sorted(CASES))
def test_numpys_own_call_on_a_nestad_value_differentiates(name):
    """numpy's function applied to a perturbed value reaches nestad.numpy's."""
    np_fn, nd_fn, args = CASES[name]
    if name == 'select':
        pytest.skip("numpy.select reads its conditions as plain arrays")
    w = R.uniform(0.5, 1.5, size=np.shape(np_fn(*args)))
    ours = nd.gradient_r(lambda a: anp.sum(w * nd_fn(a, *args[1:])))(args[0])
    theirs = nd.gradient_r(lambda a: anp.sum(w * np_fn(a, *args[1:])))(args[0])
    np.testing.assert_allclose(theirs, ours, rtol=1e-15, atol=0)


@pytest.mark.parametrize('name', sorted(CASES))
def test_rules(name):
    _, nd_fn, args = CASES[name]
    check_rules(nd_fn, *args, order=2)


def test_sinc_derivatives_at_zero_to_order_8():
    """sinc^(2m)(0) = (-1)^m pi^(2m) / (2m + 1), odd orders 0; a quotient would give 0/0."""
    for order in range(9):
        f = anp.sinc
        for _ in range(order):
            f = nd.derivative(f)
        m, odd = divmod(order, 2)
        expected = 0.0 if odd else (-1) ** m * math.pi ** (2 * m) / (2 * m + 1)
        assert f(0.0) == pytest.approx(expected, rel=1e-13, abs=1e-13), order


@pytest.mark.parametrize('x', [1e-12, 1e-8, -3e-5, 0.01, 0.3, -0.31, 0.5])
def test_sinc_derivatives_near_zero_do_not_cancel(x):
    """Near zero the derivative of sin(pi x)/(pi x) cancels catastrophically; the series
    does not.  References: the Taylor series of (sin t / t)' and '' for |t| < 0.1, their
    closed forms beyond (where they do not cancel)."""
    t = math.pi * x
    if abs(t) < 0.1:
        d1 = -t / 3 + t ** 3 / 30 - t ** 5 / 840 + t ** 7 / 45360
        d2 = -1 / 3 + t ** 2 / 10 - t ** 4 / 168 + t ** 6 / 6480
    else:
        d1 = (t * math.cos(t) - math.sin(t)) / t ** 2
        d2 = -math.sin(t) / t - 2 * math.cos(t) / t ** 2 + 2 * math.sin(t) / t ** 3
    d1, d2 = math.pi * d1, math.pi ** 2 * d2
    for d in (nd.derivative, nd.gradient_r):
        assert d(anp.sinc)(x) == pytest.approx(d1, rel=1e-12, abs=1e-300)
        for e in (nd.derivative, nd.gradient_r):
            assert d(e(anp.sinc))(x) == pytest.approx(d2, rel=1e-12)


def test_sinc_on_an_array_mixing_both_branches():
    x = np.array([0.0, 1e-9, 0.2, 0.5, 3.0, -2.5])
    g = nd.gradient_r(lambda x: anp.sum(anp.sinc(x)))(x)
    h = np.diag(nd.hessian(lambda x: anp.sum(anp.sinc(x)))(x))
    for i, xi in enumerate(x):
        assert g[i] == pytest.approx(nd.derivative(anp.sinc)(float(xi)), rel=1e-13, abs=1e-15)
        assert h[i] == pytest.approx(nd.derivative(nd.derivative(anp.sinc))(float(xi)),
                                     rel=1e-12)
    assert h[0] == pytest.approx(-math.pi ** 2 / 3, rel=1e-13)


@pytest.mark.parametrize('fn, npfn', [(anp.fmax, np.fmax), (anp.fmin, np.fmin)])
def test_fmax_fmin_ignore_nan_and_differentiate_the_other_argument(fn, npfn):
    x = np.array([np.nan, 1.0, 2.0, np.nan])
    y = np.array([3.0, np.nan, 0.5, np.nan])
    np.testing.assert_array_equal(fn(x, y), npfn(x, y))
    gx, gy = nd.gradient_r(lambda x, y: anp.sum(anp.nan_to_num(fn(x, y))), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 1.0 if npfn is np.fmax else 0.0, 0.0])
    np.testing.assert_array_equal(gy, [1.0, 0.0, 0.0 if npfn is np.fmax else 1.0, 0.0])


def test_nan_to_num_keeps_finite_derivatives_and_replaces_the_rest_by_constants():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])
    got = anp.nan_to_num(x, nan=7.0, posinf=8.0, neginf=-9.0)
    np.testing.assert_array_equal(got, np.nan_to_num(x, nan=7.0, posinf=8.0, neginf=-9.0))
    g = nd.gradient_r(lambda x: anp.sum(3.0 * anp.nan_to_num(x)))(x)
    np.testing.assert_array_equal(g, [3.0, 0.0, 0.0, 0.0, 3.0])
    np.testing.assert_array_equal(nd.gradient_f(lambda x: anp.sum(3.0 * np.nan_to_num(x)))(x), g)


def test_real_values_answer_the_complex_queries():
    x = np.array([1.0, -2.0])
    for f in (np.iscomplex, np.isreal, np.iscomplexobj, np.isrealobj):
        seen = []
        nd.gradient_r(lambda x: (seen.append(f(x)), anp.sum(x))[1])(x)
        np.testing.assert_array_equal(seen[0], f(x))
    assert anp.real_if_close(x) is x
    np.testing.assert_array_equal(anp.angle(x), np.angle(x))
    assert nd.gradient_r(lambda x: anp.sum(x * anp.angle(x)))(x).tolist() == [0.0, np.pi]


def test_pad_refuses_other_modes():
    with pytest.raises(nd.InvalidInputError, match="mode='constant'"):
        nd.gradient_r(lambda x: anp.sum(anp.pad(x, 1, mode='linear_ramp')))(V)


def test_gradient_refuses_second_order_edges():
    with pytest.raises(nd.InvalidInputError, match='edge_order=1'):
        anp.gradient(V, edge_order=2)


def test_staged_sinc_equals_eager():
    f = nd.derivative(nd.derivative(lambda x: anp.sinc(x) * x))
    staged = nd.stage(f)
    for x in (0.0, 0.2, 1.5):
        assert staged(x) == pytest.approx(f(x), rel=1e-13, abs=1e-15)


def test_fmax_fmin_values_are_numpys_at_signed_zeros_and_under_ad():
    # numpy's fmax/fmin give the first of two equal values, maximum/minimum the second
    for a, b in [(-0.0, 0.0), (0.0, -0.0), (np.nan, 1.0), (1.0, np.nan), (2.0, 1.0)]:
        for mine, theirs in ((anp.fmax, np.fmax), (anp.fmin, np.fmin)):
            got, want = mine(a, b), theirs(a, b)
            assert np.array_equal(got, want, equal_nan=True) and np.signbit(got) == np.signbit(want)
            primal = nd.jvp(lambda a: mine(a, b), (a,), (1.0,))[0]
            assert np.array_equal(primal, want, equal_nan=True) and np.signbit(primal) == np.signbit(want)


def test_sinc_values_are_numpys_on_the_series_branch_too():
    # the series gave 0.9999999835506594 at 1e-4, numpy 0.9999999835506593
    x = np.array([3.0, 1e-4, -0.283, 1e-9, 0.0, 2.5, -0.1])
    assert np.array_equal(anp.sinc(x), np.sinc(x))
    assert np.array_equal(nd.jvp(anp.sinc, (x,), (np.ones(7),))[0], np.sinc(x))
    assert np.array_equal(nd.vjp(anp.sinc, x)[0], np.sinc(x))
