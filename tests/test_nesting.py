"""Nesting: perturbation confusion tests in every mode pairing and at depth 3-4."""
import itertools
import math

import pytest

import nestad as nd
from nestad import derivative, gradient_r

MODES = {'f': derivative, 'r': gradient_r}
PAIRS = [''.join(p) for p in itertools.product('fr', repeat=2)]


@pytest.mark.parametrize('modes', PAIRS)
def test_siskind_pearlmutter_confusion(modes):
    # d/dx [x * d/dy (x + y) at y=1] at x=1 == 1  (a confused system answers 2)
    outer, inner = MODES[modes[0]], MODES[modes[1]]
    assert outer(lambda x: x * inner(lambda y: x + y)(1.0))(1.0) == 1.0


@pytest.mark.parametrize('modes', [''.join(p) for n in (3, 4) for p in itertools.product('fr', repeat=n)])
def test_confusion_at_depth(modes):
    # f_k(x) = x * d/dy f_{k-1}(x + y) at y=1, f_1 = identity: every level adds one
    # perturbation that must stay separate from the others.  With f_1(z) = z each inner
    # derivative is 1, so the whole thing is d/dx x = 1 at every depth.
    def build(level):
        if level == len(modes):
            return lambda x: x
        inner = build(level + 1)
        D = MODES[modes[level]]
        return lambda x: x * D(lambda y: inner(x + y))(1.0)
    outer = MODES[modes[0]]
    f = build(1)
    assert outer(f)(1.0) == 1.0


@pytest.mark.parametrize('modes', [''.join(p) for n in (2, 3) for p in itertools.product('fr', repeat=n)])
def test_dvl_nested_product(modes):
    # DVL: (derivative (lambda (y) ((derivative (lambda (x) (* x (* x y)))) (* y 3)))) 5) ==> 60
    # d/dx x^2 y = 2xy at x = 3y is 6y^2; its derivative at y=5 is 12y = 60.
    o, i = MODES[modes[0]], MODES[modes[1]]
    assert o(lambda y: i(lambda x: x * (x * y))(y * 3))(5) == 60.0


@pytest.mark.parametrize('modes', [''.join(p) for p in itertools.product('fr', repeat=3)])
def test_third_mixed_partial(modes):
    # g(x, y, z) = exp(x*y*z); d3/dx dy dz at (1, 2, 3) = exp(6) (1 + 3*6 + 36)
    a, b, c = (MODES[m] for m in modes)
    val = a(lambda x: b(lambda y: c(lambda z: nd.exp(x * y * z))(3.0))(2.0))(1.0)
    xyz = 6.0
    assert val == pytest.approx(math.exp(xyz) * (1 + 3 * xyz + xyz * xyz), rel=1e-12)


@pytest.mark.parametrize('modes', PAIRS)
def test_inner_derivative_of_closed_over_value(modes):
    # d/dx [d/dy sin(x*y) at y=x] = d/dx [x cos(x^2)] = cos(x^2) - 2x^2 sin(x^2)
    o, i = MODES[modes[0]], MODES[modes[1]]
    x0 = 0.7
    got = o(lambda x: i(lambda y: nd.sin(x * y))(x))(x0)
    assert got == pytest.approx(math.cos(x0 ** 2) - 2 * x0 ** 2 * math.sin(x0 ** 2), rel=1e-12)


def test_gradient_of_gradient_structure():
    # Hessian of f(a, b) = a^2 b^3 by reverse over reverse, row by row.
    f = lambda v: v[0] ** 2 * v[1] ** 3
    rows = [gradient_r(lambda v, k=k: gradient_r(f)(v)[k])([2.0, 3.0]) for k in range(2)]
    a, b = 2.0, 3.0
    assert rows == [[2 * b ** 3, 6 * a * b ** 2], [6 * a * b ** 2, 6 * a ** 2 * b]]


def test_reverse_phase_is_differentiated_by_outer_forward():
    # The outer derivative differentiates *through* the inner reverse phase's arithmetic.
    f = lambda x: derivative(lambda s: gradient_r(lambda y: nd.sin(s * y) * s)(x))(0.5)
    # inner: d/dy sin(s y) s = s^2 cos(s y); d/ds at s=0.5: 2s cos(sy) - s^2 y sin(sy)
    x = 1.3
    s = 0.5
    assert f(x) == pytest.approx(2 * s * math.cos(s * x) - s * s * x * math.sin(s * x), rel=1e-12)


def test_outer_reverse_through_inner_solver_loop():
    # An inner Newton iteration (with data-dependent control flow) differentiated from outside:
    # sqrt(a) by Newton; d sqrt(a)/da = 1/(2 sqrt a), in both outer modes.
    def newton_sqrt(a):
        x = a
        while abs(x * x - a) > 1e-14:
            x = x - (x * x - a) / derivative(lambda t: t * t - a)(x)
        return x
    for D in (derivative, gradient_r):
        assert D(newton_sqrt)(2.0) == pytest.approx(1 / (2 * math.sqrt(2.0)), rel=1e-9)


def test_hessian_matches_hand_derived():
    # f(x, y, z) = x^2 y + sin(y z) + exp(x z)
    def f(v):
        x, y, z = v
        return x * x * y + nd.sin(y * z) + nd.exp(x * z)
    x, y, z = 0.3, -1.2, 0.8
    H = nd.hessian(f)([x, y, z])
    ex = math.exp(x * z)
    s, c = math.sin(y * z), math.cos(y * z)
    want = [[2 * y + z * z * ex, 2 * x, ex + x * z * ex],
            [2 * x, -z * z * s, c - y * z * s],
            [ex + x * z * ex, c - y * z * s, -y * y * s + x * x * ex]]
    for i in range(3):
        for j in range(3):
            assert H[i][j] == pytest.approx(want[i][j], rel=1e-12, abs=1e-14)


def test_hessian_in_all_pairings_agree():
    def f(v):
        x, y = v
        return nd.exp(x * y) / (1 + x * x) + nd.atan2(y, x)
    pt = [0.4, 1.1]
    ref = nd.hessian(f)(pt)
    candidates = [
        nd.jacobian_f(nd.gradient_f(f))(pt),
        nd.jacobian_r(nd.gradient_r(f))(pt),
        nd.jacobian_r(nd.gradient_f(f))(pt),
        nd.jacobian_f(nd.gradient_r(f))(pt),
    ]
    for H in candidates:
        for i in range(2):
            for j in range(2):
                assert H[i][j] == pytest.approx(ref[i][j], rel=1e-12)
