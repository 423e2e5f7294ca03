"""Taylor mode: ``nestad.jet``, ``derivatives`` and ``taylor_series`` as an interpretation.

A ``Jet(tag, primal, series)`` is a truncated Taylor polynomial of run ``tag``:
``primal + series[0] t + series[1] t^2 + ... + series[K-1] t^K``, ``series`` holding the
*normalised* coefficients ``x_k = x^(k)(0) / k!`` (the recurrences are simplest in them;
``jet`` converts JAX's derivative-scaled series at its edges).  The order axis ``t`` is
the run's own tag, so a jet nests with every other transform without perturbation
confusion, and the coefficients (like ``primal``) hold only smaller tags: the ordering
invariant of notes/design.md.

``TAYLOR.process`` applies ``prim`` to jets by its rule in ``RULES`` (keyed by the
primitive's qualified name): linear and shape primitives coefficient by coefficient,
products by the Cauchy product, and the nonlinear scalar functions by their standard
O(K^2) recurrences.  Every other primitive with a first-order rule written with nestad's
functions (every built-in's partials or JVPs, users' ``defpartials``/``defjvp``) gets its
rule from that rule through the ODE ``y' = f'(x) x'``: the partial (or the JVP applied
to the derivative of the input curve) is evaluated on the inputs' jets of order K-1,
which gives ``y'`` to order K-1, and ``y_k = (y')_{k-1} / k``.  A partial that reads the
output ``out`` gets it as the primitive applied at order K-1 (recursively: O(K^3), for
user rules only; the built-ins that read ``out`` have recurrences).
"""
import math
import threading

import numpy as np

from . import perturbation
from .arrays import ArrayPrimitive, is_array
from .errors import InvalidInputError, MissingRuleError
from .extraction import check_output_leaf
from .interpret import FunctionOp, Interpretation
from .lifting import Primitive, _array_route, lift1, lift2
from . import primitives as P
from .structures import flatten
from .values import Perturbed, _live, escaped, primal_value
from . import registry
from .numpy._dispatch import ARRAY_METHODS, SCALAR_METHODS
from .numpy._joining import stack as anp_stack
from .numpy._kernel import _shape
from .numpy._plumbing import broadcast_to as anp_broadcast_to
from .series import Fused
from .taylor_stack import STACKED_RULES


class Jet(Perturbed):
    """A truncated Taylor polynomial of run ``tag``: ``primal`` and the normalised
    coefficients ``series`` (``x^(k) / k!`` for k = 1..K)."""

    __slots__ = ('tag', 'primal', 'series')

    def __init__(self, tag, primal, series):
        if tag not in _live:
            escaped(tag)
        self.tag = tag
        self.primal = primal
        self.series = series

    def __repr__(self):
        return f"Jet({self.tag // perturbation.STRIDE}, {self.primal!r}, {self.series!r})"


class ArrayJet(Jet):
    """A jet whose coefficients are arrays (numpy's methods and operators, installed by
    ``install``).  Its K + 1 coefficients are held as the primal and a tuple of the K
    higher ones (``primal``, ``series``), or as one array of shape (K + 1, *shape), the
    coefficients stacked along a leading order axis (``full``), or both: each form is made
    from the other when first asked for, and kept.  The stacked rules (``taylor_stack``)
    apply an operation to every order at once, in one array call for the linear ones."""
    __slots__ = ('_primal', '_terms', '_full', 'order')

    def __init__(self, tag, primal=None, terms=None, full=None, order=None):
        if tag not in _live:
            escaped(tag)
        self.tag = tag
        self._primal = primal
        self._terms = terms
        self._full = full
        self.order = len(terms) if order is None else order

    @property
    def primal(self):
        if self._primal is None:
            self._primal = self._full[0]
        return self._primal

    @property
    def series(self):
        if self._terms is None:
            f = self._full
            self._terms = tuple(f[k] for k in range(1, self.order + 1))
        return self._terms

    @property
    def full(self):
        if self._full is None:
            self._full = stacked_terms([self._primal, *self._terms], self._primal)
        return self._full

    def __repr__(self):
        return f"ArrayJet(shape={self.shape}, primal={self.primal!r})"


def make_jet(tag, coeffs):
    """The jet of run ``tag`` with coefficients ``coeffs = [x0, x1, ..., xK]``; for K = 0
    the value ``x0`` itself (a jet of order 0 is its primal)."""
    if len(coeffs) == 1:
        return coeffs[0]
    if is_array(coeffs[0]):
        return ArrayJet(tag, coeffs[0], tuple(coeffs[1:]))
    return Jet(tag, coeffs[0], tuple(coeffs[1:]))


