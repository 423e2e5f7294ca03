"""Every primitive in nestad's registry under Taylor mode.

``CASES`` names, for each registered primitive (scalar, array, nestad.scipy's, the staged
loops'), one or more curves ``t -> f(t)`` through it; for each case, ``nd.derivatives(f, 10)``
at 0 is compared with nested ``nd.derivative`` (orders 0 to 6, 1e-12 relative) and with an
independent reference to order 10: mpmath's ``diffs`` of the same function written with
mpmath (elementwise functions element by element; linear algebra on mpmath matrices), or a
closed form (linear, multilinear and polynomial functions).  Points are generic and near
the domain's edges (log and sqrt near 0, arcsin and arctanh near +-1, large arguments,
the branches the rules switch at).  ``test_every_registered_primitive_has_a_case`` fails
when a primitive is registered without a case here; each case also checks that Taylor
mode actually applied its primitive (``seen``).  JAX's jet is compared wherever JAX has
the rule."""
import contextlib
import importlib
import math
import pkgutil

import mpmath
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import primitives as P
from nestad import registry, taylor
from nestad.arrays import apply
from nestad.interpret import bind
from nestad.numpy import _banded
from nestad.scipy import linalg as sla
from nestad.scipy import signal as ssig
from nestad.scipy import special as sp
from nestad.scipy import stats as st
from nestad.staging import loops

mp = mpmath.mp
mp.dps = 40
ORDER, NESTED = 10, 6


def _import_everything():
    """Every nestad module, so that every primitive is registered."""
    for m in pkgutil.walk_packages(nd.__path__, 'nestad.'):
        importlib.import_module(m.name)


_import_everything()


# ---------------------------------------------------------------- cases

class Case:
    """A curve through a primitive: ``f(t)``, its derivatives at 0 by ``ref()`` (an
    (ORDER + 1, n) array, derivatives by rows, the output's leaves flattened), and JAX's
    version ``jax(jnp, t)`` if JAX has a Taylor rule for it."""

    def __init__(self, f, ref=None, jax=None, rtol=1e-11, nested_order=NESTED, why=None,
                 taylor_applies=True, nested_rtol=1e-12, jax_rtol=1e-10, zero=1e-100):
        self.f, self.ref, self.jax, self.rtol = f, ref, jax, rtol
        self.nested_rtol, self.jax_rtol, self.zero = nested_rtol, jax_rtol, zero
        self.nested_order, self.why, self.taylor_applies = nested_order, why, taylor_applies


CASES = {}


def case(qualname, *cases):
    CASES.setdefault(qualname, []).extend(cases)


def flat(out):
    """The leaves of an output (tuples, lists, dicts, numbers, arrays) as one float vector."""
    if isinstance(out, dict):
        return flat([out[k] for k in sorted(out)])
    if isinstance(out, (tuple, list)):
        return np.concatenate([flat(o) for o in out]) if out else np.zeros(0)
    return np.ravel(np.asarray(nd.primal_value(out), dtype=float))


def mp_diffs(F, n=ORDER):
    """Derivatives 0..n at 0 of ``s -> F(s)``, an mpmath function giving a flat list of
    numbers (evaluations shared between the entries, per working precision)."""
    memo = {}

    def value(s):
        key = (s, mp.prec)
        if key not in memo:
            memo[key] = [mpmath.mpf(v) for v in F(s)]
        return memo[key]
    with mpmath.workdps(60):        # (noise around a near zero: cos at the float pi/2)
        size = len(value(mpmath.mpf(0)))
        return np.array([[float(d) for d in mpmath.diffs(lambda s, i=i: value(s)[i], 0, n)]
                         for i in range(size)]).T


def curve(x, v):
    return lambda t: x + t * v


rng = np.random.default_rng(1616)


