"""Shape plumbing: reshape, transpose, broadcast_to and its adjoint sum_to, and the
moves of axes built from them.  ``sum`` lives here too: sum_to's tangent rule is a sum,
and sum's adjoint is broadcast_to, so the three are each other's rules.

Rules address primal axes from the right, so a tangent may carry leading batch axes
(``_nbatch``); ``_align``/``_tangent_to``/``_jvp2`` put an elementwise operand's tangent
in line with the output.
"""
import numpy as _np

from ._kernel import (_as_operand, _axis_index, _axis_tuple, _define, _nbatch, _ndim,
                      _neg_axes, _norm_axis, _shape)


# ---------------------------------------------------------------- shape plumbing

def _sum_to_plain(x, shape):
    xs = _np.shape(x)
    if xs == tuple(shape):
        return x
    lead = len(xs) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and xs[lead + i] != 1)
    return _np.reshape(_np.sum(x, axis=axes), shape)


def _sum_to_jvp(t, x, out, shape):
    # Sum the same axes of the tangent, counted after its batch axes.
    nb = _nbatch(t, x)
    xs = _shape(x)
    lead = len(xs) - len(shape)
    axes = tuple(range(nb, nb + lead)) + tuple(
        nb + lead + i for i, s in enumerate(shape) if s == 1 and xs[lead + i] != 1)
    r = _sum(t, axis=axes, keepdims=True) if axes else t
    return reshape(r, _shape(t)[:nb] + tuple(shape))


# sum_to: sum a broadcast value back to ``shape`` (the adjoint of broadcast_to).
_sum_to = _define(
    'sum_to', _sum_to_plain,
    jvps=(_sum_to_jvp,),
    vjps=(lambda g, x, out, shape: broadcast_to(g, _shape(x)),))


def sum_to(x, shape):
    x, shape = _as_operand(x), tuple(shape)
    return x if _shape(x) == shape else _sum_to(x, shape=shape)


def _broadcast_to_jvp(t, x, out, shape):
    # New leading axes of the result go after the tangent's batch axes.
    nb = _nbatch(t, x)
    missing = len(shape) - _ndim(x)
    if nb and missing:
        t = reshape(t, _shape(t)[:nb] + (1,) * missing + _shape(x))
    return broadcast_to(t, _shape(t)[:nb] + tuple(shape))


_broadcast_to = _define(
    'broadcast_to', lambda x, shape: _np.broadcast_to(x, shape),
    jvps=(_broadcast_to_jvp,),
    vjps=(lambda g, x, out, shape: sum_to(g, _shape(x)),))


def broadcast_to(x, shape):
    x, shape = _as_operand(x), tuple(shape)
    return x if _shape(x) == shape else _broadcast_to(x, shape=shape)


def _align(t, x, out):
    """Tangent ``t`` of argument ``x`` with singleton axes inserted after its batch axes,
    so that it broadcasts against the output elementwise (batch axes stay leading)."""
    missing = _ndim(out) - _ndim(x)
    nb = _nbatch(t, x)
    if missing <= 0 or nb == 0:
        return t
    return reshape(t, _shape(t)[:nb] + (1,) * missing + _shape(x))


def _tangent_to(term, t, x, out):
    """A JVP term for argument ``x`` broadcast to the output's shape (keeping batch axes)."""
    target = _shape(t)[:_nbatch(t, x)] + _shape(out)
    return term if _shape(term) == target else broadcast_to(term, target)


def _jvp2(rule):
    """An elementwise binary JVP term, with the tangent aligned to the output first."""
    def jvp_x(t, x, y, out, **params):
        return _tangent_to(rule(_align(t, x, out), x, y, out, **params), t, x, out)

    def jvp_y(t, x, y, out, **params):
        return _tangent_to(rule(_align(t, y, out), x, y, out, **params), t, y, out)
    return jvp_x, jvp_y


_reshape = _define(
    'reshape', lambda x, shape: _np.reshape(x, shape),
    jvps=(lambda t, x, out, shape: reshape(t, _shape(t)[:_nbatch(t, x)] + _shape(out)),),
    vjps=(lambda g, x, out, shape: reshape(g, _shape(x)),))