def stacked_terms(terms, primal):
    """``terms`` (coefficients shaped like ``primal``, or broadcastable to it: a rule may
    give a constant's 0.0) stacked along a new leading axis: one array (len(terms), *shape)."""
    shape = _shape(primal)
    if all(t.__class__ is np.ndarray and t.shape == shape for t in terms) or \
            not shape and all(t.__class__ is float or isinstance(t, np.floating) for t in terms):
        return np.stack(terms)
    return anp_stack([t if _shape(t) == shape else anp_broadcast_to(t, shape) for t in terms])


def full_of(x, K):
    """The coefficients ``[x0, ..., xK]`` of a jet of the run as one (K + 1, *shape) array
    (a jet of numbers': an array (K + 1,))."""
    if x.__class__ is ArrayJet:
        f = x.full
        return f if x.order == K else f[:K + 1]
    return stacked_terms([x.primal, *x.series[:K]], x.primal)


def _zero(x):
    """The higher coefficients of a constant ``x``: zeros of its shape."""
    if x.__class__ is float or x.__class__ is int:
        return 0.0
    shape = np.shape(primal_value(x))
    return np.zeros(shape) if shape else 0.0


def coefficients(x, top, K):
    """``[x0, ..., xK]`` of ``x`` in run ``top`` (a constant's higher ones are zero)."""
    if isinstance(x, Jet) and x.tag == top:
        s = x.series
        if len(s) < K:
            raise AssertionError("a jet of lower order met a jet of higher order")
        return [x.primal, *s[:K]]
    z = _zero(x)
    return [x] + [z] * K


# ---------------------------------------------------------------- the interpretation

RULES = {}            # qualified primitive name -> rule(prim, xs, carried, params, K, top)


class Taylor(Interpretation):
    """Taylor mode: the result's coefficients from the arguments' by ``prim``'s rule."""
    __slots__ = ()
    name = 'taylor'

    def process(self, prim, top, args, carried, primals, params):
        if prim.__class__ is FunctionOp:
            return prim.apply(self, top, args, carried, primals, params)
        if prim.__class__ is Fused:                  # (a recurrence of a jet's own: of jets)
            return prim.composed(*args, **params)
        if isinstance(prim, Primitive) and any(is_array(p) for p in primals):
            return _array_route(prim, args)          # a scalar function of a jet of arrays
        K = min(a.order if a.__class__ is ArrayJet else len(a.series) for a, c in zip(args, carried) if c)
        if prim.__class__ is ArrayPrimitive:
            rule = STACKED_RULES.get(prim.qualname)
            if rule is not None:
                out = rule(prim, [full_of(a, K) if c else a for a, c in zip(args, carried)],
                           carried, params, K)
                if out is not None:
                    return stacked_jet(top, out, K)
        xs = [coefficients(a, top, K) if c else a for a, c in zip(args, carried)]
        rule = RULES.get(prim.qualname)
        if rule is None:
            rule = memoised_ode_rule
        out = rule(prim, xs, carried, params, K, top)
        if out.__class__ is not list:                # a piecewise-constant result
            return out
        return make_jet(top, out)


TAYLOR = Taylor()
Jet.interpretation = TAYLOR


def stacked_jet(top, full, K):
    """The result of a stacked rule, its coefficients ``full`` (K + 1, *shape): an array
    jet; a jet of numbers where the result is a plain number (as the coefficient-wise
    rules make it)."""
    if full.__class__ is np.ndarray and full.ndim == 1:
        return Jet(top, full[0], tuple(full[1:]))
    return ArrayJet(top, full=full, order=K)


def _low(xs, carried, top, m):
    """The arguments as jets of order ``m`` (their primals for m = 0)."""
    return [make_jet(top, x[:m + 1]) if c else x for x, c in zip(xs, carried)]


def _slope(x, top):
    """The derivative of the curve ``x`` as a jet of order K-1: ``(k+1) x_{k+1}``."""
    return make_jet(top, [(k + 1) * x[k + 1] for k in range(len(x) - 1)])


class _NeedsOut(BaseException):
    """(Not an Exception: a rule's ``except Exception`` must not swallow it.)"""


class _Out(Perturbed):
    """The ``out`` given to a rule on the first try: any use of it raises ``_NeedsOut``
    (its tag is above every run's, so every operation hands it to its interpretation)."""
    __slots__ = ()
    tag = 1 << 62

    @property
    def primal(self):
        raise _NeedsOut

    def _refuse(self, what, hint=""):
        raise _NeedsOut


class _OutInterpretation(Interpretation):
    __slots__ = ()

    def process(self, prim, top, args, carried, primals, params):
        raise _NeedsOut


_Out.interpretation = _OutInterpretation()
for _name in ('add', 'sub', 'mul', 'truediv', 'pow', 'mod', 'floordiv', 'matmul'):
    setattr(_Out, f'__{_name}__', lambda s, o: s._refuse(''))
    setattr(_Out, f'__r{_name}__', lambda s, o: s._refuse(''))
