"""Every rule's first, second and third derivatives at extreme arguments, against mpmath.

For each scalar primitive (``nestad.*``), each elementwise ``nestad.numpy`` function and each
``nestad.scipy.special`` function (a two-argument one in each argument, the other held at a
moderate value), at x = +-1e-300, +-1e3, +-1e8, +-1e200 (and +-30, +-720, and points near the
ends of a bounded domain), where the function is defined:

* the reference is the symbolic derivative (sympy) evaluated by mpmath at increasing precision
  (40, 80, ... 2560 digits) until two precisions agree, then rounded to a double; so huge
  arguments (sin(1e200)) and cancellations (exp(x) - 1 at 1e-300) are resolved;
* nestad's derivative of order k is taken in every pairing of forward (``jvp`` with tangent
  one) and reverse (``gradient_r`` of the sum) of length k, eagerly, and by ``nd.stage`` of the
  all-forward and all-reverse towers; nestad.numpy and scipy functions on an array of all the
  points, nestad's scalar functions point by point.

Classes of finding:

* ``NAN``: nan where the reference is a finite number (the bug class of issue 14 item 6: an
  intermediate overflow meeting ``0 * inf`` in a rule's derivative);
* ``INF``: +-inf where the reference is finite and representable;
* ``WRONG``: finite, but off by more than ``--tol`` relative (absolute below 1e-290, where
  doubles are subnormal);
* ``ERROR``: an exception;
* ``nan-for-overflow`` (reported, not a bug by the convention in notes/hardening.md): the
  reference overflows a double, nestad gives nan instead of +-inf;
* ``value nan``: the function's own value (scipy's) is nan there;
* ``known ...``: a finding of a case listed in ``KNOWN`` (found, not fixed).

Usage::

    python benchmarks/fuzz_extremes.py                  # everything (6 minutes on an idle core)
    python benchmarks/fuzz_extremes.py --part scalar    # or numpy, or scipy
    python benchmarks/fuzz_extremes.py --only tanh,numpy.tanh --show
    python benchmarks/fuzz_extremes.py --no-staged --orders 1,2

Exit status 1 if any NAN, INF, WRONG or ERROR is found.  ``tests/test_rule_extremes.py``
runs the same checks on a subset quickly.
"""
import argparse
import itertools
import math
import signal
import sys
import warnings

import mpmath
import numpy as np
import sympy as sp

import nestad as nd
import nestad.numpy as anp

warnings.filterwarnings('ignore')

X = sp.Symbol('x', real=True)
BASE_POINTS = (1e-300, 1e3, 1e8, 1e200, 30.0, 720.0)
_ONE_MINUS = 1.0 - 2.0 ** -53


def _pm(*xs):
    return tuple(s * x for x in xs for s in (1.0, -1.0))


POINTS = _pm(*BASE_POINTS)
UNIT = (1e-300, 1e-8, 0.5, _ONE_MINUS, 1.0 - 1e-8)               # (0, 1)
SYM1 = _pm(1e-300, 1e-8, _ONE_MINUS, 1.0 - 1e-8)                  # (-1, 1)


class Case:
    """A function of one variable ``fn`` (nestad), its sympy expression ``expr`` in X, the
    points to try, and whether ``fn`` takes an array of points (nestad.numpy, scipy)."""

    def __init__(self, label, fn, expr, points=POINTS, array=True):
        self.label, self.fn, self.expr, self.points = label, fn, expr, tuple(points)
        self.array = array


# ---------------------------------------------------------------- references

def _to_float(v):
    if isinstance(v, mpmath.mpc):
        if v.imag != 0:
            return None
        v = v.real
    try:
        return float(v)
    except (OverflowError, ValueError):
        return math.copysign(math.inf, v) if mpmath.isinf(v) or abs(v) > 1 else 0.0


def _smooth(expr):
    """The derivative away from kinks: sign and Heaviside are locally constant there."""
    return expr.replace(lambda e: isinstance(e, (sp.Derivative, sp.DiracDelta)), lambda e: 0)


class erfcx(sp.Function):
    """exp(x^2) erfc(x) as a function of its own (mpmath overflows on the product)."""

    def fdiff(self, argindex=1):
        x = self.args[0]
        return 2 * x * erfcx(x) - 2 / sp.sqrt(sp.pi)


