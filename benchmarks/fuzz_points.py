"""Point checks of nestad.scipy and nestad.numpy's composite functions (numpy/_more.py).

For every function, at random points with special values mixed in (0, -0, 1, integers,
tiny and huge numbers, boundaries of the domain, ties, nan/inf where the function defines
them):

* the value equals scipy's / numpy's (bit for bit, nan and signed zeros included);
* the first derivative by gradient_r and gradient_f, and the second by the four pairings
  (derivative/gradient_r nested), match an independent reference:
  - scipy.special: mpmath at 30 digits (the function written in mpmath and differentiated
    by mpmath.diff), so no peer library is trusted;
  - scipy.stats and the composite numpy functions: JAX (float64), with a central
    difference to settle a disagreement.

A mismatch is reported with the function, the point and the numbers; kinks (where the
left and right derivatives differ) are reported separately.
"""
import math
import warnings
import zlib

import numpy as np
import scipy.special as sps
import scipy.stats as sst

import nestad as nd
import nestad.numpy as anp
import nestad.scipy.special as nsp
import nestad.scipy.stats as nst

warnings.filterwarnings('ignore')

try:
    import mpmath as mp
    mp.mp.dps = 30
except ImportError:                 # pragma: no cover
    mp = None
try:
    import jax
    import jax.numpy as jnp
    import jax.scipy.special as jsp
    import jax.scipy.stats as jst
except ImportError:                 # pragma: no cover
    jax = None


# ---------------------------------------------------------------- points

def draw(rng, kind):
    """A point of a domain kind, often a special one."""
    r = rng.random()
    if kind == 'real':
        if r < 0.5:
            return float(rng.uniform(-6, 6))
        return float(rng.choice([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-8, -1e-8, 1e-300, 30.0,
                                 -30.0, 40.0, -40.0, 700.0, -745.0, 1e8, -1e8]))
    if kind == 'pos':
        if r < 0.5:
            return float(rng.uniform(0.05, 12))
        return float(rng.choice([1e-300, 1e-12, 1e-6, 0.5, 1.0, 2.0, 3.0, 1.5, 10.0, 1e3, 1e8,
                                 171.5, 0.0]))
    if kind == 'unit':
        if r < 0.6:
            return float(rng.uniform(0.01, 0.99))
        return float(rng.choice([1e-300, 1e-12, 0.5, 1 - 1e-12, 1e-6, 1 - 1e-6, 0.0, 1.0]))
    if kind == 'sym1':            # (-1, 1)
        if r < 0.6:
            return float(rng.uniform(-0.99, 0.99))
        return float(rng.choice([0.0, -0.0, 1 - 1e-12, -1 + 1e-12, 1e-12, 0.999999]))
    if kind == 'order':
        return float(rng.choice([0, 1, 2, 3]))
    if kind == 'realorder':
        return float(rng.choice([0.0, 0.5, 1.0, 2.0, 2.5, -0.5, -1.5, 3.0]))
    if kind == 'count':
        return float(rng.choice([0, 1, 2, 5, 10, 40]))
    raise ValueError(kind)


# ---------------------------------------------------------------- scipy.special against mpmath

def _mpf(x):
    return mp.mpf(x)


