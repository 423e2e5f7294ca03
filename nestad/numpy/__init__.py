"""``import nestad.numpy as np``: numpy functions that differentiate, in every mode.

Each primitive is defined once with its JVP (forward) and VJP (reverse) rules beside it,
written with the functions of this module so that rules nest (Hessians of array code).
Rules address primal axes from the right, so a tangent may carry leading batch axes.

Plain numpy calls on nestad values (``numpy.sin(x)``, ``numpy.sum(x)``, ``a @ x``) land
here through ``__array_ufunc__``/``__array_function__``; an unsupported numpy function
raises a TypeError naming it rather than dropping the derivative.

Numpy names not listed here are not differentiable by nestad; numpy's constants and
dtypes (``pi``, ``float64``...) and array constructors on plain data are re-exported.
"""
import builtins
import math as _math

import numpy as _np
from numpy import (e, euler_gamma, float32, float64, inf, int32, int64, nan, ndarray,  # noqa: F401
                   newaxis, pi, arange, eye, identity, zeros, ones, full, empty,
                   isnan, isfinite, isinf, allclose, isclose, array_equal, shape, ndim,
                   size, result_type)

from .. import primitives as _scalar
from .. import registry as _registry
from ..arrays import ArrayPrimitive, apply, is_array, subclass_error
from ..errors import InvalidInputError
from ..lifting import ARRAY_ROUTES, lift2 as _lift2
from ..tracer import SIMPLIFY as _SIMPLIFY, UFUNC_PRIMITIVES as _UFUNC_PRIMITIVES, is_tracer
from ..tracer import Tracer as _Tracer, producer as _producer
from ..values import Batched as _Batched, Perturbed, primal_value

try:                                            # numpy >= 2.0
    from numpy.lib.array_utils import normalize_axis_index as _axis_index, \
        normalize_axis_tuple as _axis_tuple
except ImportError:                             # pragma: no cover
    from numpy.core.multiarray import normalize_axis_index as _axis_index
    from numpy.core.numeric import normalize_axis_tuple as _axis_tuple


def _shape(x):
    if x.__class__ is _np.ndarray:
        return x.shape
    x = primal_value(x)
    if x.__class__ is _Batched:       # a member's shape (not through numpy's protocol)
        return _shape(x.primal)[1:]
    return _np.shape(x)


def _ndim(x):
    if x.__class__ is _np.ndarray:
        return x.ndim
    x = primal_value(x)
    if x.__class__ is _Batched:
        return _ndim(x.primal) - 1
    return _np.ndim(x)


def _nbatch(t, x):
    """Number of leading batch axes of tangent ``t`` of a primal ``x``."""
    return _ndim(t) - _ndim(x)


def _neg_axes(axis, ndim):
    """``axis`` (None, int or tuple) as a tuple of negative axes of an ndim-array."""
    if axis is None:
        return tuple(range(-ndim, 0))
    if ndim == 0 and axis in (0, -1):
        return ()          # numpy reduces a 0-d array over axis 0 or -1 as over no axis
    if isinstance(axis, (tuple, list)):
        return tuple(sorted((a % ndim) - ndim for a in axis))
    return ((axis % ndim) - ndim,)


def _define(name, plain, jvps=None, vjps=None, jvp_joint=None):
    prim = ArrayPrimitive(name, plain, jvps, vjps, jvp_joint)

    def lifted(*args, **params):
        return apply(prim, args, params)
    lifted.__name__ = name
    prim.lifted = lifted
    return lifted


# ---------------------------------------------------------------- shape plumbing

def _sum_to_plain(x, shape):
    xs = _np.shape(x)
    if xs == tuple(shape):
        return x
    lead = len(xs) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and xs[lead + i] != 1)
    return _np.reshape(_np.sum(x, axis=axes), shape)


def _sum_to_jvp(t, x, out, shape):
    # Sum the same axes of the tangent, counted after its batch axes.
    nb = _nbatch(t, x)
    xs = _shape(x)
    lead = len(xs) - len(shape)
    axes = tuple(range(nb, nb + lead)) + tuple(
        nb + lead + i for i, s in enumerate(shape) if s == 1 and xs[lead + i] != 1)
    r = _sum(t, axis=axes, keepdims=True) if axes else t
    return reshape(r, _shape(t)[:nb] + tuple(shape))


# sum_to: sum a broadcast value back to ``shape`` (the adjoint of broadcast_to).
_sum_to = _define(
    'sum_to', _sum_to_plain,
    jvps=(_sum_to_jvp,),
    vjps=(lambda g, x, out, shape: broadcast_to(g, _shape(x)),))


def sum_to(x, shape):
    x, shape = _as_operand(x), tuple(shape)
    return x if _shape(x) == shape else _sum_to(x, shape=shape)


def _broadcast_to_jvp(t, x, out, shape):
    # New leading axes of the result go after the tangent's batch axes.
    nb = _nbatch(t, x)
    missing = len(shape) - _ndim(x)
    if nb and missing:
        t = reshape(t, _shape(t)[:nb] + (1,) * missing + _shape(x))
    return broadcast_to(t, _shape(t)[:nb] + tuple(shape))


_broadcast_to = _define(
    'broadcast_to', lambda x, shape: _np.broadcast_to(x, shape),
    jvps=(_broadcast_to_jvp,),
    vjps=(lambda g, x, out, shape: sum_to(g, _shape(x)),))


def broadcast_to(x, shape):
    x, shape = _as_operand(x), tuple(shape)
    return x if _shape(x) == shape else _broadcast_to(x, shape=shape)


def _align(t, x, out):
    """Tangent ``t`` of argument ``x`` with singleton axes inserted after its batch axes,
    so that it broadcasts against the output elementwise (batch axes stay leading)."""
    missing = _ndim(out) - _ndim(x)
    nb = _nbatch(t, x)
    if missing <= 0 or nb == 0:
        return t
    return reshape(t, _shape(t)[:nb] + (1,) * missing + _shape(x))


def _tangent_to(term, t, x, out):
    """A JVP term for argument ``x`` broadcast to the output's shape (keeping batch axes)."""
    target = _shape(t)[:_nbatch(t, x)] + _shape(out)
    return term if _shape(term) == target else broadcast_to(term, target)


def _jvp2(rule):
    """An elementwise binary JVP term, with the tangent aligned to the output first."""
    def jvp_x(t, x, y, out, **params):
        return _tangent_to(rule(_align(t, x, out), x, y, out, **params), t, x, out)

    def jvp_y(t, x, y, out, **params):
        return _tangent_to(rule(_align(t, y, out), x, y, out, **params), t, y, out)
    return jvp_x, jvp_y