def directions(n):
    return np.array([0.8, -1.1, 0.6, -0.35, 1.3, -0.7, 0.45, 0.9, -1.2][:n] * (n // 9 + 1))[:n]


def elementwise(fn, g, *args, jax=None, rtol=1e-11, **kw):
    """A case for an elementwise function of arrays: argument i follows ``a_i + t d_i``
    (``args`` pairs ``(a, d)``; ``d`` None for a constant), the reference element by
    element with mpmath's ``g``."""
    arrs = [(np.asarray(a, float), None if d is None else np.asarray(d, float)) for a, d in args]
    shape = np.broadcast_shapes(*[a.shape for a, _ in arrs])
    # (numbers stay Python floats: the scalar primitives', not numpy's, are under test)
    given = [(float(a), None if d is None else float(d)) if a.ndim == 0 else (a, d) for a, d in arrs]

    def f(t):
        return fn(*[a if d is None else a + t * d for a, d in given])

    def ref():
        full = [(np.broadcast_to(a, shape).ravel(), None if d is None else np.broadcast_to(d, shape).ravel())
                for a, d in arrs]
        cols = []
        for i in range(int(np.prod(shape))):
            pts = [(mpmath.mpf(a[i]), None if d is None else mpmath.mpf(d[i])) for a, d in full]
            cols.append(mp_diffs(lambda s: [g(*[a if d is None else a + s * d for a, d in pts])])[:, 0])
        return np.array(cols).T
    jf = None
    if jax is not None:
        def jf(jnp, t):
            return jax(jnp)(*[a if d is None else a + t * d for a, d in arrs])
    return Case(f, ref, jf, rtol=rtol, **kw)


def polynomial_ref(values_of_coeffs):
    """The reference of a polynomial curve: ``values_of_coeffs()`` gives its normalised
    coefficients (a list of arrays, possibly shorter than ORDER + 1)."""
    def ref():
        c = [flat(v) for v in values_of_coeffs()]
        c += [np.zeros_like(c[0])] * (ORDER + 1 - len(c))
        return np.array([ck * math.factorial(k) for k, ck in enumerate(c[:ORDER + 1])])
    return ref


def multilinear(fn, *shapes, jax=None, plain=None, **kw):
    """A case for a function linear in each argument: argument j follows ``A_j + t B_j``;
    coefficient k is the sum over the k-subsets S of ``fn`` with B_j for j in S
    (computed with ``plain``, numpy's version, on plain arrays)."""
    A = [rng.normal(size=s) for s in shapes]
    B = [rng.normal(size=s) for s in shapes]
    plain = plain or fn

    def coeffs():
        import itertools
        n = len(shapes)
        out = []
        for k in range(n + 1):
            total = None
            for S in itertools.combinations(range(n), k):
                term = np.asarray(plain(*[B[j] if j in S else A[j] for j in range(n)]), float)
                total = term if total is None else total + term
            out.append(total)
        return out
    jf = (lambda jnp, t: jax(jnp)(*[a + t * b for a, b in zip(A, B)])) if jax else None
    return Case(lambda t: fn(*[a + t * b for a, b in zip(A, B)]), polynomial_ref(coeffs), jf, **kw)


def linear(fn, *shapes, jax=None, plain=None, **kw):
    """A case for a function linear in all its arguments jointly: argument j follows the
    quadratic ``A_j + t B_j + t^2 C_j``; the coefficients are fn(A), fn(B), fn(C)."""
    A, B, C = ([rng.normal(size=s) for s in shapes] for _ in range(3))
    plain = plain or fn
    jf = (lambda jnp, t: jax(jnp)(*[a + t * b + t * t * c for a, b, c in zip(A, B, C)])) if jax else None
    return Case(lambda t: fn(*[a + t * b + t * t * c for a, b, c in zip(A, B, C)]),
                polynomial_ref(lambda: [plain(*A), plain(*B), plain(*C)]), jf, **kw)


# ---------------------------------------------------------------- scalar primitives

# name: (nestad function, mpmath function, points (generic and near domain edges), jax name)
UNARY = {
    'exp': (nd.exp, mpmath.exp, [0.3, -20.0, 700.0], 'exp'),
    'expm1': (nd.expm1, mpmath.expm1, [1e-8, -0.5, 30.0], 'expm1'),
    'exp2': (nd.exp2, lambda x: mpmath.power(2, x), [0.7, -3.0, 1000.0], 'exp2'),
    'log': (nd.log, mpmath.log, [0.3, 1e-8, 1e300], 'log'),
    'log1p': (nd.log1p, mpmath.log1p, [-0.999, 0.4, 1e-9], 'log1p'),
    'log2': (nd.log2, lambda x: mpmath.log(x, 2), [1.7, 1e-3], None),
    'log10': (nd.log10, mpmath.log10, [1.7, 1e-3], None),
    'sqrt': (nd.sqrt, mpmath.sqrt, [1e-6, 2.0, 1e10], 'sqrt'),
    'cbrt': (nd.cbrt, lambda x: mpmath.sign(x) * mpmath.cbrt(abs(x)), [0.5, -3.0, 1e-5], 'cbrt'),
    'sin': (nd.sin, mpmath.sin, [0.3, 1e5, 1e-9], 'sin'),
    'cos': (nd.cos, mpmath.cos, [0.3, -4.0, math.pi / 2], 'cos'),
    'tan': (nd.tan, mpmath.tan, [0.3, 1.55, -1.5707], 'tan'),
    'asin': (nd.asin, mpmath.asin, [0.2, 0.999, -0.9999], 'arcsin'),
    'acos': (nd.acos, mpmath.acos, [0.2, 0.999, -0.9999], 'arccos'),
    'atan': (nd.atan, mpmath.atan, [0.2, 30.0, -1e4], 'arctan'),
    'sinh': (nd.sinh, mpmath.sinh, [0.2, 3.0, -300.0], 'sinh'),
    'cosh': (nd.cosh, mpmath.cosh, [0.2, -3.0, 300.0], 'cosh'),
    'tanh': (nd.tanh, mpmath.tanh, [0.2, 3.0, -15.0], 'tanh'),
    'sech2': (P.sech2, lambda x: mpmath.sech(x) ** 2, [0.2, -3.0, 30.0], None),
    'asinh': (nd.asinh, mpmath.asinh, [0.2, -5.0, 1e6], 'arcsinh'),
    'acosh': (nd.acosh, mpmath.acosh, [1.001, 5.0, 1e6], 'arccosh'),
    'atanh': (nd.atanh, mpmath.atanh, [0.2, 0.999, -0.9999], 'arctanh'),
    'erf': (nd.erf, mpmath.erf, [0.2, 3.0, -5.0], None),
    'erfc': (nd.erfc, mpmath.erfc, [0.2, 3.0, 10.0], None),
    'abs': (nd.abs, abs, [0.2, -3.0, -1e-12], 'abs'),
    'recip': (P.recip, lambda x: 1 / x, [0.2, -3.0, 1e-6], 'reciprocal'),
    'neg': (lambda x: -x, lambda x: -x, [0.2], 'negative'),
}
for _name, (_f, _g, _xs, _) in UNARY.items():
    for _x in _xs:
        case(_name, elementwise(_f, _g, (_x, 1.0)))

# name: (nestad function of two scalars, mpmath function, points ((x, y), ...))
BINARY = {
    'add': (lambda x, y: x + y, lambda x, y: x + y, [(0.3, -2.0)]),
    'sub': (lambda x, y: x - y, lambda x, y: x - y, [(0.3, -2.0)]),
    'mul': (lambda x, y: x * y, lambda x, y: x * y, [(0.3, -2.0), (1e-200, 1e150)]),
    'div': (lambda x, y: x / y, lambda x, y: x / y, [(0.3, -2.0), (1.0, 1e-8)]),
    'pow': (lambda x, y: x ** y, lambda x, y: x ** y, [(0.3, 2.5), (2.0, -1.5), (50.0, 0.3)]),
    'atan2': (nd.atan2, mpmath.atan2, [(0.3, -2.0), (1e-6, 1.0), (-0.5, -1e-6)]),
    'hypot': (nd.hypot, lambda x, y: mpmath.sqrt(x * x + y * y), [(0.3, -2.0), (1e-6, 1.0)]),
    'maximum': (nd.maximum, max, [(0.3, -2.0), (-1.0, 2.0)]),
    'minimum': (nd.minimum, min, [(0.3, -2.0), (-1.0, 2.0)]),
    'mod': (lambda x, y: x % y, lambda x, y: x - y * mpmath.floor(x / y), [(5.3, 2.0), (-5.3, 2.0)]),
    # ** of traced plain numbers (a staged function run on jets meets it as a primitive)
    'python_pow': (lambda x, y: bind(P.PYTHON_POW, (x, y), {}), lambda x, y: x ** y,
                   [(0.3, 2.5), (2.0, -1.5)]),
}
for _name, (_f, _g, _pts) in BINARY.items():
    for _x, _y in _pts:
        case(_name, elementwise(_f, _g, (_x, 0.7), (_y, -0.4)),       # both arguments vary
             elementwise(_f, _g, (_x, 0.7), (_y, None)),               # the first only
             elementwise(_f, _g, (_x, None), (_y, -0.4)))              # the second only
# powers with a constant exponent at a zero base: exact, by repeated squaring
case('pow', Case(lambda t: (2.0 * t) ** 3, polynomial_ref(lambda: [0.0, 0.0, 0.0, 8.0])),
     Case(lambda t: (2.0 * t) ** 0, polynomial_ref(lambda: [1.0])))


def _constant_case(fn, expect):
    """A piecewise-constant primitive: its value, and no derivative, inside a function
    whose jet is known (``x + c`` with x = 1.25 + t).  nestad's piecewise-constant
    functions read their arguments' primal values (in every mode), so Taylor mode never
    meets them."""
    return Case(lambda t: fn(1.25 + t) + (1.25 + t), polynomial_ref(lambda: [expect + 1.25, 1.0]),
                taylor_applies=False)


for _name, _fn, _val in (
        ('floor', nd.floor, 1.0), ('ceil', nd.ceil, 2.0), ('sign', P._sign, 1.0),
        ('floordiv', lambda x: x // 0.5, 2.0), ('lt', lambda x: nd.where(x < 1.0, 1.0, 0.0), 0.0),
        ('le', lambda x: nd.where(x <= 1.25, 1.0, 0.0), 1.0), ('gt', lambda x: nd.where(x > 1.0, 1.0, 0.0), 1.0),
        ('ge', lambda x: nd.where(x >= 2.0, 1.0, 0.0), 0.0), ('eq', lambda x: nd.where(x == 1.25, 1.0, 0.0), 1.0),
        ('ne', lambda x: nd.where(x != 1.25, 1.0, 0.0), 0.0),
        ('tie_split', lambda x: P._tie_split(x, 1.0), 1.0)):
    case(_name, _constant_case(_fn, _val))
# select (where): each coefficient chosen
case('select', Case(lambda t: nd.where(t < 1.0, nd.sin(0.5 + t), t * t),
                    lambda: mp_diffs(lambda s: [mpmath.sin(0.5 + s)])))


def _logical(name, op):
    """``and``/``or``/``xor``/``not`` apply to bools, which carry no perturbation (the
    comparisons of jets give plain bools): Taylor mode never applies them; the case checks
    a program choosing with them."""
    prim = registry.lookup(name)
    args = (lambda x: (x > 1.0,)) if name == 'not' else (lambda x: (x > 1.0, x < 2.0))
    chosen = bool(prim.plain(*args(1.25)))
    return Case(lambda t: nd.where(bind(prim, args(1.25 + t), {}), nd.exp(1.25 + t), 0.0),
                (lambda: mp_diffs(lambda s: [mpmath.exp(1.25 + s)])) if chosen
                else polynomial_ref(lambda: [0.0]), taylor_applies=False)


for _name in ('and', 'or', 'xor', 'not'):
    case(_name, _logical(_name, None))


# ---------------------------------------------------------------- elementwise array primitives

NO_JAX_RULE = {'arcsin', 'arccos', 'arctan', 'cbrt', 'exp2', 'tan'}     # (jet raises KeyError)
NUMPY_UNARY = {  # numpy name: scalar name in UNARY
    'exp': 'exp', 'expm1': 'expm1', 'exp2': 'exp2', 'log': 'log', 'log1p': 'log1p', 'log2': 'log2',
    'log10': 'log10', 'sqrt': 'sqrt', 'cbrt': 'cbrt', 'sin': 'sin', 'cos': 'cos', 'tan': 'tan',
    'arcsin': 'asin', 'arccos': 'acos', 'arctan': 'atan', 'sinh': 'sinh', 'cosh': 'cosh',
    'tanh': 'tanh', 'arcsinh': 'asinh', 'arccosh': 'acosh', 'arctanh': 'atanh',
    'absolute': 'abs', 'reciprocal': 'recip', 'negative': 'neg',
}
for _np_name, _name in NUMPY_UNARY.items():
    _f, _g, _xs, _jname = UNARY[_name]
    _jname = None if _np_name in NO_JAX_RULE else _jname
    _fn = getattr(anp, _np_name)
    case(f'numpy.{_np_name}', elementwise(_fn, _g, (_xs, directions(len(_xs))),
                                          jax=(lambda jnp, n=_jname: getattr(jnp, n)) if _jname else None))
case('numpy.sech2', elementwise(lambda x: apply(registry.lookup('numpy.sech2'), (x,), {}),
                                UNARY['sech2'][1], (UNARY['sech2'][2], directions(3))))

NUMPY_BINARY = {  # numpy name: (mpmath function, x points, y points, jax name)
    'add': (lambda x, y: x + y, [0.3, -2.0], [1.5, 1e-3], 'add'),
    'subtract': (lambda x, y: x - y, [0.3, -2.0], [1.5, 1e-3], 'subtract'),
    'multiply': (lambda x, y: x * y, [0.3, -2.0], [1.5, 1e-3], 'multiply'),
    'divide': (lambda x, y: x / y, [0.3, -2.0], [1.5, 1e-3], 'divide'),
    'power': (lambda x, y: x ** y, [0.3, 2.0, 40.0], [2.5, -1.5, 0.25], 'power'),
    'float_power': (lambda x, y: x ** y, [0.3, 2.0], [2.5, -1.5], None),
    'arctan2': (mpmath.atan2, [0.3, -2.0, 1e-6], [1.5, -1e-3, 1.0], 'arctan2'),     # (see below)
    'hypot': (lambda x, y: mpmath.sqrt(x * x + y * y), [0.3, -2.0], [1.5, 1e-3], None),
    'maximum': (max, [0.3, -2.0], [1.5, -3.0], 'maximum'),
    'minimum': (min, [0.3, -2.0], [1.5, -3.0], 'minimum'),
    'mod': (lambda x, y: x - y * mpmath.floor(x / y), [5.3, -5.3], [2.0, 2.0], None),
    'fmod': (lambda x, y: x - y * (mpmath.floor(x / y) if x / y > 0 else mpmath.ceil(x / y)),
             [5.3, -5.3], [2.0, 2.0], None),
    # (JAX's jet of logaddexp raises UnexpectedTracerError: no comparison)
    'logaddexp': (lambda x, y: mpmath.log(mpmath.exp(x) + mpmath.exp(y)), [0.3, -700.0, 40.0],
                  [1.5, -701.0, -30.0], None),
    'logaddexp2': (lambda x, y: mpmath.log(mpmath.power(2, x) + mpmath.power(2, y), 2), [0.3, 40.0],
                   [1.5, -30.0], None),
}
for _np_name, (_g, _xs, _ys, _jname) in NUMPY_BINARY.items():
    _fn = getattr(anp, _np_name)
    _j = (lambda jnp, n=_jname: getattr(jnp, n)) if _jname else None
    # (JAX's jet of arctan2 is not compared: it loses digits from order 4, 1e-3 relative
    # at order 5, where mpmath agrees with ours to 1e-11)
    _j = None if _np_name == 'arctan2' else _j
    _jr = 1e-10
    case(f'numpy.{_np_name}',
         elementwise(_fn, _g, (_xs, directions(len(_xs))), (_ys, -0.5 * directions(len(_ys))), jax=_j, jax_rtol=_jr),
         elementwise(_fn, _g, (_xs, directions(len(_xs))), (_ys, None), jax=_j, jax_rtol=_jr),
         elementwise(_fn, _g, (_xs, None), (_ys, -0.5 * directions(len(_ys))), jax=_j, jax_rtol=_jr))
# integer powers at a zero base (exact), a broadcast exponent
case('numpy.power', elementwise(lambda x: anp.power(x, 3.0), lambda x: x ** 3, ([0.0, 0.5, -2.0], [1.0, 0.3, 2.0])))
case('numpy.where', Case(
    lambda t: anp.where(np.array([True, False, True]), anp.sin(np.array([0.3, -2.0, 1.0]) + t * np.array([1.0, 0.5, -0.3])),
                        (np.array([0.3, -2.0, 1.0]) + t * np.array([1.0, 0.5, -0.3])) ** 2),
    lambda: mp_diffs(lambda s: [mpmath.sin(0.3 + s), (-2.0 + 0.5 * s) ** 2, mpmath.sin(1.0 - 0.3 * s)]),
    jax=lambda jnp, t: jnp.where(np.array([True, False, True]), jnp.sin(np.array([0.3, -2.0, 1.0]) + t * np.array([1.0, 0.5, -0.3])),
                                 (np.array([0.3, -2.0, 1.0]) + t * np.array([1.0, 0.5, -0.3])) ** 2)))


# ---------------------------------------------------------------- linear and shape primitives

IDX = np.array([0, 2, 2, 3])
case('numpy.reshape', linear(lambda x: anp.reshape(x, (3, 4)), (2, 6), plain=lambda x: np.reshape(x, (3, 4)),
                             jax=lambda jnp: lambda x: jnp.reshape(x, (3, 4))))
case('numpy.transpose', linear(lambda x: anp.transpose(x, (1, 2, 0)), (2, 3, 4),
                               plain=lambda x: np.transpose(x, (1, 2, 0)),
                               jax=lambda jnp: lambda x: jnp.transpose(x, (1, 2, 0))))
case('numpy.getitem', linear(lambda x: x[1:, ::2], (3, 5), jax=lambda jnp: lambda x: x[1:, ::2]),
     linear(lambda x: x[IDX], (5,), jax=lambda jnp: lambda x: x[IDX]),
     linear(lambda x: x[np.array([True, False, True, True])], (4,), plain=lambda x: x[[0, 2, 3]]))
case('numpy.broadcast_to', linear(lambda x: anp.broadcast_to(x, (3, 4)), (4,),
                                  plain=lambda x: np.broadcast_to(x, (3, 4)),
                                  jax=lambda jnp: lambda x: jnp.broadcast_to(x, (3, 4))))
case('numpy.sum_to', linear(lambda x: anp.sum_to(x, (1, 4)), (3, 4), plain=lambda x: np.sum(x, 0, keepdims=True)))
case('numpy.sum', linear(lambda x: anp.sum(x, axis=1), (3, 4), plain=lambda x: np.sum(x, 1),
                         jax=lambda jnp: lambda x: jnp.sum(x, axis=1)),
     linear(anp.sum, (5,), plain=np.sum, jax=lambda jnp: jnp.sum))
case('numpy.cumsum', linear(lambda x: anp.cumsum(x, axis=0), (4, 2), plain=lambda x: np.cumsum(x, 0),
                            jax=lambda jnp: lambda x: jnp.cumsum(x, axis=0)))
case('numpy.concatenate', linear(lambda x, y: anp.concatenate([x, y], axis=1), (2, 3), (2, 1),
                                 plain=lambda x, y: np.concatenate([x, y], axis=1),
                                 jax=lambda jnp: lambda x, y: jnp.concatenate([x, y], axis=1)))
case('numpy.astype', linear(lambda x: anp.astype(x, np.float32), (3,), plain=lambda x: x.astype(np.float32), rtol=1e-7))
case('numpy.scatter_add', linear(lambda g: apply(registry.lookup('numpy.scatter_add'), (g,),
                                                  dict(index=IDX, shape=(5,))), (4,),
                                 plain=lambda g: np.bincount(IDX, g, minlength=5)))


def _set(x, v):
    return anp.at(x)[IDX[:2]].set(v)


def _set_plain(x, v):
    x = x.copy()
    x[IDX[:2]] = v
    return x


def _add_at_plain(x, v):
    x = x.copy()
    np.add.at(x, IDX, v)
    return x


case('numpy.at.set', linear(_set, (5,), (2,), plain=_set_plain),
     linear(lambda x, v: anp.at(x)[1].set(v), (4,), (), plain=lambda x, v: _set_plain1(x, v)))
case('numpy.at.add', linear(lambda x, v: anp.at(x)[IDX].add(v), (5,), (4,), plain=_add_at_plain))


def _set_plain1(x, v):
    x = x.copy()
    x[1] = v
    return x


case('nestad.loops.loop_row', linear(lambda s: loops.row(s, 2), (4, 3), plain=lambda s: s[2]))
case('nestad.loops.loop_row_at', linear(lambda s: loops.row(s, 1, axis=1), (4, 3), plain=lambda s: s[:, 1]))
case('nestad.loops.loop_row_set', linear(lambda b, v: loops.row_set(b, 2, v), (4, 3), (3,),
                                         plain=lambda b, v: np.concatenate([b[:2], v[None], b[3:]])))

# ---------------------------------------------------------------- products

case('numpy.matmul', multilinear(anp.matmul, (3, 4), (4, 2), plain=np.matmul, jax=lambda jnp: jnp.matmul),
     multilinear(anp.matmul, (2, 3, 4), (4,), plain=np.matmul, jax=lambda jnp: jnp.matmul))
case('numpy.dot', multilinear(anp.dot, (3, 4), (4,), plain=np.dot, jax=lambda jnp: jnp.dot))
case('numpy.inner', multilinear(anp.inner, (3, 4), (2, 4), plain=np.inner, jax=lambda jnp: jnp.inner))
case('numpy.vdot', multilinear(anp.vdot, (3, 2), (3, 2), plain=np.vdot, jax=lambda jnp: jnp.vdot))
case('numpy.vecdot', multilinear(anp.vecdot, (3, 4), (4,), plain=lambda a, b: np.sum(a * b, -1)))
case('numpy.einsum', multilinear(lambda a, b: anp.einsum('ij,jk->ki', a, b), (3, 4), (4, 2),
                                 plain=lambda a, b: np.einsum('ij,jk->ki', a, b),
                                 jax=lambda jnp: lambda a, b: jnp.einsum('ij,jk->ki', a, b)),
     multilinear(lambda a, b, c: anp.einsum('i,ij,j->', a, b, c), (3,), (3, 4), (4,),
                 plain=lambda a, b, c: np.einsum('i,ij,j->', a, b, c),
                 jax=lambda jnp: lambda a, b, c: jnp.einsum('i,ij,j->', a, b, c)))
case('numpy.convolve', multilinear(anp.convolve, (5,), (3,), plain=np.convolve, jax=lambda jnp: jnp.convolve))
case('numpy.correlate', multilinear(lambda a, b: anp.correlate(a, b, 'full'), (5,), (3,),
                                    plain=lambda a, b: np.correlate(a, b, 'full')))
case('scipy.signal.convolve', multilinear(ssig.convolve, (5,), (3,), plain=np.convolve))


# ---------------------------------------------------------------- reductions

def _poly_products(X0, V, axis, cumulative):
    """Coefficients of prod (or cumprod) along ``axis`` of the linear curves X0 + t V."""
    X0, V = np.moveaxis(X0, axis, 0), np.moveaxis(V, axis, 0)
    n = X0.shape[0]
    out, acc = [], None
    for i in range(n):
        term = [X0[i], V[i]]
        acc = term if acc is None else [sum(acc[j] * term[k - j] for j in range(len(acc)) if 0 <= k - j < 2)
                                        for k in range(len(acc) + 1)]
        out.append(acc)
    if not cumulative:
        return acc
    width = len(out[-1])
    return [np.moveaxis(np.stack([(o[k] if k < len(o) else np.zeros_like(o[0])) for o in out]), 0, axis)
            for k in range(width)]


_X, _V = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
case('numpy.prod', Case(lambda t: anp.prod(_X + t * _V, axis=0), polynomial_ref(lambda: _poly_products(_X, _V, 0, False))),
     Case(lambda t: anp.prod(np.array([0.0, 2.0, 0.0, -1.5]) + t * np.array([1.0, 0.5, -2.0, 3.0])),
          polynomial_ref(lambda: _poly_products(np.array([0.0, 2.0, 0.0, -1.5]), np.array([1.0, 0.5, -2.0, 3.0]),
                                                0, False))))
case('numpy.cumprod', Case(lambda t: anp.cumprod(_X + t * _V, axis=0),
                           polynomial_ref(lambda: _poly_products(_X, _V, 0, True)),
                           jax=lambda jnp, t: jnp.cumprod(_X + t * _V, axis=0)))
_W = rng.normal(size=(4, 3))
for _name, _pick in (('max', np.argmax), ('min', np.argmin)):
    _i = _pick(_X, axis=0)
    case(f'numpy.{_name}', Case(lambda t, n=_name: getattr(anp, n)(_X + t * _V + t * t * _W, axis=0),
                                polynomial_ref(lambda i=_i: [_X[i, range(3)], _V[i, range(3)], _W[i, range(3)]]),
                                jax=lambda jnp, t, n=_name: getattr(jnp, n)(_X + t * _V + t * t * _W, axis=0)))


# ---------------------------------------------------------------- linear algebra (mpmath references)

def mpm(a):
    return mpmath.matrix(np.asarray(a, float).tolist())


def entries(m):
    """The entries of an mpmath matrix (or number) row by row."""
    if isinstance(m, mpmath.matrix):
        return [m[i, j] for i in range(m.rows) for j in range(m.cols)]
    return [m]


def matrix_case(fn, mp_fn, *mats, **kw):
    """``fn`` of the matrices ``A_j + t B_j`` (``mats`` pairs (A, B), B None for a
    constant), against ``mp_fn`` of the same in mpmath (a list of matrices or numbers)."""
    def f(t):
        return fn(*[a if b is None else a + t * b for a, b in mats])

    def ref():
        def F(s):
            outs = mp_fn(*[mpm(a) if b is None else mpm(a) + s * mpm(b) for a, b in mats])
            return [e for o in outs for e in entries(o)]
        return mp_diffs(F)
    return Case(f, ref, **kw)


def spd(n, cond=10.0):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (q * np.geomspace(1.0, cond, n)) @ q.T


def sym(n):
    b = rng.normal(size=(n, n))
    return 0.5 * (b + b.T)


def _mp_eigsy(a):
    """Eigenvalues (ascending) and sign-free eigenvector parts v_j v_j[0] of a symmetric
    mpmath matrix."""
    e, q = mpmath.eigsy(a)
    order = sorted(range(len(e)), key=lambda i: e[i])
    return [mpmath.matrix([e[i] for i in order])] + [q[:, i] * q[0, i] for i in order]


def _np_eig_parts(w, v):
    order = np.argsort(nd.primal_value(w))
    return [w[order]] + [v[:, i] * v[0, i] for i in order]


def _mp_eig_real(a):
    """Real eigenvalues (ascending) and unit eigenvectors' parts v_j v_j[0] of an mpmath matrix."""
    e, er = mpmath.eig(a)
    e = [mpmath.re(x) for x in e]
    order = sorted(range(len(e)), key=lambda i: e[i])
    parts = [mpmath.matrix([e[i] for i in order])]
    for i in order:
        v = mpmath.matrix([mpmath.re(er[r, i]) for r in range(a.rows)])
        v = v / mpmath.norm(v)
        parts.append(v * v[0])
    return parts


def _mp_svd(a):
    u, s, v = mpmath.svd_r(a)
    out = [s]
    for j in range(len(s)):
        out.append(u[:, j] * v[j, :])          # sign-free: the rank-one parts
    return out


def _np_svd_parts(u, s, vh):
    return [s] + [anp.outer(u[:, j], vh[j, :]) for j in range(np.shape(nd.primal_value(s))[0])]


def _mp_sylvester(a, b, q):
    n, m = a.rows, b.rows
    big = mpmath.zeros(n * m, n * m)
    for i in range(n):
        for j in range(m):
            for k in range(n):
                big[i * m + j, k * m + j] += a[i, k]
            for k in range(m):
                big[i * m + j, i * m + k] += b[k, j]
    x = mpmath.lu_solve(big, mpmath.matrix([q[i, j] for i in range(n) for j in range(m)]))
    return mpmath.matrix([[x[i * m + j] for j in range(m)] for i in range(n)])


def _tri(a, lower):
    n = a.rows
    return mpmath.matrix([[a[i, j] if (j <= i if lower else j >= i) else 0 for j in range(n)] for i in range(n)])


M3 = rng.normal(size=(3, 3)) + 3.0 * np.eye(3)
S3, B3, C3 = spd(3), sym(3), rng.normal(size=(3, 3))
ILL = spd(3, cond=1e5)
b3 = rng.normal(size=3)
R32 = rng.normal(size=(3, 2))
EIG = np.array([[2.0, 0.3, 0.1], [0.2, -1.0, 0.4], [0.0, 0.5, 0.7]])   # real, distinct eigenvalues

# (det of a 3 x 3 curve is a cubic: its derivatives from order 4 on are rounding errors,
# 1e-16 against entries of 1 to 10)
case('numpy.linalg.det', matrix_case(anp.linalg.det, lambda a: [mpmath.det(a)], (M3, C3), zero=1e-14),
     matrix_case(anp.linalg.det, lambda a: [mpmath.det(a)], (ILL, B3 * 1e-5), nested_rtol=1e-10, zero=1e-14))
case('numpy.linalg.inv', matrix_case(anp.linalg.inv, lambda a: [a ** -1], (M3, C3)),
     matrix_case(anp.linalg.inv, lambda a: [a ** -1], (ILL, B3 * 1e-5), rtol=1e-9, nested_rtol=1e-10))
case('numpy.linalg.solve', matrix_case(lambda a, b: anp.linalg.solve(a, b), lambda a, b: [mpmath.lu_solve(a, b)],
                                       (M3, C3), (b3[:, None], rng.normal(size=(3, 1)))),
     matrix_case(lambda a, b: anp.linalg.solve(a, b), lambda a, b: [mpmath.lu_solve(a, b)], (M3, None),
                 (b3[:, None], rng.normal(size=(3, 1)))))
case('numpy.linalg.slogdet', matrix_case(lambda a: anp.linalg.slogdet(a)[1],
                                         lambda a: [mpmath.log(abs(mpmath.det(a)))], (-M3, C3)))
case('numpy.linalg.cholesky', matrix_case(anp.linalg.cholesky, lambda a: [mpmath.cholesky(a)], (S3, B3)))
case('numpy.linalg.eigh', matrix_case(lambda a: _np_eig_parts(*anp.linalg.eigh(a)), _mp_eigsy, (S3, B3)))
case('numpy.linalg.eigvalsh', matrix_case(anp.linalg.eigvalsh, lambda a: _mp_eigsy(a)[:1], (S3, B3)))
case('numpy.linalg.eig', matrix_case(lambda a: _np_eig_parts(*anp.linalg.eig(a)), _mp_eig_real, (EIG, 0.1 * C3),
                                     rtol=1e-10))
case('numpy.linalg.eigvals', matrix_case(lambda a: anp.sort(anp.linalg.eigvals(a)), lambda a: _mp_eig_real(a)[:1],
                                         (EIG, 0.1 * C3)))
case('numpy.linalg.svd', matrix_case(lambda a: _np_svd_parts(*anp.linalg.svd(a, full_matrices=False)), _mp_svd,
                                     (R32, rng.normal(size=(3, 2)))))
case('numpy.linalg.svdvals', matrix_case(anp.linalg.svdvals, lambda a: _mp_svd(a)[:1], (R32, rng.normal(size=(3, 2)))))
case('numpy.linalg.pinv', matrix_case(anp.linalg.pinv, lambda a: [(a.T * a) ** -1 * a.T], (R32, rng.normal(size=(3, 2)))))
case('numpy.linalg.norm', matrix_case(anp.linalg.norm, lambda a: [mpmath.mnorm(a, 'f')], (R32, rng.normal(size=(3, 2)))))
case('scipy.linalg.expm', matrix_case(sla.expm, lambda a: [mpmath.expm(a)], (0.5 * C3, 0.3 * B3), nested_order=4,
                                      why="expm's rule is the expm of a block matrix twice the size, so "
                                          "nesting derivative 6 times expms 192 x 192 matrices 3^6 times"))
case('scipy.linalg.sqrtm', matrix_case(sla.sqrtm, lambda a: [mpmath.sqrtm(a)], (S3, 0.3 * B3), rtol=1e-10))
case('scipy.linalg.solve_sylvester', matrix_case(sla.solve_sylvester, _mp_sylvester, (M3, 0.3 * C3),
                                                 (S3, 0.2 * B3), (C3, rng.normal(size=(3, 3)))))
case('scipy.linalg.solve_triangular', matrix_case(
    lambda a, b: sla.solve_triangular(a, b, lower=True), lambda a, b: [mpmath.lu_solve(_tri(a, True), b)],
    (M3, C3), (b3[:, None], rng.normal(size=(3, 1)))))
case('scipy.linalg.cholesky', matrix_case(lambda a: sla._cholesky(a, lower=False), lambda a: [mpmath.cholesky(a).T], (S3, B3)))
_L = np.linalg.cholesky(S3)
case('scipy.linalg.cho_solve', matrix_case(
    lambda c, b: sla.cho_solve((c, True), b), lambda c, b: [mpmath.lu_solve(_tri(c, True) * _tri(c, True).T, b)],
    (_L, 0.1 * np.tril(C3)), (b3[:, None], rng.normal(size=(3, 1)))))
_AB = np.array([[0.0, 1.0, -0.5], [4.0, 5.0, 6.0], [0.3, 0.2, 0.0]])   # tridiagonal, (l, u) = (1, 1)


def _mp_banded(ab, b):
    a = mpmath.matrix([[ab[1, 0], ab[0, 1], 0], [ab[2, 0], ab[1, 1], ab[0, 2]], [0, ab[2, 1], ab[1, 2]]])
    return [mpmath.lu_solve(a, b)]


case('scipy.linalg.solve_banded', matrix_case(lambda ab, b: sla.solve_banded((1, 1), ab, b), _mp_banded,
                                              (_AB, 0.3 * np.array([[0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0]])),
                                              (b3, rng.normal(size=3))))


# ---------------------------------------------------------------- nestad.scipy

def _mp_erfcx(x):
    return mpmath.exp(x * x) * mpmath.erfc(x)


def special(name, g, *args, **kw):
    return elementwise(getattr(sp, name), g, *args, **kw)


def D(xs):
    return directions(len(xs))


def _reg_gammainc(a, x):
    return mpmath.gammainc(a, 0, x, regularized=True)


case('scipy.special.gammaln', special('gammaln', mpmath.loggamma, ([0.5, 4.0, 1e-3, 1e3], D([0] * 4))))
case('scipy.special.digamma', special('digamma', mpmath.digamma, ([0.5, 4.0, -2.5, 1e3], D([0] * 4))))
case('scipy.special.polygamma', special('polygamma', lambda n, x: mpmath.polygamma(int(n), x),
                                        ([1, 2, 3], None), ([0.5, 4.0, 20.0], D([0] * 3))))
case('scipy.special.gamma', special('gamma', mpmath.gamma, ([0.5, 4.0, -1.5, 30.0], D([0] * 4))))
# (below 1/2 rgamma's rule is by reflection, whose terms cancel: 4e-10 at order 10 at -1.5)
case('scipy.special.rgamma', special('rgamma', mpmath.rgamma, ([0.5, 4.0, -1.5, 1e-3], D([0] * 4)), rtol=1e-9))
case('scipy.special.beta', special('beta', mpmath.beta, ([0.5, 4.0, 30.0], D([0] * 3)), ([1.5, 0.2, 1e-3], -D([0] * 3))))
case('scipy.special.betaln', special('betaln', lambda a, b: mpmath.log(mpmath.beta(a, b)),
                                     ([0.5, 4.0, 300.0], D([0] * 3)), ([1.5, 0.2, 1e-3], -D([0] * 3))))
case('scipy.special.gammainc', special('gammainc', _reg_gammainc, ([0.5, 2.5, 30.0], None),
                                       ([0.3, 1e-3, 25.0], D([0] * 3))))
case('scipy.special.gammaincc', special('gammaincc', lambda a, x: 1 - _reg_gammainc(a, x),
                                        ([0.5, 2.5, 30.0], None), ([0.3, 1e-3, 25.0], D([0] * 3))))
case('scipy.special.betainc', special('betainc', lambda a, b, x: mpmath.betainc(a, b, 0, x, regularized=True),
                                      ([0.5, 2.5, 3.0], None), ([1.5, 0.7, 2.0], None), ([0.3, 1e-3, 0.99], D([0] * 3))))
case('scipy.special.erf', special('erf', mpmath.erf, ([0.2, 3.0, -5.0], D([0] * 3))))
case('scipy.special.erfc', special('erfc', mpmath.erfc, ([0.2, 3.0, 10.0], D([0] * 3))))
case('scipy.special.erfinv', special('erfinv', mpmath.erfinv, ([0.2, 0.999, -0.9999], D([0] * 3))))
case('scipy.special.erfcinv', special('erfcinv', lambda x: mpmath.erfinv(1 - x), ([0.2, 1e-3, 1.999], D([0] * 3))))
case('scipy.special.erfcx', special('erfcx', _mp_erfcx, ([0.2, -2.0, 24.0, 30.0, 1e4], D([0] * 5)), rtol=1e-10))
# (the rows' scale is their largest entry, erfcx's at -2: test_erfcx_every_order_at_every_point
# compares each point on its own)
_EXD = np.array([-3.0, 0.3, 0.8, 5.0, 1e3])


def _erfcx_derivative_ref(n):
    # d^k/dt^k erfcx^(n)(x + t d) = erfcx^(n + k)(x) d^k
    def ref():
        cols = []
        for x, d in zip(_EXD, D(_EXD)):
            with mpmath.workdps(60):
                e = mpmath.diffs(_mp_erfcx, mpmath.mpf(x), n + ORDER)
                cols.append([float(v * mpmath.mpf(d) ** k) for k, v in enumerate(list(e)[n:])])
        return np.array(cols).T
    return ref


case('scipy.special.erfcx_derivative', *[Case(lambda t, n=n: sp.erfcx_derivative(n, _EXD + t * D(_EXD)),
                                              _erfcx_derivative_ref(n), rtol=1e-12) for n in (0, 1, 3)])
case('scipy.special.expit', special('expit', lambda x: 1 / (1 + mpmath.exp(-x)), ([0.5, -4.0, -40.0, 40.0], D([0] * 4)),
                                    jax=lambda jnp: __import__('jax').nn.sigmoid))
case('scipy.special.logit', special('logit', lambda x: mpmath.log(x / (1 - x)), ([0.5, 1e-4, 0.9999], D([0] * 3))))
case('scipy.special.log_expit', special('log_expit', lambda x: -mpmath.log(1 + mpmath.exp(-x)),
                                        ([0.5, -40.0, 40.0], D([0] * 3))))
case('scipy.special.xlogy', special('xlogy', lambda x, y: x * mpmath.log(y), ([0.5, 0.0, 3.0], D([0] * 3)),
                                    ([2.0, 0.5, 1e-5], -0.3 * D([0] * 3))))
case('scipy.special.xlog1py', special('xlog1py', lambda x, y: x * mpmath.log1p(y), ([0.5, 0.0, 3.0], D([0] * 3)),
                                      ([2.0, 0.5, -0.999], 0.3 * D([0] * 3))))
# (their rules, J_v' = (J_{v-1} - J_{v+1}) / 2..., apply the function twice per order: nesting
# derivative 6 times makes 2^6 paths of 3^6 applications, minutes; Taylor mode memoises)
_SLOW_NESTING = "the recurrences of the rule branch twice per order: nested to 4 (6 takes minutes)"
_Y = {}


def _bessel_y(v, x):
    if (v, x) not in _Y:
        with mpmath.workdps(40):
            _Y[v, x] = mpmath.bessely(v, x)
    return _Y[v, x]


def bessel_y_case(fn, vs, xs):
    """Y_v along x + t d: d^k Y_v^(k)(x), Y_v^(k) = 2^-k sum_j (-1)^j C(k, j) Y_{v-k+2j} (from
    Y_v' = (Y_{v-1} - Y_{v+1}) / 2), with mpmath's Y at single points (mpmath's Y of an
    integer order is a limit: under diffs it took minutes)."""
    ds = D(xs)

    def ref():
        return np.array([[float(d ** k * sum((-1) ** j * math.comb(k, j) * _bessel_y(v - k + 2 * j, mpmath.mpf(x))
                                             for j in range(k + 1)) / 2 ** k)
                          for v, x, d in zip(vs, xs, ds)] for k in range(ORDER + 1)])
    return Case(lambda t: fn(t * ds + np.array(xs)), ref, rtol=1e-10, nested_order=4, why=_SLOW_NESTING)


for _name, _g, _vs in (('iv', mpmath.besseli, [0.0, 1.5, 3.0]), ('jv', mpmath.besselj, [0.0, 1.5, 3.0])):
    case(f'scipy.special.{_name}', special(_name, _g, (_vs, None), ([0.7, 4.0, 40.0], D([0] * 3)), rtol=1e-10,
                                           nested_order=4, why=_SLOW_NESTING))
case('scipy.special.yv', bessel_y_case(lambda x: sp.yv(np.array([0.0, 1.5, 3.0]), x), [0.0, 1.5, 3.0], [0.7, 4.0, 40.0]))
case('scipy.special.yn', bessel_y_case(lambda x: sp.yn(np.array([0.0, 1.0, 3.0]), x), [0, 1, 3], [0.7, 4.0, 40.0]))
case('scipy.special.y0', bessel_y_case(sp.y0, [0, 0, 0], [0.7, 4.0, 60.0]))
case('scipy.special.y1', bessel_y_case(sp.y1, [1, 1, 1], [0.7, 4.0, 60.0]))
case('scipy.special.ive', special('ive', lambda v, x: mpmath.besseli(v, x) * mpmath.exp(-abs(x)),
                                  ([0.0, 1.0, 3.0], None), ([0.7, -4.0, 8.0], D([0] * 3)), rtol=1e-10,
                                  nested_order=4, why=_SLOW_NESTING))
for _name, _g in (('i0', lambda x: mpmath.besseli(0, x)), ('i1', lambda x: mpmath.besseli(1, x)),
                  ('i0e', lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x))),
                  ('i1e', lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x))),
                  ('j0', lambda x: mpmath.besselj(0, x)), ('j1', lambda x: mpmath.besselj(1, x))):
    _pts = [0.7, -4.0, 60.0, 3e3] if _name in ('i0e', 'i1e') else [0.7, -4.0, 60.0] if _name[0] == 'i' else [0.7, 4.0, 60.0]
    case(f'scipy.special.{_name}', special(_name, _g, (_pts, D(_pts)), rtol=1e-10, nested_order=4, why=_SLOW_NESTING))
