"""Convolutions: numpy's ``convolve`` and ``correlate``, and the N-d engine behind
``nestad.scipy.signal.convolve``.

Each is a primitive whose value is the reference library's own (numpy's, scipy's) and
whose rules come from ``windowed``, the same convolution made of differentiable
primitives: the input's windows gathered (``take`` of an index matrix per convolved
axis, after ``pad`` for the full output) and contracted with the flipped kernel by
``einsum``.  A convolution is bilinear, so its JVP in one argument is the convolution
of the tangent with the other argument, and its VJP in one argument is the pullback of
that linear map (a reverse run at zero: the map does not depend on the point); both
are written with differentiable functions, so they differentiate in turn.
"""
import string

import numpy as np

from ..arrays import ArrayPrimitive, apply
from ..extraction import run_vjp
from ._contract import einsum
from ._indexing import getitem
from ._joining import one_tangent_at_a_time
from ._kernel import _as_operand, _ndim, _shape
from ._plumbing import reshape, transpose
from ._shapes import pad, take

__all__ = ['convolve', 'correlate']


def windowed(a, b, axes, dot_axes, full):
    """sum over b's window of a's entries times b flipped, for each pair of convolved
    axes ``axes = (a_axes, b_axes)``, summed over the pairs ``dot_axes``; the output's axes
    are a's other axes, b's other axes, then the convolved ones.  ``full``: every overlap
    (a padded by the window's length - 1); else a's windows inside a (a at least as long
    as b on every convolved axis)."""
    a_conv, b_conv = (list(x) for x in axes)
    a_dot, b_dot = (list(x) for x in dot_axes)
    if full:
        widths = [(0, 0)] * _ndim(a)
        for i, j in zip(a_conv, b_conv):
            widths[i] = (_shape(b)[j] - 1,) * 2
        a = pad(a, widths)
    letters = iter(string.ascii_letters)
    a_sub = [next(letters) for _ in range(_ndim(a))]
    b_sub = [next(letters) for _ in range(_ndim(b))]
    for i, j in zip(a_dot, b_dot):
        b_sub[j] = a_sub[i]
    conv = [a_sub[i] for i in a_conv]
    ignore = ([a_sub[i] for i in range(_ndim(a)) if i not in a_conv and i not in a_dot]
              + [b_sub[j] for j in range(_ndim(b)) if j not in b_conv and j not in b_dot])
    flip = [slice(None)] * _ndim(b)
    for letter, j in zip(conv, b_conv):
        k = _shape(b)[j]
        p = a_sub.index(letter)                           # where that axis of a is now
        # a's axis becomes two, (output, window): entry [o, w] is a[o + w]
        a = take(a, np.arange(_shape(a)[p] - k + 1)[:, None] + np.arange(k), axis=p)
        b_sub[j] = next(letters)
        a_sub.insert(p + 1, b_sub[j])
        flip[j] = slice(None, None, -1)
    spec = f"{''.join(a_sub)},{''.join(b_sub)}->{''.join(ignore + conv)}"
    return einsum(spec, a, getitem(b, tuple(flip)))


def convolution(a, b, axes, dot_axes, mode, same_start):
    """``windowed`` for a mode: 'full', 'valid' (the longer argument's windows: numpy and
    scipy let either be the longer) or 'same' (the full output from ``same_start(n, k)``
    on, of a's length along each convolved axis, ``n`` a's and ``k`` b's length)."""
    sizes = [(_shape(a)[i], _shape(b)[j]) for i, j in zip(*axes)]
    if mode == 'valid' and all(n >= k for n, k in sizes):
        return windowed(a, b, axes, dot_axes, full=False)
    if mode == 'valid' and all(k >= n for n, k in sizes):
        out = windowed(b, a, axes[::-1], dot_axes[::-1], full=False)
        n_a = _ndim(a) - len(axes[0]) - len(dot_axes[0])
        n_b = _ndim(b) - len(axes[1]) - len(dot_axes[1])
        order = list(range(n_b, n_b + n_a)) + list(range(n_b)) + list(range(n_a + n_b, _ndim(out)))
        return transpose(out, order)
    out = windowed(a, b, axes, dot_axes, full=True)
    first = _ndim(out) - len(sizes)
    index = [slice(None)] * _ndim(out)
    for p, (n, k) in enumerate(sizes):
        if mode == 'valid':
            index[first + p] = slice(min(n, k) - 1, max(n, k))
        elif mode == 'same':
            start = same_start(n, k)
            index[first + p] = slice(start, start + n)
        elif mode != 'full':
            raise ValueError(f"mode must be 'full', 'valid' or 'same', not {mode!r}")
    return getitem(out, tuple(index))


def bilinear(name, plain, composite):
    """A primitive of two arguments with ``plain``'s value, bilinear, with rules from
    ``composite`` (the same function made of differentiable primitives); keyword
    arguments are parameters of both.  ``name`` is its qualified name."""
    def tangent(k):
        def jvp(t, a, b, out, **params):
            return composite(t, b, **params) if k == 0 else composite(a, t, **params)
        return one_tangent_at_a_time(jvp, k)     # (composite's axes count from the left)

    def pullback(k):
        def vjp(g, a, b, out, **params):
            zero = np.zeros(_shape((a, b)[k]))   # (the map is linear: any point will do)
            if k == 0:
                return run_vjp(lambda x: composite(x, b, **params), zero, g)
            return run_vjp(lambda x: composite(a, x, **params), zero, g)
        return vjp
    prim = ArrayPrimitive(name, plain, (tangent(0), tangent(1)), (pullback(0), pullback(1)),
                          namespace=None)

    def lifted(*args, **params):
        return apply(prim, args, params)
    lifted.__name__ = name.rsplit('.', 1)[-1]
    prim.lifted = lifted
    return lifted


# ---------------------------------------------------------------- numpy's, of 1-d arrays

def _numpy_composite(a, v, mode, correlate):
    """numpy's 1-d convolve (correlate: of v reversed) of the same length as numpy's:
    'same' has the longer argument's length, centred as numpy centres it."""
    if correlate:
        v = getitem(v, slice(None, None, -1))
    n, k = _shape(a)[0], _shape(v)[0]
    if mode != 'same':
        return convolution(a, v, ([0], [0]), ([], []), mode, None)
    full = convolution(a, v, ([0], [0]), ([], []), 'full', None)
    start = (min(n, k) - 1) // 2 if not correlate or n >= k else min(n, k) // 2
    return getitem(full, slice(start, start + max(n, k)))


_convolve = bilinear('numpy.convolve', lambda a, v, mode='full': np.convolve(a, v, mode),
                     lambda a, v, mode: _numpy_composite(a, v, mode, False))
_correlate = bilinear('numpy.correlate', lambda a, v, mode='valid': np.correlate(a, v, mode),
                      lambda a, v, mode: _numpy_composite(a, v, mode, True))


def _vector(x):
    x = _as_operand(x)
    if _ndim(x) > 1:
        raise ValueError("object too deep for desired array")     # numpy's error
    return x if _ndim(x) else reshape(x, (1,))


def convolve(a, v, mode='full'):
    """numpy.convolve of 1-d arrays: numpy's values, differentiable in both."""
    return _convolve(_vector(a), _vector(v), mode=mode)


def correlate(a, v, mode='valid'):
    """numpy.correlate of real 1-d arrays: numpy's values, differentiable in both."""
    return _correlate(_vector(a), _vector(v), mode=mode)
