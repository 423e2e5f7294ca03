"""``nestad.scipy.linalg``: scipy.linalg's functions of real matrices that differentiate.

Each is a primitive whose value is scipy's own.  ``expm``, ``sqrtm``, ``solve_sylvester``
and ``solve_triangular`` have rules written with themselves (so they differentiate in
turn): the Frechet derivative of expm as a block of the exponential of a block matrix;
sqrtm's and solve_sylvester's by Sylvester equations; solve_triangular's by triangular
solves.  ``solve_banded``, ``cho_factor`` and ``cho_solve`` take their rules from the
same computation made of differentiable functions (the dense band matrix and
``solve``; ``cholesky``; two triangular solves), by ``jvp`` and ``vjp`` of it.
Those numpy.linalg has too are nestad.numpy.linalg's.
"""
import numpy as np
import scipy.linalg as _la

from .. import numpy as anp
from .. import taylor as _taylor
from ..errors import InvalidInputError
from ..extend import _positional_names, primitive
from ..numpy.linalg import det, inv, norm, pinv, solve  # noqa: F401
from ..values import primal_value
from .special import _own
from ..operators import jvp, vjp

__all__ = ['expm', 'sqrtm', 'solve_sylvester', 'solve_triangular', 'solve_banded',
           'cho_factor', 'cho_solve', 'det', 'inv', 'norm', 'pinv', 'solve']


def _mT(a):
    return anp.swapaxes(a, -1, -2)


def _rules_of(name, plain, composite):
    """A primitive with ``plain``'s value (scipy's) and the derivatives of ``composite``
    (the same function made of differentiable ones), by jvp and vjp of it: its value
    differs from scipy's in the last bits, its derivatives are the ones wanted."""
    fn = primitive(plain, name=f"scipy.linalg.{name}")
    n = len(_positional_names(plain))

    def tangent(k):
        def rule(t, *xs, out, **params):
            def f(x):
                return composite(*xs[:k], x, *xs[k + 1:], **params)
            return jvp(f, (xs[k],), (t,))[1]
        return rule

    def cotangent(k):
        def rule(g, *xs, out, **params):
            def f(x):
                return composite(*xs[:k], x, *xs[k + 1:], **params)
            return vjp(f, xs[k])[1](g)[0]
        return rule
    fn.defjvp(*[tangent(k) for k in range(n)])
    fn.defvjp(*[cotangent(k) for k in range(n)])
    return _own(fn)


# ---------------------------------------------------------------- expm

def _frechet(a, e):
    """The derivative of expm at a in direction e: the upper right block of
    expm([[a, e], [0, a]]) (Higham, Functions of Matrices, 3.2)."""
    n = np.shape(primal_value(a))[-1]
    zero = np.zeros((n, n))
    return expm(anp.concatenate([anp.concatenate([a, e], axis=1),
                                 anp.concatenate([zero, a], axis=1)], axis=0))[:n, n:]


expm = _own(primitive(lambda a: _la.expm(a), name="scipy.linalg.expm"))
expm.defjvp(lambda t, a, out: _frechet(a, t))
expm.defvjp(lambda g, a, out: _frechet(_mT(a), g))        # the adjoint of L(a, .) is L(a^T, .)
# Taylor mode: expm of the block Toeplitz matrix of the coefficients (the Frechet rule's
# block matrix doubles per order)
_taylor.RULES['scipy.linalg.expm'] = _taylor.block_toeplitz


# ---------------------------------------------------------------- Sylvester equations, sqrtm

def _sylvester_plain(a, b, q):
    return _la.solve_sylvester(a, b, q)


# a x + x b = q: a dx + dx b = dq - da x - x db; the adjoint equation is a^T l + l b^T = g
solve_sylvester = _own(primitive(_sylvester_plain, name="scipy.linalg.solve_sylvester"))
solve_sylvester.defjvp(
    lambda t, a, b, q, out: solve_sylvester(a, b, -anp.matmul(t, out)),
    lambda t, a, b, q, out: solve_sylvester(a, b, -anp.matmul(out, t)),
    lambda t, a, b, q, out: solve_sylvester(a, b, t))