_reshape = _define(
    'reshape', lambda x, shape: _np.reshape(x, shape),
    jvps=(lambda t, x, out, shape: reshape(t, _shape(t)[:_nbatch(t, x)] + _shape(out)),),
    vjps=(lambda g, x, out, shape: reshape(g, _shape(x)),))


def reshape(x, shape, *more):
    x = _as_operand(x)
    if more or isinstance(shape, int):
        shape = ((shape,) if isinstance(shape, int) else tuple(shape)) + more
    shape = tuple(shape)
    return x if _shape(x) == shape else _reshape(x, shape=shape)


def ravel(x):
    return reshape(x, (-1,))


def _transpose_jvp(t, x, out, axes):
    nb = _nbatch(t, x)
    return _transpose(t, axes=tuple(range(nb)) + tuple(nb + a for a in axes))


_transpose = _define(
    'transpose', lambda x, axes: _np.transpose(x, axes),
    jvps=(_transpose_jvp,),
    vjps=(lambda g, x, out, axes: _transpose(g, axes=tuple(_np.argsort(axes))),))


def transpose(x, axes=None):
    x = _as_operand(x)
    n = _ndim(x)
    if axes is None:
        axes = tuple(reversed(range(n)))
    else:
        axes = tuple(_axis_index(a, n) for a in axes)
        if sorted(axes) != list(range(n)):
            raise ValueError("axes don't match array")
    return x if axes == tuple(range(n)) else _transpose(x, axes=axes)


def swapaxes(x, axis1, axis2):
    x = _as_operand(x)
    n = _ndim(x)
    axes = list(range(n))
    axis1, axis2 = _axis_index(axis1, n), _axis_index(axis2, n)
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(x, axes)


def moveaxis(x, source, destination):
    x = _as_operand(x)
    n = _ndim(x)
    source, destination = _axis_index(source, n), _axis_index(destination, n)
    order = [a for a in range(n) if a != source]
    order.insert(destination, source)
    return transpose(x, order)


def expand_dims(x, axis):
    x = _as_operand(x)
    s = list(_shape(x))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    for a in sorted(_axis_tuple(axes, len(s) + len(axes))):    # numpy's errors for bad axes
        s.insert(a, 1)
    return reshape(x, s)


def squeeze(x, axis=None):
    x = _as_operand(x)
    s = _shape(x)
    if axis is None:
        return reshape(x, [d for d in s if d != 1])
    if not s and isinstance(axis, int) and axis in (0, -1):
        return x                          # (numpy squeezes a 0-d array over axis 0 or -1)
    axes = set(_axis_tuple(axis, len(s)))
    for a in axes:
        if s[a] != 1:
            raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                             f"one (axis {a} has size {s[a]})")
    return reshape(x, [d for i, d in enumerate(s) if i not in axes])


def atleast_1d(x):
    x = _as_operand(x)
    return reshape(x, (1,)) if _ndim(x) == 0 else x


def atleast_2d(x):
    x = _as_operand(x)
    return reshape(x, (1,) * (2 - _ndim(x)) + _shape(x)) if _ndim(x) < 2 else x


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


def _python_scalar(x):
    """True if the value under x's perturbations is a Python float or int (numpy's float64
    is one), or a traced one: the scalar primitives take it (staged code then applies the
    same rules as eager code, which round differently from the array ones).  Arrays and
    other numpy scalars (float32) go to the array primitives, which keep numpy's dtypes."""
    v = primal_value(x)
    return isinstance(v, (int, float)) or v.__class__ is _Tracer and v.dtype == _np.float64


def _as_operand(x):
    """Lists and tuples (possibly holding nestad numbers) become arrays."""
    if isinstance(x, (list, tuple)):
        return array(x)
    return x


def _plain_operand(x, name):
    """x for a numpy function called directly (no primitive, which would check it)."""
    if x.__class__ is not _np.ndarray and isinstance(x, _np.ndarray):
        raise subclass_error(x, f"nestad.numpy.{name}")
    return x


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
                return _batch.constant(npfn, args, kw)
        return npfn(*args, **kw)
    public.__name__ = npfn.__name__
    return public


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


# ---------------------------------------------------------------- selection

# _where(cond, x, y): cond carries no derivative (``where`` passes its primal value), so
# only x and y have rules.  cond is an argument, not a parameter, so that it may be traced.
_where_jvp_x = _jvp2(lambda t, x, y, out, cond: _where(cond, t, 0.0))[0]
_where_jvp_y = _jvp2(lambda t, x, y, out, cond: _where(cond, 0.0, t))[1]
_where = _define(
    'where', lambda cond, x, y: _np.where(cond, x, y),
    jvps=(None, lambda t, cond, x, y, out: _where_jvp_x(t, x, y, out, cond=cond),
          lambda t, cond, x, y, out: _where_jvp_y(t, x, y, out, cond=cond)),
    vjps=(None, lambda g, cond, x, y, out: sum_to(_where(cond, g, 0.0), _shape(x)),
          lambda g, cond, x, y, out: sum_to(_where(cond, 0.0, g), _shape(y))))


def where(condition, x=_np._NoValue, y=_np._NoValue):
    """Elementwise choice; the condition is read from primal values (no derivative).
    With the condition alone, numpy's indices of its nonzero entries."""
    if x is _np._NoValue and y is _np._NoValue:
        return _np.nonzero(primal_value(_as_operand(condition)))
    if x is _np._NoValue or y is _np._NoValue:
        raise ValueError("either both or neither of x and y should be given")
    cond = primal_value(_as_operand(condition))
    if not is_tracer(cond) and cond.__class__ is not _Batched:
        cond = _np.asarray(cond, dtype=bool)
    return _where(cond, _as_operand(x), _as_operand(y))


ARRAY_ROUTES['select'] = where


def clip(x, a_min, a_max):
    x, a_min, a_max = _as_operand(x), _as_operand(a_min), _as_operand(a_max)
    out = x
    if a_min is not None:
        out = where(primal_value(out) < primal_value(a_min), a_min, out)
    if a_max is not None:
        out = where(primal_value(out) > primal_value(a_max), a_max, out)
    return out


