"""Taylor mode's recurrences and Cauchy products as primitives (``taylor_stack``'s exp,
log, sin/cos, sinh/cosh, division by a jet, and products of two jets).

A recurrence on a stack of coefficients (K + 1, *shape) costs about five array calls per
order when it is spelled with array primitives (``taylor_stack``), and a Cauchy product
six with its gathers: a staged jet of order 10 holds some fifty equations per exp, and
numba compiles each of them as array code with temporaries.  Here each is one ``Fused``
primitive:

* its plain implementation (``plain``, numpy) does the same calls in the same order as
  the spelled-out version, so it gives the same bits, in one Python function;
* its ``loops`` (``plain.numba``, which the numba backend compiles in place of ``plain``)
  are the recurrence as loops over orders and elements, the terms summed in the same
  order (no temporaries; numba compiles one small function per signature);
* every transform (forward, reverse, batching, Taylor mode) applies its ``composed``
  function, the recurrence spelled with array primitives, to its arguments, so a fused
  recurrence nests as the spelled-out one does and needs no rules of its own but a batch
  rule (``taylor_stack``: its order axis is the stack's first, a batch axis goes second).

Eager jets, ``nd.trace`` and the numba and tiered backends fuse; ``stage``'s Python
backend traces the spelled-out rules (``spelled_out``), which run faster there as
straight-line code.  ``W`` is a recurrence's (K - 1) x (K - 1) grid of weights
(``taylor_stack._grid``): a constant of the program.  ``whole``: the weighted terms made
at once as one (K - 1) x (K - 1) grid (else order by order, for stacks past
``taylor_stack.PAIRS_LIMIT``).
"""
import threading

import numpy as np

from .arrays import ArrayPrimitive, apply

_local = threading.local()


class spelled_out:
    """``with spelled_out():`` Taylor mode spells its recurrences and products with array
    primitives instead of applying ``Fused`` ones (``stage``'s Python backend traces so:
    its straight-line code runs the spelled-out equations about 10% faster than the
    loops of the plain functions, where numba compiles the fused ones into loops)."""
    __slots__ = ()

    def __enter__(self):
        _local.depth = getattr(_local, 'depth', 0) + 1

    def __exit__(self, *exc):
        _local.depth -= 1


def fusing():
    """Whether Taylor mode applies ``Fused`` primitives here (not ``spelled_out``)."""
    return not getattr(_local, 'depth', 0)


class Fused(ArrayPrimitive):
    """An array primitive that every transform applies as ``composed`` (array primitives
    spelling the same function); plain evaluation and staged programs see one operation."""
    __slots__ = ('composed',)

    def __init__(self, name, plain, loops, composed):
        super().__init__(name, plain, namespace=None)
        plain.numba = loops
        self.composed = composed

        def lifted(*args, **params):
            return apply(self, args, params)
        lifted.__name__ = name
        self.lifted = lifted

    def forward(self, top, args, carried, primals, params):
        return self.composed(*args, **params)

    reverse = forward


# ---------------------------------------------------------------- numpy (plain)

def pushed(first, acc, terms, K, sign=1, join=np.concatenate):
    """``[first, y_1, ..., y_K]`` of a recurrence ``y_k = acc_k + sign sum_{m=1..k-1}
    terms(m)[k-m-1] y_m``, pushed forward: ``acc`` holds the rows k = 1..K with the terms
    of the orders so far; once ``y_m`` (its first row) is complete, its terms go into the
    rows above at once.  Two calls per order (a product and a sum), on slices (views); the
    terms are summed in m's order, as the coefficient-wise rules do.  ``join``: numpy's
    concatenate here, the array primitives' where ``taylor_stack`` spells a recurrence."""
    rows = [first]
    for m in range(1, K):
        ym = acc[:1]
        rows.append(ym)
        t = terms(m) * ym
        acc = acc[1:] + t if sign > 0 else acc[1:] - t
    rows.append(acc)
    return join(rows, axis=0)


def weighted(W, S, K, whole):
    """``terms(m)`` for ``pushed``: the rows ``W[m - 1, i - 1] s_i``, i = 1..K - m, of the
    coefficients ``S = [s_1, ..., s_K]``: one product of the whole (K - 1) x (K - 1) grid of
    weights ``W`` (``whole``), else one product per order."""
    if whole:
        Z = W * S[:K - 1]
        return lambda m: Z[m - 1, :K - m]
    return lambda m: W[m - 1, :K - m] * S[:K - m]


def exp_plain(X, W, whole=True):
    K = X.shape[0] - 1
    y0 = np.exp(X[:1])
    S = X[1:]
    acc = S * y0
    return pushed(y0, acc, weighted(W, S, K, whole), K, 1)