SPECIAL = {   # name: (arg kinds, differentiable args, mpmath function of mpf args)
    'gammaln': (('real',), (0,), lambda x: mp.log(abs(mp.gamma(x)))),
    'digamma': (('real',), (0,), lambda x: mp.digamma(x)),
    'polygamma': (('order', 'real'), (1,), lambda n, x: mp.polygamma(int(n), x)),
    'gamma': (('real',), (0,), lambda x: mp.gamma(x)),
    'rgamma': (('real',), (0,), lambda x: mp.rgamma(x)),
    'beta': (('pos', 'pos'), (0, 1), lambda a, b: mp.beta(a, b)),
    'betaln': (('pos', 'pos'), (0, 1), lambda a, b: mp.log(abs(mp.beta(a, b)))),
    'gammainc': (('pos', 'pos'), (1,), lambda a, x: mp.gammainc(a, 0, x, regularized=True)),
    'gammaincc': (('pos', 'pos'), (1,), lambda a, x: mp.gammainc(a, x, mp.inf, regularized=True)),
    'betainc': (('pos', 'pos', 'unit'), (2,), lambda a, b, x: mp.betainc(a, b, 0, x, regularized=True)),
    'erf': (('real',), (0,), lambda x: mp.erf(x)),
    'erfc': (('real',), (0,), lambda x: mp.erfc(x)),
    'erfinv': (('sym1',), (0,), lambda x: mp.erfinv(x)),
    'erfcinv': (('unit',), (0,), lambda x: _erfcinv(x)),
    'expit': (('real',), (0,), lambda x: 1 / (1 + mp.exp(-x))),
    'logit': (('unit',), (0,), lambda x: mp.log(x / (1 - x))),
    'log_expit': (('real',), (0,), lambda x: -mp.log1p(mp.exp(-x))),
    'xlogy': (('real', 'pos'), (0, 1), lambda x, y: 0 if x == 0 else x * mp.log(y)),
    'xlog1py': (('real', 'pos'), (0, 1), lambda x, y: 0 if x == 0 else x * mp.log1p(y)),
    'i0': (('real',), (0,), lambda x: mp.besseli(0, x)),
    'i1': (('real',), (0,), lambda x: mp.besseli(1, x)),
    'i0e': (('real',), (0,), lambda x: mp.besseli(0, x) * mp.exp(-abs(x))),
    'i1e': (('real',), (0,), lambda x: mp.besseli(1, x) * mp.exp(-abs(x))),
    'iv': (('realorder', 'pos'), (1,), lambda v, x: mp.besseli(v, x)),
    'ive': (('realorder', 'pos'), (1,), lambda v, x: mp.besseli(v, x) * mp.exp(-abs(x))),
}


# closed-form first derivatives (in the last argument) where the function's value is close
# to a constant and its differences cancel even at 60 digits
REF_D1 = {
    'gammainc': lambda a, x: mp.exp(-x) * x ** (a - 1) / mp.gamma(a),
    'gammaincc': lambda a, x: -mp.exp(-x) * x ** (a - 1) / mp.gamma(a),
    'betainc': lambda a, b, x: x ** (a - 1) * (1 - x) ** (b - 1) / mp.beta(a, b),
    'erfcinv': lambda x: -mp.sqrt(mp.pi) / 2 * mp.exp(_erfcinv(x) ** 2),
    'log_expit': lambda x: 1 / (1 + mp.exp(x)),
    'expit': lambda x: 1 / (2 + mp.exp(x) + mp.exp(-x)),
}


def _erfcinv(x):
    with mp.workdps(60):
        y0 = mp.mpf(float(sps.erfcinv(float(x)))) if 0 < x < 2 else mp.mpf(0)
        return mp.findroot(lambda y: mp.erfc(y) - x, y0)


def _mp_call(f, args):
    try:
        with mp.workdps(60):
            return f(*[_mpf(a) for a in args])
    except Exception:               # noqa: BLE001
        return None


def _rel(a, b):
    """Relative difference, nan-aware (0 when both nan or both the same infinity)."""
    if math.isnan(a) and math.isnan(b):
        return 0.0
    if a == b:
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(b), 1e-300)


def _mp_deriv(f, args, i, n, kind):
    """n-th partial derivative of mpmath f in argument i at args, by central differences
    at 60 digits with a step that stays inside the domain (relative to the distance to a
    domain end at 0 or 1, else about 1e-15 of the point for n = 1, 1e-12 for n = 2);
    None when mpmath cannot (a pole, a domain end); 'kink' when the one-sided first
    derivatives differ."""
    def g(t):
        a = list(args)
        a[i] = t
        return f(*a)
    x = _mpf(args[i])
    c = mp.mpf('1e-15') if n == 1 else mp.mpf('1e-12')
    with mp.workdps(60):
        if kind in ('pos', 'unit'):
            h = abs(x) * c
            if kind == 'unit':
                h = min(h, abs(1 - x) * c)
        elif kind == 'sym1':
            h = min(max(1, abs(x)), 1 - abs(x)) * c
        else:
            h = max(1, abs(x)) * c
        if h == 0:
            return None
        try:
            central = mp.diff(g, x, n, h=h)
            left = (g(x) - g(x - h)) / h
            right = (g(x + h) - g(x)) / h
            if abs(left - right) > mp.mpf('1e-6') * (abs(left) + abs(right) + mp.mpf('1e-300')):
                return 'kink'
            return central
        except Exception:           # noqa: BLE001  (a pole, no convergence, a recursion)
            return None


def _float(v):
    try:
        r = complex(v)
        return r.real if abs(r.imag) <= 1e-20 * max(1.0, abs(r.real)) else math.nan
    except (TypeError, ValueError, OverflowError):
        return math.nan