def _full_index(index, ndim):
    """``index`` as a tuple with any Ellipsis spelled out for an ndim-array, so that extra
    trailing axes (batch axes moved to the end) are left alone by it."""
    index = index if isinstance(index, tuple) else (index,)
    if not builtins.any(i is Ellipsis for i in index):
        return index
    used = builtins.sum(1 if i is not None and not (isinstance(i, _np.ndarray) and i.dtype == bool)
                        else (i.ndim if i is not None else 0) for i in index if i is not Ellipsis)
    k = [j for j, i in enumerate(index) if i is Ellipsis][0]
    return index[:k] + (slice(None),) * (ndim - used) + index[k + 1:]


def _moveaxis_n(t, nb, last):
    """Move the first nb axes to the end (last=True) or the last nb axes to the front."""
    n = _ndim(t)
    axes = list(range(nb, n)) + list(range(nb)) if last else list(range(n - nb, n)) + list(range(n - nb))
    return transpose(t, axes)


def _is_basic(index):
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, _np.integer, slice)) for p in parts)


def _scatter_plain(g, index, shape):
    """zeros(shape) with g added at ``index`` (entries hit twice get both)."""
    dtype = _np.result_type(g, float)
    if _is_basic(index):                 # a basic index never selects an entry twice
        out = _np.zeros(shape, dtype=dtype)
        out[index] = g
        return out
    size = int(_np.prod(shape))
    flat = _np.arange(size).reshape(shape)[index]
    g = _np.broadcast_to(g, flat.shape)
    return _np.bincount(flat.ravel(), weights=g.ravel(), minlength=size).reshape(shape).astype(dtype)


# Under batch axes, index (or scatter) with the batch axes moved to the end, where no
# index can touch or displace them, then move them back to the front.
def _batch_last(fn, t, nb, index, ndim):
    """fn(t, index, batch) for a tangent t with nb leading batch axes: they are moved to the
    end, where ``index`` (spelled out for an ndim-array) cannot touch or displace them, and
    moved back to the front of the result."""
    if nb == 0:
        return fn(t, index, ())
    r = fn(_moveaxis_n(t, nb, last=True), _full_index(index, ndim), _shape(t)[:nb])
    return _moveaxis_n(r, nb, last=False)


def _front_index(index, nb, ndim):
    """A basic index (ints, slices, None, Ellipsis) for an ndim-array, under nb leading
    batch axes that it leaves in front; None for an advanced index (which may move
    axes: those keep ``_batch_last``).  Indexing in place keeps a batched tangent
    contiguous, where moving its axes last and back made every later pass over it (and
    the scatter's copy) a strided one."""
    if not _is_basic(index):
        return None
    return (slice(None),) * nb + _full_index(index, ndim)


def _getitem_jvp(t, x, out, index):
    nb = _nbatch(t, x)
    front = _front_index(index, nb, _ndim(x)) if nb else None
    if front is not None:
        return _getitem(t, index=front)
    return _batch_last(lambda t, i, batch: _getitem(t, index=i), t, nb, index, _ndim(x))


def _scatter_jvp(t, g, out, index, shape):
    nb = _nbatch(t, g)
    front = _front_index(index, nb, len(shape)) if nb else None
    # (g may be broadcast into the indexed entries, x.at[index].add(v)'s jvp: then its
    # batch axes would meet the entries' axes, and it keeps _batch_last)
    if front is not None and _shape(t)[nb:] == _indexed_shape(tuple(shape), index):
        return _scatter(t, index=front, shape=_shape(t)[:nb] + tuple(shape))
    return _batch_last(lambda t, i, batch: _scatter(t, index=i, shape=tuple(shape) + batch),
                       t, nb, index, len(shape))


# _scatter: the adjoint of indexing (adds g into zeros of ``shape`` at ``index``).
_scatter = _define('scatter_add', _scatter_plain, jvps=(_scatter_jvp,),
                   vjps=(lambda h, g, out, index, shape: _getitem(h, index=index),))

_getitem = _define('getitem', lambda x, index: x[index], jvps=(_getitem_jvp,),
                   vjps=(lambda g, x, out, index: _scatter(g, index=index, shape=_shape(x)),))


def _plain_index(index):
    """Indices may hold nestad numbers only as plain values (an index has no derivative)."""
    if isinstance(index, tuple):
        return tuple(_plain_index(i) for i in index)
    if index.__class__ is _Batched:
        raise InvalidInputError(
            "an index batched by nestad.vmap (x[i] with i mapped) is not supported yet: each member "
            "would select other entries. Select with a one-hot product (x @ (arange(n) == i)) or "
            "nestad.numpy.where, or loop over the indices outside vmap.")
    if isinstance(index, Perturbed):
        raise InvalidInputError("an array index cannot carry a perturbation")
    if is_tracer(index):
        from ..tracer import StagingError, _refuse_concrete
        if index.var.scalar:
            _refuse_concrete("using as an index (range(), a list index, a shape)", index)
        raise StagingError(
            "indexing with a traced array: the index (and so the result's shape) depends on "
            "the data, which a staged program cannot have. Use nestad.numpy.where(mask, x, "
            "0.0) to keep shapes fixed, or pass the index as a static argument.")
    if isinstance(index, list):
        return _np.asarray(index)
    return index


def getitem(x, index):
    return _getitem(_as_operand(x), index=_plain_index(index))


# ---------------------------------------------------------------- functional updates

def _indexed_shape(shape, index):
    """The shape of x[index] for an x of ``shape`` (indexing a broadcast scalar, no copy of x)."""
    return _np.broadcast_to(_np.zeros(()), shape)[index].shape


def _winners(index, shape):
    """For x[index] = v: where an entry of (broadcast) v is the one that stays.  numpy's
    assignment keeps the last of repeated entries of an advanced index.  None for a basic
    index, which never repeats an entry."""
    if _is_basic(index):
        return None
    ishape = _indexed_shape(shape, index)
    ids = _np.arange(int(_np.prod(ishape))).reshape(ishape)
    last = _np.full(shape, -1)
    last[index] = ids
    return last[index] == ids


def _set_plain(x, v, index):
    out = _np.array(x, dtype=_np.result_type(x, v))     # promoted: v is never truncated
    out[index] = v
    return out


def _set_vjp_v(g, x, v, out, index):
    # the entries of v that were written (the last of repeated ones) get the sensitivity
    won = _winners(index, _shape(x))
    gv = _getitem(g, index=index)
    return sum_to(gv if won is None or won.all() else where(won, gv, 0.0), _shape(v))


