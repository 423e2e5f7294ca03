"""Grids, tables and parts of real numbers: meshgrid, interp, unique, real, imag, conj.

Made of nestad.numpy's differentiable functions (reshape, broadcast_to, take, where),
whose rules they inherit; each follows numpy's own formula, so values are numpy's.
"""
import numpy as _np

from ._kernel import _as_operand, _ndim
from ._plumbing import broadcast_to, ravel, reshape
from ._selection import clip, where
from ._shapes import searchsorted, take
from ..errors import InvalidInputError
from ..tracer import StagingError, is_tracer
from ..values import Perturbed, primal_value

__all__ = ['meshgrid', 'interp', 'unique', 'real', 'imag', 'conj', 'conjugate']


def meshgrid(*xi, copy=True, sparse=False, indexing='xy'):
    """numpy.meshgrid: coordinate arrays; each entry carries its coordinate's derivative."""
    if indexing not in ('xy', 'ij'):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    n = len(xi)
    grids = []
    for i, x in enumerate(xi):
        shape = [1] * n
        shape[i] = -1
        if indexing == 'xy' and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]          # x along columns
        grids.append(reshape(ravel(_as_operand(x)), shape))
    if sparse:
        return tuple(grids)
    full = _np.broadcast_shapes(*[_np.shape(primal_value(g)) for g in grids])
    return tuple(broadcast_to(g, full) for g in grids)


def interp(x, xp, fp, left=None, right=None, period=None):
    """numpy.interp, differentiable in x, xp and fp: on [xp[j], xp[j+1]) numpy's
    slope * (x - xp[j]) + fp[j]; at a knot the derivative is the right-hand one (the
    interval numpy's search picks)."""
    if period is not None:
        raise InvalidInputError("nestad.numpy.interp does not support period=: map x into one "
                                "period first (x % period) and extend xp, fp by one period")
    if not any(isinstance(a, Perturbed) or is_tracer(a) for a in (x, xp, fp, left, right)):
        return _np.interp(x, xp, fp, left, right)
    x, xp, fp = _as_operand(x), _as_operand(xp), _as_operand(fp)
    xv, xpv = primal_value(x), primal_value(xp)
    if is_tracer(xv) or is_tracer(xpv):
        raise StagingError("nestad.numpy.interp of a traced x or xp: the interval each x falls "
                           "in depends on the values, which a program cannot hold; stage with "
                           "x and xp static (nestad.stage(f, static_argnums=...)) or "
                           "interpolate outside the staged function (fp may be traced)")
    n = _np.shape(xpv)[0]
    if n == 1:
        inside = fp[0] + 0.0 * x
    else:
        j = clip(searchsorted(xpv, xv, side='right') - 1, 0, n - 2)
        x0, f0 = take(xp, j), take(fp, j)
        inside = (take(fp, j + 1) - f0) / (take(xp, j + 1) - x0) * (x - x0) + f0
    out = where(xv == xpv[-1], fp[-1], inside)
    out = where(xv < xpv[0], fp[0] if left is None else left, out)
    return where(xv > xpv[-1], fp[-1] if right is None else right, out)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True):
    """numpy.unique: the sorted distinct values, each carrying the derivative of its
    first occurrence (where entries are equal the function has no derivative of its
    own); indices and counts are plain integers."""
    v = primal_value(ar)
    if is_tracer(v):
        raise StagingError("nestad.numpy.unique: the number of distinct values depends on the "
                           "values, so it cannot be staged; compute it outside the staged "
                           "function and pass the result in")
    found = _np.unique(v, return_index=True, return_inverse=return_inverse,
                       return_counts=return_counts, axis=axis, equal_nan=equal_nan)
    values = take(ravel(ar), found[1]) if axis is None else take(ar, found[1], axis=axis)
    if not (return_index or return_inverse or return_counts):
        return values
    return (values,) + ((found[1],) if return_index else ()) + tuple(found[2:])


def real(val):
    """The real part of a real value: the value itself."""
    return val


def imag(val):
    """The imaginary part of a real value: zeros, with no derivative."""
    return _np.imag(primal_value(val))


def conj(x):
    """The complex conjugate of a real value: the value itself."""
    return x


conjugate = conj