_Out.__neg__ = _Out.__abs__ = _Out.__pos__ = lambda s: s._refuse('')
_Out.__getitem__ = lambda s, i: s._refuse('')
_OUT = _Out()


def _with_out(first_order, low, prim, params):
    """``first_order(out)`` with ``out`` the result at the order of ``low``, computed only if the
    rule reads it."""
    try:
        r = first_order(_OUT)
        if r is not _OUT:
            return r
    except _NeedsOut:
        pass
    return first_order(prim.lifted(*low, **params))


def ode_rule(prim, xs, carried, params, K, top):
    """The rule of any primitive with a first-order rule: ``y' = f'(x) x'`` integrated."""
    if isinstance(prim, Primitive):
        if prim.partials is None:                     # piecewise constant
            return prim.lifted(*[x[0] if c else x for x, c in zip(xs, carried)])
        low = _low(xs, carried, top, K - 1)

        def first_order(out):
            d = None
            for partial, x, c in zip(prim.partials, xs, carried):
                if c:
                    term = partial(*low, out) * _slope(x, top)
                    d = term if d is None else d + term
            return d
    elif isinstance(prim, ArrayPrimitive):
        if prim.jvps is None and prim.jvp_joint is None:
            return prim.lifted(*[x[0] if c else x for x, c in zip(xs, carried)], **params)
        low = _low(xs, carried, top, K - 1)

        def first_order(out):
            if prim.jvp_joint is not None:
                slopes = [_slope(x, top) if c else None for x, c in zip(xs, carried)]
                return prim.jvp_joint(slopes, *low, out=out, **params)
            d = None
            for i, (x, c) in enumerate(zip(xs, carried)):
                if c:
                    term = prim.jvps[i](_slope(x, top), *low, out=out, **params)
                    d = term if d is None else d + term
            return d
    else:
        raise MissingRuleError(f"Taylor mode (nestad.jet) has no rule for {prim!r}")
    out0 = prim.lifted(*[x[0] if c else x for x, c in zip(xs, carried)], **params)
    if isinstance(out0, tuple):
        raise MissingRuleError(
            f"Taylor mode (nestad.jet) has no rule for {prim.qualname}, whose result is a tuple "
            "of values; compute jets of it with nested nestad.derivative instead.")
    dy = _with_out(first_order, low, prim, params) if K > 1 else first_order(out0)
    d = coefficients(dy, top, K - 1)
    return [out0] + [d[k - 1] / k for k in range(1, K + 1)]


# A rule whose partial applies the primitive again (expit' = out * expit(-x)) recurses on
# two primitives at order K-1, each on two at K-2...: 2^K applications.  Within one
# application, the results of the recursion are memoised by the arguments' values (exact
# bits of plain floats and small arrays), which leaves O(K) distinct applications.
_memo = threading.local()


def _bits(v):
    c = v.__class__
    if c is float:
        return v.hex()
    if c is int or c is bool or c is str or v is None:
        return v
    if c is np.ndarray and v.size <= 4096:
        return (v.shape, v.dtype.str, v.tobytes())
    if isinstance(v, np.generic):
        return (v.dtype.str, v.tobytes())
    if c is tuple:
        return tuple(_bits(e) for e in v)
    raise TypeError


def memoised_ode_rule(prim, xs, carried, params, K, top):
    table = getattr(_memo, 'table', None)
    outermost = table is None
    if outermost:
        table = _memo.table = {}
    try:
        try:
            key = (prim.qualname, top, K, _bits(tuple(sorted(params.items()))),
                   tuple(_bits(tuple(x)) if c else _bits(x) for x, c in zip(xs, carried)))
        except TypeError:              # values of other runs, large arrays: not memoised
            return ode_rule(prim, xs, carried, params, K, top)
        out = table.get(key)
        if out is None:
            out = table[key] = ode_rule(prim, xs, carried, params, K, top)
        return out
    finally:
        if outermost:
            _memo.table = None


# ---------------------------------------------------------------- linear and product rules

def linear(prim, xs, carried, params, K, top):
    """A primitive linear in its arguments jointly: coefficient by coefficient (a
    constant argument is the constant at order 0 and zero above)."""
    out = []
    for k in range(K + 1):
        out.append(prim.lifted(*[x[k] if c else (x if k == 0 else _zero(x))
                                 for x, c in zip(xs, carried)], **params))
    return out


def scalar_add(prim, xs, carried, params, K, top):
    """``a + b`` and ``a - b`` of scalars: a constant moves only the primal."""
    (a, b), (ca, cb) = xs, carried
    if ca and cb:
        return [prim.lifted(a[k], b[k]) for k in range(K + 1)]
    if ca:
        return [prim.lifted(a[0], b)] + a[1:]
    return [prim.lifted(a, b[0])] + ([-v for v in b[1:]] if prim is P.SUB else b[1:])