# _set: x with x[index] = v, as a new array (x.at[index].set(v)).
_set = _define(
    'at.set', _set_plain,
    jvps=(lambda t, x, v, out, index: _batch_last(
              lambda t, i, batch: _set(t, 0.0, index=i), t, _nbatch(t, x), index, _ndim(x)),
          lambda t, x, v, out, index: _batch_last(
              lambda t, i, batch: _set(_np.zeros(_shape(x) + batch), t, index=i),
              t, _nbatch(t, v), index, _ndim(x))),
    vjps=(lambda g, x, v, out, index: _set(g, 0.0, index=index), _set_vjp_v))


def _add_at_plain(x, v, index):
    out = _np.array(x, dtype=_np.result_type(x, v))
    _np.add.at(out, index, v)                            # repeated entries accumulate
    return out


# _add_at: x with v added at index, repeats accumulating (x.at[index].add(v), numpy.add.at).
_add_at = _define(
    'at.add', _add_at_plain,
    jvps=(lambda t, x, v, out, index: t,
          lambda t, x, v, out, index: _scatter_jvp(t, v, None, index, _shape(x))),
    vjps=(lambda g, x, v, out, index: g,
          lambda g, x, v, out, index: sum_to(_getitem(g, index=index), _shape(v))))


class _At:
    """``x.at[index]`` as in JAX: updates that return a new array (nestad arrays cannot be
    assigned to: their derivative needs the old values).  Differentiable in every mode with
    respect to x and the values."""
    __slots__ = ('x',)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, index):
        return _AtIndex(self.x, _plain_index(index))


class _AtIndex:
    __slots__ = ('x', 'index')

    def __init__(self, x, index):
        self.x, self.index = x, index

    def get(self):
        """x[index]."""
        return _getitem(self.x, index=self.index)

    def set(self, values):
        """x with x[index] = values (the last of repeated entries stays, as in numpy)."""
        return _set(self.x, _as_operand(values), index=self.index)

    def add(self, values):
        """x with values added at index; repeated entries accumulate (numpy.add.at)."""
        return _add_at(self.x, _as_operand(values), index=self.index)

    def multiply(self, values):
        """x with x[index] multiplied by values; an index may not repeat an entry."""
        won = _winners(self.index, _shape(self.x))
        if won is not None and not won.all():
            raise InvalidInputError("x.at[index].multiply(values): the index repeats an entry; "
                                    "multiply the repeated values together first")
        ones = _np.ones(_shape(self.x), dtype=_np.result_type(primal_value(self.x), 1.0))
        return self.x * _set(ones, _as_operand(values), index=self.index)


def at(x):
    """``at(x)[index].set(v)`` (``.add``, ``.multiply``, ``.get``): the functional update of
    ``x.at[index]`` for any array, plain ndarrays included (which have no ``.at``)."""
    x = _as_operand(x)
    if not (is_array(x) or isinstance(x, _np.ndarray)):
        raise InvalidInputError(f"nestad.numpy.at needs an array, not a {type(x).__name__}")
    return _At(x)


def copy(x):
    """numpy.copy.  nestad arrays are never modified in place, so a nestad value is its own copy."""
    x = _as_operand(x)
    return x if isinstance(x, Perturbed) else _np.copy(_plain_operand(x, 'copy'))


def _astype_plain(x, dtype):
    return x.astype(dtype) if isinstance(x, _np.ndarray) else _np.dtype(dtype).type(x)


def _cast(x, dtype):
    return x if _np.result_type(primal_value(x)) == dtype else _astype(x, dtype=dtype)


# _astype: a change of float precision; the tangent follows the new dtype, the cotangent
# goes back to the argument's float dtype (an integer argument's stays float).
_astype = _define(
    'astype', _astype_plain,
    jvps=(lambda t, x, out, dtype: _cast(t, dtype),),
    vjps=(lambda g, x, out, dtype: _cast(g, _np.result_type(primal_value(x)))
          if _np.result_type(primal_value(x)).kind == 'f' else g,))


def astype(x, dtype, copy=True):
    """x as another dtype.  A float dtype (float32, float64...) casts the value and its
    derivative.  An integer or boolean dtype gives numpy's values without derivative: the
    cast is piecewise constant (as floor is), so its derivative is zero wherever it exists.
    A complex dtype is refused (nestad's derivatives are real)."""
    x = _as_operand(x)
    if is_tracer(x):                     # a staged cast (no derivative to keep or drop)
        return _cast(x, _np.dtype(dtype))
    if not isinstance(x, Perturbed):
        return _np.asarray(_plain_operand(x, 'astype')).astype(dtype, copy=copy)
    dtype = _np.dtype(dtype)
    if dtype.kind in 'biu':
        return astype(primal_value(x), dtype)
    if dtype.kind != 'f':
        raise InvalidInputError(
            f"astype({dtype}) on a nestad value would drop its derivative (nestad's derivatives "
            "are real). Keep a float dtype, or use nestad.primal_value(x).astype(...) if you want "
            "the values without the derivative.")
    return _cast(x, dtype)


# ---------------------------------------------------------------- reductions

def _keep(g, x, axis, keepdims):
    """g of a reduction over ``axis``, reshaped (axes kept as 1) to broadcast against x."""
    if keepdims:
        return g
    s = list(_shape(x))
    axes = _neg_axes(axis, len(s))
    for a in axes:
        s[a] = 1
    nb = _ndim(g) - (len(s) - len(axes))
    return reshape(g, _shape(g)[:nb] + tuple(s))


_sum = _define(
    'sum', lambda x, axis, keepdims: _np.sum(x, axis=axis, keepdims=keepdims),
    jvps=(lambda t, x, out, axis, keepdims: _sum(t, axis=_neg_axes(axis, _ndim(x)), keepdims=keepdims),),
    vjps=(lambda g, x, out, axis, keepdims: broadcast_to(_keep(g, x, axis, keepdims), _shape(x)),))


def sum(x, axis=None, keepdims=False):   # noqa: A001
    return _sum(_as_operand(x), axis=_norm_axis(axis), keepdims=keepdims)


def _norm_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def mean(x, axis=None, keepdims=False):
    x, axis = _as_operand(x), _norm_axis(axis)
    if not isinstance(x, Perturbed):
        return _np.mean(_plain_operand(x, 'mean'), axis=axis, keepdims=keepdims)
    if _ndim(x) == 0 and axis is not None:
        _np.mean(primal_value(x), axis=axis)   # numpy's AxisError (its sum takes axis 0 of a 0-d array)
    if _np.result_type(primal_value(x)).kind in 'biu':      # numpy sums integers in float64
        x = multiply(x, 1.0)
    n = _np.prod([_shape(x)[a] for a in _neg_axes(axis, _ndim(x))], dtype=float)
    return sum(x, axis, keepdims) / float(n)    # a Python float keeps float32 float32


