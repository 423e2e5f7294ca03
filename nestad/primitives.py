"""Every primitive nestad knows, each with its derivative rule beside it.

Rules are written with nestad's lifted operations (``cos``, ``recip``, ``*``...)
so that a rule evaluated on perturbed primals is itself differentiated by the
enclosing run: that is what gives second and higher derivatives.

Functions accept plain numbers too and then behave like ``math``'s, except that
they follow IEEE 754 where ``math`` raises: ``log(0) == -inf``, ``sqrt(-1)`` is
nan, ``exp(1000) == inf``.  The ``**`` operator on perturbed numbers follows
``nestad.pow`` (IEEE: ``0 ** -1 == inf``, a negative base with a non-integer
exponent gives nan rather than a complex number); ``/`` follows Python floats
(``x / 0`` raises ZeroDivisionError, as it would without nestad).
"""
import math
import operator
from numbers import Real

import numpy as np

from . import registry
from .arrays import is_array
from .errors import InvalidInputError
from .interpret import bind
from .lifting import ARRAY_ROUTES, Primitive, lift1, lift2
from . import tracer as _tracer
from .tracer import RAISES, SIMPLIFY, ArrayTracer, Tracer, apply_traced, record2
from .values import Batched, Bundle, Perturbed, TapeCell, modular_pow_error, next_id, primal_value

_ARRAYS = (np.ndarray, ArrayTracer)

_float = float
_int = int
_nan = math.nan
_inf = math.inf


def _ieee1(fn, npfn):
    """``fn`` (from math) on plain numbers, with numpy's IEEE answer where math raises."""
    def plain(x):
        try:
            return fn(x)
        except (ValueError, OverflowError):
            with np.errstate(all='ignore'):
                return _float(npfn(_float(x)))
    plain.__name__ = fn.__name__
    plain.__wrapped__ = fn          # (staged code calls fn: nestad.staging.lowering)
    return plain


def unary(name, fn, npfn, partial, export=True):
    """Define a one-argument primitive: plain implementation + rule d out/dx = partial(x, out).

    ``npfn`` is the numpy function it mirrors (its IEEE answer where ``fn`` raises): the
    primitive is then elementwise, and nestad.numpy makes its array version from the same
    rule (see nestad.registry)."""
    plain = _ieee1(fn, npfn) if npfn is not None else fn
    prim = Primitive(name, plain, (partial,))

    def public(x):
        if x.__class__ is _float:
            try:
                return fn(x)
            except (ValueError, OverflowError):
                return plain(x)
        return lift1(prim, x)

    public.__name__ = public.__qualname__ = name
    public.__doc__ = f"Differentiable {name}; accepts plain and nestad numbers."
    prim.lifted = public
    if export:
        registry.export(public, 'nestad')
    if npfn is not None:
        registry.elementwise(prim, npfn)
    return public, prim


def binary(name, plain, dx, dy, numpy=None):
    """Define a two-argument primitive with rules dx(x, y, out) and dy(x, y, out);
    ``numpy`` is the numpy function it mirrors elementwise, if any (as for ``unary``)."""
    prim = Primitive(name, plain, (dx, dy))

    def public(x, y):
        return lift2(prim, x, y)

    public.__name__ = public.__qualname__ = name
    public.__doc__ = f"Differentiable {name}; accepts plain and nestad numbers."
    prim.lifted = public
    registry.export(public, 'nestad')
    if numpy is not None:
        registry.elementwise(prim, numpy)
    return public, prim


def constant(name, plain):
    """A piecewise-constant operation (floor, sign, comparisons): its derivative is zero,
    so it is applied to primal values and its result carries no perturbation."""
    prim = Primitive(name, plain, None)

    def public(*args):
        args = [primal_value(a) for a in args]
        for a in args:
            if a.__class__ is Tracer or a.__class__ is ArrayTracer:
                return apply_traced(prim, args, {})
            if a.__class__ is Batched:          # values of vmap's members: numpy's version
                return ARRAY_ROUTES[name](*args)
        return plain(*args)
    public.__name__ = public.__qualname__ = name
    prim.lifted = public
    return public


