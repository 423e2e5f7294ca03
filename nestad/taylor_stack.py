"""Taylor rules of array primitives on a stacked order axis (``nestad.taylor``'s array jets).

An array jet's coefficients ``x0, ..., xK`` are one array of shape (K + 1, *shape).  A
rule here gets each argument that carries the run as that array (a constant of the run
as itself) and returns the result's, in a number of array calls that does not grow with
K (O(K) for the recurrences), where the rules of ``taylor.RULES`` make one call per
coefficient (linear functions) or per pair of coefficients (products).  A rule returns
None to leave an application to those.

The order axis is a batch axis: coefficient k of a linear function of the arguments is
the function of their coefficients k, so the linear and shape primitives, and products
with a constant, are vmap's batch rules (``batching.BATCH_RULES``) applied to the stacks
(a constant, in a function linear in it, as its coefficients ``[c, 0, ..., 0]``).  A
product of two jets is the Cauchy product ``c_k = sum_{j=0..k} a_j b_{k-j}``: every pair
(j, k - j) is gathered into one batch and multiplied in one call, and the pairs of each k
summed (padding reads a zero appended to the products, so that no padding is ever
multiplied: ``0 * inf`` would give nan where the coefficient-wise product gives inf).
``exp`` and ``log`` run their recurrences with one step per order, on slices of the stacks.
"""
import numpy as np

from . import registry
from .batching import BATCH_RULES
from .numpy._kernel import _is_basic, _shape
from .numpy._joining import concatenate
from .numpy._plumbing import broadcast_to, expand_dims, reshape, sum as _sum
from .values import Perturbed

STACKED_RULES = {}     # qualified primitive name -> rule(prim, X, carried, params, K)


def _batch(prim, values, batched, params):
    return BATCH_RULES[prim.qualname](prim, values, batched, params)


def _dtype(x):
    """The floating dtype of a value's numbers (float64 for integers and bools)."""
    while isinstance(x, Perturbed):
        x = x.primal
    d = getattr(x, 'dtype', None)
    return d if d is not None and d.kind == 'f' else np.dtype(float)


def constant(c, K, like):
    """A constant's coefficients ``[c, 0, ..., 0]`` (K + 1, *shape): a plain array for a
    plain constant (a constant of a staged program too).  A Python number takes the dtype
    of ``like``, a jet's stack, as numpy's arithmetic would give it (float32 stays float32)."""
    shape = _shape(c)
    if c.__class__ is float or c.__class__ is int:           # (shaped to broadcast as it is)
        out = np.zeros((K + 1,) + (1,) * (len(_shape(like)) - 1), dtype=_dtype(like))
        out[0] = c
        return out
    if c.__class__ is np.ndarray or isinstance(c, np.generic):
        out = np.zeros((K + 1,) + shape, dtype=_dtype(c))
        out[0] = c
        return out
    return concatenate([expand_dims(c, 0), np.zeros((K,) + shape, dtype=_dtype(c))], axis=0)


def _like(X, carried):
    return next(x for x, c in zip(X, carried) if c)


def linear(prim, X, carried, params, K):
    """A primitive linear in its arguments jointly: its batch rule on the stacks."""
    if prim.qualname not in BATCH_RULES:
        return None
    like = _like(X, carried)
    return _batch(prim, [x if c else constant(x, K, like) for x, c in zip(X, carried)],
                  [True] * len(X), params)


def getitem(prim, X, carried, params, K):
    """``x[index]``: the order axis in front of a basic index, or of one advanced one
    (whose axes then stay where they were), needs no moving of axes."""
    index = params['index']
    parts = index if isinstance(index, tuple) else (index,)
    if sum(1 for p in parts if not _is_basic(p)) > 1:
        return linear(prim, X, carried, params, K)
    return prim.lifted(X[0], index=(slice(None),) + parts)


def select(prim, X, carried, params, K):
    """``where(c, x, y)``: the condition is a value of no run; every order chosen at once."""
    like = _like(X, carried)
    return _batch(prim, [X[0]] + [x if c else constant(x, K, like) for x, c in zip(X[1:], carried[1:])],
                  [False] + [True] * (len(X) - 1), params)


