"""Products: matmul, inner and vdot, with the rules dot and einsum (_contract) share."""
import builtins

import numpy as _np

from ..values import Batched as _Batched
from ._kernel import _as_operand, _define, _nbatch, _ndim, _shape
from ._elementwise import _MULTIPLY_JVPS, _MULTIPLY_VJPS
from ._plumbing import expand_dims, ravel, reshape, squeeze, sum_to, swapaxes, transpose


# ---------------------------------------------------------------- products

def _matmul_jvp(k):
    """JVP for operand k of matmul: promote 1-D operands to matrices as matmul does, give
    the tangent the result's stack rank (singletons after its batch axes), multiply, and
    drop the promoted axes again."""
    def jvp(t, a, b, out):
        x, other = (a, b) if k == 0 else (b, a)
        if _ndim(x) == 1 and _ndim(t) > 1 and _ndim(other) <= 2:
            # A batched tangent of a vector (a Hessian's or Jacobian's basis directions):
            # the directions are the rows of one matrix product, t @ b or t @ a^T (one
            # GEMM), not a stack of one-row (or one-column) products, which numpy loops
            # over (600 ms against 30 ms at n = 1000).
            return matmul(t, other if k == 0 or _ndim(other) == 1 else swapaxes(other, -1, -2))
        a2 = expand_dims(a, -2) if _ndim(a) == 1 else a
        b2 = expand_dims(b, -1) if _ndim(b) == 1 else b
        x, x2 = (a, a2) if k == 0 else (b, b2)
        nb = _nbatch(t, x)
        t2 = reshape(t, _shape(t)[:nb] + _shape(x2))
        missing = builtins.max(_ndim(a2), _ndim(b2)) - _ndim(x2)
        if nb and missing > 0:
            t2 = reshape(t2, _shape(t)[:nb] + (1,) * missing + _shape(x2))
        r = matmul(t2, b2) if k == 0 else matmul(a2, t2)
        if _ndim(b) == 1:
            r = squeeze(r, -1)
        if _ndim(a) == 1:
            r = squeeze(r, -2 if _ndim(b) != 1 else -1)
        return r
    return jvp


def _as_matrices(g, a, b):
    """Promote 1-D operands (and the sensitivity) to matrices, as matmul does."""
    a2 = expand_dims(a, 0) if _ndim(a) == 1 else a
    b2 = expand_dims(b, -1) if _ndim(b) == 1 else b
    g2 = g
    if _ndim(b) == 1:
        g2 = expand_dims(g2, -1)
    if _ndim(a) == 1:
        g2 = expand_dims(g2, -2)
    return g2, a2, b2


# A vector times a matrix (or a matrix times a vector) has the adjoints of a matrix-vector
# product and an outer product, written as such: fewer applications (and no transposed
# stack of 1-row matrices for a per-example gradient under vmap).

# einsum is defined in _contract, which builds on this module; it fills this in.
_EINSUM = []


def _outer(u, v):
    """u v^T of two vectors.  Under vmap (a per-example weight gradient) one einsum: one
    batched application, where expand_dims, matmul and its outer-product rule made five;
    otherwise a column times a row, which numba's backend compiles (it has no einsum).
    The same numbers either way: a product of one term, no sum."""
    if u.__class__ is _Batched or v.__class__ is _Batched:
        return _EINSUM[0]('i,j->ij', u, v)
    return matmul(expand_dims(u, -1), expand_dims(v, 0))


def _matmul_vjp_a(g, a, b, out):
    if _ndim(a) == 1 and _ndim(b) == 2:
        return matmul(b, g)
    if _ndim(a) == 2 and _ndim(b) == 1:
        return _outer(g, b)
    g2, a2, b2 = _as_matrices(g, a, b)
    return reshape(sum_to(matmul(g2, swapaxes(b2, -1, -2)), _shape(a2)), _shape(a))


def _matmul_vjp_b(g, a, b, out):
    if _ndim(a) == 1 and _ndim(b) == 2:
        return _outer(a, g)
    if _ndim(a) == 2 and _ndim(b) == 1:
        return matmul(g, a)
    g2, a2, b2 = _as_matrices(g, a, b)
    return reshape(sum_to(matmul(swapaxes(a2, -1, -2), g2), _shape(b2)), _shape(b))


_matmul = _define('matmul', _np.matmul, jvps=(_matmul_jvp(0), _matmul_jvp(1)),
                  vjps=(_matmul_vjp_a, _matmul_vjp_b))


def matmul(a, b):
    return _matmul(_as_operand(a), _as_operand(b))


def _product_rule(mul_rule, rule):
    """dot and inner multiply when an operand is 0-d; otherwise ``rule`` applies."""
    def either(s, a, b, out):
        return (mul_rule if _ndim(a) == 0 or _ndim(b) == 0 else rule)(s, a, b, out)
    return either


def _inner_jvp_b(t, a, b, out):
    # inner(a, t) puts t's batch axes after a's leading axes: move them to the front
    nb, na = _nbatch(t, b), _ndim(a) - 1
    r = _inner(a, t)
    return transpose(r, list(range(na, na + nb)) + list(range(na)) + list(range(na + nb, _ndim(r))))


def _inner_vjp(k):
    # as matrices: out (A, B) = a (A, n) b (B, n)^T
    def vjp(g, a, b, out):
        n = _shape(a)[-1]
        g2 = reshape(g, (int(_np.prod(_shape(a)[:-1])), int(_np.prod(_shape(b)[:-1]))))
        if k == 0:
            return reshape(matmul(g2, reshape(b, (_shape(g2)[1], n))), _shape(a))
        return reshape(matmul(transpose(g2), reshape(a, (_shape(g2)[0], n))), _shape(b))
    return vjp


_inner = _define('inner', _np.inner,
                 jvps=(_product_rule(_MULTIPLY_JVPS[0], lambda t, a, b, out: _inner(t, b)),
                       _product_rule(_MULTIPLY_JVPS[1], _inner_jvp_b)),
                 vjps=(_product_rule(_MULTIPLY_VJPS[0], _inner_vjp(0)),
                       _product_rule(_MULTIPLY_VJPS[1], _inner_vjp(1))))


def inner(a, b):
    """numpy.inner: the sum over the last axes; shape a.shape[:-1] + b.shape[:-1]."""
    return _inner(_as_operand(a), _as_operand(b))


def _vdot_jvp(k):
    def jvp(t, a, b, out):
        x, other = (a, b) if k == 0 else (b, a)
        return matmul(reshape(t, _shape(t)[:_nbatch(t, x)] + (int(_np.prod(_shape(x))),)), ravel(other))
    return jvp


# vdot: numpy.vdot's own values (vdot([-0.], [1.]) is +0.0, dot's is -0.0)
_vdot = _define('vdot', _np.vdot, jvps=(_vdot_jvp(0), _vdot_jvp(1)),
                vjps=(lambda g, a, b, out: reshape(g * ravel(b), _shape(a)),
                      lambda g, a, b, out: reshape(g * ravel(a), _shape(b))))


def vdot(a, b):
    """numpy.vdot of real arrays: the sum of products of the flattened operands."""
    return _vdot(_as_operand(a), _as_operand(b))