case('scipy.special.gammasgn', Case(lambda t: sp.gammasgn(-1.5 + t) * (t + 1.0),
                                    polynomial_ref(lambda: [1.0, 1.0])))
case('scipy.special.multigammaln', elementwise(
    lambda a: sp.multigammaln(a, 3), lambda a: 3 * 2 / 4 * mpmath.log(mpmath.pi) + sum(mpmath.loggamma(a - j / 2.0) for j in range(3)),
    ([1.5, 4.0, 40.0], D([0] * 3))))


def _z(x, loc, scale):
    return (x - loc) / scale


def _mp_norm_logpdf(x, loc, scale):
    z = _z(x, loc, scale)
    return -z * z / 2 - mpmath.log(scale) - mpmath.log(2 * mpmath.pi) / 2


def _mp_t_logpdf(x, df, loc, scale):
    z = _z(x, loc, scale)
    return (mpmath.loggamma((df + 1) / 2) - mpmath.loggamma(df / 2) - mpmath.log(df * mpmath.pi) / 2
            - mpmath.log(scale) - (df + 1) / 2 * mpmath.log(1 + z * z / df))


def _mp_t_cdf(x, df, loc, scale):
    z = _z(x, loc, scale)
    return 0.5 + z * mpmath.gamma((df + 1) / 2) * mpmath.hyp2f1(0.5, (df + 1) / 2, 1.5, -z * z / df) / (
        mpmath.sqrt(mpmath.pi * df) * mpmath.gamma(df / 2))