def check_special(name, rng, report):
    kinds, diff_args, mpf = SPECIAL[name]
    nfn, sfn = getattr(nsp, name), getattr(sps, name)
    args = [draw(rng, k) for k in kinds]
    report.count('special points')
    # value
    v_n, v_s = nfn(*args), sfn(*args)
    if not (np.array_equal(np.asarray(v_n), np.asarray(v_s), equal_nan=True)
            and np.signbit(v_n) == np.signbit(v_s)):
        report.mismatch('value', name, args, v_n, v_s)
    if not math.isfinite(float(v_s)):
        return
    for i in diff_args:
        def f1(t, i=i):
            a = list(args)
            a[i] = t
            return nfn(*a)
        d1 = REF_D1.get(name)
        if d1 is not None:          # a closed form where differences of values cancel
            ref = _mp_call(d1, args)
            ref2 = _mp_deriv(d1, [_mpf(a) for a in args], i, 1, kinds[i])
        else:
            ref = _mp_deriv(mpf, [_mpf(a) for a in args], i, 1, kinds[i])
            ref2 = _mp_deriv(mpf, [_mpf(a) for a in args], i, 2, kinds[i])
        got = {'gradient_r': safe_call(lambda: nd.gradient_r(f1)(args[i])),
               'gradient_f': safe_call(lambda: nd.gradient_f(f1)(args[i])),
               'derivative': safe_call(lambda: nd.derivative(f1)(args[i]))}
        second = {p: safe_call(lambda p=p: D[p[0]](D[p[1]](f1))(args[i])) for p in PAIRINGS}
        for label, values, r in (('d1', got, ref), ('d2', second, ref2)):
            report.count('derivative comparisons', len(values))
            if r == 'kink':
                report.count('kinks skipped')
                continue
            if r is None:
                report.count('no mpmath reference')
                continue
            rv = _float(r)
            for mode, v in values.items():
                if isinstance(v, str):
                    report.mismatch(f'{label} error', name, args, v, rv, mode=mode, arg=i)
                    continue
                err = _rel(float(v), rv)
                tol = 1e-8 if label == 'd1' else 1e-6
                if abs(float(v)) < 1e-280 and abs(rv) < 1e-280:
                    continue                # both underflow (or both zero)
                floor = 1e-20 * (1 + abs(_float(ref) if label == 'd2' and ref not in (None, 'kink') else 0))
                if abs(float(v) - rv) <= floor:
                    continue                # a zero derivative against the reference's noise
                if err > tol:
                    report.mismatch(f'{label} {"off" if err < 1e-3 else "WRONG"}', name, args,
                                    float(v), rv, mode=mode, arg=i, rel=err)


D = {'f': nd.derivative, 'r': nd.gradient_r}
PAIRINGS = ('ff', 'fr', 'rf', 'rr')


def safe_call(fn):
    try:
        with np.errstate(all='ignore'):
            return float(nd.primal_value(fn()))
    except Exception as e:          # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:150]}"


# ---------------------------------------------------------------- scipy.stats and numpy composites against JAX

