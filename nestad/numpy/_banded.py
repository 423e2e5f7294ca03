"""Banded batched tangents: the basis directions of ``jacobian_f``/``hessian`` kept as a
few diagonals while the operations on them keep that structure.

``jacobian_f`` and ``hessian`` push all n basis directions through one forward pass: the
tangent of a vector input of length m is an (n, m) slice of the identity.  Elementwise
scaling, sums, negation, basic slices and their adjoint (a scatter into zeros) map a
matrix with a few nonzero diagonals to another one, so the tangent is kept as
``Banded``: ``A[k, j] = bands[o][j]`` where ``k == j + o`` (one length-m vector per
diagonal offset o; entries whose k falls outside ``0 <= k < n`` are not part of A and are
ignored).  The Rosenbrock Hessian then costs a few passes over vectors of length n instead
of some 40 over n x n blocks (notes/benchmarks.md, branch hessian-banded).

Correctness never depends on the structure: every other operation, and these with
operands that do not fit (a 2-D factor, a strided slice), meet the dense array
(``Compact.primal``), which is the same matrix.  One difference is deliberate: entries
off the diagonals are zeros that are never multiplied, so a partial of inf or nan (sqrt
at 0) reaches only the directions that pass through it, as in reverse mode, where the
dense tangent gave nan for every direction (0 * inf).

In ``nd.stage`` the vectors are traced, so the program computes with vectors too, and
``banded_dense`` (one pass writing the diagonals into zeros) is its only n x n step.
"""
import numpy as _np

from .. import arrays as _arrays
from ..arrays import Compact, PerArgument
from ._elementwise import _add, _divide, _multiply, _negative, _subtract
from ._indexing import _getitem, _scatter
from ._kernel import _define, _nbatch, _ndim, _shape
from ._plumbing import broadcast_to, reshape, sum_to


def _diagonal(offset, n, m):
    """(first, stop) of the valid j of diagonal ``offset`` of an (n, m) matrix, and the
    flat positions' start and stride."""
    lo, hi = max(0, -offset), min(m, n - offset)
    return lo, hi, offset * m + lo * (m + 1)


def _dense_plain(*vectors, offsets, shape):
    n, m = shape
    batch = _np.broadcast_shapes(*(_np.shape(v)[:-1] for v in vectors))
    out = _np.zeros(batch + (n * m,), _np.result_type(*vectors, 0.0))
    for o, v in zip(offsets, vectors):
        lo, hi, start = _diagonal(o, n, m)
        if lo < hi:
            out[..., start:start + (hi - lo - 1) * (m + 1) + 1:m + 1] += v[..., lo:hi]
    return out.reshape(batch + (n, m))


def _take_plain(x, offset, m):
    n = _np.shape(x)[-2]
    lo, hi, start = _diagonal(offset, n, m)
    out = _np.zeros(_np.shape(x)[:-2] + (m,), _np.result_type(x, 0.0))
    if lo < hi:
        flat = _np.reshape(x, _np.shape(x)[:-2] + (n * m,))
        out[..., lo:hi] = flat[..., start:start + (hi - lo - 1) * (m + 1) + 1:m + 1]
    return out


def _dense_jvp(i):
    def jvp(t, *vectors, out, offsets, shape):
        # vector i's term, with the stack axes it lacks inserted after the tangent's batch
        # axes, then spread over the output's stack (as elementwise rules align a tangent)
        v = vectors[i]
        nb = _nbatch(t, v)
        lead = _ndim(out) - 1 - _ndim(v)
        if lead:
            t = reshape(t, _shape(t)[:nb] + (1,) * lead + _shape(v))
        term = banded_dense(t, offsets=(offsets[i],), shape=shape)
        target = _shape(t)[:nb] + _shape(out)
        return term if _shape(term) == target else broadcast_to(term, target)
    return jvp


# banded_dense(*vectors, offsets, shape): the (n, m) matrix of the diagonals (leading stack
# axes of the vectors kept); banded_take: one diagonal of a matrix as a length-m vector.
# Linear, and each other's adjoint (a staged Hessian's program is differentiated again).
banded_dense = _define(
    'banded_dense', _dense_plain,
    jvps=PerArgument(_dense_jvp),
    vjps=PerArgument(lambda i: lambda g, *vs, out, offsets, shape: sum_to(banded_take(
        g, offset=offsets[i], m=shape[1]), _shape(vs[i]))))
banded_take = _define(
    'banded_take', _take_plain,
    jvps=(lambda t, x, out, offset, m: banded_take(t, offset=offset, m=m),),
    vjps=(lambda g, x, out, offset, m: banded_dense(
        g, offsets=(offset,), shape=_shape(x)[-2:]),))


class Banded(Compact):
    """An (n, m) matrix by its diagonals: ``bands`` maps offset o to a length-m vector v
    (an ndarray or a traced one), ``A[j + o, j] = v[j]`` for ``0 <= j + o < n``."""
    __slots__ = ('bands', 'shape', 'dtype', '_dense')
    ndim = 2

    def __init__(self, bands, shape, dtype):
        self.bands, self.shape, self.dtype, self._dense = bands, shape, dtype, None

    @property
    def size(self):
        return self.shape[0] * self.shape[1]

    def dense(self):
        if self._dense is None:
            self._dense = banded_dense(*self.bands.values(), offsets=tuple(self.bands),
                                       shape=self.shape)
        return self._dense

    def __repr__(self):
        return f"Banded(shape={self.shape}, offsets={sorted(self.bands)})"


