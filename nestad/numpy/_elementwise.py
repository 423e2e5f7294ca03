"""Elementwise functions: the array versions of the scalar primitives (with their
scalar rules), the arithmetic operators, powers, extrema of two arrays, and the
piecewise-constant functions (floor, comparisons, argmax...), whose derivative is zero.
"""
import numpy as _np

from .. import primitives as _scalar
from .. import registry as _registry
from ..batching import member_ndim as _member_ndim, pad as _pad
from ..lifting import ARRAY_ROUTES, lift2 as _lift2
from ..tracer import UFUNC_PRIMITIVES as _UFUNC_PRIMITIVES, is_tracer
from ..values import Batched as _Batched, Perturbed, primal_value
from ._kernel import _as_operand, _define, _plain_operand, _python_scalar, _shape
from ._plumbing import _jvp2, reshape, sum_to
from ._selection import where


# ---------------------------------------------------------------- elementwise functions

def _elementwise1(name, npfn, scalar, deriv=None):
    """f applied elementwise.  Its derivative is the scalar primitive's own rule
    (``scalar.partials[0](x, out)``, written in lifted operations that accept arrays),
    unless ``deriv`` is given for a rule that compares primal values."""
    deriv = deriv or scalar.partials[0]
    scalar_fn = scalar.lifted
    prim = _define(name, npfn,
                   jvps=(lambda t, x, out: deriv(x, out) * t,),
                   vjps=(lambda g, x, out: deriv(x, out) * g,))

    def public(x):
        if isinstance(x, Perturbed) and _python_scalar(x):
            return scalar_fn(x)           # a nestad scalar keeps the scalar fast paths
        return prim(_as_operand(x))       # plain values get numpy's own answer
    public.__name__ = public.__qualname__ = name
    ARRAY_ROUTES[scalar.name] = prim
    return public


# The array versions of the elementwise scalar primitives, under numpy's names, with the
# scalar rules (nestad.registry.ELEMENTWISE: defining one in nestad/primitives.py with the
# numpy function it mirrors is all it takes).  The one-argument ones are made here; the
# two-argument ones (arctan2, hypot) after the binary machinery below.
for _prim, _npfn in _registry.ELEMENTWISE:
    if len(_prim.partials) == 1:
        globals()[_npfn.__name__] = _registry.export(
            _elementwise1(_npfn.__name__, _npfn, _prim), 'nestad.numpy')
# numpy's reciprocal of an integer is integer division (0 for |x| > 1), a step function the
# rule -1/x^2 would contradict; integers get the true reciprocal in float64, as in JAX.
reciprocal = _elementwise1('reciprocal', lambda x: _np.reciprocal(x) if _np.result_type(x).kind in 'fc'
                           else _np.true_divide(1.0, x), _scalar.RECIP)
# abs's scalar rule compares a primal value with 0; elementwise it is numpy's sign.
absolute = _elementwise1('absolute', _np.absolute, _scalar.ABS,
                         lambda x, out: _np.sign(primal_value(x)))
abs = absolute   # noqa: A001  (mirrors numpy)
# tanh's derivative (nestad.primitives.sech2) on arrays; not a numpy function, not exported
_sech2 = _elementwise1('sech2', _scalar.sech2_array, _scalar.SECH2)


def square(x):
    x = _as_operand(x)
    return x * x if isinstance(x, Perturbed) else _np.square(_plain_operand(x, 'square'))


# numpy.negative flips the sign bit of nan too (multiplying by -1 does not)
_negative = _define('negative', _np.negative,
                    jvps=(lambda t, x, out: _negative(t),),
                    vjps=(lambda g, x, out: _negative(g),))


def negative(x):
    x = _as_operand(x)
    return -x if isinstance(x, Perturbed) and _python_scalar(x) else _negative(x)


def positive(x):
    x = _as_operand(x)
    return x if isinstance(x, Perturbed) else _np.positive(_plain_operand(x, 'positive'))


def _constant(npfn):
    """A piecewise-constant function: derivative zero, plain result."""
    def public(*args, **kw):
        args = [primal_value(_as_operand(a)) for a in args]
        for a in args:
            if a.__class__ is _Batched:     # values of vmap's members
                return _batched_constant(npfn, args, kw)
        return npfn(*args, **kw)
    public.__name__ = npfn.__name__
    return public


