"""``nestad.scipy.special``: special functions with their derivative rules.

Each is scipy's function (so values are scipy's, for numbers and arrays alike) declared
a primitive, with the partial derivatives of the formula next to it, written with
functions of this module so that they are differentiated in turn: d gammaln = digamma,
d digamma = polygamma(1, .), d polygamma(n, .) = polygamma(n + 1, .), and so on.
Integer orders (``n`` of ``polygamma``, ``v`` of ``iv``) carry no derivative; asking for
one with respect to them, or to a shape parameter whose derivative scipy cannot give
(the first argument of ``gammainc``), raises instead of returning a silent zero.
"""
import math
from fractions import Fraction

import numpy as np
import scipy.special as _sp

from .. import numpy as anp
from .. import registry
from ..errors import NestadError
from ..extend import primitive
from ..primitives import recip, sqrt
from ..tracer import is_tracer
from ..values import Perturbed, primal_value
from ..numpy import _dispatch


def _own(fn):
    """A primitive of nestad's own (its rule has a row in tests/test_registry.py)."""
    registry.USER.discard(fn.primitive.name)
    return fn


def _ratio(n, d):
    """n / d with IEEE semantics (x / 0 is inf, not ZeroDivisionError), and 0 where n and d
    are both 0 and n is a constant: the boundary of a support, where the formula's factor
    x^n is constant (the derivative of (a - 1) log x at a = 1, x = 0).  A perturbed n keeps
    0/0 = nan there: its derivative (1/d) is infinite at d = 0, and no number would be
    right.  Elsewhere it is n / d, so derivatives in n and d are exact."""
    # (n * recip(d): IEEE on Python floats, and the same operations eager and staged)
    if isinstance(n, Perturbed):
        return n * recip(d)
    both = np.logical_and(primal_value(n) == 0, primal_value(d) == 0)
    if not is_tracer(both) and not np.any(both):
        return n * recip(d)
    return n * recip(anp.where(both, 1.0, d))


def _at_edge(edge, exact, formula, inside):
    """``exact(x)`` where ``edge`` holds, ``formula(x)`` elsewhere, each evaluated only where
    it is chosen (the other gets ``inside``), so that the unchosen one's infinities do not
    reach the derivatives (0 * inf).  ``edge`` is a (possibly traced) bool of the primal."""
    def choose(x):
        if not is_tracer(edge) and not np.any(edge):
            return formula(x)
        return anp.where(edge, exact(anp.where(edge, x, inside)),
                         formula(anp.where(edge, inside, x)))
    return choose


def _define(name, plain, *partials):
    return _own(primitive(plain, name=f"scipy.special.{name}").defpartials(*partials))


def _no_derivative(function, argument, why):
    def partial(*args, **params):
        raise NestadError(f"nestad.scipy.{function} has no derivative with respect to "
                          f"{argument}: {why}")
    return partial


_ORDER = "it is an integer order"

# ---------------------------------------------------------------- gamma and friends

_COT = [[0, 1]]     # d^n/dz^n cot z = P_n(cot z): P_0 = c, P_(n+1) = -(1 + c^2) P_n' (exact ints)


def _cot_derivative(n, c):
    while len(_COT) <= n:
        d = [k * a for k, a in enumerate(_COT[-1])][1:]
        q = [0] * (len(d) + 2)
        for k, a in enumerate(d):
            q[k] -= a
            q[k + 2] -= a
        _COT.append(q)
    total = 0.0
    for a in reversed(_COT[n]):
        total = total * c + float(a)
    return total


def _polygamma_plain(n, x):
    """scipy's polygamma, but for x < 0 by reflection, psi^(n)(x) = (-1)^n psi^(n)(1 - x) -
    pi^(n+1) cot^(n)(pi x), cot(pi x) with x reduced exactly (cos(pi r) as sin(pi (1/2 -
    |r|)): exactly 0 at half-integers).  scipy's Hurwitz zeta at negative x cancels where
    the value is small beside its terms (n = 8 at -2.5: 1.5e-9 relative; this: 2e-16; at
    other points both are within 1e-15)."""
    nb, xb = np.broadcast_arrays(np.asarray(n), np.asarray(x, dtype=float))
    neg = (xb < 0) & (xb != np.round(xb)) & (nb >= 1)
    if not np.any(neg):
        return _sp.polygamma(n, x)
    # (never scipy's at those x: its time grows with |x|, 0.3 s at -1e7, minutes at -1e9)
    out = np.array(_sp.polygamma(nb, np.where(neg, 1.0, xb)), dtype=float)
    for m in np.unique(nb[neg]):
        sel = neg & (nb == m)
        xs = xb[sel]
        r = xs - np.round(xs)
        c = np.sin(np.pi * (0.5 - np.abs(r))) / np.sin(np.pi * r)
        out[sel] = ((-1.0) ** int(m) * _sp.polygamma(int(m), 1.0 - xs)
                    - math.pi ** (int(m) + 1) * _cot_derivative(int(m), c))
    return out[()] if out.ndim == 0 else out


