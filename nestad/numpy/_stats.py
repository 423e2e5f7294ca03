"""numpy's statistics on nestad values: var, std, average, cov, corrcoef, ptp, the nan-
ignoring reductions, median, quantile, percentile, and cumprod (a primitive).

All but cumprod are made of nestad.numpy's differentiable functions, following numpy's
own formulas step by step (its order of sums, products and divisions), so that values
are numpy's bit for bit (float32 included: where numpy divides a float32 by an integer
count in float64 and rounds back, nestad divides in float32, which rounds to the same
number since 53 >= 2 * 24 + 2).  On plain arguments numpy's own function is called.

Order statistics (median, quantile, percentile) gather sorted entries: each carries the
derivative of the entry it came from.  Where entries tie, the function has a kink and the
derivative is one-sided: it goes to the entry numpy.argsort puts at that place (JAX and
PyTorch make the same kind of choice; the mean of tied entries is not differentiable there)."""
import builtins

import numpy as _np

from ._contract import dot
from ._elementwise import multiply, sqrt
from ._indexing import astype, getitem
from ._joining import concatenate
from ._kernel import (_as_operand, _axis_tuple, _define, _ndim, _neg_axes, _norm_axis,
                      _plain_operand, _shape)
from ._plumbing import broadcast_to, moveaxis, ravel, reshape, sum, transpose
from ._reductions import cumsum, max, mean, min, prod
from ._selection import where
from ._shapes import _axis_index, _traced, diag, sort
from ..errors import InvalidInputError
from ..values import primal_value

where_ = where      # (functions with numpy's where= parameter call it by this name)

__all__ = ['var', 'std', 'average', 'cov', 'corrcoef', 'ptp', 'cumprod', 'nansum', 'nanmean',
           'nanprod', 'nanmax', 'nanmin', 'nanvar', 'nanstd', 'nancumsum', 'nancumprod', 'median',
           'quantile', 'percentile']


def _refuse_options(name, **options):
    given = [k for k, v in options.items() if v is not None and v is not _np._NoValue]
    if given:
        raise InvalidInputError(f"nestad.numpy.{name}: {', '.join(given)}= is not supported on "
                                "nestad values (write the result out of the function instead of "
                                "into out=, select with nestad.numpy.where)")


def _kw(**kwargs):
    """numpy keywords that were given (numpy's defaults are its own _NoValue)."""
    return {k: v for k, v in kwargs.items() if v is not _np._NoValue}


def _count(x, axis):
    shape = _shape(x)
    return int(_np.prod([shape[a] for a in _neg_axes(axis, len(shape))], dtype=_np.int64))


def _float_operand(x, dtype):
    """x in the dtype numpy's statistics compute in: ``dtype``, or float64 for integers."""
    if dtype is not None:
        return astype(x, dtype)
    return multiply(x, 1.0) if _np.result_type(primal_value(x)).kind in 'biu' else x


# ---------------------------------------------------------------- moments

def _var(x, axis, dtype, ddof, keepdims):
    # numpy's _var: the mean (kept axes), deviations squared by multiplication, their sum
    # divided by max(n - ddof, 0)
    if _ndim(x) == 0 and axis is not None:     # numpy's AxisError (a 0-d array has no axis)
        _np.var(primal_value(x), axis=axis)
    x = _float_operand(x, dtype)
    n = _count(x, axis)
    if n - ddof <= 0:
        # numpy divides by max(n - ddof, 0) = 0: inf (nan where the deviations are 0), a
        # constant; its derivative through the division would be inf or nan, and differ
        # between the modes
        x = primal_value(x)
    m = sum(x, axis, keepdims=True) / float(n)
    # one entry per slice: the deviation is 0 whatever x is, so var and std are constants
    # (a derivative through sqrt(0) would be inf * 0 = nan)
    d = primal_value(x) - primal_value(m) if n == 1 else x - m
    return sum(d * d, axis, keepdims=keepdims) / float(builtins.max(n - ddof, 0))


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_np._NoValue, *, where=_np._NoValue,
        mean=_np._NoValue, correction=_np._NoValue):   # noqa: A002
    """numpy.var: mean squared deviation, divided by n - ddof (``correction`` is ddof)."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.var(_plain_operand(a, 'var'), axis, dtype, out, ddof,
                       **_kw(keepdims=keepdims, where=where, mean=mean, correction=correction))
    _refuse_options('var', out=out, where=where, mean=mean)
    if correction is not _np._NoValue:
        ddof = correction
    return _var(a, _norm_axis(axis), dtype, ddof, keepdims is True)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_np._NoValue, *, where=_np._NoValue,
        mean=_np._NoValue, correction=_np._NoValue):   # noqa: A002
    """numpy.std: the square root of var (its derivative is infinite where var is 0)."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.std(_plain_operand(a, 'std'), axis, dtype, out, ddof,
                       **_kw(keepdims=keepdims, where=where, mean=mean, correction=correction))
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                    correction=correction))