# ---------------------------------------------------------------- helpers used by rules

def _recip_plain(x):
    try:
        return 1.0 / x
    except ZeroDivisionError:
        return math.copysign(_inf, x)


# recip: 1/x, IEEE at zero so that rules like d log = recip(x) give inf, not an exception.
recip, RECIP = unary('recip', _recip_plain, None, lambda x, out: -(out * out), export=False)


def _sign_plain(v):
    return 1.0 if v > 0 else (-1.0 if v < 0 else (0.0 if v == 0 else _nan))


_sign = constant('sign', _sign_plain)

# Logic on bools (traced bools combine like numpy's: ~ is logical not).
LOGIC = {name: constant(name, fn) for name, fn in (
    ('and', operator.and_), ('or', operator.or_), ('xor', operator.xor), ('not', operator.not_))}

# Comparisons as values (a staged program records them; guards assert their outcome).
COMPARISONS = {name: constant(name, fn) for name, fn in (
    ('lt', operator.lt), ('le', operator.le), ('gt', operator.gt),
    ('ge', operator.ge), ('eq', operator.eq), ('ne', operator.ne))}
_tracer.COMPARISONS.update(COMPARISONS)


# ---------------------------------------------------------------- elementary functions

exp, EXP = unary('exp', math.exp, np.exp, lambda x, out: out)
# (exp(x), not out + 1, which cancels to 0 for x < -37)
expm1, EXPM1 = unary('expm1', math.expm1, np.expm1, lambda x, out: exp(x))
exp2, EXP2 = unary('exp2', math.exp2, np.exp2, lambda x, out: out * math.log(2.0))
log, LOG = unary('log', math.log, np.log, lambda x, out: recip(x))
log1p, LOG1P = unary('log1p', math.log1p, np.log1p, lambda x, out: recip(1.0 + x))
log2, LOG2 = unary('log2', math.log2, np.log2, lambda x, out: recip(x * math.log(2.0)))
log10, LOG10 = unary('log10', math.log10, np.log10, lambda x, out: recip(x * math.log(10.0)))
sqrt, SQRT = unary('sqrt', math.sqrt, np.sqrt, lambda x, out: 0.5 * recip(out))
cbrt, CBRT = unary('cbrt', math.cbrt, np.cbrt, lambda x, out: recip(3.0 * (out * out)))

sin, SIN = unary('sin', math.sin, np.sin, lambda x, out: cos(x))
cos, COS = unary('cos', math.cos, np.cos, lambda x, out: -sin(x))
tan, TAN = unary('tan', math.tan, np.tan, lambda x, out: 1.0 + out * out)


def _one_minus_square(x):
    # 1 - x^2 as (1 - x)(1 + x) near |x| = 1, where 1 - x*x loses digits, but as 1 - x*x
    # near 0, where the product's derivative (1 - x) - (1 + x) cancels (0 for x = 1e-300)
    return where(abs_(x) < 0.5, 1.0 - x * x, (1.0 - x) * (1.0 + x))


asin, ASIN = unary('asin', math.asin, np.arcsin, lambda x, out: recip(sqrt(_one_minus_square(x))))
acos, ACOS = unary('acos', math.acos, np.arccos, lambda x, out: -recip(sqrt(_one_minus_square(x))))
atan, ATAN = unary('atan', math.atan, np.arctan, lambda x, out: recip(1.0 + x * x))



def _sech2_plain(x):
    # sech^2 x = 4 t / (1 + t)^2 with t = exp(-2|x|): 1 - tanh^2 cancels (0 from |x| = 19.1
    # on), and 1 / cosh^2 overflows: its derivative was 0 * inf = nan from |x| = 710 on
    t = math.exp(-2.0 * abs(x))
    return 4.0 * t / ((1.0 + t) * (1.0 + t))


def sech2_array(x):
    # (1 / cosh x)^2: as accurate as the scalar formula (2 ulp, against mpmath), in 3
    # passes over the array instead of 7 (a vmapped MLP's tanh spent more time here than
    # in its matrix products); cosh's overflow past |x| = 710 gives the right 0
    with np.errstate(over='ignore'):
        s = 1.0 / np.cosh(x)
    return s * s