def _batched_constant(npfn, args, kwargs):
    """A piecewise-constant numpy function (floor, comparisons, argmax...) of values some
    of which are batched: applied to the stacked members (no derivative to keep)."""
    top = max(a.tag for a in args if a.__class__ is _Batched)
    batched = [a.__class__ is _Batched and a.tag == top for a in args]
    values = [a.primal if b else a for a, b in zip(args, batched)]
    if 'axis' in kwargs or npfn in _AXIS_FUNCTIONS:
        (x,) = values
        axis = kwargs.get('axis', -1 if npfn is _np.argsort else None)
        n = _member_ndim(x, True)
        if axis is None:
            x, axis = reshape(x, (_shape(x)[0], -1)), 1
        else:
            axis = axis % max(n, 1) + 1
        return _Batched(top, npfn(x, **{**kwargs, 'axis': axis}))
    n = max(_member_ndim(v, b) for v, b in zip(values, batched))
    return _Batched(top, npfn(*[_pad(v, b, n) for v, b in zip(values, batched)], **kwargs))


_AXIS_FUNCTIONS = (_np.argmax, _np.argmin, _np.argsort)


sign = _constant(_np.sign)
floor = _constant(_np.floor)
ceil = _constant(_np.ceil)
round = _constant(_np.round)   # noqa: A001
rint = _constant(_np.rint)
trunc = _constant(_np.trunc)
floor_divide = _constant(_np.floor_divide)
less, less_equal = _constant(_np.less), _constant(_np.less_equal)
greater, greater_equal = _constant(_np.greater), _constant(_np.greater_equal)
equal, not_equal = _constant(_np.equal), _constant(_np.not_equal)
argmax, argmin, argsort = _constant(_np.argmax), _constant(_np.argmin), _constant(_np.argsort)
# The scalar constant functions of values batched by vmap (nestad.primitives.constant).
ARRAY_ROUTES.update(
    floor=floor, ceil=ceil, sign=sign, floordiv=floor_divide, lt=less, le=less_equal,
    gt=greater, ge=greater_equal, eq=equal, ne=not_equal, tie_split=_constant(
        lambda a, b: _np.where(a > b, 1.0, _np.where(a < b, 0.0, 0.5))),
    **{'and': _constant(_np.logical_and), 'or': _constant(_np.logical_or),
       'xor': _constant(_np.logical_xor), 'not': _constant(_np.logical_not)})


def _elementwise2(name, npfn, scalar_fn, dx, dy):
    """A broadcasting binary function with elementwise partials dx(x, y, out), dy(x, y, out)."""
    prim = _define(
        name, npfn,
        jvps=(_jvp2(lambda t, x, y, out: dx(x, y, out) * t)[0],
              _jvp2(lambda t, x, y, out: dy(x, y, out) * t)[1]),
        vjps=(lambda g, x, y, out: sum_to(dx(x, y, out) * g, _shape(x)),
              lambda g, x, y, out: sum_to(dy(x, y, out) * g, _shape(y))))
    return _binary_public(name, prim, scalar_fn)


def _binary_public(name, prim, scalar_fn):
    def public(x, y):
        x, y = _as_operand(x), _as_operand(y)
        # nestad scalars keep the scalar fast paths; plain values get numpy's own answer
        if scalar_fn is not None and (isinstance(x, Perturbed) or isinstance(y, Perturbed)) \
                and _python_scalar(x) and _python_scalar(y):
            return scalar_fn(x, y)
        return prim(x, y)
    public.__name__ = name
    if scalar_fn is not None:
        ARRAY_ROUTES[getattr(scalar_fn, '__name__', name)] = prim
    return public


# + - * / get their own JVP/VJP to skip multiplying by constant partials.
_add = _define('add', _np.add,
               jvps=_jvp2(lambda t, x, y, out: t),
               vjps=(lambda g, x, y, out: sum_to(g, _shape(x)),
                     lambda g, x, y, out: sum_to(g, _shape(y))))
_subtract = _define('subtract', _np.subtract,
                    jvps=(_jvp2(lambda t, x, y, out: t)[0], _jvp2(lambda t, x, y, out: -t)[1]),
                    vjps=(lambda g, x, y, out: sum_to(g, _shape(x)),
                          lambda g, x, y, out: sum_to(-g, _shape(y))))
_MULTIPLY_JVPS = (_jvp2(lambda t, x, y, out: t * y)[0], _jvp2(lambda t, x, y, out: x * t)[1])
_MULTIPLY_VJPS = (lambda g, x, y, out: sum_to(g * y, _shape(x)),
                  lambda g, x, y, out: sum_to(x * g, _shape(y)))
_multiply = _define('multiply', _np.multiply, jvps=_MULTIPLY_JVPS, vjps=_MULTIPLY_VJPS)
# (divide, not /, in the rules: IEEE on Python floats too, as numpy is.  The y-term is
# (out t) / y, not (out / y) t: for x / y = 1 (sin(x) / x near 0) the two terms are then
# equal and cancel exactly, as the scalar rules' do; (1 / y) t and t / y round apart,
# and at x = 1e-300 that difference was 1e284.)
_divide = _define('divide', _np.true_divide,
                  jvps=(_jvp2(lambda t, x, y, out: divide(t, y))[0],
                        _jvp2(lambda t, x, y, out: -divide(out * t, y))[1]),
                  vjps=(lambda g, x, y, out: sum_to(divide(g, y), _shape(x)),
                        lambda g, x, y, out: sum_to(-divide(out * g, y), _shape(y))))