def _mp_erfcx(x):
    if x < 0:
        return mpmath.exp(x * x) * mpmath.erfc(x)
    return mpmath.hyperu(0.5, 0.5, x * x) / mpmath.sqrt(mpmath.pi)


_KINKS = {'Heaviside': lambda x, h=0.5: 1 if x > 0 else (0 if x < 0 else h),
          'sign': mpmath.sign, 'erfcx': _mp_erfcx}


class _Slow(Exception):
    pass


def _too_slow(signum, frame):
    raise _Slow()


def reference(expr, x):
    """The value of sympy expression ``expr`` at ``x`` to double precision, or None where it
    is not a real number (outside the domain, a pole) or mpmath does not settle (within ten
    seconds a precision)."""
    f = sp.lambdify(X, expr, [_KINKS, 'mpmath'])
    previous = signal.signal(signal.SIGALRM, _too_slow)
    try:
        return _settle(f, x)
    finally:
        signal.signal(signal.SIGALRM, previous)


def _settle(f, x):
    last = None
    for dps in (40, 80, 160, 320, 640, 1280, 2560):
        mpmath.mp.dps = dps
        signal.alarm(10)            # mpmath can take minutes (polygamma(4, x) at -1e200)
        try:
            v = _to_float(f(mpmath.mpf(x)))
        except Exception:                           # noqa: BLE001 (a pole; mpmath's overflow)
            v = None
        finally:
            signal.alarm(0)
            mpmath.mp.dps = 15
        if v is None:
            return None
        agree = last is not None and (v == last or (
            math.isfinite(v) and math.isfinite(last) and abs(v - last) <= 1e-14 * abs(v)))
        # a zero or an infinity may be a cancellation not yet resolved (1/gamma's derivatives
        # at 1e-300 cancel terms of size 1e600): only the largest precisions settle it
        if agree and (math.isfinite(v) and v != 0 or dps >= 1280):
            return v
        last = v
    return None


# ---------------------------------------------------------------- nestad's derivatives

def _ones(x):
    return np.ones(np.shape(nd.primal_value(x)))


def d_forward(g):
    return lambda x: nd.jvp(g, (x,), (_ones(x) if np.ndim(nd.primal_value(x)) else 1.0,))[1]


def d_reverse(g):
    return nd.gradient_r(lambda x: anp.sum(g(x)) if np.ndim(nd.primal_value(x)) else g(x))


def tower(fn, pairing):
    g = fn
    for mode in reversed(pairing):      # pairing[0] is the outermost
        g = (d_forward if mode == 'f' else d_reverse)(g)
    return g


def modes(orders, staged):
    for k in orders:
        for pairing in itertools.product('fr', repeat=k):
            yield ''.join(pairing), False
        if staged:
            yield 'f' * k, True
            yield 'r' * k, True


# ---------------------------------------------------------------- comparison

def classify(got, ref, tol):
    """None if ``got`` agrees with ``ref``, else the class of the disagreement."""
    if ref is None:
        return None
    if math.isinf(ref):
        if got == ref:
            return None
        return 'nan-for-overflow' if math.isnan(got) else 'WRONG'
    if math.isnan(got):
        return 'NAN'
    if math.isinf(got):
        return 'INF'
    if abs(ref) < 1e-290:
        return None if abs(got - ref) <= 1e-300 + tol * abs(ref) else 'WRONG'
    return None if abs(got - ref) <= tol * abs(ref) else 'WRONG'


# Found and not fixed (notes/hardening.md): reported as 'known', not counted as failures.
KNOWN = {
    # ive' = (ive(v-1) + ive(v+1)) / 2 - sign(x) ive cancels for large |x| (relative error |x|
    # eps, more in the higher derivatives): i0e and i1e have an asymptotic series there
    'scipy.ive(1.5, x)': 'WRONG',
    # scipy's own values: iv(v, x) is 0 for x = 1e-300 and v > 0 (iv(0.5, 1e-300) is 8e-151),
    # so the rule (iv(v - 1) + iv(v + 1)) / 2 is too
    'scipy.iv(1.5, x)': 'WRONG',
}