solve_sylvester.defvjp(
    lambda g, a, b, q, out: -anp.matmul(solve_sylvester(_mT(a), _mT(b), g), _mT(out)),
    lambda g, a, b, q, out: -anp.matmul(_mT(out), solve_sylvester(_mT(a), _mT(b), g)),
    lambda g, a, b, q, out: solve_sylvester(_mT(a), _mT(b), g))


def _sqrtm_plain(a):
    x = _la.sqrtm(a)
    if np.iscomplexobj(x):
        raise InvalidInputError("nestad.scipy.linalg.sqrtm: this matrix has no real square root "
                                "(scipy returns a complex one; nestad is real-valued): give a "
                                "matrix without negative real eigenvalues, e.g. a symmetric "
                                "positive definite one")
    return x


# x x = a: x dx + dx x = da; the adjoint equation is x^T l + l x^T = g
sqrtm = _own(primitive(_sqrtm_plain, name="scipy.linalg.sqrtm"))
sqrtm.defjvp(lambda t, a, out: solve_sylvester(out, out, t))
sqrtm.defvjp(lambda g, a, out: solve_sylvester(_mT(out), _mT(out), g))


# Taylor mode: one Sylvester solve per order.  (The ODE rule through the jvps above, which
# read the result, recursed on every lower order: 68 s for order 10 of a 3 x 3 system.)
def _sylvester_taylor(prim, xs, carried, params, K, top):
    """a x + x b = q: a0 x_k + x_k b0 = q_k - sum_{j=1..k} (a_j x_{k-j} + x_{k-j} b_j)."""
    (a, b, q), (ca, cb, cq) = xs, carried
    a0, b0 = a[0] if ca else a, b[0] if cb else b
    x = [solve_sylvester(a0, b0, q[0] if cq else q)]
    for k in range(1, K + 1):
        r = q[k] if cq else 0.0
        for j in range(1, k + 1):
            if ca:
                r = r - anp.matmul(a[j], x[k - j])
            if cb:
                r = r - anp.matmul(x[k - j], b[j])
        x.append(solve_sylvester(a0, b0, r))
    return x


def _sqrtm_taylor(prim, xs, carried, params, K, top):
    """x x = a: x0 x_k + x_k x0 = a_k - sum_{j=1..k-1} x_j x_{k-j}."""
    a = xs[0]
    x = [sqrtm(a[0])]
    for k in range(1, K + 1):
        r = a[k]
        for j in range(1, k):
            r = r - anp.matmul(x[j], x[k - j])
        x.append(solve_sylvester(x[0], x[0], r))
    return x


_taylor.RULES['scipy.linalg.solve_sylvester'] = _sylvester_taylor
_taylor.RULES['scipy.linalg.sqrtm'] = _sqrtm_taylor


# ---------------------------------------------------------------- triangular solves

def _trans(trans):
    t = {0: 0, 1: 1, 'N': 0, 'T': 1, 'C': 1}.get(trans)
    if t is None:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', not {trans!r}")
    return t


def _triangle(m, lower, unit_diagonal):
    """The entries of ``m`` a triangular solve reads (the strict triangle for a unit one)."""
    k = 1 if unit_diagonal else 0
    return anp.tril(m, -k) if lower else anp.triu(m, k)


def _outer(u, v):
    return anp.outer(u, v) if anp.ndim(u) == 1 else anp.matmul(u, _mT(v))


def _st_jvp_a(t, a, b, out, trans, lower, unit_diagonal):
    dt = _triangle(t, lower, unit_diagonal)
    return _solve_tri(a, -anp.matmul(_mT(dt) if trans else dt, out),
                      trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def _st_vjp_a(g, a, b, out, trans, lower, unit_diagonal):
    gb = _solve_tri(a, g, trans=1 - trans, lower=lower, unit_diagonal=unit_diagonal)
    gm = -_outer(gb, out)                         # the cotangent of op(a)
    return _triangle(_mT(gm) if trans else gm, lower, unit_diagonal)


_solve_tri = _own(primitive(
    lambda a, b, trans=0, lower=False, unit_diagonal=False:
    _la.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal),
    name="scipy.linalg.solve_triangular"))
