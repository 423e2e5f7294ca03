"""Derivative rules of every primitive nestad exports, checked point by point.

For every primitive and operator, at several points of its domain:

* the value (plain call, and the primal carried through a derivative call);
* the first derivative by forward mode (``nestad.derivative``) and by reverse
  mode (``nestad.gradient_r``), against a closed-form formula AND against a
  central finite difference computed with ``math``/``numpy`` only;
* the second derivative in all four pairings of the two modes, against the
  closed-form second derivative.

Two-argument primitives get both partials, both pure second partials and the
mixed one (each pairing, each order).  Further sections cover operators mixed
with int / float / numpy scalars, piecewise-constant operations, n-th
derivatives, IEEE special values and control flow on perturbed numbers.
"""
import math
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import nestad as nd

MODES = {'f': nd.derivative, 'r': nd.gradient_r}
# (outer, inner): 'fr' means derivative(gradient_r(f)).
PAIRINGS = ['ff', 'fr', 'rf', 'rr']

# Tolerances.
# AD against a closed form: both are exact up to rounding, so only a few ulps of
# accumulated rounding separate them.
EXACT = dict(rel=1e-10, abs=1e-12)
# AD against a central difference (f(x+h) - f(x-h)) / 2h with h = 1e-6 * max(1, |x|):
# truncation error |f'''| h^2 / 6 (<= 1e-8 at every point below) plus rounding
# error ~ eps |f| / h (~1e-10 |f|), so rel 1e-6 / abs 1e-6 leaves a wide margin
# while still catching any wrong rule (those are off by O(1)).
FD = dict(rel=1e-6, abs=1e-6)
FD_STEP = 1e-6


def d(mode, f):
    """The first-derivative operator of the given mode applied to ``f``."""
    return MODES[mode](f)


def d2(pairing, f):
    """Second derivative of ``f`` with the outer/inner modes named by ``pairing``."""
    outer, inner = pairing
    return d(outer, d(inner, f))


def nth_derivative(modes, f):
    """Apply the operators named by ``modes`` (outermost first) to ``f``."""
    for m in reversed(modes):
        f = d(m, f)
    return f


def central_difference(f, x, step=FD_STEP):
    h = step * max(1.0, abs(x))
    return (f(x + h) - f(x - h)) / (2.0 * h)


def assert_close(actual, expected, tol):
    assert actual == pytest.approx(expected, **tol), f"got {actual!r}, expected {expected!r}"


def assert_plain(value):
    """A plain number: no perturbation of any run attached."""
    assert not isinstance(value, (nd.Bundle, nd.TapeCell)), f"{value!r} carries a perturbation"
    assert isinstance(value, (int, float, np.integer, np.floating)), repr(value)


# ============================================================== one-argument primitives

@dataclass(frozen=True)
class Unary:
    name: str
    fn: Callable                 # the function under test, built from nestad
    value: Callable              # reference value, from math / numpy
    d1: Callable                 # closed-form first derivative
    d2: Callable                 # closed-form second derivative
    points: tuple

    def __str__(self):
        return self.name


def _sign(x):
    return math.copysign(1.0, x)


LN2, LN10 = math.log(2.0), math.log(10.0)
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