def _value(case, x):
    try:
        with np.errstate(all='ignore'):
            return float(np.asarray(case.fn(np.array([x]) if case.array else x)).ravel()[0])
    except OverflowError:                   # a plain float's x ** 3 at 1e200
        return math.inf


def check(case, orders=(1, 2, 3), staged=True, tol=1e-8):
    """[(class, label, pairing, staged, x, got, ref)] for every disagreement of ``case``."""
    found = []
    exprs = {k: _smooth(sp.diff(case.expr, X, k)) for k in orders}
    defined = [x for x in case.points if reference(case.expr, x) is not None]
    # where scipy's own value is nan (ive(v, x) from |x| = 1e16 on) a nan derivative is right
    nan_value = {x for x in defined if math.isnan(_value(case, x))}
    refs = {(k, x): reference(exprs[k], x) for k in orders for x in defined}
    for pairing, is_staged in modes(orders, staged):
        k = len(pairing)
        d = tower(case.fn, pairing)
        if is_staged:
            d = nd.stage(d)
        calls = [(np.array(defined), defined)] if case.array and defined else \
            [(x, [x]) for x in defined]
        for arg, xs in calls:
            try:
                with np.errstate(all='ignore'):
                    got = np.atleast_1d(np.asarray(d(arg), dtype=float))
            except Exception as exc:                     # noqa: BLE001 (reported)
                found.append(('ERROR', case.label, pairing, is_staged, xs[0],
                              f"{type(exc).__name__}: {exc}"[:200], None))
                continue
            for x, g in zip(xs, got):
                cls = classify(float(g), refs[(k, x)], tol)
                if cls and x in nan_value:
                    cls = 'value nan'
                if cls and KNOWN.get(case.label) == cls:
                    cls = 'known ' + cls
                if cls:
                    found.append((cls, case.label, pairing, is_staged, x, float(g), refs[(k, x)]))
    return found


# ---------------------------------------------------------------- the cases