def select(prim, xs, carried, params, K, top):
    """``where(c, x, y)``: the condition is a value of no run; each coefficient chosen."""
    cond = xs[0]
    return [prim.lifted(cond, *[x[k] if c else (x if k == 0 else _zero(x))
                                for x, c in zip(xs[1:], carried[1:])], **params)
            for k in range(K + 1)]


def bilinear(prim, xs, carried, params, K, top):
    """A product (``*``, matmul, dot...): the Cauchy product ``c_k = sum_j f(a_j, b_{k-j})``."""
    (a, b), (ca, cb) = xs, carried
    f = prim.lifted
    if not cb:
        return [f(a[k], b, **params) for k in range(K + 1)]
    if not ca:
        return [f(a, b[k], **params) for k in range(K + 1)]
    out = []
    for k in range(K + 1):
        s = f(a[0], b[k], **params)
        for j in range(1, k + 1):
            s = s + f(a[j], b[k - j], **params)
        out.append(s)
    return out


def divide(prim, xs, carried, params, K, top):
    """``q = a / b``: ``q_k = (a_k - sum_{j=1..k} b_j q_{k-j}) / b_0``."""
    (a, b), (ca, cb) = xs, carried
    f = prim.lifted
    if not cb:
        return [f(a[k], b) for k in range(K + 1)]
    q = [f(a[0] if ca else a, b[0])]
    r = P.recip(b[0]) if not is_array(b[0]) else 1.0 / b[0]
    for k in range(1, K + 1):
        s = a[k] if ca else 0.0
        for j in range(1, k + 1):
            s = s - b[j] * q[k - j]
        q.append(s * r)
    return q


def _weighted(x, y, k, start=1):
    """``sum_{j=start..k} j x_j y_{k-j}`` (the sums of the ODE recurrences)."""
    s = x[start] * y[k - start] * start
    for j in range(start + 1, k + 1):
        s = s + j * x[j] * y[k - j]
    return s


def _unary(fn):
    """A rule for one argument from ``fn(prim, x, K)`` giving its coefficients."""
    def rule(prim, xs, carried, params, K, top):
        return fn(prim, xs[0], K)
    return rule


def exp_series(y0, x, K):
    """``y = exp(x)``: ``k y_k = sum_j j x_j y_{k-j}``."""
    y = [y0]
    for k in range(1, K + 1):
        y.append(_weighted(x, y, k) / k)
    return y


def _exp(prim, x, K):
    return exp_series(prim.lifted(x[0]), x, K)


def _exp2(prim, x, K):
    ln2 = math.log(2.0)
    return exp_series(prim.lifted(x[0]), [x[0]] + [ln2 * c for c in x[1:]], K)


def _expm1(prim, x, K):
    y = exp_series(P.exp(x[0]), x, K)
    return [prim.lifted(x[0])] + y[1:]


def _log(prim, x, K):
    """``y = log(x)``: ``x0 y_k = x_k - (1/k) sum_{j=1..k-1} j y_j x_{k-j}``."""
    r = P.recip(x[0])
    y = [prim.lifted(x[0])]
    for k in range(1, K + 1):
        s = x[k]
        if k > 1:
            s = s - _sum_jy(y, x, k) / k
        y.append(s * r)
    return y


def _sum_jy(y, x, k):
    """``sum_{j=1..k-1} j y_j x_{k-j}``."""
    s = y[1] * x[k - 1]
    for j in range(2, k):
        s = s + j * y[j] * x[k - j]
    return s


def _log1p(prim, x, K):
    u = [1.0 + x[0]] + x[1:]
    y = _log(P.LOG, u, K)
    return [prim.lifted(x[0])] + y[1:]


def _log_base(base):
    def rule(prim, x, K):
        y = _log(P.LOG, x, K)
        c = 1.0 / math.log(base)
        return [prim.lifted(x[0])] + [c * v for v in y[1:]]
    return rule


def sin_cos(x, K, s0, c0):
    """``s = sin(x)``, ``c = cos(x)`` together: ``k s_k = sum j x_j c_{k-j}``, ``k c_k = -sum j x_j s_{k-j}``."""
    s, c = [s0], [c0]
    for k in range(1, K + 1):
        s.append(_weighted(x, c, k) / k)
        c.append(-_weighted(x, s, k) / k)
    return s, c


def sinh_cosh(x, K, s0, c0):
    s, c = [s0], [c0]
    for k in range(1, K + 1):
        s.append(_weighted(x, c, k) / k)
        c.append(_weighted(x, s, k) / k)
    return s, c


def _sin(prim, x, K):
    return sin_cos(x, K, prim.lifted(x[0]), P.cos(x[0]))[0]