def _pairs(K):
    """The Cauchy product's pairs (j, k - j), k = 0..K, j = 0..k: the row of each in each
    factor's stack, and a (K + 1) x (K + 1) grid whose column k lists coefficient k's
    pairs (by their position) and, below them, the position one past the last pair (a
    zero appended to the products)."""
    rows = [(j, k - j) for k in range(K + 1) for j in range(k + 1)]
    grid = np.full((K + 1, K + 1), len(rows), dtype=np.intp)
    n = 0
    for k in range(K + 1):
        grid[:k + 1, k] = np.arange(n, n + k + 1)
        n += k + 1
    i, j = (np.array(r, dtype=np.intp) for r in zip(*rows))
    return i, j, grid


_PAIRS = {}


def cauchy(prim, A, B, params, K):
    """``c_k = sum_{j=0..k} prim(a_j, b_{k-j})`` for k = 0..K, from the stacks of two jets:
    the (K + 1)(K + 2)/2 products in one call, then each k's summed (the grid's padding
    reads a zero appended to them, never a product with a padding factor)."""
    got = _PAIRS.get(K)
    if got is None:
        got = _PAIRS[K] = _pairs(K)
    i, j, grid = got
    if prim is _MULTIPLY and len(_shape(A)) == len(_shape(B)):
        P = prim.lifted(A[i], B[j])                # (pairs, *shape): aligned as they are
    else:
        P = _products(prim, [A[i], B[j]], [True, True], params)
    if K == 1:      # (c0, c1) = (P0, P1 + P2): slices and an add, cheaper than the grid
        return concatenate([P[:1], P[1:2] + P[2:]], axis=0)
    shape = _shape(P)[1:]
    P = concatenate([P, np.zeros((1,) + shape, dtype=_dtype(P))], axis=0)
    return _sum(P[grid], axis=0)


# The Cauchy product holds all (K + 1)(K + 2)/2 products at once, where the coefficient-
# wise rule holds one at a time: past this many numbers (8 MB of float64) it is left to
# that rule (large arrays, whose arithmetic outweighs the calls; O(K) memory).
PAIRS_LIMIT = 1 << 20


def _fits(prim, A, B, K):
    sa, sb = _shape(A)[1:], _shape(B)[1:]
    if prim is _MULTIPLY:
        out = int(np.prod(np.broadcast_shapes(sa, sb)))
    else:                          # (a bilinear result has at most size(a) size(b) numbers)
        out = int(np.prod(sa)) * int(np.prod(sb))
    return (K + 1) * (K + 2) // 2 * max(out, int(np.prod(sa)), int(np.prod(sb))) <= PAIRS_LIMIT


def _products(prim, values, batched, params):
    """``prim`` of stacked operands (a leading axis on the ``batched`` ones): vmap's batch
    rule, except that a matrix product folds the leading axes into one stack axis (one
    2-d product with a shared matrix, else one 3-d stack), which numba's ``@`` takes and
    the batch rule's 4-d stacks it does not."""
    if prim is _MATMUL:
        out = _folded_matmul(*values, *batched)
        if out is not None:
            return out
    return _batch(prim, values, batched, params)


def _folded_matmul(a, b, ba, bb):
    sa, sb = _shape(a), _shape(b)
    ma, mb = (sa[1:] if ba else sa), (sb[1:] if bb else sb)
    if len(ma) < 2 or len(mb) < 2:
        return None                                  # (vectors: the batch rule)
    if not bb and len(mb) == 2:                      # a shared matrix: one 2-d product
        return reshape(_MATMUL.lifted(reshape(a, (-1, ma[-1])), b), sa[:-1] + (mb[-1],))
    if not ba and len(ma) == 2:                      # (on the left: one stack of products)
        return reshape(_MATMUL.lifted(a, reshape(b, (-1,) + mb[-2:])), sb[:-2] + (ma[-2], mb[-1]))
    if ma[:-2] != mb[:-2]:
        return None                                  # (broadcast stacks: the batch rule)
    n = (sa if ba else sb)[0]
    if not ba:
        a = broadcast_to(a, (n,) + sa)
    if not bb:
        b = broadcast_to(b, (n,) + sb)
    out = _MATMUL.lifted(reshape(a, (-1,) + ma[-2:]), reshape(b, (-1,) + mb[-2:]))
    return reshape(out, (n,) + ma[:-1] + (mb[-1],))