def _cases():
    c = 0.7
    pi = sp.pi
    scalar_unary = {
        'exp': sp.exp(X), 'expm1': sp.exp(X) - 1, 'exp2': 2 ** X, 'log': sp.log(X),
        'log1p': sp.log(1 + X), 'log2': sp.log(X) / sp.log(2), 'log10': sp.log(X) / sp.log(10),
        'sqrt': sp.sqrt(X), 'cbrt': sp.sign(X) * sp.Abs(X) ** sp.Rational(1, 3),
        'sin': sp.sin(X), 'cos': sp.cos(X), 'tan': sp.tan(X), 'asin': sp.asin(X),
        'acos': sp.acos(X), 'atan': sp.atan(X), 'sinh': sp.sinh(X), 'cosh': sp.cosh(X),
        'tanh': sp.tanh(X), 'asinh': sp.asinh(X), 'acosh': sp.acosh(X), 'atanh': sp.atanh(X),
        'erf': sp.erf(X), 'erfc': sp.erfc(X), 'abs': sp.Abs(X),
    }
    bounded = {'asin': SYM1, 'acos': SYM1, 'atanh': SYM1,
               'acosh': (1.0 + 2.0 ** -52, 1.0 + 1e-8) + BASE_POINTS[1:]}
    cases = []
    for name, expr in scalar_unary.items():
        cases.append(Case(name, getattr(nd, name), expr, bounded.get(name, POINTS), array=False))
    scalar_binary = {
        'atan2': (sp.atan2(X, c), sp.atan2(c, X)), 'hypot': (sp.sqrt(X**2 + c**2),) * 2,
        'pow': (X ** 3, sp.Float(c) ** X), 'maximum': (sp.Max(X, c),) * 2,
        'minimum': (sp.Min(X, c),) * 2,
    }
    for name, (ex, ey) in scalar_binary.items():
        f = getattr(nd, name)
        cases.append(Case(f'{name}(x, c)', lambda x, f=f: f(x, 3.0 if f is nd.pow else c), ex,
                          array=False))
        cases.append(Case(f'{name}(c, x)', lambda x, f=f: f(c, x), ey, array=False))
    cases.append(Case('pow(x, 0.5)', lambda x: nd.pow(x, 0.5), sp.sqrt(X), array=False))
    cases.append(Case('pow(x, -2)', lambda x: nd.pow(x, -2.0), X ** -2, array=False))
    cases.append(Case('x ** 3', lambda x: x ** 3, X ** 3, array=False))
    cases.append(Case('1 / x', lambda x: 1.0 / x, 1 / X, array=False))

    # nestad.numpy's elementwise functions, on arrays
    np_unary = {
        'arccos': sp.acos(X), 'arccosh': sp.acosh(X), 'arcsin': sp.asin(X),
        'arcsinh': sp.asinh(X), 'arctan': sp.atan(X), 'arctanh': sp.atanh(X),
        'deg2rad': X * pi / 180, 'radians': X * pi / 180, 'rad2deg': X * 180 / pi,
        'degrees': X * 180 / pi, 'fabs': sp.Abs(X), 'absolute': sp.Abs(X),
        'reciprocal': 1 / X, 'square': X ** 2, 'negative': -X, 'positive': X,
        'sinc': sp.sin(pi * X) / (pi * X),
    }
    for name in ('exp', 'expm1', 'exp2', 'log', 'log1p', 'log2', 'log10', 'sqrt', 'cbrt', 'sin',
                 'cos', 'tan', 'sinh', 'cosh', 'tanh'):
        np_unary[name] = scalar_unary[name]
    np_bounded = {'arcsin': SYM1, 'arccos': SYM1, 'arctanh': SYM1, 'arccosh': bounded['acosh']}
    # numpy's sinc is sin(pi x) / (pi x) with pi x rounded: from |x| = 1e8 on its value is
    # off by as much as the value itself, and nestad's derivatives (of that formula) with it
    np_bounded['sinc'] = _pm(*[x for x in BASE_POINTS if abs(x) < 1e8])
    for name, expr in np_unary.items():
        cases.append(Case(f'numpy.{name}', getattr(anp, name), expr, np_bounded.get(name, POINTS)))
    np_binary = {
        'add': (X + c, c + X), 'subtract': (X - c, c - X), 'multiply': (X * c, c * X),
        'divide': (X / c, c / X), 'power': (X ** 3, sp.Float(c) ** X),
        'float_power': (X ** 3, sp.Float(c) ** X), 'arctan2': (sp.atan2(X, c), sp.atan2(c, X)),
        'hypot': (sp.sqrt(X**2 + c**2),) * 2,
        'logaddexp': (sp.log(sp.exp(X) + sp.exp(c)),) * 2,
        'logaddexp2': (sp.log(2 ** X + 2 ** sp.Float(c)) / sp.log(2),) * 2,
        'maximum': (sp.Max(X, c),) * 2, 'minimum': (sp.Min(X, c),) * 2,
        'fmax': (sp.Max(X, c),) * 2, 'fmin': (sp.Min(X, c),) * 2,
        'copysign': (sp.Abs(X), sp.Float(c) * sp.sign(X)),
    }
    for name, (ex, ey) in np_binary.items():
        f = getattr(anp, name)
        first = 3.0 if name in ('power', 'float_power') else c
        cases.append(Case(f'numpy.{name}(x, c)', lambda x, f=f, k=first: f(x, k), ex))
        cases.append(Case(f'numpy.{name}(c, x)', lambda x, f=f: f(c, x), ey))
    cases.extend(_scipy_cases(c))
    return cases


