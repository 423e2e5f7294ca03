"""Reductions (mean, prod, max, min, logsumexp; ``sum`` is in _plumbing), the cumulative
sum, and the diagonal and trace."""
import builtins

import numpy as _np

from ..values import Perturbed, primal_value
from ._kernel import (_as_operand, _axis_index, _define, _ndim, _neg_axes, _norm_axis,
                      _plain_operand, _shape)
from ._elementwise import exp, log, multiply  # noqa: F401  (exp, log: made by a loop)
from ._indexing import _getitem
from ._joining import concatenate, stack
from ._plumbing import _keep, _sum, broadcast_to, ravel, reshape, squeeze, sum, transpose  # noqa: A004


def mean(x, axis=None, keepdims=False):
    x, axis = _as_operand(x), _norm_axis(axis)
    if not isinstance(x, Perturbed):
        return _np.mean(_plain_operand(x, 'mean'), axis=axis, keepdims=keepdims)
    if _ndim(x) == 0 and axis is not None:
        _np.mean(primal_value(x), axis=axis)   # numpy's AxisError (its sum takes axis 0 of a 0-d array)
    if _np.result_type(primal_value(x)).kind in 'biu':      # numpy sums integers in float64
        x = multiply(x, 1.0)
    n = _np.prod([_shape(x)[a] for a in _neg_axes(axis, _ndim(x))], dtype=float)
    return sum(x, axis, keepdims) / float(n)    # a Python float keeps float32 float32


def _exclusive_cumprod(y):
    """prod_{j<i} y_j along the last axis, without division.  Plain values use numpy's
    cumprod; perturbed ones a log-depth scan of lifted multiplies, so that derivatives of
    every order are again products of entries (exact at and near zeros)."""
    n = _shape(y)[-1]
    if n == 0:                     # nothing to multiply (an empty axis)
        return y
    if not isinstance(y, Perturbed):
        return _np.concatenate([_np.ones_like(y[..., :1]), _np.cumprod(y[..., :n - 1], axis=-1)],
                               axis=-1)
    p, d = y, 1
    while d < n:
        pad = _np.ones(_shape(y)[:-1] + (d,))
        p = p * concatenate([pad, p[..., :n - d]], axis=-1)
        d *= 2
    return concatenate([_np.ones(_shape(y)[:-1] + (1,)), p[..., :n - 1]], axis=-1)


def _prod_others(x, axis):
    """For each entry, the product of the other entries along ``axis``: the exclusive
    prefix product times the exclusive suffix product.  Not prod / x, which divides 0 by 0
    at zeros, cancels catastrophically in its derivatives near them (the Hessian at
    [1e-16, 1, 1]) and is 0 where prod underflows (at [1e-200, 1e-200, 3])."""
    nd_ = _ndim(x)
    reduced = [a % nd_ for a in _neg_axes(axis, nd_)]
    kept = [a for a in range(nd_) if a not in reduced]
    perm = kept + reduced
    xs = _shape(x)
    # plain x (a first derivative): numpy's own functions, without the lifted calls
    tr, rs = (_np.transpose, _np.reshape) if not isinstance(x, Perturbed) else (transpose, reshape)
    y = rs(tr(x, perm), tuple(xs[a] for a in kept) + (int(_np.prod([xs[a] for a in reduced])),))
    if isinstance(x, Perturbed):       # prefix and (reversed) suffix products in one scan
        both = _exclusive_cumprod(stack([y, y[..., ::-1]]))
        others = both[0] * both[1][..., ::-1]
    else:
        others = _exclusive_cumprod(y) * _exclusive_cumprod(y[..., ::-1])[..., ::-1]
    others = rs(others, tuple(xs[a] for a in perm))
    return tr(others, tuple(_np.argsort(perm)))


_prod = _define(
    'prod', lambda x, axis, keepdims: _np.prod(x, axis=axis, keepdims=keepdims),
    jvps=(lambda t, x, out, axis, keepdims: _sum(
        t * _prod_others(x, axis), axis=_neg_axes(axis, _ndim(x)), keepdims=keepdims),),
    vjps=(lambda g, x, out, axis, keepdims: broadcast_to(
        _keep(g, x, axis, keepdims), _shape(x)) * _prod_others(x, axis),))