UNARY = [
    Unary('sin', nd.sin, math.sin, math.cos, lambda x: -math.sin(x),
          (-2.0, -0.5, 0.0, 0.7, 3.0)),
    Unary('cos', nd.cos, math.cos, lambda x: -math.sin(x), lambda x: -math.cos(x),
          (-2.0, -0.5, 0.0, 0.7, 3.0)),
    Unary('tan', nd.tan, math.tan, lambda x: 1.0 / math.cos(x) ** 2,
          lambda x: 2.0 * math.tan(x) / math.cos(x) ** 2,
          (-1.2, -0.3, 0.0, 0.5, 1.4)),
    Unary('asin', nd.asin, math.asin, lambda x: 1.0 / math.sqrt(1.0 - x * x),
          lambda x: x / (1.0 - x * x) ** 1.5,
          (-0.9, -0.3, 0.0, 0.5, 0.8)),
    Unary('acos', nd.acos, math.acos, lambda x: -1.0 / math.sqrt(1.0 - x * x),
          lambda x: -x / (1.0 - x * x) ** 1.5,
          (-0.9, -0.3, 0.0, 0.5, 0.8)),
    Unary('atan', nd.atan, math.atan, lambda x: 1.0 / (1.0 + x * x),
          lambda x: -2.0 * x / (1.0 + x * x) ** 2,
          (-3.0, -0.5, 0.0, 0.7, 10.0)),
    Unary('sinh', nd.sinh, math.sinh, math.cosh, math.sinh,
          (-2.0, -0.5, 0.0, 0.7, 3.0)),
    Unary('cosh', nd.cosh, math.cosh, math.sinh, math.cosh,
          (-2.0, -0.5, 0.0, 0.7, 3.0)),
    Unary('tanh', nd.tanh, math.tanh, lambda x: 1.0 / math.cosh(x) ** 2,
          lambda x: -2.0 * math.tanh(x) / math.cosh(x) ** 2,
          (-2.0, -0.5, 0.0, 0.7, 3.0)),
    Unary('asinh', nd.asinh, math.asinh, lambda x: 1.0 / math.sqrt(x * x + 1.0),
          lambda x: -x / (x * x + 1.0) ** 1.5,
          (-3.0, -0.5, 0.0, 0.7, 10.0)),
    Unary('acosh', nd.acosh, math.acosh, lambda x: 1.0 / math.sqrt(x * x - 1.0),
          lambda x: -x / (x * x - 1.0) ** 1.5,
          (1.1, 1.5, 3.0, 10.0)),
    Unary('atanh', nd.atanh, math.atanh, lambda x: 1.0 / (1.0 - x * x),
          lambda x: 2.0 * x / (1.0 - x * x) ** 2,
          (-0.9, -0.3, 0.0, 0.5, 0.8)),
    Unary('exp', nd.exp, math.exp, math.exp, math.exp,
          (-3.0, -0.5, 0.0, 0.7, 3.0)),
    Unary('expm1', nd.expm1, math.expm1, math.exp, math.exp,
          (-3.0, -0.5, 0.0, 1e-3, 3.0)),
    Unary('log', nd.log, math.log, lambda x: 1.0 / x, lambda x: -1.0 / x ** 2,
          (0.1, 0.5, 1.0, 2.5, 100.0)),
    Unary('log1p', nd.log1p, math.log1p, lambda x: 1.0 / (1.0 + x),
          lambda x: -1.0 / (1.0 + x) ** 2,
          (-0.9, -0.3, 0.0, 1.0, 5.0)),
    Unary('log2', nd.log2, math.log2, lambda x: 1.0 / (x * LN2),
          lambda x: -1.0 / (x * x * LN2),
          (0.1, 0.5, 1.0, 2.5, 100.0)),
    Unary('log10', nd.log10, math.log10, lambda x: 1.0 / (x * LN10),
          lambda x: -1.0 / (x * x * LN10),
          (0.1, 0.5, 1.0, 2.5, 100.0)),
    Unary('sqrt', nd.sqrt, math.sqrt, lambda x: 0.5 / math.sqrt(x),
          lambda x: -0.25 * x ** -1.5,
          (0.01, 0.5, 1.0, 4.0, 100.0)),
    Unary('cbrt', nd.cbrt, np.cbrt, lambda x: 1.0 / (3.0 * np.cbrt(x) ** 2),
          lambda x: -2.0 / (9.0 * np.cbrt(x) ** 5),
          (-8.0, -0.5, 0.3, 1.0, 27.0)),
    Unary('erf', nd.erf, math.erf, lambda x: TWO_OVER_SQRT_PI * math.exp(-x * x),
          lambda x: -2.0 * x * TWO_OVER_SQRT_PI * math.exp(-x * x),
          (-2.0, -0.5, 0.0, 0.7, 1.5)),
    Unary('erfc', nd.erfc, math.erfc, lambda x: -TWO_OVER_SQRT_PI * math.exp(-x * x),
          lambda x: 2.0 * x * TWO_OVER_SQRT_PI * math.exp(-x * x),
          (-2.0, -0.5, 0.0, 0.7, 1.5)),
    Unary('nestad.abs', nd.abs, abs, _sign, lambda x: 0.0,
          (-2.0, -0.5, 0.7, 3.0)),
    Unary('builtin abs', lambda x: abs(x), abs, _sign, lambda x: 0.0,
          (-2.0, -0.5, 0.7, 3.0)),
    Unary('unary -', lambda x: -x, operator.neg, lambda x: -1.0, lambda x: 0.0,
          (-2.0, 0.0, 0.7)),
    Unary('unary +', lambda x: +x, operator.pos, lambda x: 1.0, lambda x: 0.0,
          (-2.0, 0.0, 0.7)),
]

UNARY_POINTS = [pytest.param(case, x, id=f"{case.name}@{x}") for case in UNARY for x in case.points]


@pytest.mark.parametrize('case, x', UNARY_POINTS)
def test_unary_value(case, x):
    expected = float(case.value(x))
    assert_close(case.fn(x), expected, EXACT)
    primal, tangent = nd.jvp(case.fn, (x,), (1.0,))
    assert_close(primal, expected, EXACT)
    value, _ = nd.value_and_gradient_r(case.fn)(x)
    assert_close(value, expected, EXACT)


