"""Derivatives of functions that return functions (issue 3): no perturbation confusion.

Reference: Manzyuk, Pearlmutter, Radul, Rush, Siskind, "Perturbation confusion in forward
automatic differentiation of higher-order functions", JFP 2019 (the "amazing bug").
"""
import math

import pytest
from hypothesis import given, settings, strategies as st

import nestad as nd
from nestad import derivative, gradient_r

E = math.exp

# f x = \g. \y. g (x + y); fh = d/dx f at 3 maps g to \y. g'(3 + y).
f_amazing = lambda x: lambda g: lambda y: g(x + y)


def test_amazing_bug():
    fh = derivative(f_amazing)(3.0)
    assert fh(nd.exp)(1.0) == E(4)
    # The naive implementation answers 0 here: fh's perturbation is confused with itself.
    assert fh(fh(nd.exp))(1.0) == pytest.approx(E(7), rel=1e-15)
    assert fh(fh(nd.exp))(1.0) == 1096.6331584284585
    assert fh(fh(fh(nd.exp)))(0.0) == pytest.approx(E(9), rel=1e-15)


def test_multi_argument_and_keyword_functions():
    assert derivative(lambda x: lambda y, z: x * y * z)(2.0)(3.0, 4.0) == 12.0
    g = derivative(lambda x: lambda y, *, scale=1.0: scale * nd.sin(x * y))(0.5)
    assert g(2.0, scale=3.0) == pytest.approx(3.0 * 2.0 * math.cos(1.0))


def test_functions_inside_structures():
    out = derivative(lambda x: {'f': lambda y: x * x * y, 'pair': (lambda y: nd.exp(x * y), x ** 3),
                                'list': [x, lambda: x * 5.0]})(2.0)
    assert out['f'](3.0) == 12.0
    assert out['pair'][0](0.5) == pytest.approx(0.5 * E(1.0))
    assert out['pair'][1] == 12.0
    assert out['list'][0] == 1.0 and out['list'][1]() == 5.0


def test_functions_returning_functions_to_depth():
    # d/dx of \a.\b.\c. x^2 a b c is \a.\b.\c. 2 x a b c
    d = derivative(lambda x: lambda a: lambda b: lambda c: x * x * a * b * c)(1.5)
    assert d(2.0)(3.0)(4.0) == 2 * 1.5 * 24.0
    # a derivative of a derivative of a function-valued function
    dd = derivative(derivative(lambda x: lambda y: nd.sin(x * y)))(0.3)
    assert dd(2.0) == pytest.approx(-4.0 * math.sin(0.6))


def test_repeated_calls_agree():
    fh = derivative(f_amazing)(3.0)
    h = fh(fh(nd.exp))
    first = h(0.5)
    for _ in range(5):
        assert h(0.5) == first
    assert [fh(nd.sin)(t) for t in (0.0, 1.0, 0.0)] == [math.cos(3.0), math.cos(4.0), math.cos(3.0)]


def test_pair_of_functions_that_try_to_confuse_each_other():
    # Both returned functions close over the same perturbation; each is applied to the
    # other (and to itself), so each application must keep its own eps apart.
    f, g = derivative(lambda x: (lambda h: lambda y: h(x * y), lambda h: lambda y: h(x + y)))(2.0)
    # f(h)(y) = d/dx h(x y) = y h'(x y);  g(h)(y) = h'(x + y)
    assert f(nd.exp)(1.5) == pytest.approx(1.5 * E(3.0))
    assert g(nd.exp)(1.5) == pytest.approx(E(3.5))
    # f(g(exp))(y) = d/dx [g(exp)(x y)] = y * exp''(2 + 2 y) = y e^(2 + 2y)
    assert f(g(nd.exp))(1.5) == pytest.approx(1.5 * E(5.0))
    # g(f(exp))(y) = d/dx [f(exp)(x + y)] = d/dx [(x + y) e^(2 (x + y))] at x = 2
    u = 3.5
    assert g(f(nd.exp))(1.5) == pytest.approx(E(2 * u) * (1 + 2 * u))


# Church-encoded pairs: a pair is a function of a selector.
cons = lambda a, b: lambda sel: sel(a, b)
car = lambda p: p(lambda a, b: a)
cdr = lambda p: p(lambda a, b: b)


def test_church_pairs():
    dp = derivative(lambda x: cons(x * x, nd.sin(x)))(0.7)
    assert car(dp) == pytest.approx(1.4)
    assert cdr(dp) == pytest.approx(math.cos(0.7))
    # a Church pair of functions, nested in another
    dq = derivative(lambda x: cons(lambda y: x * y, cons(x, lambda y: y / x)))(2.0)
    assert car(dq)(5.0) == 5.0
    assert car(cdr(dq)) == 1.0
    assert cdr(cdr(dq))(6.0) == pytest.approx(-6.0 / 4.0)


@pytest.mark.parametrize('D', [derivative, gradient_r])
def test_function_valued_derivative_inside_other_operators(D):
    fh = derivative(f_amazing)(3.0)
    # d/dy exp'(3 + y) = exp(3 + y)
    assert D(lambda y: fh(nd.exp)(y))(1.0) == pytest.approx(E(4))
    assert D(lambda y: fh(fh(nd.exp))(y * y))(1.0) == pytest.approx(2 * E(7))
    g = derivative(lambda x: lambda y: nd.sin(x * y))(0.5)        # y cos(0.5 y)
    want = 2.0 * (math.cos(1.0) - math.sin(1.0)) + 2.0 * math.cos(1.0)
    assert D(lambda y: g(y) * y)(2.0) == pytest.approx(want)


@pytest.mark.parametrize('D', [derivative, gradient_r])
def test_argument_carrying_the_same_kind_of_perturbation(D):
    # h = d/dx (\y. x y) = \y. y; d/dx h(x^2) = 2x: the caller's eps must not be read by h.
    h = derivative(lambda x: lambda y: x * y)
    assert D(lambda x: h(x)(x * x))(3.0) == 6.0
    # The returned function applied to a gradient computed inside it.
    fh = derivative(f_amazing)(3.0)
    g = lambda u: gradient_r(lambda v: nd.exp(v * u))(1.0)       # u e^u
    assert fh(g)(0.0) == pytest.approx(4 * E(3))               # (1 + u) e^u at u = 3


def test_jvp_and_directional_derivative_of_function_valued_function():
    val, tan = nd.jvp(lambda a, b: lambda y: a * b * y, (2.0, 3.0), (1.0, 0.5))
    assert val(4.0) == 24.0
    assert tan(4.0) == pytest.approx((3.0 * 1.0 + 2.0 * 0.5) * 4.0)
    dd = nd.directional_derivative(lambda v: lambda s: s * v[0] * v[1], [1.0, 2.0], [1.0, 1.0])
    assert dd(10.0) == pytest.approx(30.0)


def test_vector_space_operations_on_tangents():
    # The tangent of a tuple of functions is a tuple of functions; they add and scale
    # pointwise, and the result is linear in the direction.
    t1 = derivative(lambda x: (lambda y: x * y, x * x))(3.0)
    t2 = derivative(lambda x: (lambda y: nd.sin(x) * y, 2 * x))(3.0)
    s = nd.tangent_add(t1, nd.tangent_scale(2.0, t2))
    assert s[0](5.0) == pytest.approx(5.0 + 2 * math.cos(3.0) * 5.0)
    assert s[1] == pytest.approx(6.0 + 4.0)
    dd = nd.directional_derivative(lambda v: (lambda y: v[0] * y, lambda y: nd.sin(v[1]) * y),
                                   [3.0, 3.0], [1.0, 2.0])
    assert dd[0](5.0) == 5.0
    assert dd[1](5.0) == pytest.approx(2 * math.cos(3.0) * 5.0)
    assert nd.tangent_scale(0.5, {'a': 4.0, 'b': [2.0]}) == {'a': 2.0, 'b': [1.0]}
    with pytest.raises(nd.InvalidInputError, match="structure"):
        nd.tangent_add((1.0, 2.0), [1.0, 2.0])


def test_plain_outputs_are_unchanged():
    # No function in the output: nothing is wrapped.
    out = derivative(lambda x: [x, (x * x, {'k': 3.0})])(2.0)
    assert out == [1.0, (4.0, {'k': 0.0})]


def test_function_output_of_gradient_r_is_rejected():
    with pytest.raises(nd.NonScalarOutputError):
        gradient_r(lambda x: (lambda y: x * y))(1.0)


# ---------------------------------------------------------------- eta-expansion agreement
# Where a function-valued derivative can be computed by ordinary means (eta-expanding by
# hand: d/dx f(x)(y) == d/dx [f(x)(y)]), both must agree, in both modes of the caller.

COEFS = st.floats(-1.5, 1.5, allow_nan=False)


def _curried(a, b, c):
    return lambda x: lambda y: lambda z: nd.sin(a * x * y) + nd.exp(b * x * z) * y + c * x * x * z