def _sech2_array_numba(x):
    # numba's backend compiles this one (it has no np.errstate): the scalar formula
    t = np.exp(-2.0 * np.abs(x))
    return 4.0 * t / ((1.0 + t) * (1.0 + t))


sech2_array.numba = _sech2_array_numba


# tanh' = sech^2, a primitive of its own whose derivative -2 sech^2 tanh is a product of
# bounded factors: every order of tanh's derivatives is finite for every x
sech2, SECH2 = unary('sech2', _sech2_plain, None, lambda x, out: -2.0 * out * tanh(x),
                     export=False)
sinh, SINH = unary('sinh', math.sinh, np.sinh, lambda x, out: cosh(x))
cosh, COSH = unary('cosh', math.cosh, np.cosh, lambda x, out: sinh(x))
tanh, TANH = unary('tanh', math.tanh, np.tanh, lambda x, out: sech2(x))
# 1 / sqrt(x^2 + 1) as 1 / hypot(x, 1), and sqrt(x - 1) sqrt(x + 1): x * x overflows to inf
# from |x| = 1.3e154 on, where the derivative 1/|x| is a normal number
asinh, ASINH = unary('asinh', math.asinh, np.arcsinh, lambda x, out: recip(hypot(x, 1.0)))
acosh, ACOSH = unary('acosh', math.acosh, np.arccosh,
                     lambda x, out: recip(sqrt(x - 1.0) * sqrt(x + 1.0)))
atanh, ATANH = unary('atanh', math.atanh, np.arctanh, lambda x, out: recip(_one_minus_square(x)))

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
erf, ERF = unary('erf', math.erf, None, lambda x, out: _TWO_OVER_SQRT_PI * exp(-(x * x)))
erfc, ERFC = unary('erfc', math.erfc, None, lambda x, out: -_TWO_OVER_SQRT_PI * exp(-(x * x)))


def _scipy_route(name):
    """numpy has no erf: on arrays nestad.erf is nestad.scipy.special.erf (scipy's values)."""
    def route(x):
        try:
            from .scipy import special
        except ImportError:
            raise InvalidInputError(f"nestad.{name} of an array is nestad.scipy.special.{name}, "
                                    "which needs scipy: pip install \"nestad[scipy]\"") from None
        return getattr(special, name)(x)
    return route


ARRAY_ROUTES['erf'], ARRAY_ROUTES['erfc'] = _scipy_route('erf'), _scipy_route('erfc')

abs_, ABS = unary('abs', abs, None, lambda x, out: _sign(x))


# floor/ceil of a float keep the sign of a zero result, as numpy's do (ceil(-0.5) == -0.0).
def _floor_plain(x):
    return math.floor(x) if isinstance(x, _int) else (
        math.copysign(_float(math.floor(x)), x) if math.isfinite(x) else x)


def _ceil_plain(x):
    return math.ceil(x) if isinstance(x, _int) else (
        math.copysign(_float(math.ceil(x)), x) if math.isfinite(x) else x)


floor = registry.export(constant('floor', _floor_plain), 'nestad')
floor.__doc__ = "Largest integer <= x (a float for float input); derivative zero, so the result is a plain number."
ceil = registry.export(constant('ceil', _ceil_plain), 'nestad')
ceil.__doc__ = "Smallest integer >= x; derivative zero, so the result is a plain number."


# ---------------------------------------------------------------- binary functions

def _pow_plain(x, y):
    """x ** y with numpy's float64 answers where Python's differ: a negative base with a
    finite non-integer exponent (nan, not a complex number), a zero base (signed zeros
    and infinities, not an exception), overflow (inf)."""
    if x < 0 and math.isfinite(y) and y != math.floor(y) or x == 0:
        with np.errstate(all='ignore'):
            return _float(np.power(_float(x), _float(y)))
    try:
        return x ** y
    except OverflowError:
        with np.errstate(all='ignore'):
            return _float(np.power(_float(x), _float(y)))