def prod(x, axis=None, keepdims=False):
    return _prod(_as_operand(x), axis=_norm_axis(axis), keepdims=keepdims)


def _extreme(name, npfn):
    def share(x, out, axis, keepdims):
        # the derivative goes to the extreme entries, split equally between ties
        xv, ov = primal_value(x), primal_value(out)
        ov = ov if keepdims else _np.expand_dims(ov, _neg_axes(axis, _np.ndim(xv)))
        mask = _np.where(xv == ov, 1.0, 0.0)        # numpy calls: they stage too
        return mask / _np.sum(mask, axis=_neg_axes(axis, _np.ndim(xv)), keepdims=True)
    prim = _define(
        name, lambda x, axis, keepdims: npfn(x, axis=axis, keepdims=keepdims),
        jvps=(lambda t, x, out, axis, keepdims: _sum(
            t * share(x, out, axis, keepdims), axis=_neg_axes(axis, _ndim(x)), keepdims=keepdims),),
        vjps=(lambda g, x, out, axis, keepdims: broadcast_to(
            _keep(g, x, axis, keepdims), _shape(x)) * share(x, out, axis, keepdims),))

    def public(x, axis=None, keepdims=False):
        return prim(_as_operand(x), axis=_norm_axis(axis), keepdims=keepdims)
    public.__name__ = name
    return public


max = amax = _extreme('max', _np.max)   # noqa: A001
min = amin = _extreme('min', _np.min)   # noqa: A001


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) computed stably (the max is shifted out as a constant)."""
    x = _as_operand(x)
    m = _np.max(primal_value(x), axis=_norm_axis(axis), keepdims=True)
    m = _np.where(_np.isfinite(m), m, 0.0)
    out = log(sum(exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else squeeze(out, axis=_neg_axes(_norm_axis(axis), _ndim(x)))


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy.diagonal: axis1 and axis2 (the first two by default, as in numpy) are removed
    and the diagonal becomes the last axis."""
    a = _as_operand(a)
    nd_ = _ndim(a)
    if nd_ < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    axis1, axis2 = _axis_index(axis1, nd_), _axis_index(axis2, nd_)
    if axis1 == axis2:
        raise ValueError("axis1 and axis2 cannot be the same")
    a = transpose(a, [i for i in range(nd_) if i not in (axis1, axis2)] + [axis1, axis2])
    rows, cols = _shape(a)[-2:]
    size = builtins.max(0, builtins.min(rows, cols - offset) if offset >= 0
                        else builtins.min(rows + offset, cols))
    i = _np.arange(size)
    return a[..., i + builtins.max(-offset, 0), i + builtins.max(offset, 0)]


def trace(a, offset=0, axis1=0, axis2=1):
    return sum(diagonal(a, offset, axis1, axis2), axis=-1)


def _flip(x, axis):
    """x reversed along a negative axis (batch axes, in front, are untouched)."""
    return _getitem(x, index=(Ellipsis, slice(None, None, -1)) + (slice(None),) * (-axis - 1))


# cumsum: numpy's own values (a triangular matmul would turn an inf into nan in the entries
# before it, since inf * 0 is nan); the adjoint is the reversed cumulative sum.
_cumsum = _define('cumsum', lambda x, axis: _np.cumsum(x, axis=axis),
                  jvps=(lambda t, x, out, axis: _cumsum(t, axis=axis),),
                  vjps=(lambda g, x, out, axis: _flip(_cumsum(_flip(g, axis), axis=axis), axis),))


def cumsum(x, axis=None):
    x = _as_operand(x)
    if axis is None or _ndim(x) == 0:       # (numpy's cumsum of a 0-d array is 1-d)
        x, axis = ravel(x), 0 if axis is None else axis
    return _cumsum(x, axis=(axis % _ndim(x)) - _ndim(x))
