"""``import nestad.numpy as np``: numpy functions that differentiate, in every mode.

This module only re-exports.  Each primitive is defined once, in the module of its
family, with its JVP (forward) and VJP (reverse) rules beside it, written with nestad.numpy's
functions so that rules nest (Hessians of array code); rules address primal axes from the
right, so a tangent may carry leading batch axes.  The families, each importing only
those above it: _kernel (shared helpers), _plumbing, _selection, _elementwise, _indexing,
_joining, _reductions, _products, _contract, _spectral/linalg, _more, _shapes, _stats,
_convolve, _grids; then _batch (vmap's batch rules) and _dispatch (numpy's protocols).

Plain numpy calls on nestad values (``numpy.sin(x)``, ``numpy.sum(x)``, ``a @ x``) land
here through ``__array_ufunc__``/``__array_function__``; an unsupported numpy function
raises a TypeError naming it rather than dropping the derivative.

Numpy names not listed here are not differentiable by nestad; numpy's constants and
dtypes (``pi``, ``float64``...) and array constructors on plain data are re-exported.
"""
import sys as _sys

from numpy import (e, euler_gamma, float32, float64, inf, int32, int64, nan, ndarray,  # noqa: F401
                   newaxis, pi, arange, eye, identity, zeros, ones, full, empty,
                   isnan, isfinite, isinf, allclose, isclose, array_equal, shape, ndim,
                   size, result_type)

from ._kernel import _as_operand, _nbatch, _ndim, _plain_operand, _shape  # noqa: F401
from ._plumbing import *  # noqa: F401,F403  (reshape, transpose, broadcast_to, sum_to, sum...)
from ._selection import *  # noqa: F401,F403  (where, clip)
from ._elementwise import *  # noqa: F401,F403  (sin, add, power, maximum, floor, less...)
from ._elementwise import _sech2  # noqa: F401
from ._indexing import *  # noqa: F401,F403  (getitem, at, astype, copy)
from . import _banded  # noqa: F401  (banded basis directions of jacobian_f and hessian)
from ._joining import *  # noqa: F401,F403  (concatenate, stack, array)
from ._reductions import *  # noqa: F401,F403  (mean, prod, max, min, logsumexp, cumsum, trace)
from ._products import *  # noqa: F401,F403  (matmul, inner, vdot)
from ._contract import *  # noqa: F401,F403  (einsum, dot, tensordot, kron, cross, outer)
from . import linalg  # noqa: F401
from . import random  # noqa: F401  (numpy's own: nestad.numpy.random)
from ._more import *  # noqa: F401,F403  (numpy functions made of the ones above)
from ._shapes import *  # noqa: F401,F403  (array manipulation, index tricks, casts)
from ._stats import *  # noqa: F401,F403  (statistics, order statistics, cumprod)
from ._convolve import *  # noqa: F401,F403  (convolve, correlate)
from ._grids import *  # noqa: F401,F403  (meshgrid, interp, unique, real, imag, conj)
from . import _batch  # noqa: F401  (vmap's batch rules of the primitives above)
from . import _dispatch

_dispatch.install(_sys.modules[__name__])