polygamma = _define('polygamma', _polygamma_plain,
                    _no_derivative('special.polygamma', 'n', _ORDER),
                    lambda n, x, out: polygamma(n + 1, x))
digamma = _define('digamma', lambda x: _sp.digamma(x), lambda x, out: polygamma(1, x))
psi = digamma
gammaln = _define('gammaln', lambda x: _sp.gammaln(x), lambda x, out: digamma(x))
gamma = _define('gamma', lambda x: _sp.gamma(x), lambda x, out: out * digamma(x))
def _rgamma_dx(x, out):
    # -rgamma(x) digamma(x) is 0 * inf at 0, -1, -2, ... (the derivative there is
    # (-1)^n n!): for x < 1/2, the reflection 1/Gamma(x) = Gamma(1 - x) sin(pi x) / pi
    # gives Gamma(1 - x) cos(pi x) - rgamma(x) digamma(1 - x), finite for every x < 1
    low = primal_value(x) < 0.5
    return _at_edge(low,
                    lambda x: gamma(1.0 - x) * anp.cos(np.pi * x) - rgamma(x) * digamma(1.0 - x),
                    lambda x: -rgamma(x) * digamma(x), 1.0)(x)


rgamma = _define('rgamma', lambda x: _sp.rgamma(x), _rgamma_dx)
def _digamma_step(x, h):
    """digamma(x + h) - digamma(x), without the cancellation of the difference when h is
    small beside x (the derivative of beta(a, b) in a for b = 1e-12 was off by 0.3%): there
    the Taylor series sum_n polygamma(n, x) h^n / n!, five terms (a relative error below
    1e-15 for |h| < 1e-3 |x|)."""
    hv, xv = primal_value(h), primal_value(x)
    near = np.abs(hv) < 1e-3 * np.abs(xv)
    def series(x, h):
        total, term = 0.0, 1.0
        for n in range(1, 6):
            term = term * h / n
            total = total + polygamma(n, x) * term
        return total

    def direct(x, h):
        return digamma(x + h) - digamma(x)
    if not is_tracer(near) and not np.any(near):
        return direct(x, h)
    if not is_tracer(near) and np.all(near):
        return series(x, h)
    return anp.where(near, series(x, anp.where(near, h, 0.0)), direct(x, anp.where(near, 1.0, h)))


# d/da log B(a, b) = digamma(a) - digamma(a + b)
beta = _define('beta', lambda a, b: _sp.beta(a, b),
               lambda a, b, out: -out * _digamma_step(a, b),
               lambda a, b, out: -out * _digamma_step(b, a))
betaln = _define('betaln', lambda a, b: _sp.betaln(a, b),
                 lambda a, b, out: -_digamma_step(a, b),
                 lambda a, b, out: -_digamma_step(b, a))


def _gammainc_dx(a, x, out):
    # x^(a-1) e^-x / Gamma(a), by logarithms (no overflow for large a and x) except below
    # x = 1, where by the power: at x = 0 the logarithms' derivatives would be 0 * inf (for
    # a = 1 the derivative at 0 is 1; for a = 2 the second derivative is 1), and at tiny x
    # their exp underflows to 0 where the higher derivatives are normal numbers (a = 2.5,
    # x = 1e-300: the second derivative was 0 for 1e-150, the third nan for 6e149)
    edge = primal_value(x) < 1.0
    return _at_edge(edge, lambda x: anp.power(x, a - 1.0) * anp.exp(-x - gammaln(a)),
                    lambda x: anp.exp(-x + (a - 1.0) * anp.log(x) - gammaln(a)), 1.0)(x)