def _cos(prim, x, K):
    return sin_cos(x, K, P.sin(x[0]), prim.lifted(x[0]))[1]


def _sinh(prim, x, K):
    return sinh_cosh(x, K, prim.lifted(x[0]), P.cosh(x[0]))[0]


def _cosh(prim, x, K):
    return sinh_cosh(x, K, P.sinh(x[0]), prim.lifted(x[0]))[1]


def _tan_like(sign):
    """``y = tan(x)`` (sign +1: y' = (1 + y^2) x') or ``tanh`` (sign -1: (1 - y^2) x')."""
    def rule(prim, x, K):
        y = [prim.lifted(x[0])]
        # z = 1 +- y^2, one step behind y; tanh's z0 is sech(x0)^2, since 1 - tanh^2
        # cancels for large |x0| (1.7e-4 relative at x0 = -15, all digits from 19 on)
        z = [1.0 + y[0] * y[0] if sign > 0 else _sech2(x[0])]
        for k in range(1, K + 1):
            y.append(_weighted(x, z, k) / k)
            z.append(sign * _square_k(y, k))
        return y
    return rule


def _sech2(x0):
    if is_array(x0):
        from .arrays import apply
        from .registry import lookup
        return apply(lookup('numpy.sech2'), (x0,), {})
    return P.sech2(x0)


def _square_k(y, k):
    """Coefficient k of ``y^2``: ``sum_{j=0..k} y_j y_{k-j}``."""
    s = y[0] * y[k]
    for j in range(1, k + 1):
        s = s + y[j] * y[k - j]
    return s


def _sqrt(prim, x, K):
    """``y^2 = x``: ``2 y0 y_k = x_k - sum_{j=1..k-1} y_j y_{k-j}``."""
    y = [prim.lifted(x[0])]
    r = 0.5 * P.recip(y[0]) if not is_array(y[0]) else 0.5 / y[0]
    for k in range(1, K + 1):
        s = x[k]
        for j in range(1, k):
            s = s - y[j] * y[k - j]
        y.append(s * r)
    return y


def power_series(y0, x, r, K):
    """``y = x^r``, ``r`` constant, ``x0 != 0``: ``k x0 y_k = sum_{j=0..k-1} (r (k-j) - j) x_{k-j} y_j``."""
    inv = P.recip(x[0]) if not is_array(x[0]) else 1.0 / x[0]
    y = [y0]
    for k in range(1, K + 1):
        s = r * k * x[k] * y[0]
        for j in range(1, k):
            s = s + (r * (k - j) - j) * x[k - j] * y[j]
        y.append(s * inv / k)
    return y


def _cauchy(a, b, K):
    return [_sum_prod(a, b, k) for k in range(K + 1)]


def _sum_prod(a, b, k):
    s = a[0] * b[k]
    for j in range(1, k + 1):
        s = s + a[j] * b[k - j]
    return s


def _raw(x):
    """The plain value under every tag (also under vmap's batching: a test of all members)."""
    while isinstance(x, Perturbed):
        x = x.primal
    return x


def _integer_power(x, n, K):
    """``x^n`` for an integer ``n >= 0`` by repeated squaring of the series (exact at 0)."""
    result = [1.0] + [0.0] * K
    base = x
    while n:
        if n & 1:
            result = _cauchy(result, base, K)
        n >>= 1
        if n:
            base = _cauchy(base, base, K)
    return result


def _pow(prim, xs, carried, params, K, top):
    (x, y), (cx, cy) = xs, carried
    if cy:              # a varying exponent: x^y = exp(y log x)
        lx = _log(P.LOG, x, K) if cx else [P.log(x)] + [0.0] * K
        e = _cauchy(lx, y, K) if cx else [lx[0] * v for v in y]
        return [prim.lifted(x[0] if cx else x, y[0])] + exp_series(
            prim.lifted(x[0] if cx else x, y[0]), e, K)[1:]
    y0 = prim.lifted(x[0], y)
    zero = _raw(x[0]) == 0
    if np.any(zero):
        r = _raw(y)
        if np.ndim(zero) == 0 and np.ndim(r) == 0 and 0 <= r < math.inf and r == int(r):
            return [y0] + _integer_power(x, int(r), K)[1:]      # exact at 0
        return ode_rule(prim, xs, carried, params, K, top)
    return power_series(y0, x, y, K)


def _recip(prim, x, K):
    return [prim.lifted(x[0])] + divide(P.DIV, [1.0, x], (False, True), {}, K, None)[1:]


def _cbrt(prim, x, K):
    y0 = prim.lifted(x[0])
    return power_series(y0, x, 1.0 / 3.0, K)