def _dpow_dbase(x, y):
    """y x^(y-1), and exactly 0 for a constant exponent 0 (x^0 is constant even at x = 0,
    where the formula would give 0 * inf).  For the exponents 1 and 2 the formula's value
    (1 x^0 = 1, 2 x^1 = 2x, exactly, for every x) without a call of pow."""
    c = y.__class__
    if c is _float or c is _int:
        if y == 2:
            return 2.0 * x
        if y == 1 or y == 0:
            return _float(y)
    elif isinstance(y, Real) and y == 0:     # plain numbers only (nestad values are not Real)
        return 0.0
    return y * pow(x, y - 1)


def _dpow_dexponent(x, out):
    """log(x) x^y, taken as 0 at x == 0 where 0^y is locally constant (0 for y > 0;
    the formula would give -inf * 0)."""
    return 0.0 if primal_value(x) == 0 else log(x) * out


pow, POW = binary('pow', _pow_plain,
                  lambda x, y, out: _dpow_dbase(x, y),
                  lambda x, y, out: _dpow_dexponent(x, out))
# (staged code calls _pow_plain: math.pow differs from numpy at negative infinity)


def _atan2_plain(y, x):
    return math.atan2(y, x)


def _over_squared_norm(n, x, y):
    # n / (x^2 + y^2) as (n r) r with r = 1 / hypot(x, y): x*x + y*y overflows to inf (and
    # underflows to 0) where the derivatives of atan2 are normal numbers (atan2(1e200, 1e200))
    r = recip(hypot(x, y))
    return n * r * r


atan2, ATAN2 = binary('atan2', _atan2_plain,
                      lambda y, x, out: _over_squared_norm(x, x, y),
                      lambda y, x, out: _over_squared_norm(-y, x, y),
                      numpy=np.arctan2)


def _hypot_plain(x, y):
    return math.hypot(x, y)


def _over_hypot(x, y, out):
    """x / hypot(x, y).  Where |x| >= |y| as sign(x) / sqrt(1 + (y/x)^2), whose derivatives
    y^2/r^3 and -xy/r^3 are products; the quotient rule's 1/r - x^2/r^3 cancels there (all
    digits at x = 1e8, y = 0.7).  Each form gets a safe argument where it is not chosen."""
    near = abs_(x) >= abs_(y)
    xs = where(near, x, 1.0)
    q = where(near, y, 0.0) * recip(xs)     # (nan at the origin, as the derivative there)
    p = primal_value(xs)
    sign = np.sign(p) if isinstance(p, _ARRAYS) else _sign(p)
    return where(near, sign * recip(sqrt(1.0 + q * q)), x * recip(where(near, 1.0, out)))


hypot, HYPOT = binary('hypot', _hypot_plain,
                      lambda x, y, out: _over_hypot(x, y, out),
                      lambda x, y, out: _over_hypot(y, x, out),
                      numpy=np.hypot)


def _tie_split_plain(a, b):
    """d max(a,b)/da: 1 where a wins, 0 where b wins, 1/2 at a tie (the symmetric choice)."""
    return 1.0 if a > b else (0.0 if a < b else 0.5)


_tie_split = constant('tie_split', _tie_split_plain)


# As numpy's: nan wins from either side, and of two equal values (0.0 and -0.0) the
# second is the answer.
def _minimum_plain(x, y):
    return x if x < y or x != x else y


def _maximum_plain(x, y):
    return x if x > y or x != x else y


minimum, MINIMUM = binary('minimum', _minimum_plain,
                          lambda x, y, out: _tie_split(y, x),
                          lambda x, y, out: _tie_split(x, y))
maximum, MAXIMUM = binary('maximum', _maximum_plain,
                          lambda x, y, out: _tie_split(x, y),
                          lambda x, y, out: _tie_split(y, x))


# ---------------------------------------------------------------- choosing

def _select_plain(c, x, y):
    return x if c else y


def _zero_of(t):
    """A zero shaped like tangent ``t`` (which may carry batch axes)."""
    shape = np.shape(primal_value(t))
    return np.zeros(shape) if shape else 0.0