def product(prim, X, carried, params, K):
    """A product (``*``, matmul, dot...): with a constant one call on the stack, of two
    jets the Cauchy product."""
    if prim.qualname not in BATCH_RULES:
        return None
    (a, b), (ca, cb) = X, carried
    if not cb:
        return _products(prim, [a, b], [True, False], params)
    if not ca:
        return _products(prim, [a, b], [False, True], params)
    if not _fits(prim, a, b, K):
        return None
    return cauchy(prim, a, b, params, K)


def divide(prim, X, carried, params, K):
    """``a / b`` by a constant ``b``: one call (a jet divisor: the recurrence of ``taylor``)."""
    if carried[1]:
        return None
    return _batch(prim, X, [True, False], {})


def power(prim, X, carried, params, K):
    """``x ** 2``: the Cauchy square (other powers: the recurrences of ``taylor``)."""
    (x, r), (cx, cr) = X, carried
    if cr or not cx or not (r.__class__ in (int, float) or isinstance(r, np.generic)) or r != 2 \
            or not _fits(_MULTIPLY, x, x, K):
        return None
    return cauchy(_MULTIPLY, x, x, {}, K)


def _weights(K, X):
    """[1, 2, ..., K] shaped (K, 1, ..., 1) against a stack ``X`` of K coefficients (in its dtype)."""
    return np.arange(1.0, K + 1, dtype=_dtype(X)).reshape((K,) + (1,) * (len(_shape(X)) - 1))


def exp(prim, X, carried, params, K):
    """``y = exp(x)``: ``k y_k = sum_{m=0..k-1} (k-m) x_{k-m} y_m``, one step per order on
    the stack of the y's so far against ``[K x_K, ..., 1 x_1]``'s last k rows.  (The
    stacks stay in order, not reversed views: numba's reductions take contiguous arrays.)"""
    (X,) = X
    y = expand_dims(prim.lifted(X[0]), 0)
    jx = X[K:0:-1] * _weights(K, X)[::-1]             # K x_K, ..., 1 x_1
    for k in range(1, K + 1):
        yk = jx[K - 1:] * y if k == 1 else \
            _sum(jx[K - k:] * y, axis=0, keepdims=True) * (1.0 / k)
        y = concatenate([y, yk], axis=0)
    return y


def log(prim, X, carried, params, K):
    """``y = log(x)``: ``x0 y_k = x_k - (1/k) sum_{j=1..k-1} j y_j x_{k-j}``, one step per
    order on the stacks of the ``j y_j`` so far and of the x's reversed."""
    (X,) = X
    x0 = X[0]
    r = 1.0 / x0
    ys = [expand_dims(prim.lifted(x0), 0), X[1:2] * r]
    if K > 1:
        rev = X[::-1]                                  # x_K, ..., x_0
        jy = ys[1]
        for k in range(2, K + 1):
            s = _sum(jy * rev[K - k + 1:K], axis=0, keepdims=True)
            yk = (X[k:k + 1] - s * (1.0 / k)) * r
            ys.append(yk)
            if k < K:
                jy = concatenate([jy, yk * float(k)], axis=0)
    return concatenate(ys, axis=0)


_MULTIPLY = registry.PRIMITIVES['numpy.multiply']
_MATMUL = registry.PRIMITIVES['numpy.matmul']

for _names, _rule in (
        (('numpy.add', 'numpy.subtract', 'numpy.negative', 'numpy.sum_to', 'numpy.broadcast_to',
          'numpy.reshape', 'numpy.transpose', 'numpy.scatter_add', 'numpy.at.set', 'numpy.at.add',
          'numpy.astype', 'numpy.sum', 'numpy.concatenate', 'numpy.cumsum'), linear),
        (('numpy.getitem',), getitem),
        (('numpy.where',), select),
        (('numpy.multiply', 'numpy.matmul', 'numpy.inner', 'numpy.vdot', 'numpy.dot',
          'numpy.vecdot', 'numpy.convolve', 'numpy.correlate'), product),
        (('numpy.divide',), divide),
        (('numpy.power',), power),
        (('numpy.exp',), exp),
        (('numpy.log',), log)):
    for _n in _names:
        STACKED_RULES[_n] = _rule
