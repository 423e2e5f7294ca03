"""``nestad.numpy.linalg``: numpy.linalg's functions of real matrices, with rules.

Rules follow the standard matrix calculus identities (e.g. Giles, "An extended
collection of matrix derivative results", 2008), written with nestad.numpy
operations so that they nest.  The spectral decompositions (eigh, eig, svd and their
value-only forms) are in ``_spectral.py``; the functions here are norm, solve, inv,
det, slogdet, cholesky, pinv, matrix_power, and numpy 2's array-API names.
"""
import builtins
import operator

import numpy as _np

from . import _contract, _elementwise, _kernel, _plumbing, _products, _reductions
from ._kernel import _define
from ._solve import _mT, _aligned, _solve, solve  # noqa: F401
from ..errors import InvalidInputError
from ..values import primal_value
from ._spectral import eig, eigh, eigvals, eigvalsh, svd, svdvals  # noqa: F401
from ._spectral import _carries, _from_triangle, _plain, _to_triangle
from ._spectral import _TIE
from ..extraction import run_jvp, run_vjp


# ---------------------------------------------------------------- norm

def _ipow(x, p):
    """x ** p as numpy's in-place power computes it (ndarray ``**=`` has fast paths; on a
    reduction's scalar result it is numpy's scalar power, whose last bit can differ from
    the power ufunc's: Python's ``**`` reaches it, staged too)."""
    if _kernel._ndim(x) == 0:
        return x ** float(p)
    if p == 1:
        return x
    if p == -1:
        return _elementwise.reciprocal(x)
    if p == 0.5:
        return _elementwise.sqrt(x)
    if p == 2:
        return x * x
    return _elementwise.power(x, float(p))


