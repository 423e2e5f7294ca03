"""Joining: concatenate (any number of arrays) and what is built on it (stack, hstack,
vstack, ``array`` of a list of nestad numbers)."""
import builtins

import numpy as _np

from ..tracer import is_tracer
from ..values import Perturbed
from . import _kernel
from ._kernel import _as_operand, _define, _nbatch, _ndim, _shape
from ._indexing import _getitem
from ._plumbing import atleast_1d, atleast_2d, expand_dims, ravel, reshape


# ---------------------------------------------------------------- joining

def _concat_jvp(tangents, *xs, out, axis):
    present = [(t, x) for t, x in zip(tangents, xs) if t is not None]
    t0, x0 = present[0]
    batch = _shape(t0)[:_nbatch(t0, x0)]
    full = [t if t is not None else _np.zeros(batch + _shape(x)) for t, x in zip(tangents, xs)]
    ax = (axis % _ndim(xs[0])) - _ndim(xs[0])
    return _concatenate(*full, axis=ax)


def _concat_vjp(k):
    def vjp(g, *xs, out, axis):
        ax = axis % _ndim(xs[0])
        start = builtins.sum(_shape(x)[ax] for x in xs[:k])
        index = (slice(None),) * ax + (slice(start, start + _shape(xs[k])[ax]),)
        return _getitem(g, index=index)
    return vjp


class _ConcatVJPs:
    """vjps[k] for any k (concatenate takes any number of arrays)."""
    def __getitem__(self, k):
        return _concat_vjp(k)


_concatenate = _define('concatenate', lambda *xs, axis: _np.concatenate(xs, axis=axis),
                       vjps=_ConcatVJPs(), jvp_joint=_concat_jvp)


def concatenate(arrays, axis=0):
    arrays = [atleast_1d(_as_operand(a)) for a in arrays]
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    return _concatenate(*arrays, axis=axis)


def stack(arrays, axis=0):
    arrays = [_as_operand(a) for a in arrays]
    n = _ndim(arrays[0]) + 1
    return concatenate([expand_dims(a, axis % n) for a in arrays], axis=axis % n)


def hstack(arrays):
    arrays = [atleast_1d(_as_operand(a)) for a in arrays]
    return concatenate(arrays, axis=0 if _ndim(arrays[0]) == 1 else 1)


def vstack(arrays):
    return concatenate([atleast_2d(_as_operand(a)) for a in arrays], axis=0)


def array(obj, dtype=None):
    """Like numpy.array, but a (nested) list holding nestad numbers becomes a nestad array."""
    if isinstance(obj, Perturbed) or is_tracer(obj):
        return obj
    if isinstance(obj, (list, tuple)) and _holds_perturbed(obj):
        return stack([array(o) if isinstance(o, (list, tuple)) else o for o in obj])
    return _np.array(obj, dtype=dtype)


asarray = array
_kernel._array = array        # lists given to any nestad.numpy function are made arrays by it


def _holds_perturbed(obj):
    """Does a (nested) list hold nestad numbers, perturbed or traced (staged code)?"""
    return builtins.any(_holds_perturbed(o) if isinstance(o, (list, tuple))
                        else isinstance(o, Perturbed) or is_tracer(o) for o in obj)


def one_tangent_at_a_time(rule, i):
    """A JVP rule for argument i that takes one tangent (its axes counted from the left),
    applied to each tangent of a batch in turn and the results stacked."""
    def jvp(t, *xs, out, **params):
        shape = _shape(xs[i])
        batch = _shape(t)[:len(_shape(t)) - len(shape)]
        if not batch:
            return rule(t, *xs, out=out, **params)
        count = int(_np.prod(batch))
        if count == 0:                 # no direction: an empty batch of tangents
            return _np.zeros(batch + _shape(out))
        flat = reshape(t, (count,) + shape)
        terms = [rule(flat[k], *xs, out=out, **params) for k in range(count)]
        return reshape(stack(terms), batch + _shape(out))
    return jvp