@pytest.mark.parametrize('mode', ['f', 'r'])
@pytest.mark.parametrize('case, x', UNARY_POINTS)
def test_unary_first_derivative(case, x, mode):
    got = d(mode, case.fn)(x)
    assert_close(got, case.d1(x), EXACT)
    assert_close(got, central_difference(case.value, x), FD)


@pytest.mark.parametrize('case, x', UNARY_POINTS)
def test_unary_closed_form_matches_finite_difference(case, x):
    # Guards the test's own formulas: d1 and d2 against differences of value and d1.
    assert_close(case.d1(x), central_difference(case.value, x), FD)
    assert_close(case.d2(x), central_difference(case.d1, x), FD)


@pytest.mark.parametrize('pairing', PAIRINGS)
@pytest.mark.parametrize('case, x', UNARY_POINTS)
def test_unary_second_derivative(case, x, pairing):
    assert_close(d2(pairing, case.fn)(x), case.d2(x), EXACT)


# ============================================================== two-argument primitives

@dataclass(frozen=True)
class Binary:
    name: str
    fn: Callable
    value: Callable
    dx: Callable                 # partial derivatives in closed form, f(x, y)
    dy: Callable
    dxx: Callable
    dxy: Callable
    dyy: Callable
    points: tuple

    def __str__(self):
        return self.name


def _zero(x, y):
    return 0.0


def _r2(x, y):
    return x * x + y * y


POS_POINTS = ((0.5, 1.5), (2.0, 3.0), (1.3, -0.7), (3.0, 0.5))
ANY_POINTS = ((1.5, 2.5), (-0.7, 3.0), (2.0, -1.25), (0.3, 0.8), (-1.1, -0.4))
MOD_POINTS = ((5.5, 2.0), (-3.7, 1.5), (7.0, 2.5), (2.3, -1.1), (0.4, 3.0))
MINMAX_POINTS = ((1.0, 2.0), (2.0, 1.0), (-3.0, 0.5), (0.5, -3.0))


def _pow_case(name, fn):
    return Binary(name, fn, lambda x, y: x ** y,
                  lambda x, y: y * x ** (y - 1.0),
                  lambda x, y: x ** y * math.log(x),
                  lambda x, y: y * (y - 1.0) * x ** (y - 2.0),
                  lambda x, y: x ** (y - 1.0) * (1.0 + y * math.log(x)),
                  lambda x, y: x ** y * math.log(x) ** 2,
                  POS_POINTS)


def _min_max_case(name, fn, ref, first_wins):
    # first_wins(x, y): does the first argument give the result?
    return Binary(name, fn, ref,
                  lambda x, y: 1.0 if first_wins(x, y) else 0.0,
                  lambda x, y: 0.0 if first_wins(x, y) else 1.0,
                  _zero, _zero, _zero, MINMAX_POINTS)


BINARY = [
    # atan2(y, x) written as f(a, b) = atan2(a, b).
    Binary('atan2', nd.atan2, math.atan2,
           lambda a, b: b / _r2(a, b),
           lambda a, b: -a / _r2(a, b),
           lambda a, b: -2.0 * a * b / _r2(a, b) ** 2,
           lambda a, b: (a * a - b * b) / _r2(a, b) ** 2,
           lambda a, b: 2.0 * a * b / _r2(a, b) ** 2,
           ((1.0, 2.0), (1.0, -2.0), (-1.0, -2.0), (-1.0, 2.0), (0.5, 0.0), (0.0, 3.0))),
    Binary('hypot', nd.hypot, math.hypot,
           lambda x, y: x / math.hypot(x, y),
           lambda x, y: y / math.hypot(x, y),
           lambda x, y: y * y / math.hypot(x, y) ** 3,
           lambda x, y: -x * y / math.hypot(x, y) ** 3,
           lambda x, y: x * x / math.hypot(x, y) ** 3,
           ((3.0, 4.0), (-1.0, 2.0), (0.5, -0.25), (-2.0, -2.0), (0.0, 1.5))),
    _pow_case('pow', nd.pow),
    _pow_case('**', operator.pow),
    _min_max_case('minimum', nd.minimum, min, lambda x, y: x < y),
    _min_max_case('maximum', nd.maximum, max, lambda x, y: x > y),
    Binary('+', operator.add, operator.add,
           lambda x, y: 1.0, lambda x, y: 1.0, _zero, _zero, _zero, ANY_POINTS),
    Binary('-', operator.sub, operator.sub,
           lambda x, y: 1.0, lambda x, y: -1.0, _zero, _zero, _zero, ANY_POINTS),
    Binary('*', operator.mul, operator.mul,
           lambda x, y: y, lambda x, y: x, _zero, lambda x, y: 1.0, _zero, ANY_POINTS),
    Binary('/', operator.truediv, operator.truediv,
           lambda x, y: 1.0 / y,
           lambda x, y: -x / y ** 2,
           _zero,
           lambda x, y: -1.0 / y ** 2,
           lambda x, y: 2.0 * x / y ** 3,
           ANY_POINTS),
    # x % y == x - y * floor(x / y), floor locally constant away from its jumps.
    Binary('%', operator.mod, operator.mod,
           lambda x, y: 1.0, lambda x, y: -math.floor(x / y), _zero, _zero, _zero, MOD_POINTS),
]

BINARY_BY_NAME = {case.name: case for case in BINARY}
BINARY_POINTS = [pytest.param(case, x, y, id=f"{case.name}@{x},{y}")
                 for case in BINARY for x, y in case.points]


@pytest.mark.parametrize('case, x, y', BINARY_POINTS)
def test_binary_value(case, x, y):
    expected = float(case.value(x, y))
    assert_close(case.fn(x, y), expected, EXACT)
    primal, _ = nd.jvp(case.fn, (x, y), (1.0, 1.0))
    assert_close(primal, expected, EXACT)
    value, _ = nd.value_and_gradient_r(case.fn, argnums=(0, 1))(x, y)
    assert_close(value, expected, EXACT)


@pytest.mark.parametrize('mode', ['f', 'r'])
@pytest.mark.parametrize('case, x, y', BINARY_POINTS)
def test_binary_partials(case, x, y, mode):
    # Perturbing one argument: the other is a plain float, so this covers the
    # forward and the reflected form of every operator.
    px = d(mode, lambda t: case.fn(t, y))(x)
    py = d(mode, lambda t: case.fn(x, t))(y)
    assert_close(px, case.dx(x, y), EXACT)
    assert_close(py, case.dy(x, y), EXACT)
    assert_close(px, central_difference(lambda t: case.value(t, y), x), FD)
    assert_close(py, central_difference(lambda t: case.value(x, t), y), FD)


@pytest.mark.parametrize('case, x, y', BINARY_POINTS)
def test_binary_gradient_both_arguments(case, x, y):
    """Both arguments perturbed by one run (same tag on both sides)."""
    expected = (case.dx(x, y), case.dy(x, y))
    grad_r = nd.gradient_r(case.fn, argnums=(0, 1))(x, y)
    grad_f = nd.gradient_f(case.fn, argnums=(0, 1))(x, y)
    for got in (grad_r, grad_f):
        assert isinstance(got, tuple) and len(got) == 2
        assert_close(got[0], expected[0], EXACT)
        assert_close(got[1], expected[1], EXACT)
    # Directional derivative along (1, 2): dx + 2 dy.
    _, tangent = nd.jvp(case.fn, (x, y), (1.0, 2.0))
    assert_close(tangent, expected[0] + 2.0 * expected[1], EXACT)


@pytest.mark.parametrize('case, x, y', BINARY_POINTS)
def test_binary_closed_form_matches_finite_difference(case, x, y):
    assert_close(case.dx(x, y), central_difference(lambda t: case.value(t, y), x), FD)
    assert_close(case.dy(x, y), central_difference(lambda t: case.value(x, t), y), FD)
    assert_close(case.dxx(x, y), central_difference(lambda t: case.dx(t, y), x), FD)
    assert_close(case.dxy(x, y), central_difference(lambda t: case.dx(x, t), y), FD)
    assert_close(case.dxy(x, y), central_difference(lambda t: case.dy(t, y), x), FD)
    assert_close(case.dyy(x, y), central_difference(lambda t: case.dy(x, t), y), FD)


@pytest.mark.parametrize('pairing', PAIRINGS)
@pytest.mark.parametrize('case, x, y', BINARY_POINTS)
def test_binary_second_partials(case, x, y, pairing):
    outer, inner = pairing
    f = case.fn
    dxx = d2(pairing, lambda t: f(t, y))(x)
    dyy = d2(pairing, lambda t: f(x, t))(y)
    # Mixed partials: the two arguments carry perturbations of two different runs.
    dxy = d(outer, lambda s: d(inner, lambda t: f(s, t))(y))(x)
    dyx = d(outer, lambda t: d(inner, lambda s: f(s, t))(x))(y)
    assert_close(dxx, case.dxx(x, y), EXACT)
    assert_close(dyy, case.dyy(x, y), EXACT)
    assert_close(dxy, case.dxy(x, y), EXACT)
    assert_close(dyx, case.dxy(x, y), EXACT)


DIAGONAL = [pytest.param(BINARY_BY_NAME[name], x, id=f"{name}@{x}")
            for name, points in (('atan2', (0.5, -2.0)), ('hypot', (0.5, -2.0)),
                                 ('pow', (0.5, 2.0)), ('**', (0.5, 2.0)),
                                 ('+', (0.5, -2.0)), ('-', (0.5, -2.0)), ('*', (0.5, -2.0)),
                                 ('/', (0.5, -2.0)), ('%', (0.5, -2.0)))
            for x in points]


@pytest.mark.parametrize('mode', ['f', 'r'])
@pytest.mark.parametrize('case, x', DIAGONAL)
def test_binary_same_value_on_both_sides(case, x, mode):
    """f(x, x): the chain rule adds both partials (x * x, x / x, x ** x, ...)."""
    got = d(mode, lambda t: case.fn(t, t))(x)
    assert_close(got, case.dx(x, x) + case.dy(x, x), EXACT)
    assert_close(got, central_difference(lambda t: case.value(t, t), x), FD)
    second = d2('f' + mode, lambda t: case.fn(t, t))(x)
    assert_close(second, case.dxx(x, x) + 2.0 * case.dxy(x, x) + case.dyy(x, x), EXACT)


# ============================================================== mixing with other number types

# Every kind of constant a user might write next to a perturbed number.
CONSTANTS = [pytest.param(c, id=f"{type(c).__name__}({c})")
             for c in (3, 3.0, np.float64(3.0), np.float32(3.0), np.int64(3), True)]
ARITHMETIC = ['+', '-', '*', '/', '**', '%']
MIXED_POINTS = (1.7, -2.2, 4.1, 0.8)


def _mixed_tolerance(c):
    # float32 arithmetic (numpy keeps float32 when a float32 meets a Python float)
    # has about 7 significant digits.
    return dict(rel=1e-6, abs=1e-6) if isinstance(c, np.float32) else EXACT


@pytest.mark.parametrize('c', CONSTANTS)
@pytest.mark.parametrize('op', ARITHMETIC)
@pytest.mark.parametrize('x', MIXED_POINTS)
def test_operator_with_constant_first_derivative(op, c, x):
    case = BINARY_BY_NAME[op]
    cf = float(c)
    tol = _mixed_tolerance(c)
    for mode in 'fr':
        # x op c (the forward operator) and c op x (the reflected one).
        assert_close(d(mode, lambda t: case.fn(t, c))(x), case.dx(x, cf), tol)
        assert_close(d(mode, lambda t: case.fn(c, t))(x), case.dy(cf, x), tol)
    primal, _ = nd.jvp(lambda t: case.fn(t, c), (x,), (1.0,))
    assert_close(primal, case.value(x, cf), tol)
    primal, _ = nd.jvp(lambda t: case.fn(c, t), (x,), (1.0,))
    assert_close(primal, case.value(cf, x), tol)


@pytest.mark.parametrize('c', CONSTANTS)
@pytest.mark.parametrize('op', ARITHMETIC)
@pytest.mark.parametrize('pairing', PAIRINGS)
def test_operator_with_constant_second_derivative(op, c, pairing):
    case = BINARY_BY_NAME[op]
    cf = float(c)
    tol = _mixed_tolerance(c)
    for x in MIXED_POINTS:
        assert_close(d2(pairing, lambda t: case.fn(t, c))(x), case.dxx(x, cf), tol)
        assert_close(d2(pairing, lambda t: case.fn(c, t))(x), case.dyy(cf, x), tol)


THREE = [pytest.param(c, id=f"{type(c).__name__}({c})")
         for c in (3, 3.0, np.int64(3), np.float64(3.0))]


@pytest.mark.parametrize('c', THREE)
def test_integer_power_of_negative_base(c):
    # x ** 3 for x < 0: real-valued, derivative 3 x^2, second derivative 6 x.
    for mode in 'fr':
        assert_close(d(mode, lambda t: t ** c)(-1.5), 3.0 * 2.25, EXACT)
    for pairing in PAIRINGS:
        assert_close(d2(pairing, lambda t: t ** c)(-1.5), 6.0 * -1.5, EXACT)


@pytest.mark.parametrize('scalar', [pytest.param(c, id=f"{type(c).__name__}({c})")
                                    for c in (np.float64(0.7), np.float32(0.75), np.int64(2), 2, 0.7)])
def test_numpy_and_int_inputs_to_derivative_operators(scalar):
    x = float(scalar)
    for mode in 'fr':
        assert_close(d(mode, nd.sin)(scalar), math.cos(x), EXACT)
        assert_close(d(mode, lambda t: t * t * t)(scalar), 3.0 * x * x, EXACT)
    for pairing in PAIRINGS:
        assert_close(d2(pairing, nd.exp)(scalar), math.exp(x), EXACT)


# ============================================================== piecewise-constant operations