def reshape(x, shape, *more):
    x = _as_operand(x)
    if more or isinstance(shape, int):
        shape = ((shape,) if isinstance(shape, int) else tuple(shape)) + more
    shape = tuple(shape)
    return x if _shape(x) == shape else _reshape(x, shape=shape)


def ravel(x):
    return reshape(x, (-1,))


def _transpose_jvp(t, x, out, axes):
    nb = _nbatch(t, x)
    return _transpose(t, axes=tuple(range(nb)) + tuple(nb + a for a in axes))


_transpose = _define(
    'transpose', lambda x, axes: _np.transpose(x, axes),
    jvps=(_transpose_jvp,),
    vjps=(lambda g, x, out, axes: _transpose(g, axes=tuple(_np.argsort(axes))),))


def transpose(x, axes=None):
    x = _as_operand(x)
    n = _ndim(x)
    if axes is None:
        axes = tuple(reversed(range(n)))
    else:
        axes = tuple(_axis_index(a, n) for a in axes)
        if sorted(axes) != list(range(n)):
            raise ValueError("axes don't match array")
    return x if axes == tuple(range(n)) else _transpose(x, axes=axes)


def swapaxes(x, axis1, axis2):
    x = _as_operand(x)
    n = _ndim(x)
    axes = list(range(n))
    axis1, axis2 = _axis_index(axis1, n), _axis_index(axis2, n)
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return transpose(x, axes)


def moveaxis(x, source, destination):
    x = _as_operand(x)
    n = _ndim(x)
    source, destination = _axis_index(source, n), _axis_index(destination, n)
    order = [a for a in range(n) if a != source]
    order.insert(destination, source)
    return transpose(x, order)


def expand_dims(x, axis):
    x = _as_operand(x)
    s = list(_shape(x))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    for a in sorted(_axis_tuple(axes, len(s) + len(axes))):    # numpy's errors for bad axes
        s.insert(a, 1)
    return reshape(x, s)


def squeeze(x, axis=None):
    x = _as_operand(x)
    s = _shape(x)
    if axis is None:
        return reshape(x, [d for d in s if d != 1])
    if not s and isinstance(axis, int) and axis in (0, -1):
        return x                          # (numpy squeezes a 0-d array over axis 0 or -1)
    axes = set(_axis_tuple(axis, len(s)))
    for a in axes:
        if s[a] != 1:
            raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                             f"one (axis {a} has size {s[a]})")
    return reshape(x, [d for i, d in enumerate(s) if i not in axes])


def atleast_1d(x):
    x = _as_operand(x)
    return reshape(x, (1,)) if _ndim(x) == 0 else x


def atleast_2d(x):
    x = _as_operand(x)
    return reshape(x, (1,) * (2 - _ndim(x)) + _shape(x)) if _ndim(x) < 2 else x


def _moveaxis_n(t, nb, last):
    """Move the first nb axes to the end (last=True) or the last nb axes to the front."""
    n = _ndim(t)
    axes = list(range(nb, n)) + list(range(nb)) if last else list(range(n - nb, n)) + list(range(n - nb))
    return transpose(t, axes)


# ---------------------------------------------------------------- reductions

def _keep(g, x, axis, keepdims):
    """g of a reduction over ``axis``, reshaped (axes kept as 1) to broadcast against x."""
    if keepdims:
        return g
    s = list(_shape(x))
    axes = _neg_axes(axis, len(s))
    for a in axes:
        s[a] = 1
    nb = _ndim(g) - (len(s) - len(axes))
    return reshape(g, _shape(g)[:nb] + tuple(s))


_sum = _define(
    'sum', lambda x, axis, keepdims: _np.sum(x, axis=axis, keepdims=keepdims),
    jvps=(lambda t, x, out, axis, keepdims: _sum(t, axis=_neg_axes(axis, _ndim(x)), keepdims=keepdims),),
    vjps=(lambda g, x, out, axis, keepdims: broadcast_to(_keep(g, x, axis, keepdims), _shape(x)),))


def sum(x, axis=None, keepdims=False):   # noqa: A001
    return _sum(_as_operand(x), axis=_norm_axis(axis), keepdims=keepdims)