def _powers_safe(a, b):
    """Where x^(a-1) (1-x)^(b-1) / B(a, b) may be computed by powers (as the incomplete gamma
    function's below 1): B(a, b) does not underflow.  Otherwise by logarithms."""
    return betaln(primal_value(a), primal_value(b)) > -700.0


def _betainc_dx(a, b, x, out):
    # x^(a-1) (1-x)^(b-1) / B(a, b), by powers (exact derivatives at 0 and 1 and near them),
    # by logarithms for parameters so large that B(a, b) underflows
    edge = _powers_safe(a, b)
    return _at_edge(edge,
                    lambda x: anp.power(x, a - 1.0) * anp.power(1.0 - x, b - 1.0) / beta(a, b),
                    lambda x: anp.exp((a - 1.0) * anp.log(x) + (b - 1.0) * anp.log1p(-x)
                                      - betaln(a, b)), 0.5)(x)


_SHAPE = "scipy has no derivative of the incomplete gamma/beta function in its shape"
gammainc = _define('gammainc', lambda a, x: _sp.gammainc(a, x),
                   _no_derivative('special.gammainc', 'a', _SHAPE), _gammainc_dx)
gammaincc = _define('gammaincc', lambda a, x: _sp.gammaincc(a, x),
                    _no_derivative('special.gammaincc', 'a', _SHAPE),
                    lambda a, x, out: -_gammainc_dx(a, x, out))
betainc = _define('betainc', lambda a, b, x: _sp.betainc(a, b, x),
                  _no_derivative('special.betainc', 'a', _SHAPE),
                  _no_derivative('special.betainc', 'b', _SHAPE),
                  _betainc_dx)

# ---------------------------------------------------------------- error functions

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0
erf = _define('erf', lambda x: _sp.erf(x), lambda x, out: _TWO_OVER_SQRT_PI * anp.exp(-x * x))
erfc = _define('erfc', lambda x: _sp.erfc(x), lambda x, out: -_TWO_OVER_SQRT_PI * anp.exp(-x * x))
erfinv = _define('erfinv', lambda x: _sp.erfinv(x),
                 lambda x, out: _SQRT_PI_OVER_TWO * anp.exp(out * out))


def _erfcx_derivative(n, x):
    """The n-th derivative of erfcx, without the cancellation of its recurrence.

    erfcx^(n) = (-2)^n n! g_n with g_n = exp(x^2) i^n erfc(x) (i^n erfc the repeated
    integrals of erfc; A&S 7.2.8), and 2n g_n = g_(n-2) - 2x g_(n-1).  The derivatives'
    recurrence y^(n) = 2x y^(n-1) + 2(n-1) y^(n-2) is that one run forwards: stable for
    x <= 1/2 (for x <= 0 it adds positive terms), but for x > 0 g_n is the recurrence's
    decaying solution, and running it forwards cancels a factor about 2x^2 / n per order
    (the rule y' = 2x y - 2/sqrt(pi) had lost 7 digits by order 6 at x = 10.6).  There the
    ratios r_n = g_n / g_(n-1) = 1 / (2x + 2(n+1) r_(n+1)) run backwards (Miller's
    algorithm: only positive terms), from r_N = 1 / (x + sqrt(x^2 + 2N)) (the recurrence's
    limit for large N) with N - n = 20 + 250 / x^2 (the start's error shrinks about as
    exp(-2x sqrt(2N)): below 1e-16 relative for x > 1/2), and g_n = erfcx(x) r_1 ... r_n."""
    if np.ndim(x) == 0:
        x = float(x)                # (Python floats: the loops below are 10x faster on them)
        y0 = float(_sp.erfcx(x))
        if n == 0 or not x > 0.5:
            return _erfcx_forward(n, x, y0)
        return y0 * _erfcx_backward(n, x, x, math.hypot)
    x = np.asarray(x, dtype=float)
    y0 = _sp.erfcx(x)
    y = _erfcx_forward(n, x, y0)
    far = x > 0.5
    if n and np.any(far):
        xf = x[far]
        y[far] = y0[far] * _erfcx_backward(n, xf, float(np.min(xf)), np.hypot)
    return y


def _erfcx_forward(n, x, y0):
    prev, y = y0, 2.0 * x * y0 - _TWO_OVER_SQRT_PI
    if n == 0:
        return y0
    for m in range(2, n + 1):
        prev, y = y, 2.0 * x * y + 2.0 * (m - 1) * prev
    return y