def _exclusive_cumprod(y):
    """prod_{j<i} y_j along the last axis, without division.  Plain values use numpy's
    cumprod; perturbed ones a log-depth scan of lifted multiplies, so that derivatives of
    every order are again products of entries (exact at and near zeros)."""
    n = _shape(y)[-1]
    if n == 0:                     # nothing to multiply (an empty axis)
        return y
    if not isinstance(y, Perturbed):
        return _np.concatenate([_np.ones_like(y[..., :1]), _np.cumprod(y[..., :n - 1], axis=-1)],
                               axis=-1)
    p, d = y, 1
    while d < n:
        pad = _np.ones(_shape(y)[:-1] + (d,))
        p = p * concatenate([pad, p[..., :n - d]], axis=-1)
        d *= 2
    return concatenate([_np.ones(_shape(y)[:-1] + (1,)), p[..., :n - 1]], axis=-1)


def _prod_others(x, axis):
    """For each entry, the product of the other entries along ``axis``: the exclusive
    prefix product times the exclusive suffix product.  Not prod / x, which divides 0 by 0
    at zeros, cancels catastrophically in its derivatives near them (the Hessian at
    [1e-16, 1, 1]) and is 0 where prod underflows (at [1e-200, 1e-200, 3])."""
    nd_ = _ndim(x)
    reduced = [a % nd_ for a in _neg_axes(axis, nd_)]
    kept = [a for a in range(nd_) if a not in reduced]
    perm = kept + reduced
    xs = _shape(x)
    # plain x (a first derivative): numpy's own functions, without the lifted calls
    tr, rs = (_np.transpose, _np.reshape) if not isinstance(x, Perturbed) else (transpose, reshape)
    y = rs(tr(x, perm), tuple(xs[a] for a in kept) + (int(_np.prod([xs[a] for a in reduced])),))
    if isinstance(x, Perturbed):       # prefix and (reversed) suffix products in one scan
        both = _exclusive_cumprod(stack([y, y[..., ::-1]]))
        others = both[0] * both[1][..., ::-1]
    else:
        others = _exclusive_cumprod(y) * _exclusive_cumprod(y[..., ::-1])[..., ::-1]
    others = rs(others, tuple(xs[a] for a in perm))
    return tr(others, tuple(_np.argsort(perm)))


_prod = _define(
    'prod', lambda x, axis, keepdims: _np.prod(x, axis=axis, keepdims=keepdims),
    jvps=(lambda t, x, out, axis, keepdims: _sum(
        t * _prod_others(x, axis), axis=_neg_axes(axis, _ndim(x)), keepdims=keepdims),),
    vjps=(lambda g, x, out, axis, keepdims: broadcast_to(
        _keep(g, x, axis, keepdims), _shape(x)) * _prod_others(x, axis),))


def prod(x, axis=None, keepdims=False):
    return _prod(_as_operand(x), axis=_norm_axis(axis), keepdims=keepdims)


def _extreme(name, npfn):
    def share(x, out, axis, keepdims):
        # the derivative goes to the extreme entries, split equally between ties
        xv, ov = primal_value(x), primal_value(out)
        ov = ov if keepdims else _np.expand_dims(ov, _neg_axes(axis, _np.ndim(xv)))
        mask = _np.where(xv == ov, 1.0, 0.0)        # numpy calls: they stage too
        return mask / _np.sum(mask, axis=_neg_axes(axis, _np.ndim(xv)), keepdims=True)
    prim = _define(
        name, lambda x, axis, keepdims: npfn(x, axis=axis, keepdims=keepdims),
        jvps=(lambda t, x, out, axis, keepdims: _sum(
            t * share(x, out, axis, keepdims), axis=_neg_axes(axis, _ndim(x)), keepdims=keepdims),),
        vjps=(lambda g, x, out, axis, keepdims: broadcast_to(
            _keep(g, x, axis, keepdims), _shape(x)) * share(x, out, axis, keepdims),))

    def public(x, axis=None, keepdims=False):
        return prim(_as_operand(x), axis=_norm_axis(axis), keepdims=keepdims)
    public.__name__ = name
    return public