def average(a, axis=None, weights=None, returned=False, *, keepdims=_np._NoValue):
    """numpy.average: sum(a * weights) / sum(weights); a and the weights may both carry
    derivatives."""
    a, w = _as_operand(a), _as_operand(weights)
    if not _traced(a, w):
        return _np.average(_plain_operand(a, 'average'), axis, w, returned, **_kw(keepdims=keepdims))
    keep = keepdims is True
    axis = _norm_axis(axis)
    if w is not None and axis is not None:
        axis = _axis_tuple(axis, _ndim(a))
    if w is None:
        avg = mean(a, axis, keep)
        scl = _np.result_type(primal_value(avg)).type(_np.size(primal_value(a)) /
                                                      _np.size(primal_value(avg)))
    else:
        if _shape(a) != _shape(w):             # numpy's checks and broadcast, step by step
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            if _shape(w) != tuple(_shape(a)[ax] for ax in axis):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            w = transpose(w, tuple(_np.argsort(axis)))
            w = reshape(w, tuple(s if ax in axis else 1 for ax, s in enumerate(_shape(a))))
        # integers (and bools) average in float64 at least, whatever the weights' dtype
        ta, tw = _np.result_type(primal_value(a)), _np.result_type(primal_value(w))
        dt = _np.result_type(ta, tw, 'f8') if ta.kind in 'biu' else _np.result_type(ta, tw)
        a, w = astype(a, dt), astype(w, dt)
        scl = sum(w, axis, keepdims=keep)
        if _np.any(primal_value(scl) == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = sum(a * w, axis, keepdims=keep) / scl
    if not returned:
        return avg
    if _shape(scl) != _shape(avg):
        scl = broadcast_to(scl, _shape(avg))
    return avg, scl


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """numpy.cov: the data, the other variables ``y`` and the weights may carry derivatives."""
    m, y = _as_operand(m), _as_operand(y)
    fweights, aweights = _as_operand(fweights), _as_operand(aweights)
    if not _traced(m, y, fweights, aweights):
        return _np.cov(_plain_operand(m, 'cov'), y, rowvar, bias, ddof, fweights, aweights,
                       dtype=dtype)
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if _ndim(m) > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None and _ndim(y) > 2:
        raise ValueError("y has more than 2 dimensions")
    if dtype is None:
        dtype = _np.result_type(primal_value(m), *([] if y is None else [primal_value(y)]),
                                _np.float64)
    X = astype(_ndmin2(m), dtype)
    if not rowvar and _ndim(m) != 1:
        X = transpose(X)
    if _shape(X)[0] == 0:
        return _np.array([]).reshape(0, 0)
    if y is not None:
        y = astype(_ndmin2(y), dtype)
        if not rowvar and _shape(y)[0] != 1:
            y = transpose(y)
        X = concatenate([X, y], axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    w = None
    if fweights is not None:
        fweights = astype(fweights, float)
        fv = primal_value(fweights)
        if not _np.all(fv == _np.around(fv)):
            raise TypeError("fweights must be integer")
        _check_weights(fweights, X, 'fweights')
        w = fweights
    if aweights is not None:
        aweights = astype(aweights, float)
        _check_weights(aweights, X, 'aweights')
        w = aweights if w is None else w * aweights
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        fact = _shape(X)[1] - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * sum(w * aweights) / w_sum
    constant = primal_value(fact) <= 0
    if constant:
        import warnings
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=2)
        fact = 0.0
    X = X - reshape(avg, (-1, 1))
    X_T = transpose(X) if w is None else transpose(X * w)
    if constant:       # numpy's inf and nan (a division by 0): constants, as var's there
        X, X_T = primal_value(X), primal_value(X_T)
    c = dot(X, X_T)
    with _np.errstate(divide='ignore'):
        c = c * (_np.true_divide(1, fact) if isinstance(fact, (int, float)) else 1.0 / fact)
    return reshape(c, [s for s in _shape(c) if s != 1])


def _ndmin2(x):
    return reshape(x, (1,) * (2 - _ndim(x)) + _shape(x)) if _ndim(x) < 2 else x


def _check_weights(w, X, name):
    if _ndim(w) > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if _shape(w)[0] != _shape(X)[1]:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    if _np.any(primal_value(w) < 0):
        raise ValueError(f"{name} cannot be negative")


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """numpy.corrcoef: cov divided by the standard deviations, clipped to [-1, 1] (a clipped
    entry is a constant: the diagonal, 1 up to rounding, has derivative 0 either way)."""
    x, y = _as_operand(x), _as_operand(y)
    if not _traced(x, y):
        return _np.corrcoef(_plain_operand(x, 'corrcoef'), y, rowvar, dtype=dtype)
    c = cov(x, y, rowvar, dtype=dtype)
    if _ndim(c) != 2:
        return c / c
    s = sqrt(diag(c))
    c = c / reshape(s, (-1, 1))
    c = c / reshape(s, (1, -1))
    cv = primal_value(c)
    return where(cv > 1, 1.0, where(cv < -1, -1.0, c))


def ptp(a, axis=None, out=None, keepdims=_np._NoValue):   # noqa: A002
    """numpy.ptp: max - min (the derivative splits between tied extremes, as max's)."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.ptp(_plain_operand(a, 'ptp'), axis, out, **_kw(keepdims=keepdims))
    _refuse_options('ptp', out=out)
    return max(a, axis, keepdims is True) - min(a, axis, keepdims is True)


# ---------------------------------------------------------------- cumprod

def _shift(x, fill):
    """x moved one place along the last axis: fill, x[..., :-1]."""
    n = _shape(x)[-1]
    if n == 0:
        return x
    first = _np.full(_shape(x)[:-1] + (1,), fill, dtype=_np.result_type(primal_value(x)))
    return concatenate([first, getitem(x, (Ellipsis, slice(None, n - 1)))], axis=-1)


def _linear_scan(a, b):
    """h_i = a_i h_(i-1) + b_i along the last axis (h_(-1) = 0), by doubling: after step d
    entry i holds the affine map of entries i-2d+1..i.  log2(n) steps of products and
    sums: no division, so every derivative of h is exact where entries vanish."""
    n = _shape(b)[-1]
    d = 1
    while d < n:
        pad = _shape(b)[:-1] + (d,)
        b = b + a * concatenate([_np.zeros(pad, _np.result_type(primal_value(b))),
                                 getitem(b, (Ellipsis, slice(None, n - d)))], axis=-1)
        if 2 * d < n:
            a = a * concatenate([_np.ones(_shape(a)[:-1] + (d,), _np.result_type(primal_value(a))),
                                 getitem(a, (Ellipsis, slice(None, n - d)))], axis=-1)
        d *= 2
    return b


def _cumprod_jvp(t, x, out, axis):
    # y_i = y_(i-1) x_i: dy_i = x_i dy_(i-1) + y_(i-1) dx_i, a linear recurrence
    xm, om = moveaxis(x, axis, -1), moveaxis(out, axis, -1)
    tm = moveaxis(t, axis, -1)
    h = _linear_scan(xm, _shift(om, 1.0) * tm)
    return moveaxis(h, -1, axis)


def _flip_last(x):
    return getitem(x, (Ellipsis, slice(None, None, -1)))


def _cumprod_vjp(g, x, out, axis):
    # the adjoint recurrence runs backwards: s_k = g_k + x_(k+1) s_(k+1), and dx_k = s_k y_(k-1)
    xm, om, gm = moveaxis(x, axis, -1), moveaxis(out, axis, -1), moveaxis(g, axis, -1)
    s = _flip_last(_linear_scan(_shift(_flip_last(xm), 1.0), _flip_last(gm)))
    return moveaxis(s * _shift(om, 1.0), -1, axis)


# cumprod: numpy's values; rules by linear recurrences solved by doubling scans, made of
# products and sums of entries (never out / x, which divides by zero at zeros and cancels
# near them).  O(n log n) work, O(log n) lifted operations per derivative order.
_cumprod = _define('cumprod', lambda x, axis: _np.cumprod(x, axis=axis),
                   jvps=(_cumprod_jvp,), vjps=(_cumprod_vjp,))


def cumprod(a, axis=None, dtype=None, out=None):   # noqa: A002
    """numpy.cumprod, with exact derivatives at and near zeros (products of the other
    entries, as prod's)."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.cumprod(_plain_operand(a, 'cumprod'), axis, dtype, out)
    _refuse_options('cumprod', out=out)
    if dtype is not None:
        a = astype(a, dtype)
    if axis is None or _ndim(a) == 0 and axis in (0, -1):    # (numpy's cumprod of a 0-d array is 1-d)
        a, axis = ravel(a), 0
    n = _ndim(a)
    return _cumprod(a, axis=(_axis_index(axis, n)) - n)


# ---------------------------------------------------------------- ignoring nan

def _nan_mask(a):
    return _np.isnan(primal_value(a))


def _replace_nan(a, value):
    mask = _nan_mask(a)
    return (where(mask, value, a) if _np.any(mask) else a), mask


def nansum(a, axis=None, dtype=None, out=None, keepdims=_np._NoValue, initial=_np._NoValue,
           where=_np._NoValue):   # noqa: A002
    """numpy.nansum: nan entries count as 0 (and get no derivative)."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.nansum(_plain_operand(a, 'nansum'), axis, dtype, out,
                          **_kw(keepdims=keepdims, initial=initial, where=where))
    _refuse_options('nansum', out=out, initial=initial, where=where)
    return sum(_float_operand(_replace_nan(a, 0.0)[0], dtype), _norm_axis(axis), keepdims is True)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=_np._NoValue, initial=_np._NoValue,
            where=_np._NoValue):   # noqa: A002
    """numpy.nanprod: nan entries count as 1."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.nanprod(_plain_operand(a, 'nanprod'), axis, dtype, out,
                           **_kw(keepdims=keepdims, initial=initial, where=where))
    _refuse_options('nanprod', out=out, initial=initial, where=where)
    return prod(_float_operand(_replace_nan(a, 1.0)[0], dtype), _norm_axis(axis), keepdims is True)


def _nan_count(mask, axis, keepdims, dtype):
    """The number of entries that are not nan, as floats of ``dtype`` (exact integers: a
    division by it rounds as numpy's division by the integer count does).  Made of
    where and sum, so that a staged (traced) mask counts too."""
    return astype(sum(where_(mask, 0.0, 1.0), axis, keepdims=keepdims), dtype)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=_np._NoValue, *, where=_np._NoValue):   # noqa: A002
    """numpy.nanmean: the mean of the entries that are not nan."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.nanmean(_plain_operand(a, 'nanmean'), axis, dtype, out,
                           **_kw(keepdims=keepdims, where=where))
    _refuse_options('nanmean', out=out, where=where)
    axis = _norm_axis(axis)
    arr, mask = _replace_nan(a, 0.0)
    tot = sum(_float_operand(arr, dtype), axis, keepdims is True)
    cnt = _nan_count(mask, axis, keepdims is True, _np.result_type(primal_value(tot)))
    empty = cnt == 0
    if not _np.any(empty):
        return tot / cnt
    # an all-nan slice: numpy's nan (0 / 0, its sign bit too), a constant; divided by 1
    # there, so that neither mode's derivative meets 0 / 0 (forward gave nan, reverse 0)
    import warnings
    warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=2)
    with _np.errstate(invalid='ignore', divide='ignore'):
        nan = primal_value(tot) / primal_value(cnt)
    return where_(empty, nan, tot / where_(empty, 1.0, cnt))


def _nan_extreme(reduce, fill, npfn, ufunc):
    def public(a, axis=None, out=None, keepdims=_np._NoValue, initial=_np._NoValue,
               where=_np._NoValue):   # noqa: A002
        a = _as_operand(a)
        if not _traced(a):
            return npfn(_plain_operand(a, npfn.__name__), axis, out,
                        **_kw(keepdims=keepdims, initial=initial, where=where))
        _refuse_options(npfn.__name__, out=out, initial=initial, where=where)
        axis = _norm_axis(axis)
        arr, mask = _replace_nan(a, fill)
        r = reduce(arr, axis, keepdims is True)
        # numpy's value is fmax.reduce (fmin): of 0.0 and -0.0 it keeps another than max's
        want = ufunc.reduce(primal_value(a), axis=axis, keepdims=keepdims is True)
        flip = _np.logical_and(want == 0, _np.signbit(want) != _np.signbit(primal_value(r)))
        if _np.any(flip):      # the sign bit as numpy's, the derivative kept:
            r = where_(_np.logical_and(flip, _np.signbit(want)), -(0.0 - r),   # 0.0 -> -0.0
                       where_(flip, r + 0.0, r))                              # -0.0 -> 0.0
        empty = _nan_count(mask, axis, keepdims is True, _np.float64) == 0
        if _np.any(empty):
            import warnings
            warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=2)
            r = where_(empty, want, r)          # (numpy's nan, its sign bit too)
        return r
    public.__name__ = public.__qualname__ = npfn.__name__
    public.__doc__ = f"numpy.{npfn.__name__}: the extreme of the entries that are not nan."
    return public


nanmax = _nan_extreme(max, -_np.inf, _np.nanmax, _np.fmax)
nanmin = _nan_extreme(min, _np.inf, _np.nanmin, _np.fmin)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_np._NoValue, *,
           where=_np._NoValue, mean=_np._NoValue, correction=_np._NoValue):   # noqa: A002
    """numpy.nanvar: the variance of the entries that are not nan."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.nanvar(_plain_operand(a, 'nanvar'), axis, dtype, out, ddof,
                          **_kw(keepdims=keepdims, where=where, mean=mean, correction=correction))
    _refuse_options('nanvar', out=out, where=where, mean=mean)
    v, bad, _ = _nanvar(a, axis, dtype, ddof, keepdims, correction)
    return v if bad is None else where_(bad, _np.nan, v)


