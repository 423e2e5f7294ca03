"""Batch rules of nestad.numpy's primitives (``nestad.batching``), by kind.

A rule ``rule(prim, values, batched, params)`` gets the stacked values (``batched[i]``:
``values[i]`` has the leading batch axis; the others are the same for every member) and
returns the stacked result.  Members' axes are one to the right of their own in a stacked
value.  Primitives not listed here run member by member (``batching.per_member``,
counted in ``batching.FALLBACKS``).
"""
import numpy as _np

from .. import batching, registry
from ..batching import elementwise, member_ndim as _member_ndim, on_stacked as _on_stacked, pad as _pad
from ..values import Batched
from . import _contract
from ._reductions import max as _max
from ._indexing import _batch_last, getitem
from ._joining import stack
from ._kernel import _ndim, _shape
from ._plumbing import broadcast_to, expand_dims, moveaxis, reshape, squeeze, transpose
from ._selection import where

RULES = batching.BATCH_RULES


class _Ops:
    """What nestad.batching uses to move batch axes (nestad.numpy's functions)."""
    getitem = staticmethod(getitem)
    stack = staticmethod(stack)
    moveaxis = staticmethod(moveaxis)
    expand_dims = staticmethod(expand_dims)
    broadcast_to = staticmethod(broadcast_to)
    where = staticmethod(where)
    reshape = staticmethod(reshape)
    max = staticmethod(_max)
    ndim = staticmethod(_ndim)
    shape = staticmethod(_shape)


batching.ops = _Ops


def _to_batched(v, b, size):
    """``v`` with a batch axis (a value every member shares is broadcast)."""
    return v if b else broadcast_to(expand_dims(v, 0), (size,) + _shape(v))


def _axes(axis, n):
    """A member's ``axis`` (None, int or tuple) as the stacked value's axes."""
    if axis is None:
        return tuple(range(1, n + 1))
    if n == 0 and not isinstance(axis, tuple) and axis in (0, -1):
        return ()                           # numpy reduces a 0-d array over axis 0 as over none
    if isinstance(axis, tuple):
        return tuple(a % n + 1 for a in axis)
    return axis % n + 1


def reduction(prim, values, batched, params):
    (x,), n = values, _member_ndim(values[0], True)
    return _on_stacked(prim, values, {**params, 'axis': _axes(params['axis'], n)})


def along_axis(prim, values, batched, params):
    """cumsum, cumprod: one member axis, given as a negative axis (unchanged when a batch
    axis is added in front)."""
    (x,) = values
    return prim.lifted(x, **params)


def _reshape(prim, values, batched, params):
    (x,) = values
    return _on_stacked(prim, values, {'shape': (_shape(x)[0],) + tuple(params['shape'])})


def _transpose(prim, values, batched, params):
    (x,) = values
    n = _member_ndim(x, True)
    axes = params['axes']
    axes = tuple(range(n))[::-1] if axes is None else tuple(a % n for a in axes)
    return _on_stacked(prim, values, {'axes': (0,) + tuple(a + 1 for a in axes)})


def _broadcast_to(prim, values, batched, params):
    (x,) = values
    shape = tuple(params['shape'])
    x = _pad(x, True, len(shape))
    return prim.lifted(x, shape=(_shape(x)[0],) + shape)


def _sum_to(prim, values, batched, params):
    (x,) = values
    shape, m = tuple(params['shape']), _shape(x)[1:]
    lead = len(m) - len(shape)
    if lead:
        x = batching_sum(x, tuple(range(1, lead + 1)), False)
    axes = tuple(i + 1 for i, (a, s) in enumerate(zip(m[lead:], shape)) if s == 1 and a != 1)
    return batching_sum(x, axes, True) if axes else x


def batching_sum(x, axes, keepdims):
    return _SUM.lifted(x, axis=axes, keepdims=keepdims)


# Indexing: the batch axis moved to the end, where no index can touch or displace it (as
# the tangents' batch axes in the jvps), then back to the front.

def _getitem(prim, values, batched, params):
    (x,) = values
    return _batch_last(lambda t, i, batch: prim.lifted(t, index=i), x, 1, params['index'],
                       _member_ndim(x, True))


def _scatter_add(prim, values, batched, params):
    (g,), shape = values, tuple(params['shape'])
    return _batch_last(lambda t, i, batch: prim.lifted(t, index=i, shape=shape + batch), g, 1,
                       params['index'], len(shape))


def _update(prim, values, batched, params):
    """x.at[index].set(v), .add(v): x and v both with the batch axis (moved last)."""
    size = batching.batch_size(values, batched)
    x, v = (_to_batched(a, b, size) for a, b in zip(values, batched))
    v_last = moveaxis(v, 0, -1)
    return _batch_last(lambda t, i, batch: prim.lifted(t, v_last, index=i), x, 1, params['index'],
                       _member_ndim(x, True))


def _concatenate(prim, values, batched, params):
    size = batching.batch_size(values, batched)
    xs = [_to_batched(v, b, size) for v, b in zip(values, batched)]
    axis = params['axis'] % _member_ndim(xs[0], True) + 1
    return prim.lifted(*xs, axis=axis)