_solve_tri.defjvp(_st_jvp_a, lambda t, a, b, out, **p: _solve_tri(a, t, **p))
_solve_tri.defvjp(_st_vjp_a, lambda g, a, b, out, trans, **p: _solve_tri(a, g, trans=1 - trans, **p))


def _solve_tri_taylor(prim, xs, carried, params, K, top):
    """op(T(a)) x = b, T the triangle read (its unit diagonal constant): one triangular solve
    per order (through the ODE rule its jvp, which reads x, recursed on the lower orders:
    2.7 s for order 10 of a 3 x 3)."""
    (a, b), (ca, cb) = xs, carried
    trans, lower, unit = params['trans'], params['lower'], params['unit_diagonal']
    a0, b0 = a[0] if ca else a, b[0] if cb else b
    times_a = None
    if ca:
        tri = [None] + [_triangle(aj, lower, unit) for aj in a[1:]]
        times_a = lambda j, x: anp.matmul(_mT(tri[j]) if trans else tri[j], x)
    return _taylor.linear_system(_solve_tri(a0, b0, **params), b, cb, K, times_a,
                                 lambda r: _solve_tri(a0, r, **params))


_taylor.RULES['scipy.linalg.solve_triangular'] = _solve_tri_taylor


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """scipy.linalg.solve_triangular, differentiable in ``a`` (its triangle) and ``b``."""
    return _solve_tri(a, b, trans=_trans(trans), lower=bool(lower),
                      unit_diagonal=bool(unit_diagonal))


# ---------------------------------------------------------------- Cholesky

def _cholesky_composite(a, lower):
    # scipy reads one triangle of a (the lower one for lower=True): the matrix it factors
    t = anp.tril(a, -1) if lower else anp.triu(a, 1)
    c = anp.linalg.cholesky(t + _mT(t) + anp.diag(anp.diagonal(a)))
    return c if lower else _mT(c)


_cholesky = _rules_of('cholesky', lambda a, lower=False: _la.cholesky(a, lower=lower),
                      _cholesky_composite)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cho_factor: ``(c, lower)``, c holding the Cholesky factor in one
    triangle and, as scipy's, a's own entries in the other (which cho_solve ignores)."""
    c = _cholesky(a, lower=bool(lower))
    other = anp.triu(a, 1) if lower else anp.tril(a, -1)
    return c + other, bool(lower)


def _cho_solve_composite(c, b, lower):
    if lower:
        y = solve_triangular(c, b, lower=True)
        return solve_triangular(c, y, trans=1, lower=True)
    y = solve_triangular(c, b, trans=1, lower=False)
    return solve_triangular(c, y, lower=False)


_cho_solve = _rules_of('cho_solve', lambda c, b, lower=False: _la.cho_solve((c, lower), b),
                       _cho_solve_composite)


def _cho_solve_taylor(prim, xs, carried, params, K, top):
    """C C^T x = b (lower; C^T C x = b for upper), C the triangle of c: A_j = sum_i C_i
    C_(j-i)^T, one cho_solve with c0 per order (through the ODE rule from the composite's
    jvp, whose triangular solves read their results: 256 s for order 10 of a 3 x 3)."""
    (c, b), (cc, cb) = xs, carried
    lower = params['lower']
    c0, b0 = c[0] if cc else c, b[0] if cb else b
    times_a = None
    if cc:
        tri = [anp.tril(cj) if lower else anp.triu(cj) for cj in c]
        first, second = (tri, [_mT(t) for t in tri]) if lower else ([_mT(t) for t in tri], tri)
        mats = [None] + [sum(anp.matmul(first[i], second[j - i]) for i in range(j + 1)) for j in range(1, K + 1)]
        times_a = lambda j, x: anp.matmul(mats[j], x)
    solve0 = _taylor.reused(lambda c0: (c0, lower), _la.cho_solve,
                            lambda r: _cho_solve(c0, r, lower=lower), c0)
    return _taylor.linear_system(_cho_solve(c0, b0, lower=lower), b, cb, K, times_a, solve0)


_taylor.RULES['scipy.linalg.cho_solve'] = _cho_solve_taylor


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """scipy.linalg.cho_solve((c, lower), b): a x = b from a's Cholesky factor."""
    c, lower = c_and_lower
    return _cho_solve(c, b, lower=bool(lower))