def _erfcx_backward(n, x, smallest, hypot):
    """erfcx^(n)(x) / erfcx(x) = prod_(m <= n) (-2m r_m), the r_m by the backward recurrence."""
    big = int(n + 20 + 250.0 / smallest / smallest)     # (smallest ** 2 overflows past 1e154)
    r = 1.0 / (x + hypot(x, math.sqrt(2.0 * (big + 1))))
    scale = 1.0
    for m in range(big + 1, 1, -1):
        r = 1.0 / (2.0 * x + 2.0 * m * r)           # r_(m-1)
        if m - 1 <= n:
            scale = scale * (-2.0 * (m - 1)) * r
    return scale


def _erfcx_derivative_plain(n, x):
    if not float(n).is_integer() or n < 0:
        raise NestadError(f"nestad.scipy.special.erfcx_derivative: the order n must be an "
                          f"integer >= 0, got {n!r}")
    return _erfcx_derivative(int(n), x)


# erfcx(x) = exp(x^2) erfc(x), the scaled complement: ratios such as the normal density over
# its distribution function without the cancellation of their logarithms.  Its derivatives
# of every order are erfcx_derivative(n, x), each computed directly (above), the next one
# its partial: no order is got by differentiating a cancelling formula.
erfcx_derivative = _define('erfcx_derivative', _erfcx_derivative_plain,
                           _no_derivative('special.erfcx_derivative', 'n', _ORDER),
                           lambda n, x, out: erfcx_derivative(n + 1, x))
erfcx = _define('erfcx', lambda x: _sp.erfcx(x), lambda x, out: erfcx_derivative(1, x))
erfcinv = _define('erfcinv', lambda x: _sp.erfcinv(x),
                  lambda x, out: -_SQRT_PI_OVER_TWO * anp.exp(out * out))

# ---------------------------------------------------------------- logistic

# expit' = expit(x) expit(-x): 1 - expit(x) would cancel for large x (0 from x = 37 on)
expit = _define('expit', lambda x: _sp.expit(x), lambda x, out: out * expit(-x))
logit = _define('logit', lambda x: _sp.logit(x), lambda x, out: anp.reciprocal(x * (1.0 - x)))
log_expit = _define('log_expit', lambda x: _sp.log_expit(x), lambda x, out: expit(-x))

# ---------------------------------------------------------------- x log y

# xlogy(0, y) is 0 for every y, so its derivative in x is log(y) and in y is x / y, 0 at
# x = 0 for every y.  (Not where(x == 0, 0, x / y): its derivative in x, the mixed second
# derivative 1 / y, was 0 at x = 0.)
xlogy = _define('xlogy', lambda x, y: _sp.xlogy(x, y),
                lambda x, y, out: anp.log(y), lambda x, y, out: _ratio(x, y))
xlog1py = _define('xlog1py', lambda x, y: _sp.xlog1py(x, y),
                  lambda x, y, out: anp.log1p(y), lambda x, y, out: _ratio(x, 1.0 + y))

# ---------------------------------------------------------------- modified Bessel functions

iv = _define('iv', lambda v, x: _sp.iv(v, x), _no_derivative('special.iv', 'v', _ORDER),
             lambda v, x, out: 0.5 * (iv(v - 1, x) + iv(v + 1, x)))
def _ive_derivative_plain(n, v, x):
    """d^n/dx^n exp(-|x|) I_v(x) for integer v >= 0 and n >= 0, from (1/pi) int_0^pi cos(v t)
    (-(1 - cos t))^n exp(-|x| (1 - cos t)) dt (x > 0; x < 0 by I_v(-x) = (-1)^v I_v(x)):
    an integrand of one sign near t = 0, where its mass is, so no cancellation, where the
    rules' (ive(v-1) + ive(v+1))/2 - ive(v) lose a factor about |x| per order (i0e's fourth
    derivative at 20: 2e-6 relative).  Periodic and smooth, so the trapezoid rule converges
    geometrically; its N = 64 + 8 sqrt|x| + 4n points resolve the peak of width |x|^-1/2."""
    for name, k in (('n', n), ('v', v)):
        if np.ndim(k) or not float(k).is_integer() or k < 0:
            raise NestadError(f"nestad.scipy.special.ive_derivative: {name} must be an integer "
                              f">= 0, got {k!r}")
    n, v = int(n), int(v)
    x = np.asarray(x, dtype=float)
    a = np.abs(x)
    top = float(np.max(a, initial=0.0))
    if not top <= 1e8:
        raise NestadError("nestad.scipy.special.ive_derivative: |x| must be finite and at most "
                          f"1e8 (the quadrature's points grow as sqrt|x|), got {top!r}")
    m = int(64 + 8 * math.sqrt(top) + 4 * n)
    t = np.linspace(0.0, np.pi, m + 1)
    u = 1.0 - np.cos(t)
    f = np.cos(v * t) * (-u) ** n
    f[0] *= 0.5
    f[-1] *= 0.5
    out = (np.exp(-np.multiply.outer(a, u)) @ f) / m
    out = np.where(x < 0, (-1.0) ** (n + v) * out, out)
    return out[()] if out.ndim == 0 else out