max = amax = _extreme('max', _np.max)   # noqa: A001
min = amin = _extreme('min', _np.min)   # noqa: A001


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) computed stably (the max is shifted out as a constant)."""
    x = _as_operand(x)
    m = _np.max(primal_value(x), axis=_norm_axis(axis), keepdims=True)
    m = _np.where(_np.isfinite(m), m, 0.0)
    out = log(sum(exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else squeeze(out, axis=_neg_axes(_norm_axis(axis), _ndim(x)))


# ---------------------------------------------------------------- products

def _matmul_jvp(k):
    """JVP for operand k of matmul: promote 1-D operands to matrices as matmul does, give
    the tangent the result's stack rank (singletons after its batch axes), multiply, and
    drop the promoted axes again."""
    def jvp(t, a, b, out):
        x, other = (a, b) if k == 0 else (b, a)
        if _ndim(x) == 1 and _ndim(t) > 1 and _ndim(other) <= 2:
            # A batched tangent of a vector (a Hessian's or Jacobian's basis directions):
            # the directions are the rows of one matrix product, t @ b or t @ a^T (one
            # GEMM), not a stack of one-row (or one-column) products, which numpy loops
            # over (600 ms against 30 ms at n = 1000).
            return matmul(t, other if k == 0 or _ndim(other) == 1 else swapaxes(other, -1, -2))
        a2 = expand_dims(a, -2) if _ndim(a) == 1 else a
        b2 = expand_dims(b, -1) if _ndim(b) == 1 else b
        x, x2 = (a, a2) if k == 0 else (b, b2)
        nb = _nbatch(t, x)
        t2 = reshape(t, _shape(t)[:nb] + _shape(x2))
        missing = builtins.max(_ndim(a2), _ndim(b2)) - _ndim(x2)
        if nb and missing > 0:
            t2 = reshape(t2, _shape(t)[:nb] + (1,) * missing + _shape(x2))
        r = matmul(t2, b2) if k == 0 else matmul(a2, t2)
        if _ndim(b) == 1:
            r = squeeze(r, -1)
        if _ndim(a) == 1:
            r = squeeze(r, -2 if _ndim(b) != 1 else -1)
        return r
    return jvp


def _as_matrices(g, a, b):
    """Promote 1-D operands (and the sensitivity) to matrices, as matmul does."""
    a2 = expand_dims(a, 0) if _ndim(a) == 1 else a
    b2 = expand_dims(b, -1) if _ndim(b) == 1 else b
    g2 = g
    if _ndim(b) == 1:
        g2 = expand_dims(g2, -1)
    if _ndim(a) == 1:
        g2 = expand_dims(g2, -2)
    return g2, a2, b2


# A vector times a matrix (or a matrix times a vector) has the adjoints of a matrix-vector
# product and an outer product, written as such: fewer applications (and no transposed
# stack of 1-row matrices for a per-example gradient under vmap).

def _outer(u, v):
    """u v^T of two vectors.  Under vmap (a per-example weight gradient) one einsum: one
    batched application, where expand_dims, matmul and its outer-product rule made five;
    otherwise a column times a row, which numba's backend compiles (it has no einsum).
    The same numbers either way: a product of one term, no sum."""
    if u.__class__ is _Batched or v.__class__ is _Batched:
        return einsum('i,j->ij', u, v)
    return matmul(expand_dims(u, -1), expand_dims(v, 0))


def _matmul_vjp_a(g, a, b, out):
    if _ndim(a) == 1 and _ndim(b) == 2:
        return matmul(b, g)
    if _ndim(a) == 2 and _ndim(b) == 1:
        return _outer(g, b)
    g2, a2, b2 = _as_matrices(g, a, b)
    return reshape(sum_to(matmul(g2, swapaxes(b2, -1, -2)), _shape(a2)), _shape(a))


def _matmul_vjp_b(g, a, b, out):
    if _ndim(a) == 1 and _ndim(b) == 2:
        return _outer(a, g)
    if _ndim(a) == 2 and _ndim(b) == 1:
        return matmul(g, a)
    g2, a2, b2 = _as_matrices(g, a, b)
    return reshape(sum_to(matmul(swapaxes(a2, -1, -2), g2), _shape(b2)), _shape(b))


_matmul = _define('matmul', _np.matmul, jvps=(_matmul_jvp(0), _matmul_jvp(1)),
                  vjps=(_matmul_vjp_a, _matmul_vjp_b))


def matmul(a, b):
    return _matmul(_as_operand(a), _as_operand(b))


def _product_rule(mul_rule, rule):
    """dot and inner multiply when an operand is 0-d; otherwise ``rule`` applies."""
    def either(s, a, b, out):
        return (mul_rule if _ndim(a) == 0 or _ndim(b) == 0 else rule)(s, a, b, out)
    return either


def _inner_jvp_b(t, a, b, out):
    # inner(a, t) puts t's batch axes after a's leading axes: move them to the front
    nb, na = _nbatch(t, b), _ndim(a) - 1
    r = _inner(a, t)
    return transpose(r, list(range(na, na + nb)) + list(range(na)) + list(range(na + nb, _ndim(r))))


def _inner_vjp(k):
    # as matrices: out (A, B) = a (A, n) b (B, n)^T
    def vjp(g, a, b, out):
        n = _shape(a)[-1]
        g2 = reshape(g, (int(_np.prod(_shape(a)[:-1])), int(_np.prod(_shape(b)[:-1]))))
        if k == 0:
            return reshape(matmul(g2, reshape(b, (_shape(g2)[1], n))), _shape(a))
        return reshape(matmul(transpose(g2), reshape(a, (_shape(g2)[0], n))), _shape(b))
    return vjp


_inner = _define('inner', _np.inner,
                 jvps=(_product_rule(_MULTIPLY_JVPS[0], lambda t, a, b, out: _inner(t, b)),
                       _product_rule(_MULTIPLY_JVPS[1], _inner_jvp_b)),
                 vjps=(_product_rule(_MULTIPLY_VJPS[0], _inner_vjp(0)),
                       _product_rule(_MULTIPLY_VJPS[1], _inner_vjp(1))))


def inner(a, b):
    """numpy.inner: the sum over the last axes; shape a.shape[:-1] + b.shape[:-1]."""
    return _inner(_as_operand(a), _as_operand(b))


def _vdot_jvp(k):
    def jvp(t, a, b, out):
        x, other = (a, b) if k == 0 else (b, a)
        return matmul(reshape(t, _shape(t)[:_nbatch(t, x)] + (int(_np.prod(_shape(x))),)), ravel(other))
    return jvp


# vdot: numpy.vdot's own values (vdot([-0.], [1.]) is +0.0, dot's is -0.0)
_vdot = _define('vdot', _np.vdot, jvps=(_vdot_jvp(0), _vdot_jvp(1)),
                vjps=(lambda g, a, b, out: reshape(g * ravel(b), _shape(a)),
                      lambda g, a, b, out: reshape(g * ravel(a), _shape(b))))


def vdot(a, b):
    """numpy.vdot of real arrays: the sum of products of the flattened operands."""
    return _vdot(_as_operand(a), _as_operand(b))


# ---------------------------------------------------------------- joining

def _concat_jvp(tangents, *xs, out, axis):
    present = [(t, x) for t, x in zip(tangents, xs) if t is not None]
    t0, x0 = present[0]
    batch = _shape(t0)[:_nbatch(t0, x0)]
    full = [t if t is not None else _np.zeros(batch + _shape(x)) for t, x in zip(tangents, xs)]
    ax = (axis % _ndim(xs[0])) - _ndim(xs[0])
    return _concatenate(*full, axis=ax)


def _concat_vjp(k):
    def vjp(g, *xs, out, axis):
        ax = axis % _ndim(xs[0])
        start = builtins.sum(_shape(x)[ax] for x in xs[:k])
        index = (slice(None),) * ax + (slice(start, start + _shape(xs[k])[ax]),)
        return _getitem(g, index=index)
    return vjp


class _ConcatVJPs:
    """vjps[k] for any k (concatenate takes any number of arrays)."""
    def __getitem__(self, k):
        return _concat_vjp(k)


_concatenate = _define('concatenate', lambda *xs, axis: _np.concatenate(xs, axis=axis),
                       vjps=_ConcatVJPs(), jvp_joint=_concat_jvp)


def concatenate(arrays, axis=0):
    arrays = [atleast_1d(_as_operand(a)) for a in arrays]
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    return _concatenate(*arrays, axis=axis)


def stack(arrays, axis=0):
    arrays = [_as_operand(a) for a in arrays]
    n = _ndim(arrays[0]) + 1
    return concatenate([expand_dims(a, axis % n) for a in arrays], axis=axis % n)


def hstack(arrays):
    arrays = [atleast_1d(_as_operand(a)) for a in arrays]
    return concatenate(arrays, axis=0 if _ndim(arrays[0]) == 1 else 1)


def vstack(arrays):
    return concatenate([atleast_2d(_as_operand(a)) for a in arrays], axis=0)


def array(obj, dtype=None):
    """Like numpy.array, but a (nested) list holding nestad numbers becomes a nestad array."""
    if isinstance(obj, Perturbed) or is_tracer(obj):
        return obj
    if isinstance(obj, (list, tuple)) and _holds_perturbed(obj):
        return stack([array(o) if isinstance(o, (list, tuple)) else o for o in obj])
    return _np.array(obj, dtype=dtype)


asarray = array


def _holds_perturbed(obj):
    """Does a (nested) list hold nestad numbers, perturbed or traced (staged code)?"""
    return builtins.any(_holds_perturbed(o) if isinstance(o, (list, tuple))
                        else isinstance(o, Perturbed) or is_tracer(o) for o in obj)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy.diagonal: axis1 and axis2 (the first two by default, as in numpy) are removed
    and the diagonal becomes the last axis."""
    a = _as_operand(a)
    nd_ = _ndim(a)
    if nd_ < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    axis1, axis2 = _axis_index(axis1, nd_), _axis_index(axis2, nd_)
    if axis1 == axis2:
        raise ValueError("axis1 and axis2 cannot be the same")
    a = transpose(a, [i for i in range(nd_) if i not in (axis1, axis2)] + [axis1, axis2])
    rows, cols = _shape(a)[-2:]
    size = builtins.max(0, builtins.min(rows, cols - offset) if offset >= 0
                        else builtins.min(rows + offset, cols))
    i = _np.arange(size)
    return a[..., i + builtins.max(-offset, 0), i + builtins.max(offset, 0)]