def _mp_gamma_logpdf(x, a, loc, scale):
    z = _z(x, loc, scale)
    return (a - 1) * mpmath.log(z) - z - mpmath.loggamma(a) - mpmath.log(scale)


def _stats(qualname, fn, g, *args, **kw):
    case(qualname, elementwise(fn, g, *args, **kw))


X3 = ([0.3, -6.0, 40.0], None)
LOC, SCALE = ([0.5, -1.0, 0.1], None), ([1.3, 0.2, 2.0], None)
for _n, _fn, _g in (
        ('logpdf', st.norm.logpdf, _mp_norm_logpdf),
        ('pdf', st.norm.pdf, lambda x, l, s: mpmath.exp(_mp_norm_logpdf(x, l, s))),
        ('cdf', st.norm.cdf, lambda x, l, s: mpmath.ncdf(_z(x, l, s))),
        ('logcdf', st.norm.logcdf, lambda x, l, s: mpmath.log(mpmath.ncdf(_z(x, l, s)))),
        ('sf', st.norm.sf, lambda x, l, s: mpmath.ncdf(-_z(x, l, s))),
        ('logsf', st.norm.logsf, lambda x, l, s: mpmath.log(mpmath.ncdf(-_z(x, l, s))))):
    _stats(f'scipy.stats.norm.{_n}', _fn, _g, ([0.3, -2.5, 6.0], D([0] * 3)), ([0.5, -1.0, 0.1], -0.3 * D([0] * 3)),
           ([1.3, 1.0, 2.0], 0.2 * D([0] * 3)), rtol=1e-10)


