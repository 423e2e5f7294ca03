"""``nestad.scipy.signal``: ``convolve`` that differentiates, with scipy's values.

``convolve(in1, in2, mode='full', method='auto')`` is scipy.signal.convolve (every axis
convolved; modes 'full', 'valid', 'same').  As in autograd's version, keyword ``axes``
(pairs of axes to convolve) and ``dot_axes`` (pairs of axes to sum over) convolve some
axes only: the output's axes are in1's others, in2's others, then the convolved ones
(autograd's convnet: ``convolve(images, kernels, axes=([2, 3], [2, 3]),
dot_axes=([1], [0]), mode='valid')``).  Rules: nestad.numpy._convolve.
"""
import scipy.signal as _signal

from ..numpy import _ndim
from ..numpy._convolve import bilinear as _bilinear, convolution as _convolution
from ..values import primal_value

__all__ = ['convolve']


def _same_start(n, k):
    return (k - 1) // 2           # scipy centres the 'same' output in the full one


def _composite(a, b, mode='full', method='auto', axes=None, dot_axes=((), ())):
    if axes is None:                                    # every axis
        axes = (tuple(range(_ndim(a))), tuple(range(_ndim(b))))
    return _convolution(a, b, axes, dot_axes, mode, _same_start)


def _plain(a, b, mode='full', method='auto', axes=None, dot_axes=((), ())):
    if axes is None:
        return _signal.convolve(a, b, mode, method)
    return primal_value(_composite(a, b, mode, method, axes, dot_axes))


_convolve = _bilinear('scipy.signal.convolve', _plain, _composite)


def convolve(in1, in2, mode='full', method='auto', *, axes=None, dot_axes=((), ())):
    """scipy.signal.convolve, differentiable in both arrays (``axes``/``dot_axes``: see
    the module's docstring)."""
    if axes is None and any(len(d) for d in dot_axes):
        raise ValueError("convolve: dot_axes needs axes (the pairs of axes to convolve)")
    if mode not in ('full', 'valid', 'same'):
        raise ValueError(f"convolve: mode must be 'full', 'valid' or 'same', not {mode!r}")
    if axes is not None:
        axes = tuple(tuple(int(i) for i in x) for x in axes)
        dot_axes = tuple(tuple(int(i) for i in x) for x in dot_axes)
    return _convolve(in1, in2, mode=mode, method=method, axes=axes, dot_axes=dot_axes)