def _nanvar(a, axis, dtype, ddof, keepdims, correction):
    """(v, bad, count): numpy's nanvar where the degrees of freedom are positive, the mask
    of slices where they are not (None if none), whose result is the constant nan, and the
    number of entries of each slice that are not nan.  Where bad, v divides by 1 instead
    of dof <= 0: a division by 0 (or a negative dof) would give the forward and reverse
    modes different nan and 0 derivatives of that constant."""
    if correction is not _np._NoValue:
        ddof = correction
    axis = _norm_axis(axis)
    arr, mask = _replace_nan(a, 0.0)
    arr = _float_operand(arr, dtype)
    dt = _np.result_type(primal_value(arr))
    with _np.errstate(invalid='ignore', divide='ignore'):
        avg = sum(arr, axis, keepdims=True) / _nan_count(mask, axis, True, dt)
        d = where_(mask, 0.0, arr - avg)
        v = sum(d * d, axis, keepdims is True)
        count = _nan_count(mask, axis, keepdims is True, dt)
        dof = count - ddof
        bad = dof <= 0
        if not _np.any(bad):
            return v / dof, None, count
    import warnings
    warnings.warn("Degrees of freedom <= 0 for slice.", RuntimeWarning, stacklevel=3)
    return v / where_(bad, 1.0, dof), bad, count


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_np._NoValue, *,
           where=_np._NoValue, mean=_np._NoValue, correction=_np._NoValue):   # noqa: A002
    """numpy.nanstd: the square root of nanvar."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.nanstd(_plain_operand(a, 'nanstd'), axis, dtype, out, ddof,
                          **_kw(keepdims=keepdims, where=where, mean=mean, correction=correction))
    _refuse_options('nanstd', out=out, where=where, mean=mean)
    v, bad, count = _nanvar(a, axis, dtype, ddof, keepdims, correction)
    # A slice with one entry that is not nan has deviation 0 whatever it is: its std is
    # the constant 0, as std's of one entry (not sqrt'(0) * 0 = nan).  The constants are
    # chosen after sqrt, which sees 1 there, so that neither mode meets 0 * inf.
    one = count == 1
    if bad is not None:                 # (numpy's functions: the masks may be traced)
        one = _np.logical_and(one, _np.logical_not(bad))
    if bad is None and not _np.any(one):
        return sqrt(v)
    const = one if bad is None else _np.logical_or(one, bad)
    r = sqrt(where_(const, 1.0, v))
    r = where_(one, 0.0, r)
    return r if bad is None else where_(bad, _np.nan, r)


def nancumsum(a, axis=None, dtype=None, out=None):   # noqa: A002
    a = _as_operand(a)
    if not _traced(a):
        return _np.nancumsum(_plain_operand(a, 'nancumsum'), axis, dtype, out)
    _refuse_options('nancumsum', out=out)
    return cumsum(_float_operand(_replace_nan(a, 0.0)[0], dtype), axis)


def nancumprod(a, axis=None, dtype=None, out=None):   # noqa: A002
    a = _as_operand(a)
    if not _traced(a):
        return _np.nancumprod(_plain_operand(a, 'nancumprod'), axis, dtype, out)
    return cumprod(_replace_nan(a, 1.0)[0], axis, dtype, out)


# ---------------------------------------------------------------- order statistics

def _keepdims_shape(a_shape, axis):
    nd_ = len(a_shape)
    if axis is None:
        return (1,) * nd_
    axes = {_axis_index(ax, nd_) for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))}
    return tuple(1 if d in axes else s for d, s in enumerate(a_shape))


def _merged(a, axis):
    """a with the reduced axes moved last and merged into one (numpy's _ureduce)."""
    nd_ = _ndim(a)
    if axis is None:
        return ravel(a)
    axes = sorted({_axis_index(ax, nd_) for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))})
    kept = [d for d in range(nd_) if d not in axes]
    a = transpose(a, kept + axes)
    kept_shape = tuple(_shape(a)[:len(kept)])
    # (the merged length spelled out: -1 is ambiguous when a kept axis is empty)
    return reshape(a, kept_shape + (int(_np.prod(_shape(a)[len(kept):])),))


