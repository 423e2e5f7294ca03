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
The recurrences (``exp``, ``log``, division by a jet, ``sin``/``cos``, ``sinh``/``cosh``)
are pushed forward (``_pushed``): once a coefficient is complete its terms go into every
higher one at once, one product and one sum per order on slices of the stacks.

Past order 1, on float64 stacks, each recurrence and each Cauchy product (elementwise, or
of stacks of matrices) is applied as one primitive of ``nestad.series`` (``SERIES_EXP``...,
``Fused``): the same numbers in one equation of a staged program, which numba compiles as
loops, where the spelled-out rule held five equations per order, each an array with its
temporaries.  Their spelled-out versions (``_exp_composed``...) are what every transform
applies to them.
"""
import numpy as np

from . import registry, series
from .batching import BATCH_RULES
from .numpy._kernel import _is_basic, _shape
from .numpy._joining import concatenate
from .numpy._plumbing import broadcast_to, expand_dims, reshape, sum as _sum, transpose
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


def _plain(x):
    return x.__class__ in (np.ndarray, float, int) or isinstance(x, np.generic)


def linear(prim, X, carried, params, K):
    """A primitive linear in its arguments jointly: its batch rule on the stacks."""
    if prim.qualname not in BATCH_RULES:
        return None
    if (prim is _ADD or prim is _SUBTRACT) and not all(carried):
        out = _shifted(prim, X, carried)
        if out is not None:
            return out
    like = _like(X, carried)
    return _batch(prim, [x if c else constant(x, K, like) for x, c in zip(X, carried)],
                  [True] * len(X), params)


def _shifted(prim, X, carried):
    """``x + c``, ``c + x``, ``x - c`` with ``c`` a value of no run here that is no plain
    constant (a traced value, another run's): only the primal row moves, two calls
    (``x[:1] + c`` and a concatenation) where the constant's stack ``[c, 0, ..., 0]`` took
    two more (its order axis and the zeros joined) besides the sum.  None where ``c``
    broadcasts ``x`` to a larger shape, or for ``c - x`` (every row negated), or for a
    plain constant (its stack is a constant of the program: the sum is one call)."""
    (a, b), (ca, cb) = X, carried
    x, c = (a, b) if ca else (b, a)
    if _plain(c) or not ca and prim is _SUBTRACT:
        return None
    shape = _shape(x)[1:]
    try:
        if np.broadcast_shapes(shape, _shape(c)) != shape:
            return None
    except ValueError:                       # (the batch rule's error, with its message)
        return None
    first = prim.lifted(x[:1], c) if ca else prim.lifted(c, x[:1])
    return concatenate([first, x[1:]], axis=0)


# A sum over a short last axis (at most this long) into at least SHORT_SUM_OUTPUTS numbers
# is spelled as its slices added: numpy reduces a short contiguous last axis one output at a
# time (30 us for the (9, 4, 20, 3) stack of gmm's sum(Qx * Qx, axis=2) at K = 8, 5 us as
# three slices and two adds), and for up to 7 numbers it adds them in this order, so the
# sums are the same bits (up to the sign of a zero sum of -0.0s).
SHORT_SUM, SHORT_SUM_OUTPUTS = 4, 64


def reduce_sum(prim, X, carried, params, K):
    """``sum(x, axis)``: the batch rule on the stack, or over a short last axis its slices
    added (``SHORT_SUM``)."""
    (x,) = X
    shape = _shape(x)[1:]
    axis, n = params['axis'], len(shape)
    axes = tuple(range(n)) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    raw = x
    while isinstance(raw, Perturbed):
        raw = raw.primal
    kind = getattr(getattr(raw, 'dtype', None), 'kind', '')
    if n and tuple(a % n for a in axes) == (n - 1,) and shape[-1] <= SHORT_SUM and kind in 'fc' \
            and (K + 1) * int(np.prod(shape[:-1])) >= SHORT_SUM_OUTPUTS:
        lead = (slice(None),) * n
        part = (lambda i: x[lead + (slice(i, i + 1),)]) if params['keepdims'] else (lambda i: x[lead + (i,)])
        out = part(0)
        for i in range(1, shape[-1]):
            out = out + part(i)
        return out
    return linear(prim, X, carried, params, K)


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
    reads a zero appended to them, never a product with a padding factor).  An
    elementwise product, or a product of stacks of matrices, of float64 stacks past
    order 1 is one fused primitive (``series``)."""
    got = _PAIRS.get(K)
    if got is None:
        got = _PAIRS[K] = _pairs(K)
    i, j, grid = got
    if prim is _MULTIPLY and len(_shape(A)) == len(_shape(B)):
        if K <= PUSHED_ORDERS:
            return _pushed_product(A, B, K)
        if _fuses(A, B):
            return SERIES_MULTIPLY.lifted(A, B, i, j, grid)
    elif prim is _MATMUL and K > 1 and _fuses(A, B) and len(_shape(A)) >= 3 and \
            len(_shape(A)) == len(_shape(B)):
        return SERIES_MATMUL.lifted(A, B, i, j, grid)
    return _cauchy_composed(prim, A, B, i, j, grid, params, K)


def _cauchy_composed(prim, A, B, i, j, grid, params, K):
    if prim is _MULTIPLY and len(_shape(A)) == len(_shape(B)):
        P = prim.lifted(A[i], B[j])                # (pairs, *shape): aligned as they are
    else:
        P = _products(prim, [A[i], B[j]], [True, True], params)
    if K == 1:      # (c0, c1) = (P0, P1 + P2): slices and an add, cheaper than the grid
        return concatenate([P[:1], P[1:2] + P[2:]], axis=0)
    shape = _shape(P)[1:]
    P = concatenate([P, np.zeros((1,) + shape, dtype=_dtype(P))], axis=0)
    return _sum(P[grid], axis=0)


def _multiply_composed(A, B, i, j, grid):
    return _cauchy_composed(_MULTIPLY, A, B, i, j, grid, {}, _shape(A)[0] - 1)


def _matmul_composed(A, B, i, j, grid):
    return _cauchy_composed(_MATMUL, A, B, i, j, grid, {}, _shape(A)[0] - 1)


def _fuses(*stacks):
    """Whether a recurrence or product of these stacks is one fused primitive: Taylor mode
    fuses here (``series.fusing``) and their numbers are all float64 (the loops keep their
    first argument's dtype: other dtypes, and mixed ones, take the spelled-out rules)."""
    if not series.fusing():
        return False
    for x in stacks:
        while isinstance(x, Perturbed):
            x = x.primal
        if getattr(x, 'dtype', None) != np.float64:
            return False
    return True


# Up to this order an elementwise product of two jets is pushed (``_pushed_product``: 2K + 2
# calls, no gather) rather than gathered (two gathers by an index array, a product, two
# slices, a sum and a concatenation at K = 1).  Measured on GradBench's ode and gmm
# (notes/benchmarks.md, branch jet-calls): a few percent faster at K = 1, slower from
# K = 2 on, where the grid's 6 calls are fewer.
PUSHED_ORDERS = 1


def _pushed_product(A, B, K):
    """``c_k = sum_{j=0..k} a_j b_{k-j}`` row by row: ``a_j`` times the rows of B below
    K + 1 - j, added to the rows k = j..K (the pairs summed in j's order, as the
    coefficient-wise product sums them)."""
    acc = A[:1] * B
    rows = [acc[:1]]
    for j in range(1, K + 1):
        acc = acc[1:] + A[j:j + 1] * B[:K + 1 - j]
        rows.append(acc[:1] if j < K else acc)
    return concatenate(rows, axis=0)


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


def _divide_composed(A, B, stacked=True):
    """``q = a / b`` of a jet ``b``: ``q_k = a_k/b_0 + sum_{j=1..k} (-b_j/b_0) q_{k-j}``,
    pushed (the terms of ``q_m`` are ``-b_i/b_0``); ``A`` a stack (``stacked``) or a
    constant, the stacks' ranks equal."""
    K = _shape(B)[0] - 1
    b0 = B[:1]
    U = B[1:] / -b0                                   # -b_i / b_0, i = 1..K
    q0 = _DIVIDE.lifted(A[:1] if stacked else A, b0)
    acc = U * q0                                      # the terms of q_0
    if stacked:
        acc = A[1:] / b0 + acc
    if K == 1:
        return concatenate([q0, acc], axis=0)
    return _pushed(q0, acc, lambda m: U[:K - m], K)


def divide(prim, X, carried, params, K):
    """``q = a / b``: by a constant ``b`` one call; by a jet the recurrence
    (``_divide_composed``), one fused primitive past order 1 where ``a`` is a stack, an
    array or a Python number (then a float64 array: ``b`` is float64)."""
    (a, b), (ca, cb) = X, carried
    if not cb:
        return _batch(prim, X, [True, False], {})
    sa, sb = _shape(a)[1 if ca else 0:], _shape(b)[1:]
    rank = max(len(sa), len(sb))                      # (stacks broadcast with their ranks equal)
    if len(sb) < rank:
        b = reshape(b, (K + 1,) + (1,) * (rank - len(sb)) + sb)
    if ca and len(sa) < rank:
        a = reshape(a, (K + 1,) + (1,) * (rank - len(sa)) + sa)
    elif not ca and sa:
        a = reshape(a, (1,) * (rank - len(sa) + 1) + sa)   # (a constant's order axis)
    elif not ca and a.__class__ in (float, int) and rank and K > 1 and _fuses(b):
        a = np.full((1,) * (rank + 1), float(a))           # (numpy's float64 of the number)
        sa = (1,) * rank
    if K > 1 and (ca or sa) and _fuses(a, b):
        return SERIES_DIVIDE.lifted(a, b, stacked=ca)
    return _divide_composed(a, b, ca)


def _trig_composed(X, W, whole=True, sign=-1, first=True):
    """``sin`` (sign -1, ``first``), ``cos`` (-1, not ``first``), ``sinh``, ``cosh``:
    ``series.sin_cos``, the pair together, with the pair's primals."""
    x0 = X[:1]
    names = ('numpy.sin', 'numpy.cos') if sign < 0 else ('numpy.sinh', 'numpy.cosh')
    s0, c0 = (registry.PRIMITIVES[n].lifted(x0) for n in names)
    return series.sin_cos(X, W, whole, s0, c0, sign, concatenate)[0 if first else 1]


def _recurrence(fused, weight, **params):
    """The stacked rule of a recurrence: ``fused`` (one ``series`` primitive) past order 1
    where it fuses (``_fuses``), else its spelled-out composition; ``weight(m, i)`` its
    grid's weights."""
    def rule(prim, X, carried, ignored, K):
        (X,) = X
        W, whole = _weights(K, X, weight) if K > 1 else (None, True)
        if K > 1 and _fuses(X):
            return fused.lifted(X, W, whole=whole, **params)
        return fused.composed(X, W, whole, **params)
    return rule


def power(prim, X, carried, params, K):
    """``x ** 2``: the Cauchy square (other powers: the recurrences of ``taylor``)."""
    (x, r), (cx, cr) = X, carried
    if cr or not cx or not (r.__class__ in (int, float) or isinstance(r, np.generic)) or r != 2 \
            or not _fits(_MULTIPLY, x, x, K):
        return None
    return cauchy(_MULTIPLY, x, x, {}, K)


def _grid(K, S, weight):
    """Constant weights ``weight(m, i)``, m, i = 1..K - 1, shaped (K - 1, K - 1, 1, ...) to
    broadcast against a stack ``S`` of coefficients (in its dtype)."""
    w = np.array([[weight(m, i) for i in range(1, K)] for m in range(1, K)], dtype=_dtype(S))
    return w.reshape(w.shape + (1,) * (len(_shape(S)) - 1))


def _weights(K, X, weight):
    """(the grid of ``weight`` for the stack ``X``'s recurrence, whether its weighted terms
    fit at once: ``PAIRS_LIMIT``)."""
    return _grid(K, X, weight), (K - 1) * (K - 1) * int(np.prod(_shape(X)[1:])) <= PAIRS_LIMIT


def _pushed(first, acc, terms, K, sign=1):
    """``series.pushed`` on any values (the rows joined by nestad's concatenate)."""
    return series.pushed(first, acc, terms, K, sign, concatenate)


_terms = series.weighted


def _exp_weight(m, i):
    return i / (m + i)


def _log_weight(j, i):
    return j / (j + i)


def _exp_composed(X, W, whole=True):
    """``y = exp(x)``: ``y_k = sum_{m=0..k-1} ((k-m)/k) x_{k-m} y_m``, pushed: the terms of
    ``y_m`` (m >= 1) are ``i/(m+i) x_i`` (i = k - m), one grid ``W`` for every m."""
    K = _shape(X)[0] - 1
    y0 = _EXP.lifted(X[:1])
    acc = X[1:] * y0                                  # the terms of y_0 (weights k/k = 1)
    if K == 1:
        return concatenate([y0, acc], axis=0)
    return _pushed(y0, acc, _terms(W, X[1:], K, whole), K)


def _log_composed(X, W, whole=True):
    """``y = log(x)``: ``y_k = u_k - sum_{j=1..k-1} (j/k) u_{k-j} y_j``, ``u = x / x0``,
    pushed: the terms of ``y_j`` are ``j/(j+i) u_i``."""
    K = _shape(X)[0] - 1
    x0 = X[:1]
    U = X[1:] / x0                                    # u_1..u_K
    y0 = _LOG.lifted(x0)
    if K == 1:
        return concatenate([y0, U], axis=0)
    return _pushed(y0, U, _terms(W, U, K, whole), K, -1)


def _series_batch(prim, values, batched, params):
    """vmap's rule of a fused recurrence: its stacks' order axis is their first, and the
    recurrence runs elementwise over the others, so the batch axis goes second (an
    unbatched stack gets an axis of length 1 there, a grid of weights a last one) and
    comes back first."""
    moved = []
    for j, (v, b) in enumerate(zip(values, batched)):
        if b:
            v = transpose(v, (1, 0) + tuple(range(2, len(_shape(v)))))
        elif j == 0 or j == 1 and prim in _TWO_STACKS:
            v = expand_dims(v, 1)
        elif j == 1:
            v = expand_dims(v, -1)                  # (a grid of weights)
        moved.append(v)
    out = prim.lifted(*moved, **params)
    return transpose(out, (1, 0) + tuple(range(2, len(_shape(out)))))


SERIES_EXP = series.Fused('series_exp', series.exp_plain, series.exp_loops, _exp_composed)
SERIES_LOG = series.Fused('series_log', series.log_plain, series.log_loops, _log_composed)
SERIES_DIVIDE = series.Fused('series_divide', series.divide_plain, series.divide_loops, _divide_composed)
SERIES_TRIG = series.Fused('series_trig', series.trig_plain, series.trig_loops, _trig_composed)
SERIES_MULTIPLY = series.Fused('series_multiply', series.multiply_plain, series.multiply_loops,
                               _multiply_composed)
SERIES_MATMUL = series.Fused('series_matmul', series.matmul_plain, series.matmul_loops, _matmul_composed)
for _fused in (SERIES_EXP, SERIES_LOG, SERIES_DIVIDE, SERIES_TRIG, SERIES_MULTIPLY, SERIES_MATMUL):
    BATCH_RULES[_fused.qualname] = _series_batch

_TWO_STACKS = (SERIES_DIVIDE, SERIES_MULTIPLY, SERIES_MATMUL)
_MULTIPLY = registry.PRIMITIVES['numpy.multiply']
_DIVIDE = registry.PRIMITIVES['numpy.divide']
_EXP = registry.PRIMITIVES['numpy.exp']
_LOG = registry.PRIMITIVES['numpy.log']
_ADD = registry.PRIMITIVES['numpy.add']
_SUBTRACT = registry.PRIMITIVES['numpy.subtract']
_MATMUL = registry.PRIMITIVES['numpy.matmul']

for _names, _rule in (
        (('numpy.add', 'numpy.subtract', 'numpy.negative', 'numpy.sum_to', 'numpy.broadcast_to',
          'numpy.reshape', 'numpy.transpose', 'numpy.scatter_add', 'numpy.at.set', 'numpy.at.add',
          'numpy.astype', 'numpy.concatenate', 'numpy.cumsum'), linear),
        (('numpy.sum',), reduce_sum),
        (('numpy.getitem',), getitem),
        (('numpy.where',), select),
        (('numpy.multiply', 'numpy.matmul', 'numpy.inner', 'numpy.vdot', 'numpy.dot',
          'numpy.vecdot', 'numpy.convolve', 'numpy.correlate'), product),
        (('numpy.divide',), divide),
        (('numpy.power',), power),
        (('numpy.exp',), _recurrence(SERIES_EXP, _exp_weight)),
        (('numpy.log',), _recurrence(SERIES_LOG, _log_weight)),
        (('numpy.sin',), _recurrence(SERIES_TRIG, _exp_weight, sign=-1, first=True)),
        (('numpy.cos',), _recurrence(SERIES_TRIG, _exp_weight, sign=-1, first=False)),
        (('numpy.sinh',), _recurrence(SERIES_TRIG, _exp_weight, sign=1, first=True)),
        (('numpy.cosh',), _recurrence(SERIES_TRIG, _exp_weight, sign=1, first=False))):
    for _n in _names:
        STACKED_RULES[_n] = _rule