def log_plain(X, W, whole=True):
    K = X.shape[0] - 1
    x0 = X[:1]
    U = X[1:] / x0
    y0 = np.log(x0)
    return pushed(y0, U, weighted(W, U, K, whole), K, -1)


def divide_plain(A, B, stacked=True):
    """``A / B`` of a jet ``B`` (K >= 2); ``A`` a jet's stack, or (``stacked`` False) a
    constant array with a leading axis of length 1; the stacks' ranks equal."""
    K = B.shape[0] - 1
    b0 = B[:1]
    U = B[1:] / -b0
    q0 = np.true_divide(A[:1] if stacked else A, b0)
    acc = U * q0
    if stacked:
        acc = A[1:] / b0 + acc
    return pushed(q0, acc, lambda m: U[:K - m], K, 1)


def sin_cos(X, W, whole, s0, c0, sign, join=np.concatenate):
    """``s, c = sin(x), cos(x)`` (sign -1) or ``sinh(x), cosh(x)`` (sign +1) together:
    ``s_k = sum_{m<k} ((k-m)/k) x_{k-m} c_m``, ``c_k = sign sum_{m<k} ((k-m)/k) x_{k-m}
    s_m``, both pushed with exp's terms: four calls per order for the two."""
    K = X.shape[0] - 1
    acc_s = X[1:] * c0
    acc_c = X[1:] * (s0 if sign > 0 else -s0)
    rows_s, rows_c = [s0], [c0]
    if K > 1:
        terms = weighted(W, X[1:], K, whole)
        for m in range(1, K):
            sm, cm = acc_s[:1], acc_c[:1]
            rows_s.append(sm)
            rows_c.append(cm)
            z = terms(m)
            acc_s = acc_s[1:] + z * cm
            acc_c = acc_c[1:] + z * sm if sign > 0 else acc_c[1:] - z * sm
    rows_s.append(acc_s)
    rows_c.append(acc_c)
    return join(rows_s, axis=0), join(rows_c, axis=0)


def trig_plain(X, W, whole=True, sign=-1, first=True):
    """sin (``sign`` -1, ``first``), cos (-1, not first), sinh (+1, first), cosh."""
    x0 = X[:1]
    if sign < 0:
        s0, c0 = np.sin(x0), np.cos(x0)
    else:
        s0, c0 = np.sinh(x0), np.cosh(x0)
    return sin_cos(X, W, whole, s0, c0, sign)[0 if first else 1]


# ---------------------------------------------------------------- loops (numba)
# The same sums in the same order, one element at a time: ``acc_k`` starts from order 0's
# term and adds order m's for m = 1..k-1, each term ``(w x) y`` grouped as the arrays do.
# (numba compiles these in place of the plain functions: no helper functions of their own.)