class _Select(Primitive):
    """``where``'s primitive: the condition (argument 0) is a primal value and never
    carries a run; the derivative is the chosen argument's, selected (not multiplied by
    0 or 1, which would make an infinite tangent of the other branch nan)."""
    __slots__ = ()

    def evaluate(self, args, params):
        c, x, y = args
        if c.__class__ is Tracer or x.__class__ is Tracer or y.__class__ is Tracer:
            return apply_traced(self, args, params)
        return x if c else y

    def forward(self, top, args, carried, primals, params):
        (_, x, y), (_, cx, cy), (c, xp, yp) = args, carried, primals
        dx = x.tangent if cx else _zero_of(y.tangent)
        dy = y.tangent if cy else _zero_of(x.tangent)
        return Bundle(top, where(c, xp, yp), where(c, dx, dy))

    def reverse(self, top, args, carried, primals, params):
        (_, x, y), (_, cx, cy), (c, xp, yp) = args, carried, primals
        partials = ()
        if cx:
            partials += ((x, where(c, 1.0, 0.0)),)
        if cy:
            partials += ((y, where(c, 0.0, 1.0)),)
        return TapeCell(top, next_id(), where(c, xp, yp), partials)


SELECT = _Select('select', _select_plain, None, _select_plain)


def where(condition, x, y):
    """``x`` where ``condition`` holds, else ``y``, as a value: in staged code (loop
    bodies included) it is recorded as a choice, not fixed as a guard.  The condition is
    read from primal values, so no derivative flows through it; the derivative is
    ``x``'s or ``y``'s.  With arrays (or values batched by vmap) it is
    ``nestad.numpy.where``."""
    c = primal_value(condition)
    if isinstance(c, _ARRAYS) or isinstance(x, _ARRAYS) or isinstance(y, _ARRAYS) \
            or c.__class__ is Batched or is_array(x) or is_array(y):
        return ARRAY_ROUTES['select'](c, x, y)
    return bind(SELECT, (c, x, y))


# A recorded select evaluated on perturbed or traced values (a program transformed by jvp
# or vjp, a loop body differentiated) is where itself: a Python ``if`` there would fix
# the choice as a guard, which a loop body refuses.
SELECT.lifted = where


# ---------------------------------------------------------------- arithmetic operators
# Generic rules (used for mixed tags and numpy scalars) plus the hot-path forms,
# which are the same rules specialised by hand to one tag or a float operand.

def _add(x, y):
    return x + y


def _sub(x, y):
    return x - y


def _mul(x, y):
    return x * y


def _div(x, y):
    return x / y


def _mod(x, y):
    return x % y


# (their plain implementations are the operator module's, which compute ``x + y`` without a
# Python frame: tracing calls one for every operation it records)
ADD = Primitive('add', operator.add, (lambda x, y, out: 1.0, lambda x, y, out: 1.0), _add)
SUB = Primitive('sub', operator.sub, (lambda x, y, out: 1.0, lambda x, y, out: -1.0), _sub)
MUL = Primitive('mul', operator.mul, (lambda x, y, out: y, lambda x, y, out: x), _mul)
DIV = Primitive('div', operator.truediv, (lambda x, y, out: recip(y), lambda x, y, out: -out * recip(y)),
                _div)
# x % y == x - y * floor(x / y): the floor is locally constant.
MOD = Primitive('mod', _mod, (lambda x, y, out: 1.0, lambda x, y, out: -floor(x / y)), _mod)
NEG = Primitive('neg', operator.neg, (lambda x, out: -1.0,), operator.neg)

_floordiv_const = constant('floordiv', operator.floordiv)


def _floordiv(x, y):
    return _floordiv_const(x, y)


def _rfloordiv(x, y):
    return _floordiv_const(y, x)


def _operator_pair(prim):
    """Generic ``x op y`` and reflected ``y op x`` for the non-hot cases."""
    def forward(self, other):
        return lift2(prim, self, other)

    def reflected(self, other):
        return lift2(prim, other, self)
    return forward, reflected


# --- Bundle: forward mode ---------------------------------------------------
# (x + dx eps) + (y + dy eps) = (x + y) + (dx + dy) eps
def _b_add(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return Bundle(self.tag, self.primal + other, self.tangent)
    if c is Bundle and other.tag == self.tag:
        return Bundle(self.tag, self.primal + other.primal, self.tangent + other.tangent)
    return lift2(ADD, self, other)


def _b_radd(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return Bundle(self.tag, other + self.primal, self.tangent)
    return lift2(ADD, other, self)


def _b_sub(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return Bundle(self.tag, self.primal - other, self.tangent)
    if c is Bundle and other.tag == self.tag:
        return Bundle(self.tag, self.primal - other.primal, self.tangent - other.tangent)
    return lift2(SUB, self, other)


def _b_rsub(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return Bundle(self.tag, other - self.primal, -self.tangent)
    return lift2(SUB, other, self)


# (x + dx eps)(y + dy eps) = xy + (dx y + x dy) eps
def _b_mul(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return Bundle(self.tag, self.primal * other, self.tangent * other)
    if c is Bundle and other.tag == self.tag:
        x = self.primal
        y = other.primal
        return Bundle(self.tag, x * y, self.tangent * y + x * other.tangent)
    return lift2(MUL, self, other)


def _b_rmul(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return Bundle(self.tag, other * self.primal, other * self.tangent)
    return lift2(MUL, other, self)


# d(x/y) = dx/y - (x/y) dy/y
def _b_truediv(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return Bundle(self.tag, self.primal / other, self.tangent / other)
    if c is Bundle and other.tag == self.tag:
        y = other.primal
        q = self.primal / y
        return Bundle(self.tag, q, (self.tangent - q * other.tangent) / y)
    return lift2(DIV, self, other)


def _b_rtruediv(self, other):
    c = other.__class__
    if c is _float or c is _int:
        y = self.primal
        q = other / y
        return Bundle(self.tag, q, -(q * self.tangent) / y)
    return lift2(DIV, other, self)


# d(x^n) = n x^(n-1) dx for a constant exponent; the general case goes through POW.
def _b_pow(self, other, mod=None):
    if mod is not None:                     # pow(x, y, mod)
        raise modular_pow_error()
    c = other.__class__
    if c is _float or c is _int:
        x = self.primal
        out = _pow_plain(x, other) if x.__class__ is _float else pow(x, other)
        return Bundle(self.tag, out, _dpow_dbase(x, other) * self.tangent)
    return lift2(POW, self, other)


def _b_rpow(self, other):
    return lift2(POW, other, self)


def _b_neg(self):
    return Bundle(self.tag, -self.primal, -self.tangent)


# --- TapeCell: forward phase of reverse mode ---------------------------------
def _t_add(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return TapeCell(self.tag, next_id(), self.primal + other, ((self, 1.0),))
    if c is TapeCell and other.tag == self.tag:
        return TapeCell(self.tag, next_id(), self.primal + other.primal, ((self, 1.0), (other, 1.0)))
    return lift2(ADD, self, other)


def _t_radd(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return TapeCell(self.tag, next_id(), other + self.primal, ((self, 1.0),))
    return lift2(ADD, other, self)


def _t_sub(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return TapeCell(self.tag, next_id(), self.primal - other, ((self, 1.0),))
    if c is TapeCell and other.tag == self.tag:
        return TapeCell(self.tag, next_id(), self.primal - other.primal, ((self, 1.0), (other, -1.0)))
    return lift2(SUB, self, other)


def _t_rsub(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return TapeCell(self.tag, next_id(), other - self.primal, ((self, -1.0),))
    return lift2(SUB, other, self)


def _t_mul(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return TapeCell(self.tag, next_id(), self.primal * other, ((self, other),))
    if c is TapeCell and other.tag == self.tag:
        x = self.primal
        y = other.primal
        return TapeCell(self.tag, next_id(), x * y, ((self, y), (other, x)))
    return lift2(MUL, self, other)


def _t_rmul(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return TapeCell(self.tag, next_id(), other * self.primal, ((self, other),))
    return lift2(MUL, other, self)


def _t_truediv(self, other):
    c = other.__class__
    if c is _float or c is _int:
        return TapeCell(self.tag, next_id(), self.primal / other, ((self, recip(other)),))
    if c is TapeCell and other.tag == self.tag:
        y = other.primal
        q = self.primal / y
        r = recip(y)
        return TapeCell(self.tag, next_id(), q, ((self, r), (other, -q * r)))
    return lift2(DIV, self, other)


def _t_rtruediv(self, other):
    c = other.__class__
    if c is _float or c is _int:
        y = self.primal
        q = other / y
        return TapeCell(self.tag, next_id(), q, ((self, -q * recip(y)),))
    return lift2(DIV, other, self)


def _t_pow(self, other, mod=None):
    if mod is not None:                     # pow(x, y, mod)
        raise modular_pow_error()
    c = other.__class__
    if c is _float or c is _int:
        x = self.primal
        out = _pow_plain(x, other) if x.__class__ is _float else pow(x, other)
        return TapeCell(self.tag, next_id(), out, ((self, _dpow_dbase(x, other)),))
    return lift2(POW, self, other)


def _t_rpow(self, other):
    return lift2(POW, other, self)


def _t_neg(self):
    return TapeCell(self.tag, next_id(), -self.primal, ((self, -1.0),))


def _pos(self):
    return self


def _abs(self):
    return lift1(ABS, self)


_mod_pair = _operator_pair(MOD)

for _cls, _ops in (
        (Bundle, dict(add=(_b_add, _b_radd), sub=(_b_sub, _b_rsub), mul=(_b_mul, _b_rmul),
                      truediv=(_b_truediv, _b_rtruediv), pow=(_b_pow, _b_rpow), neg=_b_neg)),
        (TapeCell, dict(add=(_t_add, _t_radd), sub=(_t_sub, _t_rsub), mul=(_t_mul, _t_rmul),
                        truediv=(_t_truediv, _t_rtruediv), pow=(_t_pow, _t_rpow), neg=_t_neg))):
    for _name in ('add', 'sub', 'mul', 'truediv', 'pow'):
        setattr(_cls, f'__{_name}__', _ops[_name][0])
        setattr(_cls, f'__r{_name}__', _ops[_name][1])
    _cls.__neg__ = _ops['neg']
    _cls.__pos__ = _pos
    _cls.__abs__ = _abs
    _cls.__mod__, _cls.__rmod__ = _mod_pair
    _cls.__floordiv__ = _floordiv
    _cls.__rfloordiv__ = _rfloordiv


# --- Tracer: a plain number of a program being recorded -----------------------
def _times_one(x, y):
    """x * 1.0 and 1.0 * x are x exactly (for a traced float; an int would become float)."""
    if y.__class__ is _float and y == 1.0 and x.__class__ is Tracer and x.dtype.kind == 'f':
        return x
    if x.__class__ is _float and x == 1.0 and y.__class__ is Tracer and y.dtype.kind == 'f':
        return y
    return None


SIMPLIFY[MUL] = _times_one
SIMPLIFY[DIV] = lambda x, y: _times_one(x, y) if y.__class__ is _float else None

# ``**`` on a traced plain number is Python's operator, as on the number it stands for
# (0.0 ** -1 raises ZeroDivisionError, an overflow OverflowError, a negative base with a
# fractional exponent gives a complex); under a perturbation it is nestad.pow (IEEE), as
# in eager code.  Lifted (a program differentiated), it is ``**`` on perturbed values.
def _python_pow(x, y):
    out = x ** y
    if out.__class__ is complex:
        raise InvalidInputError(
            f"{x!r} ** {y!r} is a complex number in Python, and a staged program computes "
            "reals: use nestad.pow(x, y) for numpy's answer (nan), or keep the base >= 0")
    return out


def _python_pow_checked(x, y):
    """``x ** y`` for numba, which gives inf, nan or a wrapped int where Python raises,
    gives a complex or a float: it raises there instead, and the staged call reruns as
    Python, with Python's answer (``stage.Compiled``)."""
    if x == 0 and y < 0 or x < 0 and y != math.floor(y) or y < 0 and x == math.floor(x):
        raise ValueError("Python's ** leaves the reals or the machine's numbers here")
    r = _real_pow(x, y)
    if math.isinf(r) and not math.isinf(x) and not math.isinf(y):
        raise OverflowError("Numerical result out of range")
    return r


def _real_pow(x, y):
    """``x ** y`` as Python computes it: numba is taught this function (numba_backend), since
    its own ``float ** int`` multiplies, which rounds otherwise than Python's C ``pow``."""
    return x ** y


_python_pow.numba = _python_pow_checked
PYTHON_POW = Primitive('python_pow', _python_pow, POW.partials, operator.pow)


def _tracer_pow(x, y):
    if isinstance(y, Perturbed):
        return lift2(POW, x, y)
    return apply_traced(PYTHON_POW, (x, y), {})


def _tracer_rpow(x, y):
    return apply_traced(PYTHON_POW, (y, x), {})


def _tracer_mul(x, y):
    c = y.__class__
    if c is Tracer or c is _float or c is _int:
        # (lift2's answer, sooner: record2 records it, else apply_traced in general;
        # never ``or``, which would ask a traced result's truth: a guard)
        out = record2(MUL, x, y)
        return out if out is not None else apply_traced(MUL, (x, y), _NO_PARAMS)
    if isinstance(y, (list, tuple, str)):
        return NotImplemented       # a repetition: Python asks the count's __index__
    return lift2(MUL, x, y)


def _tracer_rmul(x, y):
    c = y.__class__
    if c is _float or c is _int:
        out = record2(MUL, y, x)
        return out if out is not None else apply_traced(MUL, (y, x), _NO_PARAMS)
    if isinstance(y, (list, tuple, str)):
        return NotImplemented
    return lift2(MUL, y, x)


def _tracer_pair(prim):
    """A traced number's ``x op y`` and ``y op x``: with another traced number or a plain
    one, recorded at once (what ``lift2`` would do after its type tests: tracing calls
    these once per operation); anything else through ``lift2``."""
    def forward(self, other):
        c = other.__class__
        if c is Tracer or c is _float or c is _int:
            out = record2(prim, self, other)
            return out if out is not None else apply_traced(prim, (self, other), _NO_PARAMS)
        return lift2(prim, self, other)

    def reflected(self, other):
        c = other.__class__
        if c is _float or c is _int:
            out = record2(prim, other, self)
            return out if out is not None else apply_traced(prim, (other, self), _NO_PARAMS)
        return lift2(prim, other, self)
    return forward, reflected


_NO_PARAMS = {}


def _tracer_divmod(x, y):
    return x // y, x % y


def _tracer_rdivmod(x, y):
    return y // x, y % x


# Every operation goes through lifting, which records it once it reaches tracers.
def _t_neg_tracer(self):
    return apply_traced(NEG, (self,), {})


for _name, _prim in (('add', ADD), ('sub', SUB), ('truediv', DIV), ('mod', MOD)):
    _fwd, _rev = _tracer_pair(_prim)
    setattr(Tracer, f'__{_name}__', _fwd)
    setattr(Tracer, f'__r{_name}__', _rev)
Tracer.__mul__, Tracer.__rmul__ = _tracer_mul, _tracer_rmul
Tracer.__pow__, Tracer.__rpow__ = _tracer_pow, _tracer_rpow
Tracer.__divmod__, Tracer.__rdivmod__ = _tracer_divmod, _tracer_rdivmod
# (the divisor is what raises; the dividend can be replaced in an unused equation)
RAISES.update({DIV: (0,), MOD: (0,), registry.PRIMITIVES['floordiv']: (0,), PYTHON_POW: ()})
Tracer.__neg__ = _t_neg_tracer
Tracer.__pos__ = _pos
Tracer.__abs__ = _abs
for _name, _op in (('and', 'and'), ('or', 'or'), ('xor', 'xor')):
    setattr(Tracer, f'__{_name}__', lambda self, other, _f=LOGIC[_op]: _f(self, other))
    setattr(Tracer, f'__r{_name}__', lambda self, other, _f=LOGIC[_op]: _f(other, self))


def _t_invert(self):
    if self.var.dtype != bool:
        raise TypeError("~ on a traced number: only traced bools have it (logical not)")
    return LOGIC['not'](self)


Tracer.__invert__ = _t_invert
Tracer.__floordiv__ = _floordiv
Tracer.__rfloordiv__ = _rfloordiv
