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

import numpy as np
import scipy.special as _sp

from .. import numpy as anp
from .. import registry
from ..errors import NestadError
from ..extend import primitive
from ..values import primal_value


def _own(fn):
    """A primitive of nestad's own (its rule has a row in tests/test_registry.py)."""
    registry.USER.discard(fn.primitive.name)
    return fn


def _define(name, plain, *partials):
    return _own(primitive(plain, name=f"scipy.special.{name}").defpartials(*partials))


def _no_derivative(function, argument, why):
    def partial(*args, **params):
        raise NestadError(f"nestad.scipy.{function} has no derivative with respect to "
                          f"{argument}: {why}")
    return partial


_ORDER = "it is an integer order"

# ---------------------------------------------------------------- gamma and friends

polygamma = _define('polygamma', lambda n, x: _sp.polygamma(n, x),
                    _no_derivative('special.polygamma', 'n', _ORDER),
                    lambda n, x, out: polygamma(n + 1, x))
digamma = _define('digamma', lambda x: _sp.digamma(x), lambda x, out: polygamma(1, x))
psi = digamma
gammaln = _define('gammaln', lambda x: _sp.gammaln(x), lambda x, out: digamma(x))
gamma = _define('gamma', lambda x: _sp.gamma(x), lambda x, out: out * digamma(x))
rgamma = _define('rgamma', lambda x: _sp.rgamma(x), lambda x, out: -out * digamma(x))
beta = _define('beta', lambda a, b: _sp.beta(a, b),
               lambda a, b, out: out * (digamma(a) - digamma(a + b)),
               lambda a, b, out: out * (digamma(b) - digamma(a + b)))
betaln = _define('betaln', lambda a, b: _sp.betaln(a, b),
                 lambda a, b, out: digamma(a) - digamma(a + b),
                 lambda a, b, out: digamma(b) - digamma(a + b))


def _gammainc_dx(a, x, out):
    return anp.exp(-x + (a - 1.0) * anp.log(x) - gammaln(a))


_SHAPE = "scipy has no derivative of the incomplete gamma/beta function in its shape"
gammainc = _define('gammainc', lambda a, x: _sp.gammainc(a, x),
                   _no_derivative('special.gammainc', 'a', _SHAPE), _gammainc_dx)
gammaincc = _define('gammaincc', lambda a, x: _sp.gammaincc(a, x),
                    _no_derivative('special.gammaincc', 'a', _SHAPE),
                    lambda a, x, out: -_gammainc_dx(a, x, out))
betainc = _define('betainc', lambda a, b, x: _sp.betainc(a, b, x),
                  _no_derivative('special.betainc', 'a', _SHAPE),
                  _no_derivative('special.betainc', 'b', _SHAPE),
                  lambda a, b, x, out: anp.exp((a - 1.0) * anp.log(x) + (b - 1.0) * anp.log1p(-x)
                                               - betaln(a, b)))

# ---------------------------------------------------------------- error functions

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0
erf = _define('erf', lambda x: _sp.erf(x), lambda x, out: _TWO_OVER_SQRT_PI * anp.exp(-x * x))
erfc = _define('erfc', lambda x: _sp.erfc(x), lambda x, out: -_TWO_OVER_SQRT_PI * anp.exp(-x * x))
erfinv = _define('erfinv', lambda x: _sp.erfinv(x),
                 lambda x, out: _SQRT_PI_OVER_TWO * anp.exp(out * out))
erfcinv = _define('erfcinv', lambda x: _sp.erfcinv(x),
                  lambda x, out: -_SQRT_PI_OVER_TWO * anp.exp(out * out))

# ---------------------------------------------------------------- logistic

expit = _define('expit', lambda x: _sp.expit(x), lambda x, out: out * (1.0 - out))
logit = _define('logit', lambda x: _sp.logit(x), lambda x, out: 1.0 / (x * (1.0 - x)))
log_expit = _define('log_expit', lambda x: _sp.log_expit(x), lambda x, out: expit(-x))

# ---------------------------------------------------------------- x log y

# xlogy(0, y) is 0 for every y, so its derivative in x is log(y) and in y is x / y (0 at x = 0).
xlogy = _define('xlogy', lambda x, y: _sp.xlogy(x, y),
                lambda x, y, out: anp.log(y),
                lambda x, y, out: anp.where(x == 0, 0.0, x / anp.where(x == 0, 1.0, y)))
xlog1py = _define('xlog1py', lambda x, y: _sp.xlog1py(x, y),
                  lambda x, y, out: anp.log1p(y),
                  lambda x, y, out: anp.where(x == 0, 0.0, x / anp.where(x == 0, 1.0, 1.0 + y)))

# ---------------------------------------------------------------- modified Bessel functions

iv = _define('iv', lambda v, x: _sp.iv(v, x), _no_derivative('special.iv', 'v', _ORDER),
             lambda v, x, out: 0.5 * (iv(v - 1, x) + iv(v + 1, x)))
ive = _define('ive', lambda v, x: _sp.ive(v, x), _no_derivative('special.ive', 'v', _ORDER),
              lambda v, x, out: 0.5 * (ive(v - 1, x) + ive(v + 1, x)) - anp.sign(x) * out)
i0 = _define('i0', lambda x: _sp.i0(x), lambda x, out: i1(x))
i1 = _define('i1', lambda x: _sp.i1(x), lambda x, out: 0.5 * (i0(x) + iv(2, x)))
i0e = _define('i0e', lambda x: _sp.i0e(x), lambda x, out: i1e(x) - anp.sign(x) * out)
i1e = _define('i1e', lambda x: _sp.i1e(x),
              lambda x, out: 0.5 * (i0e(x) + ive(2, x)) - anp.sign(x) * out)


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
    from ..numpy import _dispatch
    for name, fn in list(globals().items()):
        target = getattr(_sp, name, None)
        if isinstance(target, np.ufunc) and callable(fn) and not name.startswith('_'):
            _dispatch.UFUNCS[target] = fn


_install_dispatch()
