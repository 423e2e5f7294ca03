"""The trace-time simplifier: identities applied while tracing (``nestad.tracer.SIMPLIFY``,
filled here).  Each gives a value equal to the result bit for bit, so staged programs
skip work the rules spell out in general (``x * 1``, ``-(-y)``, ``a + (-y)``, sums of
scatters at one index...)."""
import math as _math

import numpy as _np

from .. import registry as _registry
from ..numpy._elementwise import add, multiply, negative, subtract
from ..numpy._indexing import _scatter
from ..numpy._kernel import _is_basic, _shape
from ..tracer import SIMPLIFY as _SIMPLIFY, Var, is_tracer, producer as _producer


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
    return like.trace.tracers[var] if isinstance(var, Var) else var


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
