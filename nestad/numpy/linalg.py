"""``nestad.numpy.linalg``: norm, solve, inv, det, slogdet, cholesky, with rules.

Rules follow the standard matrix calculus identities (e.g. Giles, "An extended
collection of matrix derivative results", 2008), written with nestad.numpy
operations so that they nest.
"""
import numpy as _np

from .. import numpy as anp
from ..arrays import apply, ArrayPrimitive
from ..errors import InvalidInputError
from ..values import primal_value


def _define(name, plain, jvps, vjps):
    prim = ArrayPrimitive(name, plain, jvps, vjps)

    def lifted(*args, **params):
        return apply(prim, args, params)
    prim.lifted = lifted
    return lifted


def _mT(a):
    return anp.swapaxes(a, -1, -2)


def norm(x, ord=None, axis=None, keepdims=False):
    """The 2-norm of vectors / Frobenius norm of matrices (``ord`` None, 2 for vectors, 'fro')."""
    if ord not in (None, 'fro') and not (ord == 2 and (anp._ndim(x) == 1 or isinstance(axis, int))):
        raise InvalidInputError(f"nestad.numpy.linalg.norm supports ord=None, 'fro' and the vector "
                                f"2-norm, not ord={ord!r}")
    return anp.sqrt(anp.sum(x * x, axis=axis, keepdims=keepdims))


def _solve_plain(a, b):
    return _np.linalg.solve(a, b)




def _solve_jvp_a(t, a, b, out):
    # d x = A^-1 (db - dA x)
    if anp._ndim(b) == 1:
        rhs = -anp.matmul(t, out)                 # (batch..., n)
        return _mT(solve(a, _mT(rhs))) if anp._ndim(rhs) > 1 else solve(a, rhs)
    return solve(a, -anp.matmul(t, out))


def _solve_jvp_b(t, a, b, out):
    if anp._ndim(b) == 1 and anp._ndim(t) > 1:
        return _mT(solve(a, _mT(t)))
    return solve(a, t)


def _solve_vjp_a(g, a, b, out):
    gb = solve(_mT(a), g)
    if anp._ndim(b) == 1:
        return -anp.outer(gb, out)
    return -anp.matmul(gb, _mT(out))


def _solve_vjp_b(g, a, b, out):
    return solve(_mT(a), g)


solve = _define('solve', _solve_plain, (_solve_jvp_a, _solve_jvp_b), (_solve_vjp_a, _solve_vjp_b))

inv = _define(
    'inv', _np.linalg.inv,
    (lambda t, a, out: -anp.matmul(anp.matmul(out, t), out),),
    (lambda g, a, out: -anp.matmul(anp.matmul(_mT(out), g), _mT(out)),))


def _det_jvp(t, a, out):
    # d det = det * tr(A^-1 dA)
    return out * anp.sum(_mT(inv(a)) * t, axis=(-2, -1))


det = _define('det', _np.linalg.det, (_det_jvp,),
              (lambda g, a, out: anp.expand_dims(anp.expand_dims(g * out, -1), -1) * _mT(inv(a))
               if anp._ndim(a) > 2 else g * out * _mT(inv(a)),))


def slogdet(a):
    """(sign, log|det a|); the sign is constant, log|det| is differentiable."""
    sign, _ = _np.linalg.slogdet(primal_value(a))
    return sign, _logabsdet(a)


_logabsdet = _define(
    'logabsdet', lambda a: _np.linalg.slogdet(a)[1],
    (lambda t, a, out: anp.sum(_mT(inv(a)) * t, axis=(-2, -1)),),
    (lambda g, a, out: g * _mT(inv(a)),))


def _phi(x):
    """Lower triangle with the diagonal halved."""
    n = anp._shape(x)[-1]
    mask = _np.tril(_np.ones((n, n))) - 0.5 * _np.eye(n)
    return x * mask


def _chol_jvp(t, a, out):
    # dL = L phi(L^-1 dA L^-T)
    linv = inv(out)
    return anp.matmul(out, _phi(anp.matmul(anp.matmul(linv, t), _mT(linv))))


def _chol_vjp(g, a, out):
    # Abar = sym(L^-T phi(L^T Lbar) L^-1) (Murray 2016, with symmetrisation)
    linv = inv(out)
    s = anp.matmul(anp.matmul(_mT(linv), _phi(anp.matmul(_mT(out), g))), linv)
    return 0.5 * (s + _mT(s))


cholesky = _define('cholesky', _np.linalg.cholesky, (_chol_jvp,), (_chol_vjp,))