def exp_loops(X, W, whole=True):
    K = X.shape[0] - 1
    x = np.ascontiguousarray(X).reshape((K + 1, X.size // (K + 1)))
    w = np.ascontiguousarray(W).reshape((K - 1, K - 1))
    y = np.empty_like(x)
    for e in range(x.shape[1]):
        y0 = np.exp(x[0, e])
        y[0, e] = y0
        for k in range(1, K + 1):
            acc = x[k, e] * y0
            for m in range(1, k):
                acc = acc + (w[m - 1, k - m - 1] * x[k - m, e]) * y[m, e]
            y[k, e] = acc
    return y.reshape(X.shape)


def log_loops(X, W, whole=True):
    K = X.shape[0] - 1
    x = np.ascontiguousarray(X).reshape((K + 1, X.size // (K + 1)))
    w = np.ascontiguousarray(W).reshape((K - 1, K - 1))
    y = np.empty_like(x)
    u = np.empty_like(x)
    for e in range(x.shape[1]):
        x0 = x[0, e]
        y[0, e] = np.log(x0)
        for k in range(1, K + 1):
            u[k, e] = x[k, e] / x0
            acc = u[k, e]
            for m in range(1, k):
                acc = acc - (w[m - 1, k - m - 1] * u[k - m, e]) * y[m, e]
            y[k, e] = acc
    return y.reshape(X.shape)


def divide_loops(A, B, stacked=True):
    K = B.shape[0] - 1
    shape = np.broadcast_shapes(A.shape[1:], B.shape[1:])
    b = np.ascontiguousarray(np.broadcast_to(B, (K + 1,) + shape))
    b = b.reshape((K + 1, b.size // (K + 1)))
    a = np.ascontiguousarray(np.broadcast_to(A, (A.shape[0],) + shape))
    a = a.reshape((a.shape[0], b.shape[1]))
    q = np.empty_like(b)
    for e in range(b.shape[1]):
        b0 = b[0, e]
        nb0 = -b0
        q0 = a[0, e] / b0
        q[0, e] = q0
        for k in range(1, K + 1):
            acc = (b[k, e] / nb0) * q0
            if stacked:
                acc = a[k, e] / b0 + acc
            for m in range(1, k):
                acc = acc + (b[k - m, e] / nb0) * q[m, e]
            q[k, e] = acc
    return q.reshape((K + 1,) + shape)


def trig_loops(X, W, whole=True, sign=-1, first=True):
    K = X.shape[0] - 1
    x = np.ascontiguousarray(X).reshape((K + 1, X.size // (K + 1)))
    w = np.ascontiguousarray(W).reshape((K - 1, K - 1))
    s = np.empty_like(x)
    c = np.empty_like(x)
    for e in range(x.shape[1]):
        x0 = x[0, e]
        if sign < 0:
            s0, c0 = np.sin(x0), np.cos(x0)
        else:
            s0, c0 = np.sinh(x0), np.cosh(x0)
        s[0, e], c[0, e] = s0, c0
        for k in range(1, K + 1):
            acc_s = x[k, e] * c0
            acc_c = x[k, e] * (s0 if sign > 0 else -s0)
            for m in range(1, k):
                z = w[m - 1, k - m - 1] * x[k - m, e]
                acc_s = acc_s + z * c[m, e]
                acc_c = acc_c + z * s[m, e] if sign > 0 else acc_c - z * s[m, e]
            s[k, e], c[k, e] = acc_s, acc_c
    return (s if first else c).reshape(X.shape)


# ---------------------------------------------------------------- Cauchy products
# ``c_k = sum_{j=0..k} a_j b_{k-j}`` of two jets' stacks, k = 0..K: ``I``, ``J`` and the
# grid ``G`` are ``taylor_stack._pairs(K)`` (the pairs' rows in each factor, and each
# coefficient's pairs padded by a zero appended to the products).

def _summed(P, G):
    P = np.concatenate([P, np.zeros((1,) + P.shape[1:], dtype=P.dtype)], axis=0)
    return np.add.reduce(P.take(G, axis=0), axis=0)


def multiply_plain(A, B, I, J, G):
    # (``take``: 2-3x faster than the subscript ``A[I]`` on small stacks, the same numbers)
    return _summed(A.take(I, axis=0) * B.take(J, axis=0), G)


def matmul_plain(A, B, I, J, G):
    """The stacks of matrices (K + 1, *batch, m, n) and (K + 1, *batch, n, p)."""
    a, b = A.take(I, axis=0), B.take(J, axis=0)
    if a.shape[:-2] == b.shape[:-2]:      # (one stack of matrices: numpy's 3-d loop is faster)
        P = np.matmul(a.reshape((-1,) + a.shape[-2:]), b.reshape((-1,) + b.shape[-2:]))
        P = P.reshape(a.shape[:-1] + b.shape[-1:])
    else:
        P = np.matmul(a, b)
    return _summed(P, G)


def multiply_loops(A, B, I, J, G):
    K = A.shape[0] - 1
    shape = (K + 1,) + np.broadcast_shapes(A.shape[1:], B.shape[1:])
    a = np.ascontiguousarray(np.broadcast_to(A, shape))
    b = np.ascontiguousarray(np.broadcast_to(B, shape))
    n = a.size // (K + 1)
    a, b = a.reshape((K + 1, n)), b.reshape((K + 1, n))
    c = np.empty_like(a)
    for k in range(K + 1):
        for e in range(n):
            c[k, e] = a[0, e] * b[k, e]
        for j in range(1, k + 1):
            for e in range(n):
                c[k, e] += a[j, e] * b[k - j, e]
    return c.reshape(shape)


def matmul_loops(A, B, I, J, G):
    K = A.shape[0] - 1
    m, n, p = A.shape[-2], A.shape[-1], B.shape[-1]
    batch = np.broadcast_shapes(A.shape[1:-2], B.shape[1:-2])
    a = np.ascontiguousarray(np.broadcast_to(A, (K + 1,) + batch + (m, n)))
    b = np.ascontiguousarray(np.broadcast_to(B, (K + 1,) + batch + (n, p)))
    nb = a.size // ((K + 1) * m * n)
    a, b = a.reshape((K + 1, nb, m, n)), b.reshape((K + 1, nb, n, p))
    c = np.zeros((K + 1, nb, m, p), dtype=a.dtype)
    for k in range(K + 1):
        for j in range(k + 1):
            for t in range(nb):
                for r in range(m):
                    for q in range(p):
                        s = a[j, t, r, 0] * b[k - j, t, 0, q]
                        for l in range(1, n):
                            s += a[j, t, r, l] * b[k - j, t, l, q]
                        c[k, t, r, q] += s
    return c.reshape((K + 1,) + batch + (m, p))
