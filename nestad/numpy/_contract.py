"""Contractions: einsum (every form numpy takes), dot of any dimensions, tensordot, kron,
cross, outer.

``einsum`` is one primitive for any number of operands.  Its subscripts are first spelled
out explicitly for the operands' shapes (ellipses become letters, an implicit output is
numpy's: the labels that occur once, in alphabetical order, after the ellipsis axes), so
the rules read one form.  einsum is linear in each operand: the JVP of operand k is the
same einsum with the tangent in its place and the tangent's batch axes as new leading
labels; the VJP of operand k is the einsum of the sensitivity with the other operands,
then summed where operand k was broadcast (a label of size 1 against a larger one),
broadcast where operand k's label is summed in no other term, and put back on the diagonal
(with identity matrices) where a label repeats in operand k ('ii->i', 'ii').

``dot`` is a primitive with numpy's own values for operands of any dimensions; its rules
are matmul's for up to 2 dimensions and tensordot's for more.  ``tensordot``, ``kron``,
``cross`` and ``outer`` follow numpy's own algorithms step by step with differentiable
functions (transposes, reshapes, 2-D dot, elementwise products), so their values are
numpy's bit for bit and their rules come from those functions.
"""
import builtins
import math
import operator
import warnings

import numpy as _np

from ._elementwise import _MULTIPLY_JVPS, _MULTIPLY_VJPS, multiply, negative, subtract
from ._indexing import astype, getitem
from ._joining import stack
from ._kernel import _as_operand, _define, _nbatch, _ndim, _shape
from ._plumbing import broadcast_to, expand_dims, moveaxis, reshape, sum, sum_to, transpose
from ._products import _EINSUM, _inner, _matmul_jvp, _matmul_vjp_a, _matmul_vjp_b, _product_rule
from ..arrays import PerArgument
from ..values import primal_value

__all__ = ['einsum', 'dot', 'tensordot', 'kron', 'cross', 'outer'] + \
    (['vecdot'] if hasattr(_np, 'vecdot') else [])

_LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'


# ---------------------------------------------------------------- einsum: subscripts

def _fresh(spec, n):
    """n letters that do not occur in ``spec``."""
    free = [c for c in _LETTERS if c not in spec]
    if n > len(free):
        raise ValueError("nestad.numpy.einsum: too many axes to label (52 letters in all)")
    return ''.join(free[:n])


def _sublist_letters(sub):
    out = ''
    for s in sub:
        if s is Ellipsis:
            out += '...'
            continue
        s = operator.index(s)
        if not 0 <= s < 52:
            raise ValueError("subscript is not within the valid range [0, 52)")
        out += _LETTERS[s]
    return out


def _from_sublists(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [sublistout]) as (subscripts, operands)."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None
    ops = args[0::2]
    spec = ','.join(_sublist_letters(sub) for sub in args[1::2])
    if out is not None:
        spec += '->' + _sublist_letters(out)
    return spec, ops


def _explicit(subscripts, shapes):
    """numpy's subscripts for operands of ``shapes``, spelled out: no ellipsis, explicit
    output.  Raises numpy's errors for ellipses that do not fit."""
    s = subscripts.replace(' ', '')
    ins, arrow, out = s.partition('->')
    terms = ins.split(',')
    if len(terms) != len(shapes):
        more = 'more' if len(shapes) > len(terms) else 'fewer'
        raise ValueError(f"{more} operands provided to einstein sum function than specified "
                         "in the subscripts string")
    extra = []
    for i, (t, shape) in enumerate(zip(terms, shapes)):
        k = len(shape) - (len(t) - 3) if '...' in t else 0
        if k < 0:
            raise ValueError("einstein sum subscripts string contains too many subscripts "
                             f"for operand {i}")
        extra.append(k)
    ell = _fresh(s, builtins.max(extra, default=0))
    terms = [t.replace('...', ell[len(ell) - k:] if k else '') for t, k in zip(terms, extra)]
    if not arrow:
        letters = ''.join(terms)
        once = sorted(c for c in set(letters) if c not in ell and letters.count(c) == 1)
        out = ell + ''.join(once)
    elif '...' in out:
        out = out.replace('...', ell)
    elif ell:
        raise ValueError("output has more dimensions than subscripts given in einstein sum, "
                         "but no '...' ellipsis provided to broadcast the extra dimensions.")
    return ','.join(terms) + '->' + out