# On scalars these go straight to the scalar primitives (not through ``x + y``: a numpy
# scalar operand would send that back here through __array_ufunc__).
add = _binary_public('add', _add, lambda x, y: _lift2(_scalar.ADD, x, y))
subtract = _binary_public('subtract', _subtract, lambda x, y: _lift2(_scalar.SUB, x, y))
multiply = _binary_public('multiply', _multiply, lambda x, y: _lift2(_scalar.MUL, x, y))
def _ieee(scalar, prim):
    """A scalar fast path that keeps numpy's IEEE answer where Python's float raises
    (x / 0.0, x % 0.0): the array primitive gives it, as numpy does on plain numbers."""
    def fast(x, y):
        try:
            return _lift2(scalar, x, y)
        except ZeroDivisionError:
            return prim(x, y)
    fast.__name__ = scalar.name
    return fast


divide = true_divide = _binary_public('divide', _divide, _ieee(_scalar.DIV, _divide))
for _n, _p in (('add', _add), ('sub', _subtract), ('mul', _multiply), ('div', _divide)):
    ARRAY_ROUTES[_n] = _p


def _float_valued(x):
    v = primal_value(x)
    return v.__class__ is float or getattr(getattr(v, 'dtype', None), 'kind', None) == 'f'


def _dpow_dx(x, y, out):
    yv = primal_value(y)
    if _np.ndim(yv) == 0 and not isinstance(y, Perturbed) and yv == 0:
        return 0.0
    if yv.__class__ in (int, float) and yv == 2 and _float_valued(x):
        return y * x                  # (x ** 2: x ** 1.0 is x, one application fewer)
    return y * power(x, y - 1.0)     # y - 1.0: an integer x to the power -1 is not an integer


def _dpow_dy(x, y, out):
    xv = primal_value(x)
    safe = where(xv == 0, 1.0, x) if _np.any(xv == 0) else x
    return where(xv == 0, 0.0, log(safe) * out)


def _power_plain(x, y):
    with _np.errstate(divide='ignore', invalid='ignore'):
        return _np.power(x, y)


power = _elementwise2('power', _power_plain, _scalar.pow, _dpow_dx, _dpow_dy)
for _prim, _npfn in _registry.ELEMENTWISE:
    if len(_prim.partials) == 2:
        globals()[_npfn.__name__] = _registry.export(
            _elementwise2(_npfn.__name__, _npfn, _prim.lifted, *_prim.partials), 'nestad.numpy')




def _tie(a, b):
    a, b = primal_value(a), primal_value(b)
    return _np.where(a > b, 1.0, _np.where(a < b, 0.0, 0.5))


maximum = _elementwise2('maximum', _np.maximum, _scalar.maximum,
                        lambda x, y, out: _tie(x, y), lambda x, y, out: _tie(y, x))
minimum = _elementwise2('minimum', _np.minimum, _scalar.minimum,
                        lambda x, y, out: _tie(y, x), lambda x, y, out: _tie(x, y))


def _logistic(z):
    """1 / (1 + exp(-z)), each side by the formula whose exponential cannot overflow (the
    other side's argument is replaced by 0, so its infinities reach no derivative)."""
    zv = primal_value(z)
    up = zv >= 0
    if not is_tracer(up) and _np.all(up):
        return reciprocal(1.0 + exp(-z))
    e = exp(where(up, 0.0, z))
    return where(up, reciprocal(1.0 + exp(-where(up, z, 0.0))), e * reciprocal(1.0 + e))


# the partials exp(x - out) lost the digits of x - out, which out's rounding decides once
# x and y are far apart (1e-3 relative in the second derivative at x - y = 29)
logaddexp = _elementwise2('logaddexp', _np.logaddexp, None,
                          lambda x, y, out: _logistic(x - y), lambda x, y, out: _logistic(y - x))
_mod = _define('mod', _np.mod,
               jvps=(_jvp2(lambda t, x, y, out: t)[0],
                     _jvp2(lambda t, x, y, out: -floor_divide(x, y) * t)[1]),
               vjps=(lambda g, x, y, out: sum_to(g, _shape(x)),
                     lambda g, x, y, out: sum_to(-floor_divide(x, y) * g, _shape(y))))
mod = remainder = _binary_public('mod', _mod, _ieee(_scalar.MOD, _mod))
_UFUNC_PRIMITIVES.update({_np.add: add, _np.subtract: subtract, _np.multiply: multiply,
                          _np.true_divide: divide, _np.negative: negative, _np.power: power})