def _nan_last(s, result):
    """numpy: a slice holding nan (sorted last) gives that nan."""
    last = getitem(s, (Ellipsis, -1))
    nan = _np.isnan(primal_value(last))
    if not _np.any(nan):
        return result
    return where(nan, last, result)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):   # noqa: A002
    """numpy.median: the middle sorted entry, or the mean of the two middle ones (each
    carries its entry's derivative; at ties the derivative is one-sided, see the module)."""
    a = _as_operand(a)
    if not _traced(a):
        return _np.median(_plain_operand(a, 'median'), axis, out, overwrite_input, keepdims)
    _refuse_options('median', out=out)
    shape = _shape(a)
    if _ndim(a) == 0:
        if axis is not None:          # numpy's AxisError (a 0-d array has no axis 0)
            _np.median(primal_value(a), axis=axis)
        return a
    s = sort(_merged(a, axis), axis=-1)
    n = _shape(s)[-1]
    half = n // 2
    middle = slice(half, half + 1) if n % 2 else slice(half - 1, half + 1)
    r = mean(getitem(s, (Ellipsis, middle)), axis=-1)
    if n:
        r = _nan_last(s, r)
    return reshape(r, _keepdims_shape(shape, axis)) if keepdims else r


def _quantile_indices(n, q, method):
    """numpy's virtual index of quantile q among n sorted entries: (previous, next, gamma)
    for interpolating methods, or (index, None, None)."""
    if method == 'linear':
        vi = (n - 1) * q
    elif method in ('lower', 'higher', 'nearest'):
        rounding = {'lower': _np.floor, 'higher': _np.ceil, 'nearest': _np.around}[method]
        return rounding((n - 1) * q).astype(_np.intp), None, None
    elif method == 'midpoint':
        vi = 0.5 * (_np.floor((n - 1) * q) + _np.ceil((n - 1) * q))
    else:
        raise InvalidInputError(f"nestad.numpy.quantile: method {method!r} is not supported on "
                                "nestad values; use 'linear', 'lower', 'higher', 'nearest' or "
                                "'midpoint'")
    vi = _np.asanyarray(vi)
    if _np.issubdtype(vi.dtype, _np.integer) and method == 'linear':
        return vi, None, None
    prev = _np.array(_np.floor(vi))
    nxt = _np.array(prev + 1)
    above = vi >= n - 1
    prev[above], nxt[above] = -1, -1
    below = vi < 0
    prev[below], nxt[below] = 0, 0
    gamma = _np.asanyarray(vi - prev)
    if method == 'midpoint':
        gamma = _np.where(vi % 1 == 0, 0.0, 0.5).astype(vi.dtype)
    return prev.astype(_np.intp), nxt.astype(_np.intp), _np.asanyarray(gamma, dtype=vi.dtype)


