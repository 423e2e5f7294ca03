"""Indexing and its adjoint (scatter_add), the functional updates ``at[index].set/add``,
and casts (``astype``, ``copy``).  Under batch axes, a rule moves them to the end, where
no index can touch or displace them (``_batch_last``)."""
import numpy as _np

from .. import arrays as _arrays
from ..arrays import is_array
from ..errors import InvalidInputError
from ..tracer import StagingError as _StagingError, _refuse_concrete, is_tracer
from ..values import Batched as _Batched, Perturbed, primal_value
from ._kernel import (_as_operand, _define, _full_index, _indexed_shape, _is_basic, _nbatch,
                      _ndim, _plain_operand, _shape, _winners)
from ._plumbing import _moveaxis_n, sum_to, transpose  # noqa: F401
from ._selection import where


def _scatter_plain(g, index, shape):
    """zeros(shape) with g added at ``index`` (entries hit twice get both)."""
    dtype = _np.result_type(g, float)
    if _is_basic(index):                 # a basic index never selects an entry twice
        out = _np.zeros(shape, dtype=dtype)
        out[index] = g
        return out
    size = int(_np.prod(shape))
    flat = _np.arange(size).reshape(shape)[index]
    g = _np.broadcast_to(g, flat.shape)
    return _np.bincount(flat.ravel(), weights=g.ravel(), minlength=size).reshape(shape).astype(dtype)


# Under batch axes, index (or scatter) with the batch axes moved to the end, where no
# index can touch or displace them, then move them back to the front.
def _batch_last(fn, t, nb, index, ndim):
    """fn(t, index, batch) for a tangent t with nb leading batch axes: they are moved to the
    end, where ``index`` (spelled out for an ndim-array) cannot touch or displace them, and
    moved back to the front of the result."""
    if nb == 0:
        return fn(t, index, ())
    r = fn(_moveaxis_n(t, nb, last=True), _full_index(index, ndim), _shape(t)[:nb])
    return _moveaxis_n(r, nb, last=False)


def _front_index(index, nb, ndim):
    """A basic index (ints, slices, None, Ellipsis) for an ndim-array, under nb leading
    batch axes that it leaves in front; None for an advanced index (which may move
    axes: those keep ``_batch_last``).  Indexing in place keeps a batched tangent
    contiguous, where moving its axes last and back made every later pass over it (and
    the scatter's copy) a strided one."""
    if not _is_basic(index):
        return None
    return (slice(None),) * nb + _full_index(index, ndim)


def _getitem_jvp(t, x, out, index):
    nb = _nbatch(t, x)
    front = _front_index(index, nb, _ndim(x)) if nb else None
    if front is not None:
        return _getitem(t, index=front)
    return _batch_last(lambda t, i, batch: _getitem(t, index=i), t, nb, index, _ndim(x))


def _scatter_jvp(t, g, out, index, shape):
    nb = _nbatch(t, g)
    front = _front_index(index, nb, len(shape)) if nb else None
    # (g may be broadcast into the indexed entries, x.at[index].add(v)'s jvp: then its
    # batch axes would meet the entries' axes, and it keeps _batch_last)
    if front is not None and _shape(t)[nb:] == _indexed_shape(tuple(shape), index):
        return _scatter(t, index=front, shape=_shape(t)[:nb] + tuple(shape))
    return _batch_last(lambda t, i, batch: _scatter(t, index=i, shape=tuple(shape) + batch),
                       t, nb, index, len(shape))


# _scatter: the adjoint of indexing (adds g into zeros of ``shape`` at ``index``).
_scatter = _define('scatter_add', _scatter_plain, jvps=(_scatter_jvp,),
                   vjps=(lambda h, g, out, index, shape: _getitem(h, index=index),))

_getitem = _define('getitem', lambda x, index: x[index], jvps=(_getitem_jvp,),
                   vjps=(lambda g, x, out, index: _scatter(g, index=index, shape=_shape(x)),))


def _plain_index(index):
    """Indices may hold nestad numbers only as plain values (an index has no derivative)."""
    if isinstance(index, tuple):
        return tuple(_plain_index(i) for i in index)
    if index.__class__ is _Batched:
        raise InvalidInputError(
            "an index batched by nestad.vmap (x[i] with i mapped) is not supported yet: each member "
            "would select other entries. Select with a one-hot product (x @ (arange(n) == i)) or "
            "nestad.numpy.where, or loop over the indices outside vmap.")
    if isinstance(index, Perturbed):
        raise InvalidInputError("an array index cannot carry a perturbation")
    if is_tracer(index):
        if index.var.scalar:
            _refuse_concrete("using as an index (range(), a list index, a shape)", index)
        raise _StagingError(
            "indexing with a traced array: the index (and so the result's shape) depends on "
            "the data, which a staged program cannot have. Use nestad.numpy.where(mask, x, "
            "0.0) to keep shapes fixed, or pass the index as a static argument.")
    if isinstance(index, list):
        return _np.asarray(index)
    return index


def getitem(x, index):
    return _getitem(_as_operand(x), index=_plain_index(index))


# ---------------------------------------------------------------- functional updates


def _set_plain(x, v, index):
    out = _np.array(x, dtype=_np.result_type(x, v))     # promoted: v is never truncated
    out[index] = v
    return out