@settings(max_examples=40, deadline=None)
@given(a=COEFS, b=COEFS, c=COEFS, x=COEFS, y=COEFS, z=COEFS)
def test_eta_expansion_agrees(a, b, c, x, y, z):
    f = _curried(a, b, c)
    lazy = derivative(f)(x)(y)(z)
    eta = derivative(lambda x_: f(x_)(y)(z))(x)
    assert lazy == pytest.approx(eta, rel=1e-12, abs=1e-12)
    # Applying the derivative-valued function under another derivative of y (either mode)
    # equals the mixed second derivative computed directly.
    for D in (derivative, gradient_r):
        nested = D(lambda y_: derivative(f)(x)(y_)(z))(y)
        direct = derivative(lambda x_: derivative(lambda y_: f(x_)(y_)(z))(y))(x)
        assert nested == pytest.approx(direct, rel=1e-10, abs=1e-10)


@settings(max_examples=30, deadline=None)
@given(x=COEFS, y=COEFS, k=st.floats(0.1, 2.0))
def test_self_application_agrees_with_hand_expansion(x, y, k):
    # fh = d/dx (\g.\y. g(k x + y)): fh(g)(y) = k g'(k x + y), so
    # fh(fh(sin))(y) = k * d/du [k cos(k x + u)] at u = k x + y = -k^2 sin(2 k x + y).
    fh = derivative(lambda x_: lambda g: lambda y_: g(k * x_ + y_))(x)
    assert fh(fh(nd.sin))(y) == pytest.approx(-k * k * math.sin(2 * k * x + y), rel=1e-10, abs=1e-12)


# ---------------------------------------------------------------- DVL's amazing-bug files
# Expected values from axch/dysvunctional-language, dvl/examples/amazing-bug-2..5.dvl and
# non-bug.dvl.  A pair of functions and the same pair Church-encoded have *different*
# derivatives (amazing-bug-3 explains why: adding Church pairs respects the non-linearity
# of the continuation), and nestad must reproduce both.

def _f_pair(x):
    return (lambda y: nd.sin(x * y), lambda g: lambda z: g(x + z))


def test_dvl_amazing_bug_2_pair_of_functions():
    g_hat, f_hat = derivative(_f_pair)(3)
    # (cos(3y) - 3y sin(3y)) at y = 3.14159 + 3
    assert f_hat(g_hat)(3.14159) == pytest.approx(8.504448924508122, rel=1e-14)


def test_dvl_amazing_bug_3_church_pair():
    f = lambda x: lambda recipient: recipient(*_f_pair(x))
    got = derivative(f)(3)(lambda g_hat, f_hat: f_hat(g_hat)(3.14159))
    assert got == pytest.approx(8.32914929893078, rel=1e-14)     # cos(3y)(3 + y)


@pytest.mark.parametrize('D', [derivative, gradient_r])
def test_dvl_amazing_bug_4_arguments_flipped(D):
    f = lambda recipient: lambda x: recipient(*_f_pair(x))
    recip = lambda g_hat, f_hat: f_hat(g_hat)(3.14159)
    assert D(f(recip))(3.0) == pytest.approx(8.32914929893078, rel=1e-14)


church_output = lambda f: lambda x: lambda recipient: recipient(f(x))
flip = lambda f: lambda x: lambda y: f(y)(x)
square = lambda x: x * x


@pytest.mark.parametrize('D', [derivative, gradient_r])
def test_dvl_amazing_bug_5_church_output(D):
    assert square(D(nd.sin)(1.0)) == pytest.approx(0.2919265817264289, rel=1e-15)
    assert derivative(church_output(nd.sin))(1.0)(square) == pytest.approx(0.9092974268256818, rel=1e-15)
    assert D(flip(church_output(nd.sin))(square))(1.0) == pytest.approx(0.9092974268256818, rel=1e-15)


def test_dvl_non_bug_church_encoded_directional_derivative():
    c_cons = lambda a, d: lambda r: r(a, d)
    c_car = lambda c: c(lambda a, d: a)
    c_cdr = lambda c: c(lambda a, d: d)
    c_add = lambda u, v: c_cons(c_car(u) + c_car(v), c_cdr(u) + c_cdr(v))
    c_scale = lambda r, v: c_cons(r * c_car(v), r * c_cdr(v))
    f = lambda pt: c_cons(c_car(pt) + c_cdr(pt), c_car(pt) * c_cdr(pt))
    x, direction = c_cons(7.0, 11.0), c_cons(2.0, 3.0)
    dd = derivative(lambda dist: f(c_add(x, c_scale(dist, direction))))(0.0)
    assert dd(lambda a, d: (a, d)) == (5.0, 43.0)