PIECEWISE = [
    pytest.param(nd.floor, math.floor, id='floor'),
    pytest.param(nd.ceil, math.ceil, id='ceil'),
    pytest.param(lambda t: t // 2.0, lambda t: t // 2.0, id='x//2.0'),
    pytest.param(lambda t: t // 2, lambda t: t // 2, id='x//2'),
    pytest.param(lambda t: 7.0 // t, lambda t: 7.0 // t, id='7.0//x'),
    pytest.param(lambda t: t // np.float64(0.5), lambda t: t // 0.5, id='x//np.float64'),
    pytest.param(lambda t: np.int64(9) // t, lambda t: 9 // t, id='np.int64//x'),
    pytest.param(lambda t: (3.0 * t) // t, lambda t: (3.0 * t) // t, id='3x//x'),
]


@pytest.mark.parametrize('fn, ref', PIECEWISE)
@pytest.mark.parametrize('x', [2.5, -1.3, 0.7, 4.2])
def test_piecewise_constant(fn, ref, x):
    seen = []

    def spy(t):
        out = fn(t)
        seen.append(out)
        return out

    for mode in 'fr':
        assert d(mode, spy)(x) == 0.0
    for pairing in PAIRINGS:
        assert d2(pairing, spy)(x) == 0.0
    assert seen, "the function was not called"
    for out in seen:          # inside every run, the result is a plain number ...
        assert_plain(out)
        assert out == ref(x)  # ... with the right value
    # and the product rule sees it as a constant: d/dx [x * floor(x)] == floor(x)
    for mode in 'fr':
        assert d(mode, lambda t: t * fn(t))(x) == pytest.approx(float(ref(x)), **EXACT)


def test_floor_ceil_plain_values():
    assert nd.floor(2.5) == 2.0 and isinstance(nd.floor(2.5), float)
    assert nd.ceil(2.5) == 3.0 and isinstance(nd.ceil(2.5), float)
    assert nd.floor(-2.5) == -3.0 and nd.ceil(-2.5) == -2.0
    assert nd.floor(7) == 7 and nd.ceil(7) == 7
    assert nd.floor(math.inf) == math.inf
    assert math.isnan(nd.ceil(math.nan))


def test_floordiv_of_two_perturbed_values_is_plain():
    def f(x, y):
        q = x // y
        assert_plain(q)
        return q * x * y

    gx, gy = nd.gradient_r(f, argnums=(0, 1))(7.5, 2.0)
    # f = 3 x y locally (floor(7.5 / 2) = 3)
    assert (gx, gy) == (pytest.approx(3 * 2.0), pytest.approx(3 * 7.5))


# ============================================================== n-th derivatives

NTH = [
    pytest.param(nd.exp, lambda n, x: math.exp(x), 0.3, id='exp'),
    pytest.param(nd.sin, lambda n, x: math.sin(x + n * math.pi / 2), 0.7, id='sin'),
    pytest.param(lambda x: 1.0 / (1.0 + x),
                 lambda n, x: (-1) ** n * math.factorial(n) / (1.0 + x) ** (n + 1),
                 0.5, id='1/(1+x)'),
]
MODE_SEQUENCES = {
    'forward': lambda n: 'f' * n,
    'alternating-f-outer': lambda n: ('fr' * n)[:n],
    'alternating-r-outer': lambda n: ('rf' * n)[:n],
}


@pytest.mark.parametrize('modes', list(MODE_SEQUENCES))
@pytest.mark.parametrize('n', range(1, 9))
@pytest.mark.parametrize('fn, closed_form, x', NTH)
def test_nth_derivative(fn, closed_form, x, n, modes):
    sequence = MODE_SEQUENCES[modes](n)
    got = nth_derivative(sequence, fn)(x)
    assert_close(got, closed_form(n, x), dict(rel=1e-9, abs=1e-12))


@pytest.mark.parametrize('mode', ['f', 'r'])
@pytest.mark.parametrize('three', THREE)
@pytest.mark.parametrize('x', [0.0, 1.5, -2.0])
def test_derivatives_of_cubic_beyond_its_degree(x, three, mode):
    """x**3: 3x^2, 6x, 6, then 0 forever, including at x = 0."""
    expected = [x ** 3, 3 * x ** 2, 6 * x, 6.0, 0.0, 0.0]
    for n in range(1, 6):
        assert_close(nth_derivative(mode * n, lambda t: t ** three)(x), expected[n], EXACT)
        assert_close(nth_derivative(mode * n, lambda t: nd.pow(t, three))(x), expected[n], EXACT)
        assert_close(nth_derivative(mode * n, lambda t: t * t * t)(x), expected[n], EXACT)


# Powers with a zero base, where the general rule d/dx x^y = y x^(y-1) meets 0 * inf.
ZERO_EXPONENTS = [pytest.param(c, id=f"{type(c).__name__}({c})")
                  for c in (0, 0.0, np.int64(0), np.float64(0.0), np.float32(0.0), False)]


@pytest.mark.parametrize('mode', ['f', 'r'])
@pytest.mark.parametrize('zero', ZERO_EXPONENTS)
def test_zeroth_power_is_constant_at_zero(zero, mode):
    # x ** 0 == 1 for every x (0.0 ** 0 == 1.0, as numpy's 0.0 ** np.int64(0)),
    # so its derivative is 0 everywhere, x = 0 included.
    assert d(mode, lambda t: t ** zero)(0.0) == 0.0
    assert d(mode, lambda t: nd.pow(t, zero))(0.0) == 0.0


ZERO_BASE = [
    # x ** 1 == x: second derivative 0.
    pytest.param(lambda t: t ** 1, 2, id='d2/dx2 x**1 at 0'),
    pytest.param(lambda t: t ** np.int64(1), 2, id='d2/dx2 x**np.int64(1) at 0'),
    # 0 ** y == 0 for every y > 0: d/dy 0 ** y == 0 there (evaluated at y = 2).
    pytest.param(lambda y: nd.pow(0.0, y + 2.0), 1, id='d/dy pow(0,y) at y=2'),
    pytest.param(lambda y: 0.0 ** (y + 2.0), 1, id='d/dy 0.0**y at y=2'),
    pytest.param(lambda y: 0 ** (y + 2.0), 2, id='d2/dy2 0**y at y=2'),
]


@pytest.mark.parametrize('mode', ['f', 'r'])
@pytest.mark.parametrize('fn, order', ZERO_BASE)
def test_power_with_zero_base(fn, order, mode):
    assert nth_derivative(mode * order, fn)(0.0) == 0.0


# ============================================================== IEEE special values

def test_ieee_values_of_plain_calls():
    assert nd.log(0.0) == -math.inf
    assert nd.log(0) == -math.inf
    assert math.isnan(nd.log(-1.0))
    assert math.isnan(nd.sqrt(-1.0))
    assert nd.exp(1000.0) == math.inf
    assert nd.exp(-1000.0) == 0.0
    assert math.isnan(nd.asin(2.0))
    assert math.isnan(nd.acosh(0.5))
    assert nd.atanh(1.0) == math.inf
    assert nd.cosh(1000.0) == math.inf
    assert nd.pow(0.0, -1.0) == math.inf
    assert math.isnan(nd.pow(-8.0, 1.0 / 3.0))


def test_ieee_values_inside_derivatives():
    for mode in 'fr':
        assert d(mode, nd.log)(0.0) == math.inf            # 1/x at 0+
        assert d(mode, nd.sqrt)(0.0) == math.inf           # 1/(2 sqrt x) at 0+
        assert d(mode, nd.exp)(1000.0) == math.inf
        assert math.isnan(d(mode, nd.sqrt)(-1.0))
        primal, _ = nd.jvp(nd.log, (0.0,), (1.0,))
        assert primal == -math.inf


NAN_FUNCTIONS = [
    pytest.param(nd.sin, id='sin'), pytest.param(nd.exp, id='exp'),
    pytest.param(nd.log, id='log'), pytest.param(nd.tanh, id='tanh'),
    pytest.param(lambda x: x * x * x + 3.0 * x, id='poly'),     # f'' = 6x depends on x
    pytest.param(lambda x: 1.0 / (1.0 + x * x), id='rational'),
    pytest.param(lambda x: nd.atan2(x, 1.0) + nd.hypot(x, 2.0), id='binary'),
]


@pytest.mark.parametrize('fn', NAN_FUNCTIONS)
def test_nan_propagates(fn):
    nan = math.nan
    for mode in 'fr':
        assert math.isnan(d(mode, fn)(nan))
    for pairing in PAIRINGS:
        assert math.isnan(d2(pairing, fn)(nan))
    primal, tangent = nd.jvp(fn, (nan,), (1.0,))
    assert math.isnan(primal) and math.isnan(tangent)
    grads = nd.gradient_r(lambda x, y: fn(x) * y, argnums=(0, 1))(nan, 2.0)
    assert math.isnan(grads[0]) and math.isnan(grads[1])


# ============================================================== comparisons and control flow

def test_comparisons_return_plain_bools():
    results = []

    numpy_results = []

    def f(x):
        y = x * 2.0          # perturbed
        results.extend([x < 2, x <= 1.5, x > 1, x >= 1.5, x == 1.5, x != 1.5,
                        y > x, y == 3.0, 2 < x, 1.5 <= x, x < 1])
        # Against numpy scalars the answer is whatever the primals' comparison
        # gives (numpy itself answers with np.bool_ for float < np.float32).
        numpy_results.extend([np.float64(1.0) < x, x < np.float32(2.0), x == np.int64(1)])
        return y

    for mode in 'fr':
        results.clear()
        numpy_results.clear()
        d(mode, f)(1.5)
        assert all(type(r) is bool for r in results), [type(r) for r in results]
        assert results == [True, True, True, True, True, False,
                           True, True, False, True, False]
        assert all(isinstance(r, (bool, np.bool_)) for r in numpy_results), numpy_results
        assert numpy_results == [True, True, False]


def test_comparisons_across_nested_runs():
    """Comparing values of different runs (and modes) compares their primals."""
    seen = []

    def inner(y, x):
        seen.append((x < y, y < x, x == y - 1.0, bool(x)))
        return x * y

    for outer, inner_mode in PAIRINGS:
        seen.clear()
        d(outer, lambda x: d(inner_mode, lambda y: inner(y, x))(3.0))(2.0)
        assert seen and all(s == (True, False, True, True) for s in seen)
        assert all(type(b) is bool for s in seen for b in s)


def piecewise(x):
    """x^2 below 1, 3x - 2 from 1 to 3, sin(x) + 7 - sin(3) above (continuous)."""
    if x < 1.0:
        return x * x
    elif x <= 3.0:
        return 3.0 * x - 2.0
    return nd.sin(x) + (7.0 - math.sin(3.0))


@pytest.mark.parametrize('x, d1, d2_', [(-0.5, -1.0, 2.0), (0.5, 1.0, 2.0),
                                        (2.0, 3.0, 0.0), (4.0, math.cos(4.0), -math.sin(4.0))])
def test_control_flow_on_perturbed_values(x, d1, d2_):
    for mode in 'fr':
        assert_close(d(mode, piecewise)(x), d1, EXACT)
    for pairing in PAIRINGS:
        assert_close(d2(pairing, piecewise)(x), d2_, EXACT)


def test_loop_driven_by_perturbed_value():
    """A while loop whose trip count depends on x: Newton's method for sqrt(a)."""
    def newton_sqrt(a):
        guess = 1.0
        while abs(guess * guess - a) > 1e-14 * primal_max(a):
            guess = 0.5 * (guess + a / guess)
        return guess

    def primal_max(a):
        return max(1.0, nd.primal_value(a))

    for a in (2.0, 9.0, 0.25):
        for mode in 'fr':
            assert_close(d(mode, newton_sqrt)(a), 0.5 / math.sqrt(a), dict(rel=1e-9, abs=1e-12))
        for pairing in PAIRINGS:
            assert_close(d2(pairing, newton_sqrt)(a), -0.25 * a ** -1.5, dict(rel=1e-7, abs=1e-10))


def test_builtin_max_min_sorted_on_perturbed_values():
    def f(x):
        a, b, c = x * x, 3.0 * x, nd.sin(x)
        return max(a, b, c) + min(a, b, c) + sorted([a, b, c])[1]

    x = 2.0     # a = 4, b = 6, c = sin 2 = 0.909: max b, min c, middle a
    expected = 3.0 + math.cos(x) + 2.0 * x
    for mode in 'fr':
        assert_close(d(mode, f)(x), expected, EXACT)


# Rules without cancellation near their special points (each was off: tanh' was 0 from
# |x| = 19.1 on and 4% off at 18, expm1' 0 below -37, asin'/atanh' lost digits near 1, and
# atan2's partials overflowed to 0 at atan2(1e200, 1e200)); exact values from mpmath.
@pytest.mark.parametrize('fn, x, d1, d2', [
    (nd.tanh, 18.0, 9.278091320974273e-16, -1.8556182641948537e-15),
    (nd.tanh, 30.0, 3.502604305078608e-26, -7.005208610157216e-26),
    (nd.tanh, -20.0, 1.6993417021166355e-17, 3.398683404233271e-17),
    (nd.expm1, -40.0, 4.248354255291589e-18, 4.248354255291589e-18),
    (nd.atanh, 0.99999999, 49999999.99876204, 4999999949752408.0),
    (nd.asin, 1 - 1e-10, 70710.67519510884, 353553346704731.44),
])
def test_rules_exact_near_special_points(fn, x, d1, d2):
    for op in (nd.derivative, nd.gradient_r):
        assert math.isclose(op(fn)(x), d1, rel_tol=1e-13)
    for outer in (nd.derivative, nd.gradient_r):
        for inner in (nd.derivative, nd.gradient_r):
            assert math.isclose(outer(inner(fn))(x), d2, rel_tol=1e-12)


def test_atan2_partials_do_not_overflow():
    for y, x in [(1e200, 1e200), (1e-200, 1e-200)]:      # d/dy atan2(y, x) = x / (x^2 + y^2)
        for op in (nd.gradient_r, nd.gradient_f):
            gy, gx = op(nd.atan2, argnums=(0, 1))(y, x)
            assert math.isclose(gy, 0.5 / x, rel_tol=1e-15) and math.isclose(gx, -gy, rel_tol=1e-15)
