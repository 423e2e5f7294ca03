"""Linear systems: ``linalg.solve`` for stacks of matrices, the base of the spectral
rules (_spectral) and of nestad.numpy.linalg."""
import numpy as _np

from . import _kernel, _plumbing, _products
from ._kernel import _define


def _mT(a):
    return _plumbing.swapaxes(a, -1, -2)


def _aligned(t, x, out):
    """Tangent t of x with singletons after its batch axes up to the output's rank, so
    that stacks of matrices broadcast against the output's stack axes."""
    nb = _kernel._nbatch(t, x)
    missing = _kernel._ndim(out) - _kernel._ndim(x)
    if nb and missing > 0:
        return _plumbing.reshape(t, _kernel._shape(t)[:nb] + (1,) * missing + _kernel._shape(x))
    return t


# _solve: A X = B for stacks of matrices A (..., M, M) and B (..., M, K), broadcasting.
_solve = _define(
    'linalg.solve', _np.linalg.solve,
    # dX = A^-1 (dB - dA X)
    (lambda t, a, b, out: _solve(a, -_products.matmul(_aligned(t, a, out), out)),
     lambda t, a, b, out: _solve(a, _aligned(t, b, out))),
    # Bbar = A^-T Xbar, Abar = -Bbar X^T
    (lambda g, a, b, out: _plumbing.sum_to(-_products.matmul(_solve(_mT(a), g), _mT(out)), _kernel._shape(a)),
     lambda g, a, b, out: _plumbing.sum_to(_solve(_mT(a), g), _kernel._shape(b))))


def solve(a, b):
    """numpy.linalg.solve: a vector right-hand side (b.ndim == 1) or stacks of matrices."""
    a, b = _kernel._as_operand(a), _kernel._as_operand(b)
    if _kernel._ndim(b) == 1:
        return _plumbing.squeeze(_solve(a, _plumbing.expand_dims(b, -1)), -1)
    return _solve(a, b)