def _split(spec):
    ins, out = spec.split('->')
    return ins.split(','), out


# ---------------------------------------------------------------- einsum: the primitive

def _einsum_plain(*ops, spec, optimize):
    return _np.einsum(spec, *ops, optimize=optimize)


def _einsum_jvp(k):
    def jvp(t, *ops, out, spec, optimize):
        ins, res = _split(spec)
        batch = _fresh(spec, _nbatch(t, ops[k]))        # the tangent's batch axes lead
        terms = [batch + s if i == k else s for i, s in enumerate(ins)]
        return _einsum(*[t if i == k else o for i, o in enumerate(ops)],
                       spec=','.join(terms) + '->' + batch + res, optimize=optimize)
    return jvp


def _einsum_vjp(k):
    def vjp(g, *ops, out, spec, optimize):
        ins, res = _split(spec)
        target = ins[k]
        size = dict(zip(target, _shape(ops[k])))
        others = [(s, o) for i, (s, o) in enumerate(zip(ins, ops)) if i != k]
        avail = set(res).union(*(set(s) for s, _ in others))
        labels = ''.join(dict.fromkeys(target))          # operand k's labels, once each
        present = ''.join(c for c in labels if c in avail)
        r = _einsum(g, *[o for _, o in others],
                    spec=','.join([res] + [s for s, _ in others]) + '->' + present,
                    optimize=optimize)
        # one axis per label: size 1 where the label is summed in operand k alone
        have = iter(_shape(r))
        r = reshape(r, [next(have) if c in avail else 1 for c in labels])
        want = tuple(size[c] for c in labels)
        summed = tuple(i for i, (h, w) in enumerate(zip(_shape(r), want)) if w == 1 and h != 1)
        if summed:                                        # operand k was broadcast there
            r = sum(r, axis=summed, keepdims=True)
        r = broadcast_to(r, want)
        if len(labels) < len(target):                     # a repeated label: its diagonal
            fresh = iter(_fresh(spec, len(target) - len(labels)))
            spelled, eyes, eye_terms, seen = '', [], [], set()
            dtype = _np.result_type(primal_value(r))
            for c in target:
                if c in seen:
                    f = next(fresh)
                    spelled += f
                    eyes.append(_np.eye(size[c], dtype=dtype))
                    eye_terms.append(c + f)
                else:
                    seen.add(c)
                    spelled += c
            r = _einsum(r, *eyes, spec=','.join([labels] + eye_terms) + '->' + spelled,
                        optimize=optimize)
        return r
    return vjp


_einsum = _define('einsum', _einsum_plain, jvps=PerArgument(_einsum_jvp),
                  vjps=PerArgument(_einsum_vjp))


def einsum(*operands, optimize=False):
    """numpy.einsum: subscripts with ellipses, implicit output, repeated labels (diagonals,
    traces), any number of operands, or the interleaved form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``; ``optimize`` is passed to numpy."""
    if operands and isinstance(operands[0], str):
        spec, ops = operands[0], list(operands[1:])
    else:
        spec, ops = _from_sublists(operands)
    ops = [_as_operand(o) for o in ops]
    return _einsum(*ops, spec=_explicit(spec, [_shape(o) for o in ops]), optimize=optimize)


# ---------------------------------------------------------------- dot

def _dot_jvp_a(t, a, b, out):
    return _dot(t, b)                 # the tangent's batch axes lead, like a's own axes


def _dot_jvp_b(t, a, b, out):
    if _ndim(b) == 1:                 # sum over the last axes: inner(t, a)
        return _inner(t, a)
    nb, na = _nbatch(t, b), _ndim(a) - 1
    r = _dot(a, t)                    # a[:-1] + batch + ...: batch axes to the front
    return transpose(r, list(range(na, na + nb)) + list(range(na)) + list(range(na + nb, _ndim(r))))


