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
    prim = ArrayPrimitive(name, plain, jvps, vjps, namespace='numpy')

    def lifted(*args, **params):
        return apply(prim, args, params)
    prim.lifted = lifted
    return lifted


def _mT(a):
    return anp.swapaxes(a, -1, -2)


def norm(x, ord=None, axis=None, keepdims=False):
    """The 2-norm of vectors / Frobenius norm of matrices (``ord`` None, 2 for vectors, 'fro')."""
    x = anp._as_operand(x)
    if ord not in (None, 'fro') and not (ord == 2 and (anp._ndim(x) == 1 or isinstance(axis, int))):
        raise InvalidInputError(f"nestad.numpy.linalg.norm supports ord=None, 'fro' and the vector "
                                f"2-norm, not ord={ord!r}")
    return anp.sqrt(anp.sum(x * x, axis=axis, keepdims=keepdims))


def _aligned(t, x, out):
    """Tangent t of x with singletons after its batch axes up to the output's rank, so
    that stacks of matrices broadcast against the output's stack axes."""
    nb = anp._nbatch(t, x)
    missing = anp._ndim(out) - anp._ndim(x)
    if nb and missing > 0:
        return anp.reshape(t, anp._shape(t)[:nb] + (1,) * missing + anp._shape(x))
    return t


# _solve: A X = B for stacks of matrices A (..., M, M) and B (..., M, K), broadcasting.
_solve = _define(
    'linalg.solve', _np.linalg.solve,
    # dX = A^-1 (dB - dA X)
    (lambda t, a, b, out: _solve(a, -anp.matmul(_aligned(t, a, out), out)),
     lambda t, a, b, out: _solve(a, _aligned(t, b, out))),
    # Bbar = A^-T Xbar, Abar = -Bbar X^T
    (lambda g, a, b, out: anp.sum_to(-anp.matmul(_solve(_mT(a), g), _mT(out)), anp._shape(a)),
     lambda g, a, b, out: anp.sum_to(_solve(_mT(a), g), anp._shape(b))))


def solve(a, b):
    """numpy.linalg.solve: a vector right-hand side (b.ndim == 1) or stacks of matrices."""
    a, b = anp._as_operand(a), anp._as_operand(b)
    if anp._ndim(b) == 1:
        return anp.squeeze(_solve(a, anp.expand_dims(b, -1)), -1)
    return _solve(a, b)


_inv = _define(
    'linalg.inv', _np.linalg.inv,
    (lambda t, a, out: -anp.matmul(anp.matmul(out, t), out),),
    (lambda g, a, out: -anp.matmul(anp.matmul(_mT(out), g), _mT(out)),))


def inv(a):
    return _inv(anp._as_operand(a))


def _det_jvp(t, a, out):
    # d det = det * tr(A^-1 dA)
    return out * anp.sum(_mT(inv(a)) * t, axis=(-2, -1))


def _per_matrix(g, a):
    """A cotangent of a function of each matrix in a stack (shape a.shape[:-2]), with two
    singleton axes so that it meets its own matrix, not the stack's last axis."""
    return anp._keep(g, a, (-2, -1), False)


_det = _define('linalg.det', _np.linalg.det, (_det_jvp,),
               (lambda g, a, out: _per_matrix(g * out, a) * _mT(inv(a)),))


def det(a):
    return _det(anp._as_operand(a))


def slogdet(a):
    """(sign, log|det a|); the sign is constant, log|det| is differentiable."""
    a = anp._as_operand(a)
    result = _np.linalg.slogdet(primal_value(a))
    return type(result)(result.sign, _logabsdet(a))      # numpy's (sign, logabsdet) namedtuple


_logabsdet = _define(
    'linalg.slogdet', lambda a: _np.linalg.slogdet(a)[1],
    (lambda t, a, out: anp.sum(_mT(inv(a)) * t, axis=(-2, -1)),),
    (lambda g, a, out: _per_matrix(g, a) * _mT(inv(a)),))


def _phi(x):
    """Lower triangle with the diagonal halved."""
    n = anp._shape(x)[-1]
    mask = _np.tril(_np.ones((n, n))) - 0.5 * _np.eye(n)
    return x * mask


def _chol_jvp(t, a, out):
    # dL = L phi(L^-1 dA L^-T), with dA symmetrised (the factor is a function of sym(A))
    linv = inv(out)
    t = 0.5 * (t + _mT(t))
    return anp.matmul(out, _phi(anp.matmul(anp.matmul(linv, t), _mT(linv))))


def _chol_vjp(g, a, out):
    # Abar = sym(L^-T phi(L^T Lbar) L^-1) (Murray 2016, with symmetrisation)
    linv = inv(out)
    s = anp.matmul(anp.matmul(_mT(linv), _phi(anp.matmul(_mT(out), g))), linv)
    return 0.5 * (s + _mT(s))


# The factor is taken of sym(A) = (A + A^T)/2, as JAX does: numpy reads one triangle only,
# so without this the two modes would differentiate different functions.
_cholesky = _define('linalg.cholesky', lambda a: _np.linalg.cholesky(0.5 * (a + _np.swapaxes(a, -1, -2))),
                    (_chol_jvp,), (_chol_vjp,))


def cholesky(a):
    return _cholesky(anp._as_operand(a))