def test_norm_logcdf_far_in_the_tail_to_high_order():
    # (erfcx at 10.6, where erfcx's old rule y' = 2 x y - 2/sqrt(pi) cancelled: 1e-7 off at
    # order 6, 25% at order 10)
    for z in (-15.0,):
        f = lambda t: st.norm.logcdf(z + t)
        with mpmath.workdps(60):
            ref = mp_diffs(lambda s: [mpmath.log(mpmath.ncdf(z + s))])
        assert_agrees(np.array([flat(d) for d in nd.derivatives(f, ORDER)(0.0)]), ref, 1e-12, f"norm.logcdf at {z}")


def test_erfcx_every_order_at_every_point():
    # each point on its own (a row's scale is its own value), orders 0..10 against mpmath
    # and 1..6 against nested derivative (the first-order rule also cancelled: 2x erfcx(x)
    # - 2/sqrt(pi) lost 3 digits at 20); x from -5 to 1e4, both sides of the switch at 1/2
    for x in (-5.0, 0.0, 0.5, 0.51, 1.0, 2.0, 10.6, 25.0, 100.0, 1e4):
        ours = np.array([flat(d) for d in nd.derivatives(sp.erfcx, ORDER)(x)])
        with mpmath.workdps(60):
            ref = mp_diffs(lambda s: [_mp_erfcx(x + s)])
        assert np.allclose(ours, ref, rtol=1e-13, atol=0), (x, (ours - ref) / ref)
        if x not in (0.51, 10.6, 1e4):
            continue
        nested = nested_derivatives(sp.erfcx, NESTED, x)
        assert np.allclose(nested, ref[:NESTED + 1], rtol=1e-13, atol=0), (x, (nested - ref[:NESTED + 1]) / ref[:NESTED + 1])
    # arrays take each element's branch
    xs = np.array([-5.0, 0.3, 0.7, 20.0, 1e4])
    got = np.array([flat(d) for d in nd.derivatives(lambda t: sp.erfcx(xs + t), ORDER)(0.0)])
    each = np.array([[flat(d)[0] for d in nd.derivatives(sp.erfcx, ORDER)(float(x))] for x in xs]).T
    assert np.allclose(got, each, rtol=1e-14, atol=0)