def _scipy_cases(c):
    try:
        import nestad.scipy.special as s
    except ImportError:                                  # pragma: no cover
        return []
    a, b = 2.5, 1.5
    unary = {
        'gammaln': sp.loggamma(X), 'digamma': sp.polygamma(0, X), 'gamma': sp.gamma(X),
        'rgamma': 1 / sp.gamma(X), 'erf': sp.erf(X), 'erfc': sp.erfc(X),
        'erfinv': sp.erfinv(X), 'expit': 1 / (1 + sp.exp(-X)), 'logit': sp.log(X / (1 - X)),
        'log_expit': -sp.log(1 + sp.exp(-X)), 'i0': sp.besseli(0, X), 'i1': sp.besseli(1, X),
        'i0e': sp.exp(-sp.Abs(X)) * sp.besseli(0, X), 'i1e': sp.exp(-sp.Abs(X)) * sp.besseli(1, X),
    }
    points = {'erfinv': SYM1, 'logit': UNIT, 'erfcinv': UNIT + (1.5, 2.0 - 2.0 ** -52)}
    cases = [Case(f'scipy.{n}', getattr(s, n), e, points.get(n, POINTS)) for n, e in unary.items()]
    # erfcx and erfcinv through mpmath's functions (it has neither)
    # (mpmath's hyperu, the reference, is wrong beyond x = 1e100)
    cases.append(Case('scipy.erfcx', s.erfcx, erfcx(X), _pm(*BASE_POINTS[:3], 30.0, 720.0)))
    cases.append(Case('scipy.erfcinv', s.erfcinv, sp.erfinv(1 - X), points['erfcinv']))
    cases += [
        Case('scipy.polygamma(1, x)', lambda x: s.polygamma(1, x), sp.polygamma(1, X)),
        Case('scipy.iv(1.5, x)', lambda x: s.iv(1.5, x), sp.besseli(1.5, X)),
        Case('scipy.ive(1.5, x)', lambda x: s.ive(1.5, x), sp.exp(-sp.Abs(X)) * sp.besseli(1.5, X)),
        Case('scipy.beta(x, c)', lambda x: s.beta(x, c), sp.beta(X, c)),
        Case('scipy.beta(c, x)', lambda x: s.beta(c, x), sp.beta(c, X)),
        Case('scipy.betaln(x, c)', lambda x: s.betaln(x, c), sp.log(sp.beta(X, c))),
        Case('scipy.gammainc(a, x)', lambda x: s.gammainc(a, x),
             sp.lowergamma(a, X) / sp.gamma(a)),
        Case('scipy.gammaincc(a, x)', lambda x: s.gammaincc(a, x),
             sp.uppergamma(a, X) / sp.gamma(a)),
        Case('scipy.betainc(a, b, x)', lambda x: s.betainc(a, b, x),
             sp.betainc_regularized(a, b, 0, X), UNIT),
        Case('scipy.xlogy(x, c)', lambda x: s.xlogy(x, c), X * sp.log(c)),
        Case('scipy.xlogy(c, x)', lambda x: s.xlogy(c, x), c * sp.log(X)),
        Case('scipy.xlog1py(c, x)', lambda x: s.xlog1py(c, x), c * sp.log(1 + X)),
    ]
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--only', help='comma-separated case labels (prefixes match)')
    ap.add_argument('--orders', default='1,2,3')
    ap.add_argument('--no-staged', action='store_true')
    ap.add_argument('--tol', type=float, default=1e-8)
    ap.add_argument('--show', action='store_true', help='print every finding')
    ap.add_argument('--part', choices=('scalar', 'numpy', 'scipy'),
                    help="only nestad's scalar functions, nestad.numpy's or nestad.scipy's")
    args = ap.parse_args(argv)
    orders = tuple(int(k) for k in args.orders.split(','))
    cases = _cases()
    if args.part:
        prefix = {'numpy': 'numpy.', 'scipy': 'scipy.'}.get(args.part)
        cases = [c for c in cases if (c.label.startswith(prefix) if prefix else
                                      not c.label.startswith(('numpy.', 'scipy.')))]
    if args.only:
        wanted = args.only.split(',')
        cases = [c for c in cases if any(c.label == w or c.label.startswith(w + '(') for w in wanted)]
    counts, failing = {}, 0
    for case in cases:
        found = check(case, orders, not args.no_staged, args.tol)
        for f in found:
            counts[f[0]] = counts.get(f[0], 0) + 1
        bad = [f for f in found if f[0].isupper()]
        failing += len(bad)
        shown = found if args.show else bad
        # one line per (class, pairing, point) group is enough to read
        seen = set()
        for cls, label, pairing, staged, x, got, ref in shown:
            key = (cls, x, len(pairing))
            if key in seen and not args.show:
                continue
            seen.add(key)
            print(f"{cls:16} {label:26} {'staged ' if staged else ''}{pairing:4} x={x!r:<24} "
                  f"got {got!r:<26} mpmath {ref!r}", flush=True)
        print(f"  {case.label}: {len(found)} findings", file=sys.stderr, flush=True)
    print(f"{len(cases)} cases; findings: {counts or 'none'}")
    return 1 if failing else 0


if __name__ == '__main__':
    sys.exit(main())
