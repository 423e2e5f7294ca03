"""More numpy functions, written with nestad.numpy's differentiable ones (no rules of
their own: theirs come from the functions they are made of).  Each keeps numpy's name,
arguments and values; numpy's dispatch reaches them by name like the others."""
import math

import numpy as _np
from numpy import isfinite, isnan

from ._elementwise import (_dpow_dx, _dpow_dy, _elementwise2, _logistic, absolute, maximum,
                           minimum, negative, sin)
from ._indexing import astype, getitem
from ._joining import concatenate, vstack
from ._kernel import _as_operand, _axis_index, _ndim, _plain_operand, _shape
from ._plumbing import reshape, transpose
from ._selection import where
from ..errors import InvalidInputError
from ..tracer import is_tracer
from ..values import Perturbed, primal_value

__all__ = ['rad2deg', 'degrees', 'deg2rad', 'radians', 'fabs', 'sinc', 'logaddexp2',
           'nan_to_num', 'real_if_close', 'angle', 'rot90', 'atleast_3d', 'rollaxis', 'select',
           'column_stack', 'row_stack', 'fmax', 'fmin', 'gradient', 'partition', 'fmod',
           'copysign', 'heaviside', 'float_power', 'signbit']


def rad2deg(x):
    return _as_operand(x) * (180.0 / _np.pi)


def deg2rad(x):
    return _as_operand(x) * (_np.pi / 180.0)


degrees, radians = rad2deg, deg2rad


def fabs(x):
    return absolute(x)


# sin(t)/t = sum_k (-1)^k t^(2k) / (2k+1)!, for |t| < 1: its terms to k = 20 give the value
# and every derivative up to order 20 to rounding, with no cancellation near t = 0
_SINC_SERIES = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(21)]


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0.  Near 0 (|pi x| < 1) the Taylor series is used:
    differentiating the quotient there cancels catastrophically (and gives 0/0 at 0)."""
    x = _as_operand(x)
    v = primal_value(x)
    if not isinstance(x, Perturbed) and not is_tracer(v):
        return _np.sinc(_plain_operand(x, 'sinc'))
    small = _np.abs(v) < 1.0 / _np.pi
    if not is_tracer(small) and not _np.any(small):
        return sin(_np.pi * x) / (_np.pi * x)
    t = _np.pi * where(small, x, 0.0)
    s = t * t
    series = _SINC_SERIES[-1]
    for c in reversed(_SINC_SERIES[:-1]):
        series = series * s + c
    # numpy's value (the series' differs by an ulp), the series' derivatives
    series = series + (_np.sinc(primal_value(where(small, x, 0.0))) - primal_value(series))
    safe = where(small, 1.0, x)
    return where(small, series, sin(_np.pi * safe) / (_np.pi * safe))


# log2(2^x + 2^y): numpy's values, rules 2^x / (2^x + 2^y) (as logaddexp's: not 2^(x - out),
# which loses the digits of x - out to out's rounding)
logaddexp2 = _elementwise2('logaddexp2', _np.logaddexp2, None,
                           lambda x, y, out: _logistic((x - y) * _LN2),
                           lambda x, y, out: _logistic((y - x) * _LN2))
_LN2 = math.log(2.0)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Finite entries pass with their derivative; nan and infinities become constants."""
    x = _as_operand(x)
    v = primal_value(x)
    return where(isfinite(v), x, _np.nan_to_num(v, nan=nan, posinf=posinf, neginf=neginf))


def real_if_close(x, tol=100):
    return x                                   # nestad's values are real


def angle(z, deg=False):
    """The angle of a real number: 0 or pi, a constant."""
    return _np.angle(primal_value(z), deg=deg)


def rot90(m, k=1, axes=(0, 1)):
    m = _as_operand(m)
    _np.rot90(_np.empty(_shape(m), bool), k, axes)      # numpy's checks of the axes (a view)
    k %= 4
    a0, a1 = (a % _ndim(m) for a in axes)
    for _ in range(k):
        # rot90 once: reverse axis a1, then swap a0 and a1
        index = tuple(slice(None, None, -1) if i == a1 else slice(None) for i in range(_ndim(m)))
        m = getitem(m, index)
        perm = list(range(_ndim(m)))
        perm[a0], perm[a1] = perm[a1], perm[a0]
        m = transpose(m, perm)
    return m


def atleast_3d(x):
    x = _as_operand(x)
    n = _ndim(x)
    if n == 0:
        return reshape(x, (1, 1, 1))
    if n == 1:
        return reshape(x, (1,) + _shape(x) + (1,))
    if n == 2:
        return reshape(x, _shape(x) + (1,))
    return x


def rollaxis(a, axis, start=0):
    a = _as_operand(a)
    n = _ndim(a)
    axis = _axis_index(axis, n)
    start = _axis_index(start, n + 1)
    order = [i for i in range(n) if i != axis]
    order.insert(start if start <= axis else start - 1, axis)
    return transpose(a, order)