def test_erfcx_derivative_refuses_an_order_that_is_not_a_whole_number():
    for n in (-1, 1.5):
        with pytest.raises(nd.NestadError, match="order n must be an integer"):
            sp.erfcx_derivative(n, 1.0)


_stats('scipy.stats.t.logpdf', st.t.logpdf, _mp_t_logpdf, ([0.3, -4.0, 60.0], D([0] * 3)),
       ([3.0, 0.7, 30.0], 0.2 * D([0] * 3)), ([0.5, -1.0, 0.1], -0.3 * D([0] * 3)), ([1.3, 0.5, 2.0], 0.2 * D([0] * 3)))
# t.cdf: along x alone its derivatives are the density's (mpmath's hypergeometric cdf under
# diffs took minutes); along every argument against nested derivative only
_TX, _TDF, _TLOC, _TSCALE = np.array([0.3, -4.0, 60.0]), np.array([3.0, 0.7, 30.0]), np.array([0.5, -1.0, 0.1]), \
    np.array([1.3, 0.5, 2.0])


def _t_cdf_ref():
    rows = []
    for x, df, loc, scale, d in zip(_TX, _TDF, _TLOC, _TSCALE, D([0] * 3)):
        pdf = mp_diffs(lambda s: [d * mpmath.exp(_mp_t_logpdf(x + s * d, df, loc, scale))], ORDER - 1)[:, 0]
        rows.append([float(_mp_t_cdf(mpmath.mpf(x), df, loc, scale))] + list(pdf))
    return np.array(rows).T


case('scipy.stats.t.cdf', Case(lambda t: st.t.cdf(_TX + t * D([0] * 3), _TDF, _TLOC, _TSCALE), _t_cdf_ref, rtol=1e-10),
     Case(lambda t: st.t.cdf(_TX + t * D([0] * 3), _TDF, _TLOC - 0.3 * t * D([0] * 3), _TSCALE + 0.2 * t * D([0] * 3))))
_stats('scipy.stats.gamma.logpdf', st.gamma.logpdf, _mp_gamma_logpdf, ([1.3, 0.01, 40.0], D([0] * 3)),
       ([2.5, 0.7, 30.0], 0.2 * D([0] * 3)), ([0.5, 0.0, 0.1], -0.1 * D([0] * 3)), ([1.3, 0.5, 2.0], 0.2 * D([0] * 3)))