def trace(a, offset=0, axis1=0, axis2=1):
    return sum(diagonal(a, offset, axis1, axis2), axis=-1)


def _flip(x, axis):
    """x reversed along a negative axis (batch axes, in front, are untouched)."""
    return _getitem(x, index=(Ellipsis, slice(None, None, -1)) + (slice(None),) * (-axis - 1))


# cumsum: numpy's own values (a triangular matmul would turn an inf into nan in the entries
# before it, since inf * 0 is nan); the adjoint is the reversed cumulative sum.
_cumsum = _define('cumsum', lambda x, axis: _np.cumsum(x, axis=axis),
                  jvps=(lambda t, x, out, axis: _cumsum(t, axis=axis),),
                  vjps=(lambda g, x, out, axis: _flip(_cumsum(_flip(g, axis), axis=axis), axis),))


def cumsum(x, axis=None):
    x = _as_operand(x)
    if axis is None or _ndim(x) == 0:       # (numpy's cumsum of a 0-d array is 1-d)
        x, axis = ravel(x), 0 if axis is None else axis
    return _cumsum(x, axis=(axis % _ndim(x)) - _ndim(x))


# How staged code spells these primitives (nestad.staging.codegen); the others are
# called through their plain implementation.  Elementwise ufuncs are spelled np.<name>.
# (numpy's functions, not operators: on two Python floats an operator gives a Python float,
# which numpy does not promote a float32 array with, numpy.multiply a float64 scalar, as
# eager nestad.numpy gives; and / raises where numpy.true_divide gives inf)
_EXPRESSIONS = {
    'add': 'np.add({0}, {1})', 'subtract': 'np.subtract({0}, {1})',
    'multiply': 'np.multiply({0}, {1})', 'divide': 'np.true_divide({0}, {1})',
    'matmul': '{0} @ {1}', 'getitem': '{0}[{index}]', 'where': 'np.where({0}, {1}, {2})',
    'sum': 'np.sum({0}, axis={axis}, keepdims={keepdims})',
    'prod': 'np.prod({0}, axis={axis}, keepdims={keepdims})',
    'max': 'np.max({0}, axis={axis}, keepdims={keepdims})',
    'min': 'np.min({0}, axis={axis}, keepdims={keepdims})',
    'reshape': 'np.reshape({0}, {shape})', 'transpose': 'np.transpose({0}, {axes})',
    'broadcast_to': 'np.broadcast_to({0}, {shape})',
}
for _qualname, _prim in _registry.PRIMITIVES.items():
    _name = _qualname[len('numpy.'):]
    if _qualname.startswith('numpy.') and _prim.emit is None:
        if _name in _EXPRESSIONS:
            _prim.emit = _EXPRESSIONS[_name]
        elif isinstance(_prim.plain, _np.ufunc) and getattr(_np, _prim.plain.__name__, None) is _prim.plain:
            # every operand (the binary ones were written with their first operand only)
            _operands = ', '.join(f"{{{_k}}}" for _k in range(_prim.plain.nin))
            _prim.emit = f"np.{_prim.plain.__name__}({_operands})"



# Identities applied while tracing (nestad.tracer.SIMPLIFY): each gives a value equal to
# the result bit for bit, so staged programs skip work the rules spell out in general.
def _keeps_dtype(x, c):
    """True if x (a tracer) combined with the constant c has x's dtype: numpy promotes a
    float32 x with a float64 array or numpy scalar (not with a Python number), and a
    Python float x (weak) takes the dtype of a float32 array or scalar c.  Read from x's
    example value, which is a Python float where x stands for one."""
    v = x.val
    return _np.result_type(v, c) == _np.result_type(v)


def _is_ones(c, x):
    """A plain constant of ones that leaves x unchanged when multiplying it."""
    if isinstance(c, (int, float)) and not isinstance(c, bool):
        return c == 1 and _keeps_dtype(x, c)
    return isinstance(c, _np.ndarray) and c.dtype.kind == 'f' and _keeps_dtype(x, c) and \
        _np.broadcast_shapes(c.shape, x.shape) == x.shape and bool(_np.all(c == 1))


def _float_tracer(x):
    return is_tracer(x) and x.dtype.kind == 'f'


def _times_one(x, y):
    if _float_tracer(x) and _is_ones(y, x):
        return x
    if _float_tracer(y) and _is_ones(x, y):
        return y
    return None


def _power_identity(x, y):
    if not _float_tracer(x) or isinstance(y, bool) or not isinstance(y, (int, float)) or \
            not _keeps_dtype(x, y):
        return None
    if y == 0:
        return _np.ones(x.shape, x.dtype)
    if y == 1:
        return x
    if y == 2:
        return multiply(x, x)        # numpy computes x ** 2 as x * x
    return None


def _is_scalar_const(c):
    return isinstance(c, (int, float, _np.floating)) and not isinstance(c, bool)