def _matrix_product(prim, values, batched, params):
    """matmul and stacked linear algebra of two operands (solve): the members' stack
    axes broadcast, the batch axis leading; a 1-d member (matmul) as a matrix."""
    (a, b), (ba, bb) = values, batched
    if prim is _MATMUL and ba != bb:
        # one operand shared by every member: numpy's matmul broadcasts the batch axis
        # as one more stack axis where the shared operand has at most 2 axes (a weight
        # matrix: one 2-D product for the whole batch, not a stack of small ones)
        if ba and _ndim(b) <= 2:
            return _on_stacked(prim, values, params)
        if bb and _ndim(a) <= 2:
            if _member_ndim(b, True) >= 2:
                return _on_stacked(prim, values, params)
            return _on_stacked(prim, (b, _transpose_shared(a)), params)   # a member vector b: b^T a^T
    va = _member_ndim(a, ba) == 1
    vb = _member_ndim(b, bb) == 1
    if va:
        a = expand_dims(a, -2)
    if vb:
        b = expand_dims(b, -1)
    n = max(_member_ndim(a, ba), _member_ndim(b, bb))
    a, b = _pad(a, ba, n), _pad(b, bb, n)
    if not ba:
        a = reshape(a, (1,) * (n + 1 - _ndim(a)) + _shape(a))
    if not bb:
        b = reshape(b, (1,) * (n + 1 - _ndim(b)) + _shape(b))
    if prim is _MATMUL and _shape(a)[-1] == 1 and _shape(b)[-2] == 1:
        # outer products (a per-example gradient's x g^T), the same numbers by a product
        # without a sum: numpy's matmul loops over the stack for them; einsum forms a
        # stack of them fastest (1.5-2x a broadcasting multiply, whose inner loops are short)
        if n == 2 and ba and bb:
            sa, sb = _shape(a), _shape(b)
            out = _on_stacked(_EINSUM, (reshape(a, sa[:2]), reshape(b, (sb[0], sb[2]))),
                              {'spec': 'zi,zj->zij', 'optimize': False})
        else:
            out = _MULTIPLY.lifted(a, b)
    else:
        out = prim.lifted(a, b, **params)
    if va and vb:
        return reshape(out, _shape(out)[:-2])
    if vb:
        return squeeze(out, -1)
    return squeeze(out, -2) if va else out


def _transpose_shared(a):
    return a if _ndim(a) < 2 else transpose(a)


def _dot(prim, values, batched, params):
    """dot is matmul for members of at most 2 axes (and the product for a 0-d one)."""
    if max(_member_ndim(v, b) for v, b in zip(values, batched)) > 2:
        return batching.per_member(prim, values, batched, params)
    if any(_member_ndim(v, b) == 0 for v, b in zip(values, batched)):
        return elementwise(registry.PRIMITIVES['numpy.multiply'], values, batched, {})
    return _matrix_product(registry.PRIMITIVES['numpy.matmul'], values, batched, {})


def _vecdot(prim, values, batched, params):
    """Sums over the last axis, broadcasting the others: elementwise alignment."""
    return elementwise(prim, values, batched, params)


def _einsum(prim, values, batched, params):
    spec = params['spec']
    ins, out = spec.split('->')
    letter = _contract._fresh(spec, 1)
    terms = [letter + s if b else s for s, b in zip(ins.split(','), batched)]
    return prim.lifted(*values, spec=','.join(terms) + '->' + letter + out,
                       optimize=params['optimize'])


def _stacked(prim, values, batched, params):
    """Linear algebra of one stack of matrices: the batch axis is one more stack axis."""
    return prim.lifted(*values, **params)


_SUM = registry.PRIMITIVES['numpy.sum']
_MATMUL, _MULTIPLY = registry.PRIMITIVES['numpy.matmul'], registry.PRIMITIVES['numpy.multiply']
_EINSUM = registry.PRIMITIVES['numpy.einsum']
_ELEMENTWISE = ['add', 'subtract', 'multiply', 'divide', 'power', 'maximum', 'minimum',
                'logaddexp', 'logaddexp2', 'mod', 'fmod', 'float_power', 'negative', 'where',
                'astype', 'reciprocal', 'absolute', 'sech2'] + \
    [npfn.__name__ for _, npfn in registry.ELEMENTWISE]
for _name in _ELEMENTWISE:
    if f'numpy.{_name}' in registry.PRIMITIVES:
        RULES[f'numpy.{_name}'] = elementwise
for _name in ('sum', 'max', 'min', 'prod'):
    RULES[f'numpy.{_name}'] = reduction
RULES.update({
    'numpy.cumsum': along_axis, 'numpy.cumprod': along_axis,
    'numpy.reshape': _reshape, 'numpy.transpose': _transpose,
    'numpy.broadcast_to': _broadcast_to, 'numpy.sum_to': _sum_to, 'numpy.getitem': _getitem,
    'numpy.scatter_add': _scatter_add, 'numpy.at.set': _update, 'numpy.at.add': _update,
    'numpy.concatenate': _concatenate, 'numpy.matmul': _matrix_product, 'numpy.dot': _dot,
    'numpy.vecdot': _vecdot, 'numpy.einsum': _einsum, 'numpy.linalg.solve': _matrix_product,
})
for _name in ('inv', 'det', 'slogdet', 'cholesky', 'eigh', 'eigvalsh', 'eig', 'eigvals',
              'svd', 'svdvals', 'pinv'):
    RULES[f'numpy.linalg.{_name}'] = _stacked