for _names, _rule in (
        (('add', 'sub'), scalar_add),
        (('neg', 'numpy.add', 'numpy.subtract', 'numpy.negative', 'numpy.sum_to',
          'numpy.broadcast_to', 'numpy.reshape', 'numpy.transpose', 'numpy.getitem',
          'numpy.scatter_add', 'numpy.at.set', 'numpy.at.add', 'numpy.astype', 'numpy.sum',
          'numpy.concatenate', 'numpy.cumsum', 'numpy.banded_dense', 'numpy.banded_take'), linear),
        (('select', 'numpy.where'), select),
        (('mul', 'numpy.multiply', 'numpy.matmul', 'numpy.inner', 'numpy.vdot', 'numpy.dot',
          'numpy.vecdot', 'numpy.convolve', 'numpy.correlate'), bilinear),
        (('div', 'numpy.divide'), divide),
        (('pow', 'numpy.power', 'numpy.float_power'), _pow)):
    for _n in _names:
        RULES[_n] = _rule

_UNARY = dict(exp=_exp, exp2=_exp2, expm1=_expm1, log=_log, log1p=_log1p,
              log2=_log_base(2.0), log10=_log_base(10.0), sin=_sin, cos=_cos, tan=_tan_like(1.0),
              sinh=_sinh, cosh=_cosh, tanh=_tan_like(-1.0), sqrt=_sqrt, recip=_recip, cbrt=_cbrt)
_NUMPY_NAMES = {'recip': 'reciprocal'}


def _install_unary():
    numpy_name = {prim.name: f"numpy.{fn.__name__}" for prim, fn in registry.ELEMENTWISE}
    for name, fn in _UNARY.items():
        RULES[name] = _unary(fn)
        qual = numpy_name.get(name) or f"numpy.{_NUMPY_NAMES.get(name, name)}"
        RULES[qual] = _unary(fn)


_install_unary()


def block_toeplitz(prim, xs, carried, params, K, top):
    """A matrix function ``F`` that is a power series (``expm``) of a matrix curve ``A(t)``:
    the block upper triangular Toeplitz matrices ``T(A0, ..., AK)`` (``A0`` on the diagonal,
    ``Aj`` on the j-th block superdiagonal) are the matrix polynomials in t truncated after
    t^K, so ``F(T(A0..AK)) = T(F0..FK)``, the coefficients of ``F(A(t))``: its first block
    row (Higham, Functions of Matrices, thm. 4.16).  One application to a matrix (K + 1)
    times larger, where the ODE rule through expm's Frechet derivative (the exponential of
    a matrix twice as large) doubles the size per order: 2^K."""
    from . import numpy as anp
    a = xs[0]
    shape = np.shape(primal_value(a[0]))
    n = shape[-1]
    zero = np.zeros(shape)
    rows = [anp.concatenate([zero] * i + a[:K + 1 - i], axis=-1) for i in range(K + 1)]
    f = prim.lifted(anp.concatenate(rows, axis=-2), **params)
    return [f[..., :n, j * n:(j + 1) * n] for j in range(K + 1)]


# ---------------------------------------------------------------- linear systems

def is_plain(v):
    """A plain number or numpy array (no run's perturbation, no tracer, no batch): a
    factorisation of it may be reused outside nestad's primitives."""
    return v.__class__ in (np.ndarray, float, int) or isinstance(v, np.generic)


def linear_system(x0, b, cb, K, times_a, solve0):
    """The coefficients of x(t) with A(t) x(t) = b(t), from A0 x_k = b_k - sum_{j=1..k} A_j
    x_{k-j}: one solve with A0 per order.  ``times_a(j, x)`` is A_j x (None for a constant
    A), ``solve0(r)`` solves with A0, ``x0`` the primal solution."""
    x = [x0]
    for k in range(1, K + 1):
        r = b[k] if cb else 0.0
        if times_a is not None:
            for j in range(1, k + 1):
                r = r - times_a(j, x[k - j])
        x.append(solve0(r))
    return x


def reused(factor, solve_plain, solve_lifted, a0):
    """``solve0`` for linear_system: a plain ``a0`` is factored once (``factor``) and each
    plain right-hand side solved with the factors; otherwise (other runs' perturbations,
    tracers) the primitive itself, whose derivatives are its rules'."""
    factors = []

    def solve0(r):
        if is_plain(a0) and is_plain(r):
            if not factors:
                factors.append(factor(a0))
            return solve_plain(factors[0], r)
        return solve_lifted(r)
    return solve0