def _vector_norm(x, ord, axis, keepdims):
    """numpy's vector norms along one axis."""
    if ord == _np.inf:
        return _reductions.max(_elementwise.absolute(x), axis=axis, keepdims=keepdims)
    if ord == -_np.inf:
        return _reductions.min(_elementwise.absolute(x), axis=axis, keepdims=keepdims)
    if ord == 0:            # the number of nonzero entries: no derivative
        v = primal_value(x)
        return _np.sum((v != 0).astype(v.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return _plumbing.sum(_elementwise.absolute(x), axis=axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return _elementwise.sqrt(_plumbing.sum(x * x, axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    ret = _plumbing.sum(_ipow(_elementwise.absolute(x), ord), axis=axis, keepdims=keepdims)
    return _ipow(ret, 1.0 / ord)


def _matrix_norm(x, ord, row, col, keepdims):
    """numpy's matrix norms over axes (row, col)."""
    nd_ = _kernel._ndim(x)
    row, col = row % nd_, col % nd_
    if row == col:
        raise ValueError('Duplicate axes given.')
    if ord in (2, -2, 'nuc'):
        rest = [i for i in range(nd_) if i not in (row, col)]
        s = svdvals(_plumbing.transpose(x, rest + [row, col]))
        ret = {2: _reductions.max, -2: _reductions.min, 'nuc': _plumbing.sum}[ord](s, axis=-1)
    elif ord in (1, -1):
        ret = _plumbing.sum(_elementwise.absolute(x), axis=row)
        ret = (_reductions.max if ord == 1 else _reductions.min)(ret, axis=col - 1 if col > row else col)
    elif ord in (_np.inf, -_np.inf):
        ret = _plumbing.sum(_elementwise.absolute(x), axis=col)
        ret = (_reductions.max if ord == _np.inf else _reductions.min)(ret, axis=row - 1 if row > col else row)
    elif ord in (None, 'fro', 'f'):
        ret = _elementwise.sqrt(_plumbing.sum(x * x, axis=(row, col)))
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        shape = list(_kernel._shape(x))
        shape[row] = shape[col] = 1
        ret = _plumbing.reshape(ret, shape)
    return ret


def _norm2_jvp(t, x, out):
    return _elementwise.divide(_plumbing.sum(x * t, axis=tuple(range(-_kernel._ndim(x), 0))), out)


def _norm2_vjp(g, x, out):
    return _elementwise.divide(g, out) * x


# The 2-norm of all of x: numpy's own value, sqrt(dot(x.ravel(order='K'), x.ravel(order='K'))),
# whose summation follows x's memory layout (a transposed or strided x sums in another
# order than a C-ordered copy: one result in five differed in the last bit); rules x / |x|.
_norm2 = _define('linalg.norm', lambda x: _np.linalg.norm(x), (_norm2_jvp,), (_norm2_vjp,))


def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: every vector ``ord`` (inf, -inf, 0, 1, 2, any p, None) over one
    axis, every matrix ``ord`` ('fro', 'nuc', inf, -inf, 1, -1, 2, -2, None) over two,
    numpy's values and branches.  The 2-norm's derivative at zero is nan (0/0)."""
    x = _kernel._as_operand(x)
    if not _carries(x):
        return _np.linalg.norm(_plain(x, 'norm'), ord, axis, keepdims)
    nd_ = _kernel._ndim(x)
    if nd_ == 0 and axis is not None:          # numpy's AxisError (a 0-d array has no axis)
        _np.linalg.norm(primal_value(x), ord, axis, keepdims)
    if axis is None:
        if ord is None or ord in ('f', 'fro') and nd_ == 2 or ord == 2 and nd_ == 1:
            ret = _norm2(x)
            return _plumbing.reshape(ret, [1] * nd_) if keepdims else ret
        axis = tuple(range(nd_))
    elif not isinstance(axis, tuple):
        try:
            axis = (operator.index(axis),)
        except TypeError:
            raise TypeError("'axis' must be None, an integer or a tuple of integers") from None
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis[0], axis[1], keepdims)
    raise ValueError("Improper number of dimensions to norm.")


def matrix_norm(x, /, *, keepdims=False, ord='fro'):
    """numpy.linalg.matrix_norm: norm over the last two axes."""
    return norm(x, axis=(-2, -1), keepdims=keepdims, ord=ord)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """numpy.linalg.vector_norm: a vector norm over any axes (all of them by default)."""
    x = _kernel._as_operand(x)
    if not _carries(x):
        return _np.linalg.vector_norm(_plain(x, 'vector_norm'), axis=axis, keepdims=keepdims, ord=ord)
    shape = list(_kernel._shape(x))
    if axis is None:
        y, along = _plumbing.ravel(x), 0
    elif isinstance(axis, tuple):
        axes = [a % len(shape) for a in axis]
        rest = [i for i in range(len(shape)) if i not in axes]
        y = _plumbing.reshape(_plumbing.transpose(x, axes + rest),
                        (int(_np.prod([shape[i] for i in axes])),) + tuple(shape[i] for i in rest))
        along = 0
    else:
        y, along = x, axis
    res = norm(y, axis=along, ord=ord)
    if keepdims:
        for i in (range(len(shape)) if axis is None else
                  [a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))]):
            shape[i] = 1
        res = _plumbing.reshape(res, shape)
    return res


_inv = _define(
    'linalg.inv', _np.linalg.inv,
    (lambda t, a, out: -_products.matmul(_products.matmul(out, t), out),),
    (lambda g, a, out: -_products.matmul(_products.matmul(_mT(out), g), _mT(out)),))


def inv(a):
    return _inv(_kernel._as_operand(a))


def _det_jvp(t, a, out):
    # d det = det * tr(A^-1 dA)
    return out * _plumbing.sum(_mT(inv(a)) * t, axis=(-2, -1))


def _per_matrix(g, a):
    """A cotangent of a function of each matrix in a stack (shape a.shape[:-2]), with two
    singleton axes so that it meets its own matrix, not the stack's last axis."""
    return _plumbing._keep(g, a, (-2, -1), False)


_det = _define('linalg.det', _np.linalg.det, (_det_jvp,),
               (lambda g, a, out: _per_matrix(g * out, a) * _mT(inv(a)),))


def det(a):
    return _det(_kernel._as_operand(a))


def slogdet(a):
    """(sign, log|det a|); the sign is constant, log|det| is differentiable."""
    a = _kernel._as_operand(a)
    result = _np.linalg.slogdet(primal_value(a))
    return type(result)(result.sign, _logabsdet(a))      # numpy's (sign, logabsdet) namedtuple


_logabsdet = _define(
    'linalg.slogdet', lambda a: _np.linalg.slogdet(a)[1],
    (lambda t, a, out: _plumbing.sum(_mT(inv(a)) * t, axis=(-2, -1)),),
    (lambda g, a, out: _per_matrix(g, a) * _mT(inv(a)),))


def _phi(x):
    """Lower triangle with the diagonal halved."""
    n = _kernel._shape(x)[-1]
    mask = _np.tril(_np.ones((n, n))) - 0.5 * _np.eye(n)
    return x * mask


def _chol_jvp(t, a, out):
    # dL = L phi(L^-1 dA L^-T), with dA symmetrised (the factor is a function of sym(A))
    linv = inv(out)
    t = 0.5 * (t + _mT(t))
    return _products.matmul(out, _phi(_products.matmul(_products.matmul(linv, t), _mT(linv))))


def _chol_vjp(g, a, out):
    # Abar = sym(L^-T phi(L^T Lbar) L^-1) (Murray 2016, with symmetrisation)
    linv = inv(out)
    s = _products.matmul(_products.matmul(_mT(linv), _phi(_products.matmul(_mT(out), g))), linv)
    return 0.5 * (s + _mT(s))


# The factor is taken of sym(A) = (A + A^T)/2, as JAX does: numpy reads one triangle only,
# so without this the two modes would differentiate different functions.
_cholesky = _define('linalg.cholesky', lambda a: _np.linalg.cholesky(0.5 * (a + _np.swapaxes(a, -1, -2))),
                    (_chol_jvp,), (_chol_vjp,))


def cholesky(a):
    return _cholesky(_kernel._as_operand(a))


# ---------------------------------------------------------------- pinv, matrix_power

def _pinv_plain(a, hermitian, **tol):
    return _np.linalg.pinv(a, hermitian=hermitian, **tol)


def _pinv_kept(a, hermitian, tol):
    """numpy's cut-off: (mask of the singular values pinv keeps, True if it drops one
    that is not zero to rounding).  Then pinv(a) is the pseudo-inverse of the truncation
    A_k = U S_k V^T, not of a, and the derivative is that of pinv(A_k(a))."""
    s = _np.linalg.svd(primal_value(a), compute_uv=False, hermitian=hermitian)
    rcond, rtol = tol.get('rcond'), tol.get('rtol', _np._NoValue)
    if rcond is None:
        rcond = 1e-15 if rtol is _np._NoValue else \
            max(_kernel._shape(a)[-2:]) * _np.finfo(s.dtype).eps if rtol is None else rtol
    top = _np.max(s, axis=-1, keepdims=True)
    keep = s > _np.asarray(rcond)[..., None] * top
    zero = s <= _TIE * s.shape[-1] * top
    # (numpy's functions, not ~ and &: staged, the masks are traced)
    return keep, bool(_np.any(_np.logical_not(_np.logical_or(keep, zero))))


def _truncation(a, keep, hermitian):
    """A_k = U S_k V^T: a without the singular values pinv drops (a differentiable
    composition of nestad's svd)."""
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    return _products.matmul(u * _plumbing.expand_dims(s * keep, -2), vh)


def _pinv_jvp(t, a, out, hermitian, **tol):
    # d A+ = -A+ dA A+ + A+ A+^T dA^T (I - A A+) + (I - A+ A) dA^T A+^T A+, where the rank of
    # A is locally constant (Golub and Pereyra 1973); with A_k for A where the cut-off
    # drops singular values that are not zero (A+ is then A_k's pseudo-inverse)
    keep, truncated = _pinv_kept(a, hermitian, tol)
    if truncated:
        a, t = run_jvp(lambda x: _truncation(x, keep, hermitian), a, t)
    elif hermitian:                                    # numpy reads the lower triangle
        t, a = _from_triangle(t, True), _from_triangle(a, True)
    m, n = _kernel._shape(a)[-2:]
    p_out = _np.eye(m) - _products.matmul(a, out)            # I - A A+
    p_in = _np.eye(n) - _products.matmul(out, a)             # I - A+ A
    tT = _mT(t)
    return (-_products.matmul(out, _products.matmul(t, out))
            + _products.matmul(_products.matmul(out, _mT(out)), _products.matmul(tT, p_out))
            + _products.matmul(p_in, _products.matmul(tT, _products.matmul(_mT(out), out))))


def _pinv_vjp(g, a, out, hermitian, **tol):
    keep, truncated = _pinv_kept(a, hermitian, tol)
    a0 = a
    if truncated:
        a = _truncation(a, keep, hermitian)
    elif hermitian:
        a = _from_triangle(a, True)
    m, n = _kernel._shape(a)[-2:]
    p_out = _np.eye(m) - _products.matmul(a, out)
    p_in = _np.eye(n) - _products.matmul(out, a)
    gT = _mT(g)
    ga = (-_products.matmul(_mT(out), _products.matmul(g, _mT(out)))
          + _products.matmul(p_out, _products.matmul(gT, _products.matmul(out, _mT(out))))
          + _products.matmul(_products.matmul(_mT(out), out), _products.matmul(gT, p_in)))
    if truncated:
        return run_vjp(lambda x: _truncation(x, keep, hermitian), a0, ga)
    return _to_triangle(ga, True) if hermitian else ga


_pinv = _define('linalg.pinv', _pinv_plain, (_pinv_jvp,), (_pinv_vjp,))


def pinv(a, rcond=None, hermitian=False, **rtol):
    """numpy.linalg.pinv (stacks too), numpy's values and cut-offs (``rcond``, ``rtol``).
    Its derivative is the one where the rank stays fixed: exact for full-rank matrices
    and along perturbations that keep the rank; a perturbation that changes the rank
    makes the pseudo-inverse jump, and no derivative exists there."""
    a = _kernel._as_operand(a)
    tol = dict(rtol) if rcond is None else dict(rtol, rcond=rcond)
    if not _carries(a):
        return _np.linalg.pinv(_plain(a, 'pinv'), hermitian=hermitian, **tol)
    return _pinv(a, hermitian=hermitian, **tol)


def matrix_power(a, n):
    """numpy.linalg.matrix_power by numpy's steps (squarings and products with matmul, inv
    for negative powers), so its values are numpy's."""
    a = _kernel._as_operand(a)
    if not _carries(a):
        return _np.linalg.matrix_power(_plain(a, 'matrix_power'), n)
    shape = _kernel._shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise _np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError("exponent must be an integer") from None
    if n == 0:              # the identity: a constant
        dtype = _np.result_type(primal_value(a))
        return _np.broadcast_to(_np.eye(shape[-1], dtype=dtype), shape).copy()
    if n < 0:
        a, n = inv(a), -n
    if n == 1:
        return a
    if n == 2:
        return _products.matmul(a, a)
    if n == 3:
        return _products.matmul(_products.matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else _products.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _products.matmul(result, z)
    return result


def multi_dot(arrays, *, out=None):
    """numpy.linalg.multi_dot: the chain of dots in numpy's order (the cheapest, found by
    the same dynamic programme), so its values are numpy's."""
    arrays = [_kernel._as_operand(a) for a in arrays]
    if not builtins.any(_carries(a) for a in arrays):
        return _np.linalg.multi_dot([_plain(a, 'multi_dot') for a in arrays], out=out)
    if out is not None:
        raise TypeError("numpy.linalg.multi_dot(..., out=...) cannot write a nestad value into a "
                        "plain array; use the result it returns")
    n = len(arrays)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    if n == 2:
        return _contract.dot(arrays[0], arrays[1])
    first, last = _kernel._ndim(arrays[0]), _kernel._ndim(arrays[-1])
    if first == 1:
        arrays[0] = _plumbing.atleast_2d(arrays[0])
    if last == 1:
        arrays[-1] = _plumbing.transpose(_plumbing.atleast_2d(arrays[-1]))
    for a in arrays:
        if _kernel._ndim(a) != 2:
            raise _np.linalg.LinAlgError(f"{_kernel._ndim(a)}-dimensional array given. Array must be "
                                         "two-dimensional")
    if n == 3:
        (a0, a1b0), (b1c0, c1) = _kernel._shape(arrays[0]), _kernel._shape(arrays[2])
        if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
            result = _contract.dot(_contract.dot(arrays[0], arrays[1]), arrays[2])
        else:
            result = _contract.dot(arrays[0], _contract.dot(arrays[1], arrays[2]))
    else:
        result = _chain(arrays, _chain_order([_kernel._shape(a) for a in arrays]), 0, n - 1)
    if first == 1 and last == 1:
        return result[0, 0]
    if first == 1 or last == 1:
        return _plumbing.ravel(result)
    return result


def _chain_order(shapes):
    """The split points of the cheapest multiplication order (Cormen 15.2, as numpy)."""
    n = len(shapes)
    p = [s[0] for s in shapes] + [shapes[-1][1]]
    cost = _np.zeros((n, n))
    split = _np.zeros((n, n), dtype=int)
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i, j] = _np.inf
            for k in range(i, j):
                q = cost[i, k] + cost[k + 1, j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i, j]:
                    cost[i, j], split[i, j] = q, k
    return split


def _chain(arrays, split, i, j):
    if i == j:
        return arrays[i]
    return _contract.dot(_chain(arrays, split, i, split[i, j]), _chain(arrays, split, split[i, j] + 1, j))


# ---------------------------------------------------------------- numpy 2's array-API names

def matmul(x1, x2, /):
    return _products.matmul(x1, x2)


def tensordot(x1, x2, /, *, axes=2):
    return _contract.tensordot(x1, x2, axes)


def outer(x1, x2, /):
    """numpy.linalg.outer: of two vectors only."""
    x1, x2 = _kernel._as_operand(x1), _kernel._as_operand(x2)
    if _kernel._ndim(x1) != 1 or _kernel._ndim(x2) != 1:
        raise ValueError("Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={_kernel._ndim(x1)} and x2.ndim={_kernel._ndim(x2)}.")
    return _contract.outer(x1, x2)


def cross(x1, x2, /, *, axis=-1):
    """numpy.linalg.cross: of 3-element vectors only."""
    x1, x2 = _kernel._as_operand(x1), _kernel._as_operand(x2)
    if _kernel._shape(x1)[axis] != 3 or _kernel._shape(x2)[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they "
                         f"are {_kernel._shape(x1)[axis]} and {_kernel._shape(x2)[axis]} dimensional instead.")
    return _contract.cross(x1, x2, axis=axis)


def trace(x, /, *, offset=0, dtype=None):
    """numpy.linalg.trace: over the last two axes."""
    if dtype is not None:
        raise InvalidInputError("nestad.numpy.linalg.trace supports dtype=None")
    return _reductions.trace(x, offset, -2, -1)


def diagonal(x, /, *, offset=0):
    return _reductions.diagonal(x, offset, -2, -1)


def matrix_transpose(x, /):
    return _mT(_kernel._as_operand(x))


if hasattr(_contract, 'vecdot'):
    def vecdot(x1, x2, /, *, axis=-1):
        return _contract.vecdot(x1, x2, axis=axis)