def _quantile(a, q, axis, method, keepdims, weak_q, name):
    if _traced(q):
        raise InvalidInputError(f"nestad.numpy.{name}: the quantile q cannot carry a derivative "
                                "(only the data can)")
    if _ndim(q) > 2:
        raise ValueError("q must be a scalar or 1d")
    shape = _shape(a)
    s = sort(_merged(a, axis), axis=-1)
    s = moveaxis(s, -1, 0)                  # numpy samples along the first axis
    n = _shape(s)[0]
    prev, nxt, gamma = _quantile_indices(n, q, method)
    rest = (slice(None),) * (_ndim(s) - 1)
    if nxt is None:
        r = getitem(s, (prev,) + rest)
    else:
        lo, hi = getitem(s, (prev,) + rest), getitem(s, (nxt,) + rest)
        if weak_q:
            gamma = float(gamma)
        else:
            gamma = gamma.reshape(gamma.shape + (1,) * (_ndim(s) - 1))
        d = hi - lo
        r = where(_np.asarray(gamma) >= 0.5, hi - d * (1 - gamma), lo + d * gamma)
    if n:
        last = getitem(s, (-1,) + rest)
        nan = _np.isnan(primal_value(last))
        if _np.any(nan):
            r = where(nan, last, r)
    if keepdims:
        r = reshape(r, _np.shape(q) + _keepdims_shape(shape, axis))
    return r