def _solve_rule(prim, xs, carried, params, K, top):
    """numpy.linalg.solve, a x = b: one LU factorisation, K solves (through the ODE rule its
    jvp, which reads x, recursed on the lower orders: 2.5 s for order 10 of a 3 x 3)."""
    import scipy.linalg as sla
    from . import numpy as anp
    (a, b), (ca, cb) = xs, carried
    a0, b0 = a[0] if ca else a, b[0] if cb else b
    x0 = prim.lifted(a0, b0)
    lifted = lambda r: prim.lifted(a0, r)
    if np.ndim(primal_value(a0)) == 2 and np.ndim(primal_value(x0)) == 2:
        solve0 = reused(sla.lu_factor, lambda f, r: sla.lapack.dgetrs(f[0], f[1], r)[0], lifted, a0)
    else:                                                # (stacks: numpy's solve per order)
        solve0 = lifted
    return linear_system(x0, b, cb, K, (lambda j, x: anp.matmul(a[j], x)) if ca else None, solve0)


RULES['numpy.linalg.solve'] = _solve_rule


# ---------------------------------------------------------------- arithmetic on jets

def _operators():
    """Scalar jets: the operators through the scalar primitives (``lift2`` hands them to
    ``TAYLOR``, which sends arrays to nestad.numpy); array jets: numpy's methods."""
    for name, prim in (('add', P.ADD), ('sub', P.SUB), ('mul', P.MUL), ('truediv', P.DIV),
                       ('mod', P.MOD)):
        setattr(Jet, f'__{name}__', lambda s, o, _p=prim: lift2(_p, s, o))
        setattr(Jet, f'__r{name}__', lambda s, o, _p=prim: lift2(_p, o, s))

    def _pow(s, o, mod=None):
        if mod is not None:
            raise P.modular_pow_error()
        return lift2(P.POW, s, o)
    Jet.__pow__ = _pow
    Jet.__rpow__ = lambda s, o: lift2(P.POW, o, s)
    Jet.__neg__ = lambda s: lift1(P.NEG, s)
    Jet.__pos__ = lambda s: s
    Jet.__abs__ = lambda s: lift1(P.ABS, s)
    Jet.__floordiv__ = P._floordiv
    Jet.__rfloordiv__ = P._rfloordiv
    for name in SCALAR_METHODS:
        setattr(Jet, name, ARRAY_METHODS[name])
    for name, fn in ARRAY_METHODS.items():
        setattr(ArrayJet, name, fn)


_operators()


# ---------------------------------------------------------------- the operators

def _run(f, primals, normalised, K, op, kwargs):
    """``f(*primals)`` with input leaf i the curve ``primals_i + sum_k normalised[i][k] t^k``:
    the output structure, and per output leaf its coefficients ``[y0, y1, ..., yK]``."""
    tag = perturbation.fresh()
    try:
        args = [make_jet(tag, [x, *s]) if s is not None else x for x, s in zip(primals, normalised)]
        out = f(*args, **kwargs)
        leaves, tree = flatten(out, "output", op)
        coeffs = []
        for k, y in enumerate(leaves):
            check_output_leaf(op, k, y, tag)
            coeffs.append(coefficients(y, tag, K))
        return tree, coeffs
    finally:
        perturbation.retire(tag)


def _is_value(x):
    return isinstance(x, (int, float, np.ndarray, np.generic, Perturbed)) and not isinstance(x, bool) \
        or hasattr(x, 'var')                                            # (a tracer)