def identity_columns(n, start, m, dtype):
    """Columns start..start+m of the n x n identity, banded: ones on offset start."""
    return Banded({start: _np.ones(m, dtype)}, (n, m), _np.dtype(dtype))


def _fits(p, m):
    """``p`` broadcasts along the vectors' axis (a number, or shape (m,) or (1,))."""
    if isinstance(p, Compact):
        return False
    s = _shape(p)
    return len(s) == 0 or (len(s) == 1 and s[0] in (m, 1))


def _scaled(b, fn, p, first):
    bands = {o: (fn(v, p) if first else fn(p, v)) for o, v in b.bands.items()}
    return Banded(bands, b.shape, _np.result_type(*(v.dtype for v in bands.values())))


def _multiply_rule(args, params):
    a, b = args
    if a.__class__ is Banded and _fits(b, a.shape[1]):
        return _scaled(a, _multiply, b, True)
    if b.__class__ is Banded and _fits(a, b.shape[1]):
        return _scaled(b, _multiply, a, False)
    return None


def _divide_rule(args, params):
    a, b = args
    if a.__class__ is Banded and _fits(b, a.shape[1]):
        return _scaled(a, _divide, b, True)
    return None


def _merge(a, b, negate):
    if a.__class__ is not Banded or b.__class__ is not Banded or a.shape != b.shape:
        return None
    bands = dict(a.bands)
    for o, v in b.bands.items():
        if o in bands:
            bands[o] = (_subtract if negate else _add)(bands[o], v)
        else:
            bands[o] = _negative(v) if negate else v
    return Banded(bands, a.shape, _np.result_type(a.dtype, b.dtype))


def _negative_rule(args, params):
    (a,) = args
    if a.__class__ is not Banded:
        return None
    return Banded({o: _negative(v) for o, v in a.bands.items()}, a.shape, a.dtype)


def _column_slice(index, m):
    """(start, stop) of a unit-step slice of the columns, under the batch axis: the index
    ``(slice(None), slice(a, b))`` that a basic index of the batched tangent becomes."""
    if not (isinstance(index, tuple) and len(index) == 2 and index[0] == slice(None)
            and isinstance(index[1], slice) and index[1].step in (None, 1)):
        return None
    start, stop, _ = index[1].indices(m)
    return start, max(start, stop)


def _getitem_rule(args, params):
    (a,) = args
    if a.__class__ is not Banded:
        return None
    cut = _column_slice(params['index'], a.shape[1])
    if cut is None:
        return None
    start, stop = cut
    bands = {o + start: _getitem(v, index=slice(start, stop)) for o, v in a.bands.items()}
    return Banded(bands, (a.shape[0], stop - start), a.dtype)


def _scatter_rule(args, params):
    (a,) = args
    shape = tuple(params['shape'])
    if a.__class__ is not Banded or len(shape) != 2 or shape[0] != a.shape[0]:
        return None
    cut = _column_slice(params['index'], shape[1])
    if cut is None or cut[1] - cut[0] != a.shape[1]:
        return None
    start, stop = cut
    bands = {o - start: _scatter(v, index=slice(start, stop), shape=(shape[1],))
             for o, v in a.bands.items()}
    return Banded(bands, shape, a.dtype)


def _sum_rule(args, params):
    """The sum over the columns: an n-vector, each diagonal added at its rows."""
    (a,) = args
    if a.__class__ is not Banded or params['keepdims'] or params['axis'] not in ((-1,), (1,), -1, 1):
        return None
    n, m = a.shape
    out = None
    for o, v in a.bands.items():
        lo, hi = max(0, -o), min(m, n - o)
        if lo >= hi:
            continue
        term = _scatter(_getitem(v, index=slice(lo, hi)), index=slice(lo + o, hi + o), shape=(n,))
        out = term if out is None else _add(out, term)
    return _np.zeros(n, a.dtype) if out is None else out


def _astype_rule(args, params):
    (a,) = args
    if a.__class__ is Banded and _np.dtype(params['dtype']) == a.dtype:
        return a
    return None


RULES = {'numpy.multiply': _multiply_rule, 'numpy.divide': _divide_rule,
         'numpy.add': lambda args, params: _merge(*args, False),
         'numpy.subtract': lambda args, params: _merge(*args, True),
         'numpy.negative': _negative_rule, 'numpy.getitem': _getitem_rule,
         'numpy.scatter_add': _scatter_rule, 'numpy.sum': _sum_rule, 'numpy.astype': _astype_rule}

DENSIFIED = {}      # primitive name -> how often a compact argument was made dense (tests)


def compact_apply(prim, args, params):
    """``prim`` applied to arguments among which a Compact and no run's value: by its
    structured rule, else on the dense arrays."""
    rule = RULES.get(prim.qualname)
    if rule is not None:
        out = rule(args, params)
        if out is not None:
            return out
    DENSIFIED[prim.qualname] = DENSIFIED.get(prim.qualname, 0) + 1
    return prim.evaluate(tuple(a.dense() if isinstance(a, Compact) else a for a in args), params)


_arrays.COMPACT[0] = compact_apply