def _stats_cases():
    if jax is None:
        return {}
    return {   # name: (arg kinds, differentiable args, nestad, scipy, jax)
        'norm.logpdf': (('real', 'real', 'pos'), (0, 1, 2), nst.norm.logpdf, sst.norm.logpdf, getattr(jst.norm, 'logpdf', None)),
        'norm.pdf': (('real', 'real', 'pos'), (0, 1, 2), nst.norm.pdf, sst.norm.pdf, getattr(jst.norm, 'pdf', None)),
        'norm.cdf': (('real', 'real', 'pos'), (0, 1, 2), nst.norm.cdf, sst.norm.cdf, getattr(jst.norm, 'cdf', None)),
        'norm.logcdf': (('real', 'real', 'pos'), (0, 1, 2), nst.norm.logcdf, sst.norm.logcdf, getattr(jst.norm, 'logcdf', None)),
        'norm.sf': (('real', 'real', 'pos'), (0, 1, 2), nst.norm.sf, sst.norm.sf, getattr(jst.norm, 'sf', None)),
        'norm.logsf': (('real', 'real', 'pos'), (0, 1, 2), nst.norm.logsf, sst.norm.logsf, getattr(jst.norm, 'logsf', None)),
        't.logpdf': (('real', 'pos', 'real', 'pos'), (0, 1, 2, 3), nst.t.logpdf, sst.t.logpdf, getattr(jst.t, 'logpdf', None)),
        't.pdf': (('real', 'pos', 'real', 'pos'), (0, 1, 2, 3), nst.t.pdf, sst.t.pdf, getattr(jst.t, 'pdf', None)),
        't.cdf': (('real', 'pos', 'real', 'pos'), (0, 2, 3), nst.t.cdf, sst.t.cdf, getattr(jst.t, 'cdf', None)),
        'gamma.logpdf': (('pos', 'pos', 'real', 'pos'), (0, 1, 3), nst.gamma.logpdf, sst.gamma.logpdf, getattr(jst.gamma, 'logpdf', None)),
        'gamma.cdf': (('pos', 'pos', 'real', 'pos'), (0, 3), nst.gamma.cdf, sst.gamma.cdf, getattr(jst.gamma, 'cdf', None)),
        'beta.logpdf': (('unit', 'pos', 'pos'), (0, 1, 2), nst.beta.logpdf, sst.beta.logpdf, getattr(jst.beta, 'logpdf', None)),
        'beta.cdf': (('unit', 'pos', 'pos'), (0,), nst.beta.cdf, sst.beta.cdf, getattr(jst.beta, 'cdf', None)),
        'chi2.logpdf': (('pos', 'pos'), (0, 1), nst.chi2.logpdf, sst.chi2.logpdf, getattr(jst.chi2, 'logpdf', None)),
        'poisson.logpmf': (('count', 'pos'), (1,), nst.poisson.logpmf, sst.poisson.logpmf, getattr(jst.poisson, 'logpmf', None)),
        'poisson.cdf': (('count', 'pos'), (1,), nst.poisson.cdf, sst.poisson.cdf, getattr(jst.poisson, 'cdf', None)),
    }


def _numpy_cases():
    """Composite nestad.numpy functions: (maker of arguments, differentiable args, nestad,
    numpy, jax)."""
    def vec(rng, n=4, special=True):
        x = rng.uniform(-2, 2, n)
        if special:
            for k in range(n):
                if rng.random() < 0.3:
                    x[k] = rng.choice([0.0, -0.0, 1e-9, -1e-9, 1e-4, 0.3183098861837907, 1.0,
                                       -1.0, 0.5, 2.0, 3.0])
        return x
    cases = {
        'sinc': (lambda r: (vec(r),), (0,), anp.sinc, np.sinc, 'sinc'),
        'rad2deg': (lambda r: (vec(r),), (0,), anp.rad2deg, np.rad2deg, 'rad2deg'),
        'deg2rad': (lambda r: (vec(r),), (0,), anp.deg2rad, np.deg2rad, 'deg2rad'),
        'fabs': (lambda r: (vec(r),), (0,), anp.fabs, np.fabs, 'fabs'),
        'logaddexp2': (lambda r: (vec(r) * 30, vec(r) * 30), (0, 1), anp.logaddexp2, np.logaddexp2, 'logaddexp2'),
        'logaddexp': (lambda r: (vec(r) * 30, vec(r) * 30), (0, 1), anp.logaddexp, np.logaddexp, 'logaddexp'),
        'fmax': (lambda r: (vec(r), vec(r)), (0, 1), anp.fmax, np.fmax, 'fmax'),
        'fmin': (lambda r: (vec(r), vec(r)), (0, 1), anp.fmin, np.fmin, 'fmin'),
        'nan_to_num': (lambda r: (vec(r),), (0,), anp.nan_to_num, np.nan_to_num, 'nan_to_num'),
        'rot90': (lambda r: (vec(r, 6).reshape(2, 3),), (0,), anp.rot90, np.rot90, 'rot90'),
        'pad': (lambda r: (vec(r, 6).reshape(2, 3),), (0,), lambda x: anp.pad(x, ((1, 0), (0, 2))),
                lambda x: np.pad(x, ((1, 0), (0, 2))), None),
        'gradient': (lambda r: (vec(r, 5),), (0,), anp.gradient, np.gradient, 'gradient'),
        'partition': (lambda r: (vec(r, 5),), (0,), lambda x: anp.partition(x, 2), lambda x: np.partition(x, 2), None),
        'select': (lambda r: (vec(r), vec(r)), (0, 1),
                   lambda x, y: anp.select([x > 0, y > 0], [x * y, y]),
                   lambda x, y: np.select([x > 0, y > 0], [x * y, y]), None),
        'column_stack': (lambda r: (vec(r, 3), vec(r, 3)), (0, 1), lambda a, b: anp.column_stack([a, b]),
                         lambda a, b: np.column_stack([a, b]), None),
        'atleast_3d': (lambda r: (vec(r, 3),), (0,), anp.atleast_3d, np.atleast_3d, 'atleast_3d'),
        'rollaxis': (lambda r: (vec(r, 6).reshape(1, 2, 3),), (0,), lambda x: anp.rollaxis(x, 2),
                     lambda x: np.rollaxis(x, 2), None),
        'expm1': (lambda r: (vec(r) * 20,), (0,), anp.expm1, np.expm1, 'expm1'),
        'log1p': (lambda r: (np.abs(vec(r)) * 5,), (0,), anp.log1p, np.log1p, 'log1p'),
        'arccosh': (lambda r: (1 + np.abs(vec(r)),), (0,), anp.arccosh, np.arccosh, 'arccosh'),
        'cbrt': (lambda r: (vec(r),), (0,), anp.cbrt, np.cbrt, 'cbrt'),
        'hypot': (lambda r: (vec(r), vec(r)), (0, 1), anp.hypot, np.hypot, 'hypot'),
        'arctan2': (lambda r: (vec(r), vec(r)), (0, 1), anp.arctan2, np.arctan2, 'arctan2'),
        'power': (lambda r: (np.abs(vec(r)), vec(r)), (0, 1), anp.power, np.power, 'power'),
        'logsumexp': (lambda r: (vec(r) * 300,), (0,), anp.logsumexp, lambda x: sps.logsumexp(x), None),
        'prod': (lambda r: (vec(r),), (0,), anp.prod, np.prod, 'prod'),
        'norm': (lambda r: (vec(r),), (0,), anp.linalg.norm, np.linalg.norm, None),
        'mean': (lambda r: (vec(r),), (0,), anp.mean, np.mean, 'mean'),
    }
    return cases