ive_derivative = _define('ive_derivative', _ive_derivative_plain,
                         _no_derivative('special.ive_derivative', 'n', _ORDER),
                         _no_derivative('special.ive_derivative', 'v', _ORDER),
                         lambda n, v, x, out: ive_derivative(n + 1, v, x))


def _quadrature_zone(x):
    """Where the rules of ive, i0e and i1e take ive_derivative: 2 < |x| <= 1e4 (below 2 their
    formulas do not cancel much; beyond 50 i0e and i1e have their asymptotic series)."""
    a = np.abs(primal_value(x))
    return np.logical_and(a > 2.0, a <= 1e4)


def _ive_dx(v, x, out):
    formula = lambda x: 0.5 * (ive(v - 1, x) + ive(v + 1, x)) - anp.sign(x) * ive(v, x)
    vv = primal_value(v)
    if np.ndim(vv) or is_tracer(vv) or not float(vv).is_integer() or vv < 0:
        return formula(x)
    return _at_edge(_quadrature_zone(x), lambda x: ive_derivative(1, vv, x), formula, 10.0)(x)


ive = _define('ive', lambda v, x: _sp.ive(v, x), _no_derivative('special.ive', 'v', _ORDER), _ive_dx)
i0 = _define('i0', lambda x: _sp.i0(x), lambda x, out: i1(x))
i1 = _define('i1', lambda x: _sp.i1(x), lambda x, out: 0.5 * (i0(x) + iv(2, x)))
def _asymptotic(nu, terms=20):
    """(-1)^k a_k(nu), k = 0..terms-1: e^-x I_nu(x) ~ (2 pi x)^(-1/2) sum_k (-1)^k a_k(nu) x^-k,
    a_k(nu) = prod_(j <= k) (4 nu^2 - (2j - 1)^2) / (k! 8^k)."""
    coefs = [Fraction(1)]
    for k in range(1, terms):
        coefs.append(-coefs[-1] * (4 * nu * nu - (2 * k - 1) ** 2) / (8 * k))
    return coefs


_A0, _A1 = _asymptotic(0), _asymptotic(1)
# beyond |x| = 50, the derivatives of i0e and i1e as series in 1/|x| (i0e' = i1e - i0e and
# i1e' = i0e - i1e - i1e / x for x > 0, their leading terms cancelled exactly): the formulas
# below cancel (relative error |x| eps: 1e-8 at 1e8, the second derivative twice too large);
# 20 terms, relative truncation error below 1e-22 at 50
_I0E_DX = [float(c1 - c0) for c0, c1 in zip(_A0, _A1)]
_I1E_DX = [float(c0 - c1 - (_A1[k - 1] if k else 0)) for k, (c0, c1) in enumerate(zip(_A0, _A1))]


def _bessel_tail(coefs, x):
    """(2 pi |x|)^(-1/2) sum_k coefs[k] |x|^-k."""
    a = anp.absolute(x)
    r = recip(a)
    total = 0.0
    for c in reversed(coefs):
        total = total * r + c
    return total * recip(sqrt(2.0 * math.pi * a))


def _far(x):
    return np.abs(primal_value(x)) > 50.0


i0e = _define('i0e', lambda x: _sp.i0e(x),
              lambda x, out: _at_edge(_far(x), lambda x: anp.sign(x) * _bessel_tail(_I0E_DX, x),
                                      lambda x: _at_edge(_quadrature_zone(x), lambda x: ive_derivative(1, 0, x),
                                                         lambda x: i1e(x) - anp.sign(x) * i0e(x), 10.0)(x),
                                      100.0)(x))