def _dot_vjp_a(g, a, b, out):
    if _ndim(b) == 1:
        return multiply(expand_dims(g, -1), b)
    rest = _ndim(b) - 1               # b's axes other than the summed one, at g's end
    return tensordot(g, b, axes=(list(range(_ndim(g) - rest, _ndim(g))),
                                 [i for i in range(_ndim(b)) if i != _ndim(b) - 2]))


def _dot_vjp_b(g, a, b, out):
    lead = list(range(_ndim(a) - 1))
    r = tensordot(a, g, axes=(lead, lead))             # the summed axis first
    return r if _ndim(b) == 1 else moveaxis(r, 0, -2)


def _by_rank(low, high):
    """matmul's rules for operands of up to 2 dimensions, tensordot's beyond."""
    def rule(s, a, b, out):
        return (low if _ndim(a) <= 2 and _ndim(b) <= 2 else high)(s, a, b, out)
    return rule


# dot: values from numpy.dot itself (its summation order and signed zeros differ from
# matmul's: numpy.dot([-0.], [1.]) is -0.0); rules of multiply for a 0-d operand.
_dot = _define('dot', _np.dot,
               jvps=(_product_rule(_MULTIPLY_JVPS[0], _by_rank(_matmul_jvp(0), _dot_jvp_a)),
                     _product_rule(_MULTIPLY_JVPS[1], _by_rank(_matmul_jvp(1), _dot_jvp_b))),
               vjps=(_product_rule(_MULTIPLY_VJPS[0], _by_rank(_matmul_vjp_a, _dot_vjp_a)),
                     _product_rule(_MULTIPLY_VJPS[1], _by_rank(_matmul_vjp_b, _dot_vjp_b))))


def dot(a, b):
    """numpy.dot: a product for 0-d operands, the sum over a's last axis and b's
    second-to-last (its only one if 1-D) otherwise."""
    return _dot(_as_operand(a), _as_operand(b))


# ---------------------------------------------------------------- tensordot, kron, cross, outer

def _axes_list(axes):
    try:
        return list(axes)
    except TypeError:
        return [axes]


def tensordot(a, b, axes=2):
    """numpy.tensordot, by numpy's own steps: both operands transposed and reshaped to
    matrices, one 2-D dot, reshaped back."""
    a, b = _as_operand(a), _as_operand(b)
    try:
        iter(axes)
    except TypeError:
        axes_a, axes_b = list(range(-axes, 0)), list(range(0, axes))
    else:
        axes_a, axes_b = axes
    axes_a, axes_b = _axes_list(axes_a), _axes_list(axes_b)
    sa, sb = _shape(a), _shape(b)
    nda, ndb = len(sa), len(sb)
    if len(axes_a) != len(axes_b) or builtins.any(sa[i] != sb[j] for i, j in zip(axes_a, axes_b)):
        raise ValueError("shape-mismatch for sum")
    axes_a = [i + nda if i < 0 else i for i in axes_a]
    axes_b = [j + ndb if j < 0 else j for j in axes_b]
    keep_a = [k for k in range(nda) if k not in axes_a]
    keep_b = [k for k in range(ndb) if k not in axes_b]
    at = reshape(transpose(a, keep_a + axes_a),
                 (math.prod(sa[k] for k in keep_a), math.prod(sa[k] for k in axes_a)))
    bt = reshape(transpose(b, axes_b + keep_b),
                 (math.prod(sb[k] for k in axes_b), math.prod(sb[k] for k in keep_b)))
    return reshape(dot(at, bt), [sa[k] for k in keep_a] + [sb[k] for k in keep_b])