def jet(f, primals, series, /, **kwargs):
    """Taylor mode, JAX's ``jax.experimental.jet.jet``: ``(f(*primals), series_out)``.

    ``series[i]`` is a list of K terms ``(x1, ..., xK)``, the derivatives at 0 of the
    input curve ``x_i(t)`` through ``primals[i]`` (each term shaped like ``primals[i]``: a
    number, an array or a structure of them).  ``series_out`` has the output's structure
    with each leaf replaced by the list ``(y1, ..., yK)`` of the derivatives of
    ``f(x(t))`` at 0.  One pass, O(K^2) per operation.  Keyword arguments go to ``f``
    and are constants.  Nests with every other operator."""
    if not isinstance(primals, (tuple, list)) or not isinstance(series, (tuple, list)):
        raise InvalidInputError("jet: primals and series must be tuples (or lists) with one "
                                "entry per positional argument of f, as jet(f, (x,), ((x1, x2),))")
    if len(primals) != len(series):
        raise InvalidInputError(f"jet: {len(primals)} primals but {len(series)} series; give one "
                                "series (a list of K terms) per primal")
    orders = set()
    for i, s in enumerate(series):
        if not isinstance(s, (tuple, list)):
            raise InvalidInputError(f"jet: series[{i}] is a {type(s).__name__}; each series is a "
                                    "list of K terms (x1, ..., xK), e.g. ((1.0, 0.0),) for K = 2")
        orders.add(len(s))
    if len(orders) > 1:
        raise InvalidInputError(f"jet: the series have different lengths {sorted(orders)}; every "
                                "argument's series needs the same number K of terms")
    K = orders.pop() if orders else 0
    leaves, trees, norm = [], [], []
    for i, (x, s) in enumerate(zip(primals, series)):
        xl, tree = flatten(x, f"primals[{i}]", "jet")
        per_leaf = [[] for _ in xl]
        for k, term in enumerate(s):
            tl, ttree = flatten(term, f"series[{i}][{k}]", "jet")
            if ttree.signature() != tree.signature():
                raise InvalidInputError(f"jet: series[{i}][{k}] does not have the structure of "
                                        f"primals[{i}]; each term is shaped like its primal")
            for j, (p, t) in enumerate(zip(xl, tl)):
                if not _is_value(t):
                    raise InvalidInputError(f"jet: series[{i}][{k}] leaf {j} is a "
                                            f"{type(t).__name__}, not a number or array")
                if np.shape(primal_value(p)) != np.shape(primal_value(t)):
                    raise InvalidInputError(
                        f"jet: series[{i}][{k}] leaf {j} has shape {np.shape(primal_value(t))} but "
                        f"its primal has shape {np.shape(primal_value(p))}; terms are never broadcast")
                per_leaf[j].append(t / math.factorial(k + 1))
        for j, p in enumerate(xl):
            if not _is_value(p):
                raise InvalidInputError(f"jet: primals[{i}] leaf {j} is a {type(p).__name__}, "
                                        "not a number or array")
        leaves.append(xl)
        trees.append(tree)
        norm.append(per_leaf)
    if K == 0:
        out = f(*primals, **kwargs)
        leaves_out, tree = flatten(out, "output", "jet")
        return out, tree.build([[] for _ in leaves_out])
    flat_x = [p for xl in leaves for p in xl]
    flat_s = [s for sl in norm for s in sl]

    def on_leaves(*ls):
        args, n = [], 0
        for xl, tree in zip(leaves, trees):
            args.append(tree.build(list(ls[n:n + len(xl)])))
            n += len(xl)
        return f(*args, **kwargs)
    tree, coeffs = _run(on_leaves, flat_x, flat_s, K, "jet", {})
    primal_out = tree.build([c[0] for c in coeffs])
    series_out = tree.build([[c[k] * math.factorial(k) for k in range(1, K + 1)] for c in coeffs])
    return primal_out, series_out


def _check_order(k, op):
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 0:
        raise InvalidInputError(f"{op}: the order k must be an int >= 0, not {k!r:.40}")
    return int(k)


def _scalar_curve(f, k, op, x, direction, kwargs):
    """Coefficients ``[y0..yk]`` of ``f(x + t v)`` (normalised), and the output tree."""
    shape = np.shape(primal_value(x))
    if direction is None:
        if shape:
            raise InvalidInputError(
                f"{op}: x has shape {shape}; for an array give a direction v "
                f"({op}(f, k)(x, v) differentiates t -> f(x + t v) at 0), or use nestad.jet")
        direction = 1.0
    elif np.shape(primal_value(direction)) != shape:
        raise InvalidInputError(f"{op}: the direction has shape {np.shape(primal_value(direction))} "
                                f"but x has shape {shape}; give v shaped like x")
    if not _is_value(x):
        raise InvalidInputError(f"{op}: x is a {type(x).__name__}, not a number or array")
    if k == 0:
        out = f(x, **kwargs)
        leaves, tree = flatten(out, "output", op)
        return tree, [[y] for y in leaves]
    z = _zero(x)
    return _run(f, [x], [[direction] + [z] * (k - 1)], k, op, kwargs)


def derivatives(f, k):
    """``derivatives(f, k)(x)``: ``[f(x), f'(x), ..., f^(k)(x)]`` in one Taylor pass, each
    entry with ``f``'s output structure.  For an array ``x`` give a direction:
    ``derivatives(f, k)(x, v)`` are the derivatives of ``t -> f(x + t v)`` at 0."""
    k = _check_order(k, "derivatives")

    def of(x, v=None, /, **kwargs):
        tree, coeffs = _scalar_curve(f, k, "derivatives", x, v, kwargs)
        return [tree.build([c[j] * math.factorial(j) if j > 1 else c[j] for c in coeffs])
                for j in range(k + 1)]
    of.__name__ = f"derivatives({getattr(f, '__name__', 'f')}, {k})"
    return of


def taylor_series(f, k):
    """``taylor_series(f, k)(x)``: the Taylor coefficients ``[f(x), f'(x), f''(x)/2!, ...,
    f^(k)(x)/k!]`` (``(x, v)`` for the curve ``t -> f(x + t v)`` of an array ``x``)."""
    k = _check_order(k, "taylor_series")

    def of(x, v=None, /, **kwargs):
        tree, coeffs = _scalar_curve(f, k, "taylor_series", x, v, kwargs)
        return [tree.build([c[j] for c in coeffs]) for j in range(k + 1)]
    of.__name__ = f"taylor_series({getattr(f, '__name__', 'f')}, {k})"
    return of
