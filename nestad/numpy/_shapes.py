"""numpy's array manipulation on nestad values: repeating, tiling, triangles, rolling,
splitting, diagonals, flips, sorting and gathering, index tricks (``r_``, ``c_``),
``linspace`` with perturbed end points, ``diff``, ``pad``'s index modes.

Each is made of nestad.numpy's differentiable functions (``getitem`` with basic or
advanced indices, ``concatenate``, ``reshape``, ``broadcast_to``, ``where``, ``at``), which
move entries without arithmetic, so values are numpy's and derivatives exact; they need no
rules of their own.  On plain arguments each calls numpy's function itself, so values and
dtypes are numpy's by construction; numpy's own function on a nestad value reaches these
through numpy's dispatch (nestad.numpy._dispatch), by name."""
import operator

import numpy as _np

from ._indexing import astype, at, getitem
from ._joining import concatenate
from ._kernel import _as_operand, _axis_index, _ndim, _plain_operand, _shape
from ._plumbing import broadcast_to, moveaxis, ravel, reshape, transpose
from ._reductions import diagonal
from ._selection import where
from ..errors import InvalidInputError
from ..tracer import StagingError, is_tracer
from ..values import Perturbed, primal_value

__all__ = ['repeat', 'tile', 'tril', 'triu', 'roll', 'append', 'split', 'array_split', 'vsplit',
           'hsplit', 'dsplit', 'diag', 'diagflat', 'flip', 'flipud', 'fliplr', 'sort',
           'take_along_axis', 'take', 'linspace', 'diff', 'pad', 'r_', 'c_', 'full_like', 'zeros_like',
           'ones_like', 'empty_like', 'nonzero', 'flatnonzero', 'argwhere', 'count_nonzero',
           'searchsorted']


def _traced(*xs):
    """True if any argument carries a perturbation or is traced (staged): then the
    composition runs; plain arguments go to numpy's own function."""
    return any(isinstance(x, Perturbed) or is_tracer(x) for x in xs)


def _along(axis, index, ndim):
    """An index applying ``index`` along ``axis`` of an ndim-array."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


# ---------------------------------------------------------------- repeating

def repeat(a, repeats, axis=None):
    """numpy.repeat: each entry gathered ``repeats`` times (an advanced index); the
    derivative of an entry is the sum over its copies."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.repeat(_plain_operand(a, 'repeat'), repeats, axis)
    if axis is None or _ndim(a) == 0 and axis in (0, -1):    # (numpy takes a 0-d array as 1-d)
        a, axis = ravel(a), 0
    axis = _axis_index(axis, _ndim(a))
    index = _np.repeat(_np.arange(_shape(a)[axis]), primal_value(repeats))
    return getitem(a, _along(axis, index, _ndim(a)))


def tile(A, reps):
    """numpy.tile: a broadcast along a new axis before each axis, then a reshape (the
    derivative sums the copies back)."""
    A = _as_operand(A)
    if not _traced(A):
        return _np.tile(_plain_operand(A, 'tile'), reps)
    try:
        reps = tuple(reps)
    except TypeError:
        reps = (reps,)
    shape = _shape(A)
    if len(shape) < len(reps):
        shape = (1,) * (len(reps) - len(shape)) + shape
    reps = (1,) * (len(shape) - len(reps)) + reps
    x = reshape(A, sum(((1, s) for s in shape), ()))
    x = broadcast_to(x, sum(((r, s) for r, s in zip(reps, shape)), ()))
    return reshape(x, tuple(r * s for r, s in zip(reps, shape)))


# ---------------------------------------------------------------- triangles and diagonals

def tril(m, k=0):
    """numpy.tril: the entries above the k-th diagonal (of each matrix of a stack) are 0."""
    m = _as_operand(m)
    if not _traced(m):
        return _np.tril(_plain_operand(m, 'tril'), k)
    mask = _np.tri(*_shape(m)[-2:], k=k, dtype=bool)
    return where(mask, m, _np.zeros(1, _np.result_type(primal_value(m))))


def triu(m, k=0):
    """numpy.triu: the entries below the k-th diagonal (of each matrix of a stack) are 0."""
    m = _as_operand(m)
    if not _traced(m):
        return _np.triu(_plain_operand(m, 'triu'), k)
    mask = _np.tri(*_shape(m)[-2:], k=k - 1, dtype=bool)
    return where(mask, _np.zeros(1, _np.result_type(primal_value(m))), m)