def _set_vjp_v(g, x, v, out, index):
    # the entries of v that were written (the last of repeated ones) get the sensitivity
    won = _winners(index, _shape(x))
    gv = _getitem(g, index=index)
    return sum_to(gv if won is None or won.all() else where(won, gv, 0.0), _shape(v))


# _set: x with x[index] = v, as a new array (x.at[index].set(v)).
_set = _define(
    'at.set', _set_plain,
    jvps=(lambda t, x, v, out, index: _batch_last(
              lambda t, i, batch: _set(t, 0.0, index=i), t, _nbatch(t, x), index, _ndim(x)),
          lambda t, x, v, out, index: _batch_last(
              lambda t, i, batch: _set(_np.zeros(_shape(x) + batch), t, index=i),
              t, _nbatch(t, v), index, _ndim(x))),
    vjps=(lambda g, x, v, out, index: _set(g, 0.0, index=index), _set_vjp_v))


def _add_at_plain(x, v, index):
    out = _np.array(x, dtype=_np.result_type(x, v))
    _np.add.at(out, index, v)                            # repeated entries accumulate
    return out


# _add_at: x with v added at index, repeats accumulating (x.at[index].add(v), numpy.add.at).
_add_at = _define(
    'at.add', _add_at_plain,
    jvps=(lambda t, x, v, out, index: t,
          lambda t, x, v, out, index: _scatter_jvp(t, v, None, index, _shape(x))),
    vjps=(lambda g, x, v, out, index: g,
          lambda g, x, v, out, index: sum_to(_getitem(g, index=index), _shape(v))))


class _At:
    """``x.at[index]`` as in JAX: updates that return a new array (nestad arrays cannot be
    assigned to: their derivative needs the old values).  Differentiable in every mode with
    respect to x and the values."""
    __slots__ = ('x',)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, index):
        return _AtIndex(self.x, _plain_index(index))


class _AtIndex:
    __slots__ = ('x', 'index')

    def __init__(self, x, index):
        self.x, self.index = x, index

    def get(self):
        """x[index]."""
        return _getitem(self.x, index=self.index)

    def set(self, values):
        """x with x[index] = values (the last of repeated entries stays, as in numpy)."""
        return _set(self.x, _as_operand(values), index=self.index)

    def add(self, values):
        """x with values added at index; repeated entries accumulate (numpy.add.at)."""
        return _add_at(self.x, _as_operand(values), index=self.index)

    def multiply(self, values):
        """x with x[index] multiplied by values; an index may not repeat an entry."""
        won = _winners(self.index, _shape(self.x))
        if won is not None and not won.all():
            raise InvalidInputError("x.at[index].multiply(values): the index repeats an entry; "
                                    "multiply the repeated values together first")
        ones = _np.ones(_shape(self.x), dtype=_np.result_type(primal_value(self.x), 1.0))
        return self.x * _set(ones, _as_operand(values), index=self.index)


def at(x):
    """``at(x)[index].set(v)`` (``.add``, ``.multiply``, ``.get``): the functional update of
    ``x.at[index]`` for any array, plain ndarrays included (which have no ``.at``)."""
    x = _as_operand(x)
    if not (is_array(x) or isinstance(x, _np.ndarray)):
        raise InvalidInputError(f"nestad.numpy.at needs an array, not a {type(x).__name__}")
    return _At(x)


def copy(x):
    """numpy.copy.  nestad arrays are never modified in place, so a nestad value is its own copy."""
    x = _as_operand(x)
    return x if isinstance(x, Perturbed) else _np.copy(_plain_operand(x, 'copy'))


def _astype_plain(x, dtype):
    return x.astype(dtype) if isinstance(x, _np.ndarray) else _np.dtype(dtype).type(x)


def _cast(x, dtype):
    return x if _np.result_type(primal_value(x)) == dtype else _astype(x, dtype=dtype)


# _astype: a change of float precision; the tangent follows the new dtype, the cotangent
# goes back to the argument's float dtype (an integer argument's stays float).
_astype = _define(
    'astype', _astype_plain,
    jvps=(lambda t, x, out, dtype: _cast(t, dtype),),
    vjps=(lambda g, x, out, dtype: _cast(g, _np.result_type(primal_value(x)))
          if _np.result_type(primal_value(x)).kind == 'f' else g,))


def astype(x, dtype, copy=True):
    """x as another dtype.  A float dtype (float32, float64...) casts the value and its
    derivative.  An integer or boolean dtype gives numpy's values without derivative: the
    cast is piecewise constant (as floor is), so its derivative is zero wherever it exists.
    A complex dtype is refused (nestad's derivatives are real)."""
    x = _as_operand(x)
    if is_tracer(x):                     # a staged cast (no derivative to keep or drop)
        return _cast(x, _np.dtype(dtype))
    if not isinstance(x, Perturbed):
        return _np.asarray(_plain_operand(x, 'astype')).astype(dtype, copy=copy)
    dtype = _np.dtype(dtype)
    if dtype.kind in 'biu':
        return astype(primal_value(x), dtype)
    if dtype.kind != 'f':
        raise InvalidInputError(
            f"astype({dtype}) on a nestad value would drop its derivative (nestad's derivatives "
            "are real). Keep a float dtype, or use nestad.primal_value(x).astype(...) if you want "
            "the values without the derivative.")
    return _cast(x, dtype)


_arrays.CAST[0] = astype      # (a rule's tangent in its output's dtype: nestad.arrays)