def check_jax_case(name, case, rng, report, kind):
    if kind == 'stats':
        kinds, diff_args, nfn, sfn, jfn = case
        args = [draw(rng, k) for k in kinds]
    else:
        make, diff_args, nfn, sfn, jname = case
        args = list(make(rng))
        jfn = getattr(jnp, jname) if jname else {
            'pad': lambda x: jnp.pad(x, ((1, 0), (0, 2))), 'partition': lambda x: jnp.partition(x, 2),
            'select': lambda x, y: jnp.select([x > 0, y > 0], [x * y, y]),
            'column_stack': lambda a, b: jnp.column_stack([a, b]),
            'rollaxis': lambda x: jnp.rollaxis(x, 2),
            'logsumexp': lambda x: jsp.logsumexp(x), 'norm': jnp.linalg.norm}[name]
    report.count(f'{kind} points')
    with np.errstate(all='ignore'):
        v_n, v_s = nfn(*args), sfn(*args)
    v_n = np.asarray(nd.primal_value(v_n))
    v_s = np.asarray(v_s)
    if not (v_n.shape == v_s.shape and np.array_equal(v_n, v_s, equal_nan=True)
            and np.array_equal(np.signbit(v_n), np.signbit(v_s))):
        if kind == 'numpy' or not np.allclose(v_n, v_s, rtol=1e-13, atol=0, equal_nan=True):
            report.mismatch('value', name, args, v_n.tolist(), v_s.tolist())
    if not np.all(np.isfinite(v_s)):
        return
    w = rng.uniform(0.5, 1.5, size=v_s.shape)

    def F(*a):
        return anp.sum(nfn(*a) * w) if v_s.shape else nfn(*a) * float(w)

    def FJ(*a):
        return jnp.sum(jfn(*a) * w)
    argnums = tuple(diff_args)
    jargs = [jnp.asarray(a) for a in args]
    try:
        if jfn is None:             # JAX lacks it: central differences are the reference
            gj = [np.asarray(_fd(F, args, k)) for k in argnums]
        else:
            gj = [np.asarray(g) for g in jax.grad(FJ, argnums=argnums)(*jargs)]
    except Exception as e:          # noqa: BLE001
        report.count('jax errors')
        return
    for mode, op in (('gradient_r', nd.gradient_r), ('gradient_f', nd.gradient_f)):
        try:
            with np.errstate(all='ignore'):
                gn = [np.asarray(g, float) for g in op(F, argnums=argnums)(*args)]
        except Exception as e:      # noqa: BLE001
            report.mismatch('gradient error', name, args, f"{type(e).__name__}: {str(e)[:150]}", None, mode=mode)
            continue
        report.count('derivative comparisons')
        rtol = 1e-8 if jfn is not None else 1e-5
        for k, (a, b) in enumerate(zip(gn, gj)):
            if not np.allclose(a, b, rtol=rtol, atol=rtol * 1e-4 * (1 + np.max(np.abs(b), initial=0)), equal_nan=True):
                fd = _fd(F, args, argnums[k])
                verdict = 'nestad' if np.allclose(a, fd, rtol=1e-5, atol=1e-7) else (
                    'jax' if np.allclose(b, fd, rtol=1e-5, atol=1e-7) else 'neither')
                report.mismatch(f'gradient (fd agrees with {verdict})', name, args, a.tolist(),
                                b.tolist(), mode=mode, arg=argnums[k], fd=np.asarray(fd).tolist())
    # second order: Hessian-vector products in the four pairings agree with each other and JAX
    x0 = args[argnums[0]]
    v = rng.uniform(-1, 1, size=np.shape(x0)) if np.shape(x0) else float(rng.uniform(-1, 1))

    def G(x):
        a = list(args)
        a[argnums[0]] = x
        return F(*a)

    def GJ(x):
        a = list(jargs)
        a[argnums[0]] = x
        return FJ(*a)
    if jfn is None:
        return
    try:
        hj = np.asarray(jax.jvp(jax.grad(GJ), (jnp.asarray(x0),), (jnp.asarray(v),))[1])
    except Exception:               # noqa: BLE001
        return
    hv = {}
    for pair, (outer, inner) in {'fr': ('f', 'r'), 'ff': ('f', 'f'), 'rr': ('r', 'r'), 'rf': ('r', 'f')}.items():
        g = nd.gradient_r(G) if inner == 'r' else nd.gradient_f(G)
        try:
            with np.errstate(all='ignore'):
                hv[pair] = np.asarray(nd.jvp(g, (x0,), (v,))[1] if outer == 'f' else nd.vjp(g, x0)[1](v)[0], float)
        except Exception as e:      # noqa: BLE001
            report.mismatch('hvp error', name, args, f"{type(e).__name__}: {str(e)[:150]}", None, mode=pair)
    report.count('derivative comparisons', len(hv))
    for pair, h in hv.items():
        if not np.allclose(h, hj, rtol=1e-7, atol=1e-10 * (1 + np.max(np.abs(hj), initial=0)), equal_nan=True):
            report.mismatch('hvp', name, args, h.tolist(), hj.tolist(), mode=pair)


def _fd(F, args, i, h=1e-6):
    x = np.array(args[i], dtype=float)
    g = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        step = h * max(1.0, abs(x[idx]))
        xp, xm = x.copy(), x.copy()
        xp[idx] += step
        xm[idx] -= step
        a, b = list(args), list(args)
        a[i], b[i] = (xp if x.shape else float(xp)), (xm if x.shape else float(xm))
        with np.errstate(all='ignore'):
            g[idx] = (float(nd.primal_value(F(*a))) - float(nd.primal_value(F(*b)))) / (2 * step)
    return g if x.shape else float(g)


# ---------------------------------------------------------------- running

class Report:
    def __init__(self, limit=8):
        self.counts, self.mismatches, self.limit = {}, {}, limit

    def count(self, what, n=1):
        self.counts[what] = self.counts.get(what, 0) + n

    def mismatch(self, what, name, args, got, want, **extra):
        key = (name, what)
        lst = self.mismatches.setdefault(key, [])
        self.count('mismatches')
        if len(lst) < self.limit:
            lst.append(dict(args=args, nestad=got, reference=want, **extra))


def run_points(opts, per_function=None):
    n = per_function or max(1, opts.programs)
    report = Report()
    for name in SPECIAL if mp is not None else ():
        for i in range(n):
            check_special(name, np.random.default_rng([opts.seed, i, zlib.crc32(name.encode())]), report)
    for kind, cases in (('stats', _stats_cases()), ('numpy', _numpy_cases() if jax else {})):
        for name, case in cases.items():
            for i in range(n):
                check_jax_case(name, case, np.random.default_rng([opts.seed, i, zlib.crc32(name.encode()), 3]), report, kind)
    print("points: " + ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items())))
    for (name, what), lst in sorted(report.mismatches.items()):
        print(f"  {name} [{what}]: {len(lst)} shown")
        for m in lst[:4]:
            print(f"      {m}")
    return report