_stats('scipy.stats.gamma.cdf', st.gamma.cdf, lambda x, a, l, s: _reg_gammainc(a, _z(x, l, s)),
       ([1.3, 0.01, 40.0], D([0] * 3)), ([2.5, 0.7, 30.0], None), ([0.5, 0.0, 0.1], -0.1 * D([0] * 3)),
       ([1.3, 0.5, 2.0], 0.2 * D([0] * 3)))
_stats('scipy.stats.beta.logpdf', st.beta.logpdf,
       lambda x, a, b: (a - 1) * mpmath.log(x) + (b - 1) * mpmath.log(1 - x) - mpmath.log(mpmath.beta(a, b)),
       ([0.3, 1e-3, 0.999], 0.1 * D([0] * 3)), ([2.5, 0.7, 30.0], 0.2 * D([0] * 3)), ([1.5, 3.0, 0.5], -0.2 * D([0] * 3)))
_stats('scipy.stats.beta.cdf', st.beta.cdf, lambda x, a, b: mpmath.betainc(a, b, 0, x, regularized=True),
       ([0.3, 1e-3, 0.999], 0.1 * D([0] * 3)), ([2.5, 0.7, 3.0], None), ([1.5, 3.0, 0.5], None))
_stats('scipy.stats.poisson.logpmf', st.poisson.logpmf, lambda k, mu: k * mpmath.log(mu) - mu - mpmath.loggamma(k + 1),
       ([0.0, 3.0, 40.0], None), ([0.5, 2.5, 1e-3], 0.1 * D([0] * 3)))
_stats('scipy.stats.poisson.cdf', st.poisson.cdf,
       lambda k, mu: sum(mpmath.exp(-mu) * mu ** j / mpmath.factorial(j) for j in range(int(k) + 1)),
       ([0.0, 3.0, 40.0], None), ([0.5, 2.5, 30.0], 0.1 * D([0] * 3)))
_stats('scipy.stats.chi2.logpdf', st.chi2.logpdf,
       lambda x, df: (df / 2 - 1) * mpmath.log(x) - x / 2 - df / 2 * mpmath.log(2) - mpmath.loggamma(df / 2),
       ([0.3, 1e-3, 60.0], 0.1 * D([0] * 3)), ([2.5, 0.7, 30.0], 0.2 * D([0] * 3)))
_stats('scipy.stats.chi2.cdf', st.chi2.cdf, lambda x, df: _reg_gammainc(df / 2, x / 2),
       ([0.3, 1e-3, 60.0], 0.1 * D([0] * 3)), ([2.5, 0.7, 30.0], None))


# (last: drawing their data earlier would change every later case's)
case('numpy.banded_dense', linear(lambda a, b: _banded.banded_dense(a, b, offsets=(1, -2), shape=(4, 3)),
                                  (3,), (2, 3)))
case('numpy.banded_take', linear(lambda x: _banded.banded_take(x, offset=-1, m=3), (2, 4, 3)))



# ---------------------------------------------------------------- fused recurrences
# ``nestad.series``: a recurrence of a jet's stack (K + 1, n) as one primitive, here applied
# to a stack moving along a line, ``X0 + t V``: its Taylor rule is its composition.  The
# reference is the truncated power series of the function of the stack's polynomial
# (exp, log, 1/b, sin... by their series, products by convolution), in mpmath.