def quantile(a, q, axis=None, out=None, overwrite_input=False, method='linear', keepdims=False, *,
             weights=None, **kwargs):   # noqa: A002
    """numpy.quantile of the data (linear interpolation between the neighbouring sorted
    entries, or the 'lower', 'higher', 'nearest', 'midpoint' methods)."""
    a = _as_operand(a)
    if not _traced(a, q):
        return _np.quantile(_plain_operand(a, 'quantile'), q, axis, out, overwrite_input, method,
                            keepdims, weights=weights, **kwargs)
    _refuse_options('quantile', out=out, weights=weights)
    weak_q = type(q) in (int, float)
    qv = _np.asanyarray(primal_value(q))
    if not (_np.all(0 <= qv) and _np.all(qv <= 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    return _quantile(a, q if _traced(q) else qv, axis, method, keepdims, weak_q, 'quantile')


def percentile(a, q, axis=None, out=None, overwrite_input=False, method='linear', keepdims=False, *,
               weights=None, **kwargs):   # noqa: A002
    """numpy.percentile: quantile of q / 100."""
    a = _as_operand(a)
    if not _traced(a, q):
        return _np.percentile(_plain_operand(a, 'percentile'), q, axis, out, overwrite_input,
                              method, keepdims, weights=weights, **kwargs)
    _refuse_options('percentile', out=out, weights=weights)
    weak_q = type(q) in (int, float)
    if _traced(q):
        return _quantile(a, q, axis, method, keepdims, weak_q, 'percentile')
    qv = _np.true_divide(q, 100)
    if not (_np.all(0 <= qv) and _np.all(qv <= 1)):
        raise ValueError("Percentiles must be in the range [0, 100]")
    return _quantile(a, _np.asanyarray(qv), axis, method, keepdims, weak_q, 'percentile')