def kron(a, b):
    """numpy.kron, by numpy's steps: interleaved singleton axes, a broadcast product, one
    reshape."""
    a, b = _as_operand(a), _as_operand(b)
    if _ndim(a) < _ndim(b):
        a = reshape(a, (1,) * (_ndim(b) - _ndim(a)) + _shape(a))
    nda, ndb = _ndim(a), _ndim(b)
    if nda == 0 or ndb == 0:
        return multiply(a, b)
    as_ = (1,) * builtins.max(0, ndb - nda) + _shape(a)
    bs = (1,) * builtins.max(0, nda - ndb) + _shape(b)
    a2 = reshape(a, [d for s in as_ for d in (s, 1)])
    b2 = reshape(b, [d for s in bs for d in (1, s)])
    return reshape(multiply(a2, b2), tuple(x * y for x, y in zip(as_, bs)))


def outer(a, b):
    """numpy.outer: both operands flattened."""
    return multiply(reshape(_as_operand(a), (-1, 1)), reshape(_as_operand(b), (1, -1)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy.cross of 3- (or 2-) element vectors along the given axes, by numpy's formulas."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _as_operand(a), _as_operand(b)
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    if (na == 2 or nb == 2) and _np.lib.NumpyVersion(_np.__version__) >= '2.0.0':
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of "
                      "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
                      DeprecationWarning, stacklevel=2)
    dtype = _np.promote_types(_np.result_type(primal_value(a)), _np.result_type(primal_value(b)))
    a, b = astype(a, dtype), astype(b, dtype)
    a0, a1 = getitem(a, (Ellipsis, 0)), getitem(a, (Ellipsis, 1))
    b0, b1 = getitem(b, (Ellipsis, 0)), getitem(b, (Ellipsis, 1))
    if na == 2 and nb == 2:
        return subtract(multiply(a0, b1), multiply(a1, b0))
    if na == 3 and nb == 3:
        a2, b2 = getitem(a, (Ellipsis, 2)), getitem(b, (Ellipsis, 2))
        c = [subtract(multiply(a1, b2), multiply(a2, b1)),
             subtract(multiply(a2, b0), multiply(a0, b2)),
             subtract(multiply(a0, b1), multiply(a1, b0))]
    elif na == 2:
        b2 = getitem(b, (Ellipsis, 2))
        c = [multiply(a1, b2), negative(multiply(a0, b2)),
             subtract(multiply(a0, b1), multiply(a1, b0))]
    else:
        a2 = getitem(a, (Ellipsis, 2))
        c = [negative(multiply(a2, b1)), multiply(a2, b0),
             subtract(multiply(a0, b1), multiply(a1, b0))]
    shape = _np.broadcast_shapes(_shape(c[0]), _shape(c[1]), _shape(c[2]))
    out = stack([broadcast_to(x, shape) for x in c], axis=-1)
    return moveaxis(out, -1, axisc)


# ---------------------------------------------------------------- vecdot (numpy >= 2)

def _vecdot_jvp(k):
    def jvp(t, a, b, out):
        x = (a, b)[k]
        nb = _nbatch(t, x)
        missing = _ndim(out) + 1 - _ndim(x)        # singletons after the batch axes
        if nb and missing > 0:
            t = reshape(t, _shape(t)[:nb] + (1,) * missing + _shape(x))
        return _vecdot(t, b) if k == 0 else _vecdot(a, t)
    return jvp


def _vecdot_vjp(k):
    def vjp(g, a, b, out):
        return sum_to(expand_dims(g, -1) * (b, a)[k], _shape((a, b)[k]))
    return vjp


if hasattr(_np, 'vecdot'):
    # vecdot over the last axis: numpy's own values (a gufunc), multiply-and-sum's rules
    _vecdot = _define('vecdot', lambda a, b: _np.vecdot(a, b),
                      jvps=(_vecdot_jvp(0), _vecdot_jvp(1)), vjps=(_vecdot_vjp(0), _vecdot_vjp(1)))

    def vecdot(x1, x2, /, *, axis=-1):
        """numpy.vecdot of real arrays: the sum of products along ``axis``, broadcasting."""
        x1, x2 = _as_operand(x1), _as_operand(x2)
        return _vecdot(moveaxis(x1, axis, -1), moveaxis(x2, axis, -1))


_EINSUM.append(einsum)     # (matmul's outer-product adjoint under vmap, _products)