def _i1e_dx(x, out):
    # I1' = (I0 + I2) / 2 (finite at 0), but scipy's ive(2, x) is nan from |x| = 1e17 or so:
    # beyond |x| = 1 I1' = I0 - I1 / x, beyond 50 the series
    big = np.abs(primal_value(x)) > 1.0
    return _at_edge(big, lambda x: _at_edge(_far(x), lambda x: _bessel_tail(_I1E_DX, x),
                                            lambda x: _at_edge(_quadrature_zone(x), lambda x: ive_derivative(1, 1, x),
                                                               lambda x: i0e(x) - i1e(x) / x - anp.sign(x) * i1e(x),
                                                               10.0)(x),
                                            100.0)(x),
                    lambda x: 0.5 * (i0e(x) + ive(2, x)) - anp.sign(x) * i1e(x), 2.0)(x)


i1e = _define('i1e', lambda x: _sp.i1e(x), _i1e_dx)


# ---------------------------------------------------------------- Bessel functions
# J_v' = (J_{v-1} - J_{v+1}) / 2, and the same for Y_v; J_0' = -J_1, Y_0' = -Y_1.  The
# integer order n of jn and yn carries no derivative.

jv = _define('jv', lambda v, x: _sp.jv(v, x), _no_derivative('special.jv', 'v', _ORDER),
             lambda v, x, out: 0.5 * (jv(v - 1, x) - jv(v + 1, x)))
jn = jv                                     # (scipy's jn is jv)
yv = _define('yv', lambda v, x: _sp.yv(v, x), _no_derivative('special.yv', 'v', _ORDER),
             lambda v, x, out: 0.5 * (yv(v - 1, x) - yv(v + 1, x)))
yn = _define('yn', lambda n, x: _sp.yn(n, x), _no_derivative('special.yn', 'n', _ORDER),
             lambda n, x, out: 0.5 * (yn(n - 1, x) - yn(n + 1, x)))
j0 = _define('j0', lambda x: _sp.j0(x), lambda x, out: -j1(x))
j1 = _define('j1', lambda x: _sp.j1(x), lambda x, out: 0.5 * (j0(x) - jv(2, x)))
y0 = _define('y0', lambda x: _sp.y0(x), lambda x, out: -y1(x))
y1 = _define('y1', lambda x: _sp.y1(x), lambda x, out: 0.5 * (y0(x) - yn(2, x)))

# ---------------------------------------------------------------- sign of Gamma, multivariate Gamma

# piecewise constant (+-1, 0 at the poles): its derivative is zero
gammasgn = _define('gammasgn', lambda x: _sp.gammasgn(x), lambda x, out: anp.zeros_like(out))
# log Gamma_d(a) = d (d - 1) / 4 log pi + sum_j gammaln(a - j / 2), j = 0..d-1; d, the
# dimension, is an integer parameter (a keyword of the primitive)
_multigammaln = _define('multigammaln', lambda a, d=1: _sp.multigammaln(a, d),
                        lambda a, out, d=1: sum(digamma(a - 0.5 * j) for j in range(d)))


def multigammaln(a, d):
    """scipy.special.multigammaln: the log of the multivariate gamma function of
    dimension ``d`` (an integer, not differentiated)."""
    return _multigammaln(a, d=int(d))


# ---------------------------------------------------------------- logsumexp

def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """scipy.special.logsumexp: log(sum(b * exp(a))), differentiable in ``a`` and ``b``
    (``b`` must keep the sum positive; ``return_sign`` is not supported)."""
    if return_sign:
        raise NestadError("nestad.scipy.special.logsumexp does not support return_sign")
    if b is None:
        return anp.logsumexp(a, axis=axis, keepdims=keepdims)
    m = np.max(np.asarray(primal_value(a)), axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = anp.log(anp.sum(b * anp.exp(a - m), axis=axis, keepdims=True)) + m
    if keepdims:
        return out
    return anp.squeeze(out, axis=axis) if axis is not None else anp.reshape(out, ())


def _install_dispatch():
    """scipy.special's own ufuncs on nestad values come here, by name."""
    for name, fn in list(globals().items()):
        target = getattr(_sp, name, None)
        if isinstance(target, np.ufunc) and callable(fn) and not name.startswith('_'):
            _dispatch.UFUNCS[target] = fn


_install_dispatch()