# ---------------------------------------------------------------- banded systems

def _banded_dense(ab, l, u):
    """The n x n matrix whose diagonal k (-l <= k <= u) is row u - k of ab."""
    n = np.shape(primal_value(ab))[-1]
    return sum(anp.diag(ab[u - k, k:] if k >= 0 else ab[u - k, :n + k], k)
               for k in range(-l, u + 1))


_solve_banded = _rules_of(
    'solve_banded', lambda ab, b, l=0, u=0: _la.solve_banded((l, u), ab, b),
    lambda ab, b, l, u: anp.linalg.solve(_banded_dense(ab, l, u), b))


def _banded_times(ab, x, l, u):
    """A x for the band matrix of ``ab`` (diagonal k is row u - k), without forming A."""
    n = np.shape(primal_value(ab))[-1]
    column = (lambda d: anp.reshape(d, (-1, 1))) if anp.ndim(x) == 2 else (lambda d: d)
    rest = np.shape(primal_value(x))[1:]
    total = 0.0
    for k in range(-l, u + 1):
        if abs(k) >= n:
            continue
        pad = np.zeros((abs(k),) + rest)
        if k >= 0:      # rows 0..n-1-k: ab[u-k, k:] x[k:]
            total = total + anp.concatenate([column(ab[u - k, k:]) * x[k:], pad])
        else:           # rows -k..n-1: ab[u-k, :n+k] x[:n+k]
            total = total + anp.concatenate([pad, column(ab[u - k, :n + k]) * x[:n + k]])
    return total


def _gb_factor(ab, l, u):
    """LAPACK's band LU (dgbtrf) of ``ab``, in its storage (l more rows for the fill-in)."""
    store = np.zeros((2 * l + u + 1, ab.shape[1]))
    store[l:] = ab
    lu, piv, info = _la.lapack.dgbtrf(store, l, u)
    return lu, piv


def _gb_solve(factors, r, l, u):
    lu, piv = factors
    x, info = _la.lapack.dgbtrs(lu, l, u, r.reshape(r.shape[0], -1), piv)
    return x.reshape(r.shape)


def _solve_banded_taylor(prim, xs, carried, params, K, top):
    """A(ab) x = b, A linear in ab: one band LU, one band solve per order (through the ODE
    rule, the composite's dense solve recursed on every lower order)."""
    (ab, b), (cab, cb) = xs, carried
    l, u = params['l'], params['u']
    ab0, b0 = ab[0] if cab else ab, b[0] if cb else b
    x0 = _solve_banded(ab0, b0, l=l, u=u)
    plain_dtype = np.result_type(primal_value(ab0), primal_value(x0)) == np.float64
    lifted = lambda r: _solve_banded(ab0, r, l=l, u=u)
    solve0 = _taylor.reused(lambda a: _gb_factor(a, l, u), lambda f, r: _gb_solve(f, r, l, u),
                            lifted, ab0) if plain_dtype else lifted
    times_a = (lambda j, x: _banded_times(ab[j], x, l, u)) if cab else None
    return _taylor.linear_system(x0, b, cb, K, times_a, solve0)


_taylor.RULES['scipy.linalg.solve_banded'] = _solve_banded_taylor


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """scipy.linalg.solve_banded((l, u), ab, b), differentiable in ab and b."""
    l, u = (int(k) for k in l_and_u)
    return _solve_banded(ab, b, l=l, u=u)