def diag(v, k=0):
    """numpy.diag: the k-th diagonal of a matrix, or a matrix with v on its k-th diagonal."""
    v = _as_operand(v)
    if not _traced(v):
        return _np.diag(_plain_operand(v, 'diag'), k)
    if _ndim(v) == 2:
        return diagonal(v, k)
    if _ndim(v) != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = _shape(v)[0]
    i = _np.arange(n)
    out = _np.zeros((n + abs(k), n + abs(k)), _np.result_type(primal_value(v)))
    return at(out)[i + max(-k, 0), i + max(k, 0)].set(v)


def diagflat(v, k=0):
    """numpy.diagflat: v flattened, on the k-th diagonal of a matrix."""
    v = _as_operand(v)
    if not _traced(v):
        return _np.diagflat(_plain_operand(v, 'diagflat'), k)
    return diag(ravel(v), k)


# ---------------------------------------------------------------- moving entries

def roll(a, shift, axis=None):
    """numpy.roll: the two parts of each rolled axis swapped (two slices, one concatenate)."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.roll(_plain_operand(a, 'roll'), shift, axis)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    pairs = _np.broadcast(shift, axis)
    if pairs.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    shifts = [0] * _ndim(a)
    for sh, ax in pairs:
        shifts[_axis_index(int(ax), _ndim(a))] += int(sh)
    for ax, sh in enumerate(shifts):
        n = _shape(a)[ax]
        s = sh % n if n else 0
        if s:
            nd_ = _ndim(a)
            a = concatenate([getitem(a, _along(ax, slice(n - s, None), nd_)),
                             getitem(a, _along(ax, slice(None, n - s), nd_))], axis=ax)
    return a


def flip(m, axis=None):
    """numpy.flip: the entries of each axis in ``axis`` (all by default) reversed."""
    m = _as_operand(m)
    if not _traced(m):
        return _np.flip(_plain_operand(m, 'flip'), axis)
    n = _ndim(m)
    if axis is None:
        axes = set(range(n))
    else:
        axes = {_axis_index(a, n) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    return getitem(m, tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(n)))


def flipud(m):
    m = _as_operand(m)
    if _ndim(m) < 1:
        raise ValueError("Input must be >= 1-d.")
    return flip(m, 0)


def fliplr(m):
    m = _as_operand(m)
    if _ndim(m) < 2:
        raise ValueError("Input must be >= 2-d.")
    return flip(m, 1)


def append(arr, values, axis=None):
    """numpy.append: a concatenation (both flattened when axis is None)."""
    arr, values = _as_operand(arr), _as_operand(values)
    if not _traced(arr, values):
        return _np.append(_plain_operand(arr, 'append'), _plain_operand(values, 'append'), axis)
    if axis is None:
        arr, values, axis = ravel(arr), ravel(values), 0
    return concatenate([arr, values], axis=axis)


# ---------------------------------------------------------------- splitting

def array_split(ary, indices_or_sections, axis=0):
    """numpy.array_split: slices of ``ary`` along ``axis`` (numpy's division points)."""
    ary = _as_operand(ary)
    if not _traced(ary):
        return _np.array_split(_plain_operand(ary, 'array_split'), indices_or_sections, axis)
    nd_ = _ndim(ary)
    axis = _axis_index(axis, nd_)
    total = _shape(ary)[axis]
    try:
        points = [0] + list(indices_or_sections) + [total]
    except TypeError:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError('number sections must be larger than 0.') from None
        each, extras = divmod(total, sections)
        sizes = [0] + extras * [each + 1] + (sections - extras) * [each]
        points = _np.cumsum(sizes).tolist()
    return [getitem(ary, _along(axis, slice(points[i], points[i + 1]), nd_))
            for i in range(len(points) - 1)]


def split(ary, indices_or_sections, axis=0):
    """numpy.split: as array_split, but sections must divide the axis equally."""
    ary = _as_operand(ary)
    if not _traced(ary):
        return _np.split(_plain_operand(ary, 'split'), indices_or_sections, axis)
    try:
        len(indices_or_sections)
    except TypeError:
        if _shape(ary)[_axis_index(axis, _ndim(ary))] % indices_or_sections:
            raise ValueError('array split does not result in an equal division') from None
    return array_split(ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    ary = _as_operand(ary)
    if _ndim(ary) == 0:
        raise ValueError('hsplit only works on arrays of 1 or more dimensions')
    return split(ary, indices_or_sections, 1 if _ndim(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    ary = _as_operand(ary)
    if _ndim(ary) < 2:
        raise ValueError('vsplit only works on arrays of 2 or more dimensions')
    return split(ary, indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    ary = _as_operand(ary)
    if _ndim(ary) < 3:
        raise ValueError('dsplit only works on arrays of 3 or more dimensions')
    return split(ary, indices_or_sections, 2)


# ---------------------------------------------------------------- sorting and gathering

def _plain_indices(indices, name):
    indices = _as_operand(indices)
    if isinstance(indices, Perturbed):
        raise InvalidInputError(f"nestad.numpy.{name}: indices cannot carry a perturbation "
                                "(an index has no derivative)")
    return _np.asarray(indices)


def take_along_axis(arr, indices, axis=-1):
    """numpy.take_along_axis: a gather (an advanced index) whose derivative scatters back."""
    arr = _as_operand(arr)
    indices = _plain_indices(indices, 'take_along_axis')
    if not _traced(arr):
        return _np.take_along_axis(_plain_operand(arr, 'take_along_axis'), indices, axis)
    if axis is None:
        if indices.ndim != 1:
            raise ValueError('when axis=None, `indices` must have a single dimension.')
        arr, axis = ravel(arr), 0
    nd_ = _ndim(arr)
    axis = _axis_index(axis, nd_)
    if not _np.issubdtype(indices.dtype, _np.integer):
        raise IndexError('`indices` must be an integer array')
    if indices.ndim != nd_:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    index = tuple(indices if d == axis else
                  _np.arange(n).reshape((1,) * d + (-1,) + (1,) * (nd_ - d - 1))
                  for d, n in enumerate(_shape(arr)))
    return getitem(arr, index)


def take(a, indices, axis=None, mode='raise'):
    """numpy.take (mode 'raise', 'wrap' or 'clip' are applied to the indices)."""
    a = _as_operand(a)
    indices = _plain_indices(indices, 'take')
    if not _traced(a):
        return _np.take(_plain_operand(a, 'take'), indices, axis, mode=mode)
    if indices.dtype.kind == 'b':       # numpy takes bools as the indices 0 and 1 (not a mask)
        indices = indices.astype(_np.intp)
    elif indices.dtype.kind not in 'iu':
        raise TypeError(f"Cannot cast array data from {indices.dtype!r} to dtype('int64') "
                        "according to the rule 'safe'")
    if axis is None or _ndim(a) == 0 and axis in (0, -1):    # (numpy takes a 0-d array as 1-d)
        a, axis = ravel(a), 0
    axis = _axis_index(axis, _ndim(a))
    n = _shape(a)[axis]
    if mode == 'wrap':
        indices = indices % n
    elif mode == 'clip':
        indices = _np.clip(indices, 0, n - 1)
    index = indices[()] if indices.ndim == 0 else indices
    return getitem(a, (slice(None),) * axis + (index,))


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """numpy.sort: the entries gathered in the order of numpy.argsort of the values.  Each
    sorted entry carries the derivative of the entry it came from; tied entries are equal, so
    any assignment gives the same values (the derivative then follows argsort's choice: a
    one-sided derivative, as in the other libraries).  Equal entries of different sign
    (0.0 and -0.0) may come out in another order than numpy.sort's."""
    a = _as_operand(a)
    if not _traced(a):
        options = {} if stable is None else {'stable': stable}
        return _np.sort(_plain_operand(a, 'sort'), axis, kind=kind, order=order, **options)
    if order is not None:
        raise InvalidInputError("nestad.numpy.sort: order= sorts structured arrays, which carry "
                                "no derivative")
    if axis is None:
        a, axis = ravel(a), -1
    v = primal_value(a)
    if is_tracer(v):
        raise StagingError("sorting a traced array: the order depends on the data, which a "
                           "staged program cannot have; pass the array as a static argument")
    options = {} if stable is None else {'stable': stable}
    return take_along_axis(a, _np.argsort(v, axis=axis, kind=kind, **options), axis)


# ---------------------------------------------------------------- ranges and differences

def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, **kwargs):
    """numpy.linspace; start and stop may carry derivatives (numpy's formula: arange times
    the step, plus start, the last entry stop itself)."""
    start, stop = _as_operand(start), _as_operand(stop)
    if not _traced(start, stop):
        return _np.linspace(_plain_operand(start, 'linspace'), _plain_operand(stop, 'linspace'),
                            num, endpoint, retstep, dtype, axis, **kwargs)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    if dtype is not None and _np.dtype(dtype).kind != 'f':
        raise InvalidInputError(f"nestad.numpy.linspace(..., dtype={_np.dtype(dtype)}) of nestad "
                                "end points would drop their derivatives; keep a float dtype")
    div = (num - 1) if endpoint else num
    dt = _np.result_type(primal_value(start), primal_value(stop), 1.0)
    start, stop = astype(start, dt), astype(stop, dt)
    delta = stop - start
    y = _np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * _ndim(delta))
    if div > 0:
        step = delta / div
        if _np.any(primal_value(step) == 0):        # numpy's care for denormal steps
            y = (y / div) * delta
        else:
            y = y * step
    else:
        step = _np.nan
        y = y * delta
    y = y + start
    if endpoint and num > 1:
        y = at(y)[-1, ...].set(stop)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtype is not None:
        y = astype(y, dtype)
    return (y, step) if retstep else y


def diff(a, n=1, axis=-1, prepend=_np._NoValue, append=_np._NoValue):   # noqa: A002
    """numpy.diff: differences of neighbours, n times, after prepend/append are joined."""
    a = _as_operand(a)
    extra = [_as_operand(e) for e in (prepend, append) if e is not _np._NoValue]
    if not _traced(a, *extra):
        return _np.diff(_plain_operand(a, 'diff'), n, axis, prepend, append)
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    nd_ = _ndim(a)
    if nd_ == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = _axis_index(axis, nd_)
    parts = []
    for e, first in ((prepend, True), (append, False)):
        if e is _np._NoValue:
            continue
        e = _as_operand(e)
        if _ndim(e) == 0:
            shape = list(_shape(a))
            shape[axis] = 1
            e = broadcast_to(e, tuple(shape))
        parts.append((first, e))
    if parts:
        a = concatenate([e for f, e in parts if f] + [a] + [e for f, e in parts if not f], axis)
    for _ in range(n):
        a = getitem(a, _along(axis, slice(1, None), nd_)) - \
            getitem(a, _along(axis, slice(None, -1), nd_))
    return a


_PAD_INDEX_MODES = ('edge', 'reflect', 'symmetric', 'wrap')


def pad(array, pad_width, mode='constant', **kwargs):
    """numpy.pad: 'constant' (constant_values plain, or one nestad number), and the modes
    that copy entries ('edge', 'reflect', 'symmetric', 'wrap'; reflect_type 'even'), each a
    gather by numpy.pad of the entries' indices."""
    x = _as_operand(array)
    values = kwargs.get('constant_values', 0)
    if not _traced(x, values):
        return _np.pad(_plain_operand(x, 'pad'), pad_width, mode, **kwargs)
    if mode not in ('constant',) + _PAD_INDEX_MODES or \
            set(kwargs) - {'constant_values', 'reflect_type'} or \
            kwargs.get('reflect_type', 'even') != 'even':
        raise InvalidInputError(
            f"nestad.numpy.pad supports mode='constant' and the modes {_PAD_INDEX_MODES} "
            f"(reflect_type='even'), not mode={mode!r} with {sorted(kwargs)}")
    nd_ = _ndim(x)
    if nd_ == 0:                      # numpy pads a 0-d array along none of its axes
        _np.pad(primal_value(x), pad_width, mode, **kwargs)       # (and checks the arguments)
        return x
    widths = _np.broadcast_to(_np.round(_np.asarray(pad_width)).astype(_np.intp), (nd_, 2))
    if _np.any(widths < 0):
        raise ValueError("index can't contain negative values")
    if mode != 'constant':
        for ax in range(nd_):
            if widths[ax].any():
                index = _np.pad(_np.arange(_shape(x)[ax]), widths[ax], mode=mode, **kwargs)
                x = getitem(x, _along(ax, index, nd_))
        return x
    dtype = _np.result_type(primal_value(x))
    shape = tuple(int(s + lo + hi) for s, (lo, hi) in zip(_shape(x), widths))
    inside = tuple(slice(int(lo), int(lo) + s) for s, (lo, _) in zip(_shape(x), widths))
    if _traced(values):
        if _ndim(values) != 0:
            raise InvalidInputError("nestad.numpy.pad: constant_values carrying a derivative must "
                                    "be one number")
        return at(broadcast_to(astype(values, dtype), shape))[inside].set(x)
    # numpy's frame: each axis's two sides set in turn over the whole padded array
    frame = _np.pad(_np.zeros(_shape(x), dtype), widths, constant_values=values)
    return at(frame)[inside].set(x)


# ---------------------------------------------------------------- index tricks

class _Concatenator:
    """numpy's r_ and c_ (index-trick objects) for pieces that may be nestad values:
    arrays, scalars and slices (ranges) joined along an axis.  Plain pieces only: numpy's
    own object answers."""

    def __init__(self, plain, axis, ndmin, trans1d):
        self._plain, self._axis, self._ndmin, self._trans1d = plain, axis, ndmin, trans1d

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not _traced(*items):
            return self._plain[key]
        axis, ndmin, trans1d = self._axis, self._ndmin, self._trans1d
        objs, kinds = [], []
        for k, item in enumerate(items):
            if isinstance(item, str):
                if k != 0:
                    raise ValueError("special directives must be the first entry.")
                if item in ('r', 'c'):
                    raise InvalidInputError("nestad.numpy.r_/c_: the 'r' and 'c' directives make "
                                            "a numpy.matrix, which nestad does not support")
                vec = [int(x) for x in item.split(',')]
                axis = vec[0]
                ndmin = vec[1] if len(vec) > 1 else ndmin
                trans1d = vec[2] if len(vec) > 2 else trans1d
                continue
            if isinstance(item, slice):      # a range, as numpy makes it
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                obj = _np.linspace(start, item.stop, num=int(abs(step))) \
                    if isinstance(step, (complex, _np.complexfloating)) \
                    else _np.arange(start, item.stop, step)
                if ndmin > 1:
                    obj = _np.array(obj, ndmin=ndmin)
                    if trans1d != -1:
                        obj = obj.swapaxes(-1, trans1d)
                objs.append(obj)
                kinds.append(obj.dtype)
                continue
            scalar = isinstance(item, (int, float, bool, complex, _np.generic))
            obj = _as_operand(item)
            item_ndim = _ndim(obj)
            if item_ndim < ndmin:
                obj = reshape(obj, (1,) * (ndmin - item_ndim) + _shape(obj))
                if trans1d != -1 and not scalar:
                    k2, k1 = ndmin - item_ndim, trans1d
                    if k1 < 0:
                        k1 += k2 + 1
                    axes = list(range(ndmin))
                    obj = transpose(obj, axes[:k1] + axes[k2:] + axes[k1:k2])
            objs.append(obj)
            kinds.append(item if scalar else _np.result_type(primal_value(obj)))
        dtype = _np.result_type(*kinds)
        objs = [o if _np.result_type(primal_value(o)) == dtype else astype(o, dtype) for o in objs]
        return concatenate(objs, axis=axis)

    def __len__(self):
        return 0


r_ = _Concatenator(_np.r_, 0, 1, -1)
c_ = _Concatenator(_np.c_, -1, 2, 0)


# ---------------------------------------------------------------- constants of a shape

def _like(npfn):
    def public(a, *args, **kwargs):
        return npfn(primal_value(_as_operand(a)), *args, **kwargs)
    public.__name__ = public.__qualname__ = npfn.__name__
    public.__doc__ = (f"numpy.{npfn.__name__} of a nestad value: a constant of its shape and "
                      "dtype (no derivative).")
    return public


zeros_like, ones_like, empty_like = _like(_np.zeros_like), _like(_np.ones_like), _like(_np.empty_like)


def full_like(a, fill_value, dtype=None, order='K', subok=True, shape=None, **kwargs):
    """numpy.full_like: a constant of a's shape, unless fill_value carries a derivative
    (then every entry carries it)."""
    a = _as_operand(a)
    fill = _as_operand(fill_value)
    out = _np.full_like(primal_value(a), primal_value(fill), dtype, order, subok, shape, **kwargs)
    if not _traced(fill):
        return out
    if out.dtype.kind != 'f':
        raise InvalidInputError(f"full_like(a, x) with a nestad x and dtype {out.dtype} would drop "
                                "x's derivative; give a float dtype")
    return broadcast_to(astype(fill, out.dtype), out.shape)


# ---------------------------------------------------------------- indices of values

def _of_values(npfn):
    """A numpy function whose result is indices or counts: computed from the values."""
    def public(a, *args, **kwargs):
        return npfn(primal_value(_as_operand(a)), *[primal_value(_as_operand(x)) for x in args],
                    **kwargs)
    public.__name__ = public.__qualname__ = npfn.__name__
    public.__doc__ = f"numpy.{npfn.__name__} of the values (indices carry no derivative)."
    return public


nonzero, flatnonzero = _of_values(_np.nonzero), _of_values(_np.flatnonzero)
argwhere, count_nonzero = _of_values(_np.argwhere), _of_values(_np.count_nonzero)
searchsorted = _of_values(_np.searchsorted)