def _series_ops(K):
    def mul(p, q):
        return [mpmath.fsum(p[j] * q[k - j] for j in range(k + 1)) for k in range(K + 1)]

    def powers(q, scale):        # sum_j scale(j) q^j, q[0] = 0 (nilpotent: j <= K)
        out, term = [mpmath.mpf(0)] * (K + 1), [mpmath.mpf(1)] + [mpmath.mpf(0)] * K
        for j in range(K + 1):
            out = [o + scale(j) * t for o, t in zip(out, term)]
            term = mul(term, q)
        return out

    def shifted(p):
        return [mpmath.mpf(0)] + list(p[1:])

    def exp(p):
        return [mpmath.exp(p[0]) * c for c in powers(shifted(p), lambda j: 1 / mpmath.factorial(j))]

    def log(p):
        r = [c / p[0] for c in shifted(p)]
        out = powers(r, lambda j: 0 if j == 0 else (-1) ** (j + 1) / mpmath.mpf(j))
        return [mpmath.log(p[0]) + out[0]] + out[1:]

    def divide(a, b):
        r = [c / b[0] for c in shifted(b)]
        return mul(a, [c / b[0] for c in powers(r, lambda j: (-1) ** j)])

    def trig(p, sign, first):
        q = shifted(p)
        sgn = (lambda j: (-1) ** j) if sign < 0 else (lambda j: 1)
        C = powers(q, lambda j: 0 if j % 2 else sgn(j // 2) / mpmath.factorial(j))
        S = powers(q, lambda j: sgn(j // 2) / mpmath.factorial(j) if j % 2 else 0)
        s0, c0 = (mpmath.sin(p[0]), mpmath.cos(p[0])) if sign < 0 else (mpmath.sinh(p[0]), mpmath.cosh(p[0]))
        if first:                            # sin(p0 + q) = s0 C + c0 S; sinh likewise
            return [s0 * c + c0 * d for c, d in zip(C, S)]
        return [c0 * c + sign * s0 * d for c, d in zip(C, S)]   # cos: c0 C - s0 S
    return dict(mul=mul, exp=exp, log=log, divide=divide, trig=trig)


def fused(name, prim, stacks, ref_fn, params=None, extra=(), seed=0, K=3, n=2, **kw):
    """A case of a fused recurrence: its stacks (K + 1, n) follow ``X0 + t V`` (the
    ``stacks`` pairs (X0, V) given as functions of a generator), ``ref_fn(ops, *polys)``
    the reference of one element's coefficients."""
    from nestad import taylor_stack as ts
    g = np.random.default_rng(seed)
    pairs = [make(g, K, n) for make in stacks]
    params = params or {}
    prim = getattr(ts, prim)
    consts = []
    for c in extra:
        c = c(K, pairs[0][0]) if callable(c) else c
        consts += list(c) if isinstance(c, tuple) else [c]

    def f(t):
        return prim.lifted(*[x + t * v for x, v in pairs], *consts, **params)

    def ref():
        ops = _series_ops(K)

        def at(s):
            out = [[None] * n for _ in range(K + 1)]
            for e in range(n):
                polys = [[mpmath.mpf(x[k, e]) + s * mpmath.mpf(v[k, e]) for k in range(len(x))]
                         for x, v in pairs]
                for k, c in enumerate(ref_fn(ops, *polys)):
                    out[k][e] = c
            return [c for row in out for c in row]
        return mp_diffs(at)
    return Case(f, ref, **kw)


def _line(lo, hi):
    return lambda g, K, n: (np.concatenate([g.uniform(lo, hi, (1, n)), 0.6 * g.normal(size=(K, n))]),
                            0.4 * g.normal(size=(K + 1, n)))


def _exp_grid(K, X):
    from nestad import taylor_stack as ts
    return ts._grid(K, X, ts._exp_weight)


def _log_grid(K, X):
    from nestad import taylor_stack as ts
    return ts._grid(K, X, ts._log_weight)


def _pairs(K, X):
    from nestad import taylor_stack as ts
    return ts._pairs(K)


case('series_exp', fused('exp', 'SERIES_EXP', [_line(-1, 1)], lambda o, p: o['exp'](p), extra=[_exp_grid]),
     fused('exp, terms by order', 'SERIES_EXP', [_line(-1, 1)], lambda o, p: o['exp'](p),
           extra=[_exp_grid], params={'whole': False}, seed=1, K=4))
case('series_log', fused('log', 'SERIES_LOG', [_line(1.5, 3)], lambda o, p: o['log'](p), extra=[_log_grid]),
     fused('log, terms by order', 'SERIES_LOG', [_line(1.5, 3)], lambda o, p: o['log'](p),
           extra=[_log_grid], params={'whole': False}, seed=1, K=4))
case('series_trig', *[fused('trig', 'SERIES_TRIG', [_line(-1, 1)],
                            lambda o, p, sg=sg, fi=fi: o['trig'](p, sg, fi), extra=[_exp_grid],
                            params={'sign': sg, 'first': fi, 'whole': sg > 0}, seed=2 + j)
                      for j, (sg, fi) in enumerate([(-1, True), (-1, False), (1, True), (1, False)])])
case('series_divide', fused('divide', 'SERIES_DIVIDE', [_line(-1, 1), _line(1.5, 3)],
                            lambda o, a, b: o['divide'](a, b)),
     # a constant numerator: its stack is its value and zeros (the rule's ``stacked=False``
     # takes the value alone, (1, n))
     fused('divide by a jet', 'SERIES_DIVIDE',
           [lambda g, K, n: (g.normal(size=(1, n)), np.zeros((1, n))), _line(1.5, 3)],
           lambda o, a, b: o['divide'](a + [0] * (len(b) - 1), b), params={'stacked': False}, seed=3))
case('series_multiply', fused('multiply', 'SERIES_MULTIPLY', [_line(-1, 1), _line(-1, 1)],
                              lambda o, a, b: o['mul'](a, b), extra=[_pairs]))


def _series_matmul_case():
    # (K + 1, 2, 3) @ (K + 1, 3, 2): each entry a sum of elementwise Cauchy products
    from nestad import taylor_stack as ts
    g, K = np.random.default_rng(5), 3
    A, dA, B, dB = (g.normal(size=s) for s in [(K + 1, 2, 3)] * 2 + [(K + 1, 3, 2)] * 2)
    i, j, grid = ts._pairs(K)

    def f(t):
        return ts.SERIES_MATMUL.lifted(A + t * dA, B + t * dB, i, j, grid)

    def ref():
        ops = _series_ops(K)

        def at(s):
            a = [[[mpmath.mpf(A[k, r, l]) + s * mpmath.mpf(dA[k, r, l]) for k in range(K + 1)]
                  for l in range(3)] for r in range(2)]
            b = [[[mpmath.mpf(B[k, l, q]) + s * mpmath.mpf(dB[k, l, q]) for k in range(K + 1)]
                  for q in range(2)] for l in range(3)]
            c = [[[sum(ops['mul'](a[r][l], b[l][q])[k] for l in range(3)) for q in range(2)]
                  for r in range(2)] for k in range(K + 1)]
            return [x for rows in c for row in rows for x in row]
        return mp_diffs(at)
    return Case(f, ref)


case('series_matmul', _series_matmul_case())


# ---------------------------------------------------------------- the checks

def builtin_primitives():
    return sorted(q for q in registry.PRIMITIVES if q not in registry.USER)


def test_every_registered_primitive_has_a_case():
    missing = [q for q in builtin_primitives() if q not in CASES]
    assert not missing, f"primitives without a Taylor test case in {__name__}: {missing}"
    unknown = [q for q in CASES if q not in registry.PRIMITIVES]
    assert not unknown, unknown


@contextlib.contextmanager
def recording():
    """The qualified names of the primitives Taylor mode applies its rules to."""
    seen = set()
    process = taylor.Taylor.process

    def recorded(self, prim, top, args, carried, primals, params):
        seen.add(getattr(prim, 'qualname', None))
        return process(self, prim, top, args, carried, primals, params)
    taylor.Taylor.process = recorded
    try:
        yield seen
    finally:
        taylor.Taylor.process = process


def nested_derivatives(f, k, t0):
    fs = [f]
    for _ in range(k):
        fs.append(nd.derivative(fs[-1]))
    return np.array([flat(g(t0)) for g in fs])


def assert_agrees(ours, ref, rtol, what, zero=1e-100):
    """Row k (order k) within rtol of the reference, relative to the row's largest entry
    for entries smaller than it (cancellation inside a row is not the rule's error); below
    ``zero`` both are zero (mpmath's noise around an exact zero grows with the order,
    1e-300 to 1e-117 at order 10; a case whose derivative is exactly zero computed as
    rounding errors says how large they are)."""
    for k, (a, b) in enumerate(zip(ours, ref)):
        scale = np.max(np.abs(b[np.isfinite(b)]), initial=0.0)
        ok = np.isclose(a, b, rtol=rtol, atol=max(rtol * scale, zero)) | (np.isnan(a) & np.isnan(b))
        assert ok.all(), f"{what}, order {k}: {a} against {b}"


IDS = [(q, i) for q in sorted(CASES) for i in range(len(CASES[q]))]


@pytest.mark.parametrize("qualname,i", IDS, ids=[f"{q}[{i}]" for q, i in IDS])
def test_primitive_under_taylor_mode(qualname, i):
    c = CASES[qualname][i]
    with recording() as seen:
        ours = np.array([flat(d) for d in nd.derivatives(c.f, ORDER)(0.0)])
    if c.taylor_applies:
        assert qualname in seen, f"the case did not apply {qualname} to a jet: {sorted(seen)}"
    assert_agrees(ours[:c.nested_order + 1], nested_derivatives(c.f, c.nested_order, 0.0), c.nested_rtol,
            f"{qualname} against nested derivative", c.zero)
    if c.ref is not None:
        with mpmath.workdps(60):    # (whatever precision an earlier test left: mpf(x) rounds to it)
            ref = c.ref()
        assert_agrees(ours, ref, c.rtol, f"{qualname} against the reference", c.zero)


JAX_IDS = [(q, i) for q, i in IDS if CASES[q][i].jax is not None]


@pytest.mark.parametrize("qualname,i", JAX_IDS, ids=[f"{q}[{i}]" for q, i in JAX_IDS])
def test_primitive_against_jax_jet(qualname, i):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from jax.experimental.jet import jet as jjet
    c = CASES[qualname][i]
    K = 6
    series = (1.0,) + (0.0,) * (K - 1)
    p, s = nd.jet(c.f, (0.0,), (series,))
    jp, js = jjet(lambda t: c.jax(jax.numpy, t), (0.0,), (series,))
    assert_agrees(np.array([flat(p)] + [flat(v) for v in s]),
            np.array([flat(np.asarray(jp))] + [flat(np.asarray(v)) for v in js]), c.jax_rtol,
            f"{qualname} against JAX's jet")


def test_polygamma_at_negative_arguments_every_order():
    # scipy's polygamma at negative x cancels where the value is small beside its terms
    # (n = 8 at -2.5: 1.5e-9 relative): polygamma reflects there, each point on its own
    for x in (-2.5, -0.3, -7.9, -30.25):
        ours = np.array([flat(d) for d in nd.derivatives(sp.digamma, ORDER)(x)])
        with mpmath.workdps(40):
            ref = np.array([[float(mpmath.polygamma(k, x))] for k in range(ORDER + 1)])
        assert np.allclose(ours, ref, rtol=2e-14, atol=0), (x, (ours - ref) / ref)
    xs = np.array([-2.5, -0.3, 1.5])
    for n in (2, 6):
        got = sp.polygamma(n, xs)
        want = [float(mpmath.polygamma(n, x)) for x in xs]
        assert np.allclose(got, want, rtol=2e-15, atol=0), (n, got, want)



def test_polygamma_far_below_zero_by_reflection():
    # scipy's polygamma takes time in proportion to |x| at negative x (minutes at -1e9):
    # the reflection never calls it there.  At a half-integer cot(pi x) = 0, so
    # trigamma(x) = pi^2 - trigamma(1 - x), and orders 2 and 3 are psi2(1 - x) and
    # 2 pi^4 - psi3(1 - x); far out psi_n(y) ~ (-1)^(n+1) (n-1)! / y^n (1 + n / (2y))
    x = -1e12 - 0.5
    y = 1e12 + 1.5
    want = (math.pi ** 2 - (1 / y + 0.5 / y ** 2), -(1 / y ** 2 + 1 / y ** 3),
            2 * math.pi ** 4 - (2 / y ** 3 + 3 / y ** 4))
    got = nd.derivatives(sp.digamma, 3)(x)[1:]
    assert np.allclose(got, want, rtol=1e-14, atol=0), (got, want)
    assert np.allclose(sp.polygamma(np.array([1, 2]), np.array([x, x])), want[:2], rtol=1e-14, atol=0)


def _mp_ive(v):
    return lambda x: mpmath.besseli(v, x) * mpmath.exp(-abs(x))


_IVD = np.array([0.7, 6.0, -20.0, 45.0])


def _ive_derivative_ref(n, v):
    def ref():          # d^k/dt^k ive^(n)(v, x + t d) = ive^(n + k)(v, x) d^k
        cols = []
        for x, d in zip(_IVD, D(_IVD)):
            with mpmath.workdps(60):
                e = mpmath.diffs(_mp_ive(v), mpmath.mpf(x), n + ORDER)
                cols.append([float(c * mpmath.mpf(d) ** k) for k, c in enumerate(list(e)[n:])])
        return np.array(cols).T
    return ref


case('scipy.special.ive_derivative', *[Case(lambda t, n=n, v=v: sp.ive_derivative(n, v, _IVD + t * D(_IVD)),
                                            _ive_derivative_ref(n, v), rtol=1e-12) for n, v in ((0, 0), (2, 1))])


def test_exponentially_scaled_bessel_every_order_at_every_point():
    # i0e, i1e, ive(2, .) between |x| = 2 and 50, where their rules' differences
    # (i1e - i0e...) cancelled a factor about |x| per order (i0e at 20: 2e-6 at order 4):
    # each point on its own against mpmath, orders 0..10
    for fn, v, xs in ((sp.i0e, 0, (20.0, -45.0)), (sp.i1e, 1, (3.0, 20.0)), (lambda x: sp.ive(2, x), 2, (20.0,))):
        for x in xs:
            ours = np.array([flat(d) for d in nd.derivatives(fn, ORDER)(x)])
            with mpmath.workdps(60):
                ref = mp_diffs(lambda s: [_mp_ive(v)(x + s)])
            assert np.allclose(ours, ref, rtol=1e-13, atol=0), (v, x, (ours - ref) / ref)


def test_ive_derivative_refuses_orders_that_are_not_whole_numbers():
    for n, v in ((-1, 0), (1.5, 0), (1, 0.5)):
        with pytest.raises(nd.NestadError, match="must be an integer"):
            sp.ive_derivative(n, v, 1.0)