def _power_of_two(c):
    """c = +-2**k with k >= 0: multiplying by it is exact (but for overflow, which
    happens alike in either order), so it regroups freely with another factor."""
    if not _is_scalar_const(c) or c == 0 or not _np.isfinite(c):
        return False
    m, e = _math.frexp(abs(float(c)))
    return m == 0.5 and e >= 1


def _made_by(x, name):
    """(args of the equation of nestad.numpy's primitive ``name`` that computed tracer
    x) or None."""
    eqn = _producer(x)
    return eqn.args if eqn is not None and eqn.op is _P[name] else None


def _scaled(x):
    """x = factor * y for a scalar factor: (factor, y tracer), or None."""
    for name, sign in (('multiply', 1), ('negative', -1)):
        args = _made_by(x, name)
        if args is None:
            continue
        if name == 'negative':
            return -1.0, _tracer_of(x, args[0])
        a, b = args
        if _is_scalar_const(a):
            return a, _tracer_of(x, b)
        if _is_scalar_const(b):
            return b, _tracer_of(x, a)
    return None


def _tracer_of(like, var):
    """The tracer of ``var`` in ``like``'s trace (a Var of an equation, or a constant)."""
    from ..tracer import Var
    return like.trace.tracers[id(var)] if isinstance(var, Var) else var


def _simplify_multiply(x, y):
    same = _times_one(x, y)
    if same is not None:
        return same
    for c, t in ((x, y), (y, x)):        # by a constant array of one value: by that scalar
        if isinstance(c, _np.ndarray) and c.size and c.dtype.kind == 'f' and _float_tracer(t) \
                and _keeps_dtype(t, c) and _np.broadcast_shapes(c.shape, _shape(t)) == _shape(t) \
                and bool(_np.all(c == c.flat[0])):
            return multiply(t, float(c.flat[0]))
    c, t = (x, y) if _is_scalar_const(x) else (y, x) if _is_scalar_const(y) else (None, None)
    # (a numpy scalar wider than t promotes the product: it is not a Python float there)
    if c is None or not _float_tracer(t) or not _keeps_dtype(t, c):
        return None
    if c == -1:
        return negative(t)
    if not (y is c and type(c) is float):
        return multiply(t, float(c))       # one spelling (tracer, float), so CSE shares it
    inner = _scaled(t)
    if inner is not None and is_tracer(inner[1]) and inner[1].var.dtype == t.var.dtype and \
            (_power_of_two(c) or _power_of_two(inner[0])):
        return multiply(inner[1], c * inner[0])        # (y * c2) * c == y * (c * c2)
    return None


def _simplify_negative(x):
    if not _float_tracer(x):
        return None
    args = _made_by(x, 'negative')
    if args is not None:
        return _tracer_of(x, args[0])                  # -(-y) == y
    args = _made_by(x, 'multiply')
    if args is not None:                               # -(y * c) == y * (-c), c constant
        a, b = (_tracer_of(x, v) for v in args)
        for c, y in ((a, b), (b, a)):
            if (_is_scalar_const(c) or isinstance(c, _np.ndarray)) and _float_tracer(y) and \
                    _np.shape(c) == () or isinstance(c, _np.ndarray) and \
                    _np.broadcast_shapes(c.shape, _shape(y)) == _shape(y):
                return multiply(y, -c)
    return None


def _simplify_add(x, y):
    # scatter(a, I) + scatter(b, I) == scatter(a + b, I) for a basic index I (each entry
    # is written once, the rest stay 0.0)
    ax = _made_by(x, 'scatter_add') if is_tracer(x) else None
    ay = _made_by(y, 'scatter_add') if is_tracer(y) else None
    if ax is not None and ay is not None:
        ex, ey = _producer(x), _producer(y)
        if _same_index(ex.params['index'], ey.params['index']) and _is_basic(ex.params['index']) \
                and ex.params['shape'] == ey.params['shape']:
            a, b = _tracer_of(x, ax[0]), _tracer_of(y, ay[0])
            if _shape(a) == _shape(b):
                return _scatter(add(a, b), index=ex.params['index'], shape=ex.params['shape'])
    for a, b in ((x, y), (y, x)):
        args = _made_by(b, 'negative') if is_tracer(b) else None
        if args is not None and _float_tracer(a) and _float_tracer(b):
            return subtract(a, _tracer_of(b, args[0]))  # a + (-y) == a - y
    return None


def _same_index(i, j):
    try:
        return i == j and type(i) is type(j)
    except ValueError:             # arrays in the index: compared elementwise
        return False


def _simplify_subtract(x, y):
    args = _made_by(y, 'negative') if is_tracer(y) else None
    if args is not None and _float_tracer(x) and _float_tracer(y):
        return add(x, _tracer_of(y, args[0]))          # a - (-y) == a + y
    return None


_P = {n: _registry.PRIMITIVES['numpy.' + n] for n in ('multiply', 'negative', 'add', 'subtract',
                                                         'scatter_add')}
_SIMPLIFY[_P['multiply']] = _simplify_multiply
_SIMPLIFY[_P['negative']] = _simplify_negative
_SIMPLIFY[_P['add']] = _simplify_add
_SIMPLIFY[_P['subtract']] = _simplify_subtract
_SIMPLIFY[_registry.PRIMITIVES['numpy.divide']] = lambda x, y: x if _float_tracer(x) and \
    _is_ones(y, x) else None
_SIMPLIFY[_registry.PRIMITIVES['numpy.power']] = _power_identity
_UFUNC_PRIMITIVES.update({_np.add: add, _np.subtract: subtract, _np.multiply: multiply,
                          _np.true_divide: divide, _np.negative: negative, _np.power: power})

from ._contract import *  # noqa: E402,F401,F403  (einsum, dot, tensordot, kron, cross, outer)
from . import linalg  # noqa: E402  (after the primitives it uses)
from . import random  # noqa: E402,F401  (numpy's own: nestad.numpy.random)
from ._more import *  # noqa: E402,F401,F403  (numpy functions made of the ones above)
from ._shapes import *  # noqa: E402,F401,F403  (array manipulation, index tricks, casts)
from ._stats import *  # noqa: E402,F401,F403  (statistics, order statistics, cumprod)
from ._convolve import *  # noqa: E402,F401,F403  (convolve, correlate)
from ._grids import *  # noqa: E402,F401,F403  (meshgrid, interp, unique, real, imag, conj)
from . import _batch  # noqa: E402  (vmap's batch rules of the primitives above)
from ._dispatch import install as _install  # noqa: E402

_install()