def select(condlist, choicelist, default=0):
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = where(cond, choice, out)
    return out


def column_stack(tup):
    arrays = [_as_operand(a) for a in tup]
    return concatenate([reshape(a, (-1, 1)) if _ndim(a) < 2 else a for a in arrays], axis=1)


row_stack = vstack


# Of two equal values (0.0 and -0.0) numpy's fmax/fmin give the first, its maximum/minimum
# the second: hence maximum(y, x).  The tie rule splits the derivative either way.
def fmax(x, y):
    """maximum that ignores nan (the other argument wins)."""
    return where(isnan(primal_value(x)), y, where(isnan(primal_value(y)), x, maximum(y, x)))


def fmin(x, y):
    return where(isnan(primal_value(x)), y, where(isnan(primal_value(y)), x, minimum(y, x)))


def gradient(f, *varargs, axis=None, edge_order=1):
    """numpy.gradient with unit spacing (or one scalar spacing per axis): central
    differences inside, one-sided at the edges (edge_order=1)."""
    f = _as_operand(f)
    n = _ndim(f)
    axes = tuple(range(n)) if axis is None else (
        tuple(a % n for a in axis) if isinstance(axis, (tuple, list)) else (axis % n,))
    if edge_order != 1:
        raise InvalidInputError("nestad.numpy.gradient supports edge_order=1")
    spacings = list(varargs) if varargs else [1.0] * len(axes)
    if len(spacings) == 1 and len(axes) > 1:
        spacings = spacings * len(axes)
    out = []
    for ax, h in zip(axes, spacings):
        def part(s):
            return tuple(s if i == ax else slice(None) for i in range(n))
        inner = (getitem(f, part(slice(2, None))) - getitem(f, part(slice(None, -2)))) / (2.0 * h)
        first = (getitem(f, part(slice(1, 2))) - getitem(f, part(slice(0, 1)))) / h
        last = (getitem(f, part(slice(-1, None))) - getitem(f, part(slice(-2, -1)))) / h
        out.append(concatenate([first, inner, last], axis=ax))
    return out[0] if len(out) == 1 else out


def partition(a, kth, axis=-1):
    """numpy.partition: the entries, in numpy's partitioned order, each with its derivative."""
    a = _as_operand(a)
    v = primal_value(a)
    axis = _axis_index(axis, _np.ndim(v))       # numpy's AxisError, not a modulo by zero
    order = _np.argpartition(v, kth, axis=axis)
    grid = list(_np.indices(_np.shape(v), sparse=True))
    grid[axis] = order
    return getitem(a, tuple(grid))



def _fmod_dy(x, y, out):
    # numpy's division: Python's raised ZeroDivisionError for two Python floats at y = 0
    with _np.errstate(divide='ignore', invalid='ignore'):
        return -_np.trunc(_np.true_divide(primal_value(x), primal_value(y)))


# fmod: C's remainder, with the sign of x (numpy's values); d/dx = 1, d/dy = -trunc(x / y)
fmod = _elementwise2('fmod', _np.fmod, None, lambda x, y, out: 1.0, _fmod_dy)


def signbit(x):
    """numpy.signbit of the values (no derivative)."""
    return _np.signbit(primal_value(_as_operand(x)))


def _promoted(x, y):
    return _np.result_type(primal_value(x), primal_value(y))


def copysign(x, y):
    """|x| with the sign of y: x or -x, chosen by the sign bits (y has no derivative;
    at x = 0 the derivative is that of the side chosen, +-1)."""
    x, y = _as_operand(x), _as_operand(y)
    flip = _np.signbit(primal_value(x)) != _np.signbit(primal_value(y))
    x = astype(x, _promoted(x, y))
    return where(flip, negative(x), x)


def heaviside(x1, x2):
    """0 for x1 < 0, 1 for x1 > 0, x2 where x1 == 0 (the derivative is x2's there)."""
    x1, x2 = _as_operand(x1), _as_operand(x2)
    v1 = primal_value(x1)
    dt = _promoted(x1, x2)
    return where(v1 == 0, astype(x2, dt), astype(_np.heaviside(v1, _np.zeros((), dt)), dt))


def _float_power_plain(x, y):
    with _np.errstate(divide='ignore', invalid='ignore'):
        return _np.float_power(x, y)


# numpy.float_power's own values (its loop rounds differently from power's in the last bit,
# for one pair in twenty), power's rules
_float_power = _elementwise2('float_power', _float_power_plain, None, _dpow_dx, _dpow_dy)


def float_power(x1, x2):
    """x1 ** x2 computed in float64 (numpy.float_power): numpy's values, power's rules."""
    x1, x2 = _as_operand(x1), _as_operand(x2)
    return _float_power(astype(x1, _np.float64), astype(x2, _np.float64))
