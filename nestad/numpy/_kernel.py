"""The kernel of nestad.numpy: helpers every array primitive uses (shapes of nestad
values, axis normalisation, index classification, defining a primitive).

It imports nothing of nestad.numpy and of nestad only the value layer (values, arrays,
tracer, errors), so every family module can import it.
"""
import builtins

import numpy as _np

from ..arrays import ArrayPrimitive, Compact as _Compact, apply, subclass_error
from ..tracer import Tracer as _Tracer
from ..values import Batched as _Batched, primal_value

try:                                            # numpy >= 2.0
    from numpy.lib.array_utils import normalize_axis_index as _axis_index, \
        normalize_axis_tuple as _axis_tuple
except ImportError:                             # pragma: no cover
    from numpy.core.multiarray import normalize_axis_index as _axis_index  # noqa: F401
    from numpy.core.numeric import normalize_axis_tuple as _axis_tuple  # noqa: F401


def _shape(x):
    if x.__class__ is _np.ndarray:
        return x.shape
    if isinstance(x, _Compact):       # (without making it dense)
        return x.shape
    x = primal_value(x)
    if x.__class__ is _Batched:       # a member's shape (not through numpy's protocol)
        return _shape(x.primal)[1:]
    return _np.shape(x)


def _ndim(x):
    if x.__class__ is _np.ndarray:
        return x.ndim
    if isinstance(x, _Compact):
        return x.ndim
    x = primal_value(x)
    if x.__class__ is _Batched:
        return _ndim(x.primal) - 1
    return _np.ndim(x)


def _nbatch(t, x):
    """Number of leading batch axes of tangent ``t`` of a primal ``x``."""
    return _ndim(t) - _ndim(x)


def _neg_axes(axis, ndim):
    """``axis`` (None, int or tuple) as a tuple of negative axes of an ndim-array."""
    if axis is None:
        return tuple(range(-ndim, 0))
    if ndim == 0 and axis in (0, -1):
        return ()          # numpy reduces a 0-d array over axis 0 or -1 as over no axis
    if isinstance(axis, (tuple, list)):
        return tuple(sorted((a % ndim) - ndim for a in axis))
    return ((axis % ndim) - ndim,)


def _define(name, plain, jvps=None, vjps=None, jvp_joint=None):
    prim = ArrayPrimitive(name, plain, jvps, vjps, jvp_joint)

    def lifted(*args, **params):
        return apply(prim, args, params)
    lifted.__name__ = name
    prim.lifted = lifted
    return lifted


def _python_scalar(x):
    """True if the value under x's perturbations is a Python float or int (numpy's float64
    is one), or a traced one: the scalar primitives take it (staged code then applies the
    same rules as eager code, which round differently from the array ones).  Arrays and
    other numpy scalars (float32) go to the array primitives, which keep numpy's dtypes."""
    if isinstance(x, _Compact):       # (an array: not made dense to be told so)
        return False
    v = primal_value(x)
    return isinstance(v, (int, float)) or v.__class__ is _Tracer and v.dtype == _np.float64


def _as_operand(x):
    """Lists and tuples (possibly holding nestad numbers) become arrays."""
    if isinstance(x, (list, tuple)):
        return _array(x)
    return x


# numpy.array, until nestad.numpy._joining (which stacks a list holding nestad numbers)
# puts its ``array`` here: _as_operand is needed below the modules that can stack.
_array = _np.array


def _plain_operand(x, name):
    """x for a numpy function called directly (no primitive, which would check it)."""
    if x.__class__ is not _np.ndarray and isinstance(x, _np.ndarray):
        raise subclass_error(x, f"nestad.numpy.{name}")
    return x


def _full_index(index, ndim):
    """``index`` as a tuple with any Ellipsis spelled out for an ndim-array, so that extra
    trailing axes (batch axes moved to the end) are left alone by it."""
    index = index if isinstance(index, tuple) else (index,)
    if not builtins.any(i is Ellipsis for i in index):
        return index
    used = builtins.sum(1 if i is not None and not (isinstance(i, _np.ndarray) and i.dtype == bool)
                        else (i.ndim if i is not None else 0) for i in index if i is not Ellipsis)
    k = [j for j, i in enumerate(index) if i is Ellipsis][0]
    return index[:k] + (slice(None),) * (ndim - used) + index[k + 1:]


def _is_basic(index):
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, _np.integer, slice)) for p in parts)


def _indexed_shape(shape, index):
    """The shape of x[index] for an x of ``shape`` (indexing a broadcast scalar, no copy of x)."""
    return _np.broadcast_to(_np.zeros(()), shape)[index].shape


def _winners(index, shape):
    """For x[index] = v: where an entry of (broadcast) v is the one that stays.  numpy's
    assignment keeps the last of repeated entries of an advanced index.  None for a basic
    index, which never repeats an entry."""
    if _is_basic(index):
        return None
    ishape = _indexed_shape(shape, index)
    ids = _np.arange(int(_np.prod(ishape))).reshape(ishape)
    last = _np.full(shape, -1)
    last[index] = ids
    return last[index] == ids


def _norm_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis
