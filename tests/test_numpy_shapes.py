"""Array manipulation, statistics and casts of nestad.numpy (nestad/numpy/_shapes.py,
_stats.py, the elementwise additions of _more.py): values numpy's (bit for bit, dtypes
too, float32 included) on nestad values, numpy's own call on a nestad value
differentiates, derivatives checked by check_rules (gradient_r, gradient_f and jvp against
each other and central differences; second order in all four pairings), staged equals
eager, refused cases name their cause."""
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.extend import check_rules

R = np.random.default_rng(5)
V = R.uniform(-1.0, 1.0, size=5)
W = R.uniform(-1.0, 1.0, size=5)
M = R.uniform(-1.0, 1.0, size=(3, 4))
M2 = R.uniform(0.5, 1.5, size=(3, 4))
S = R.uniform(-1.0, 1.0, size=(4, 4))
T = R.uniform(-1.0, 1.0, size=(2, 3, 4))
Z = np.array([0.5, -1.2, 0.0, 2.0, 0.7])          # a zero, for cumprod's exactness
NANS = np.array([[0.3, np.nan, -0.8, 1.1], [np.nan, 0.2, 0.6, -0.4], [0.9, -0.1, 0.5, 0.25]])


def weighted_parts(mod, fn, axis):
    """Pieces of a split joined again, piece k scaled by k + 1 (a piece sent to the wrong
    place changes the value)."""
    def f(a, *args):
        parts = fn(mod)(a, *args)
        return mod.concatenate([p * (k + 1.0) for k, p in enumerate(parts)], axis=axis)
    return f


def both(expr):
    """(numpy's version, nestad.numpy's version) of ``expr(module)``."""
    return expr(np), expr(anp)


def case(expr, *args, numpy_call=True):
    np_fn, nd_fn = both(expr)
    return np_fn, nd_fn, args, numpy_call


# name: (numpy's function, nestad.numpy's, arguments, whether numpy's own call on a nestad
# value reaches nestad).  Every argument is differentiated by check_rules.
CASES = {
    'repeat scalar': case(lambda m: lambda a: m.repeat(a, 2), V),
    'repeat axis 1 list': case(lambda m: lambda a: m.repeat(a, [1, 0, 2, 1], axis=1), M),
    'repeat axis None': case(lambda m: lambda a: m.repeat(a, 3), M),
    'tile 3-d reps': case(lambda m: lambda a: m.tile(a, (2, 1, 2)), M),
    'tile int': case(lambda m: lambda a: m.tile(a, 2), V),
    'tril': case(lambda m: lambda a: m.tril(a), S),
    'tril k=-1 stack': case(lambda m: lambda a: m.tril(a, k=-1), T),
    'triu k=1': case(lambda m: lambda a: m.triu(a, k=1), M),
    'triu 1-d': case(lambda m: lambda a: m.triu(a), V),
    'roll axis 1': case(lambda m: lambda a: m.roll(a, 2, axis=1), M),
    'roll None': case(lambda m: lambda a: m.roll(a, -1), M),
    'roll tuples': case(lambda m: lambda a: m.roll(a, (1, 2), axis=(0, 2)), T),
    'roll big shift': case(lambda m: lambda a: m.roll(a, 7, axis=-1), T),
    'append None': case(lambda m: m.append, V, M),
    'append axis 0': case(lambda m: lambda a, b: m.append(a, b, axis=0), M, M[:1]),
    'split': case(lambda m: weighted_parts(m, lambda m: lambda a: m.split(a, 2, axis=1), 1), M),
    'array_split': case(lambda m: weighted_parts(m, lambda m: lambda a: m.array_split(a, 3), 0), V),
    'array_split indices axis 2': case(
        lambda m: weighted_parts(m, lambda m: lambda a: m.array_split(a, [1, 3], axis=2), 2), T),
    'vsplit': case(lambda m: weighted_parts(m, lambda m: lambda a: m.vsplit(a, 3), 0), M),
    'hsplit': case(lambda m: weighted_parts(m, lambda m: lambda a: m.hsplit(a, [1, 3]), 1), M),
    'dsplit': case(lambda m: weighted_parts(m, lambda m: lambda a: m.dsplit(a, 2), 2), T),
    'diag of vector k=1': case(lambda m: lambda a: m.diag(a, k=1), V),
    'diag of vector k=-2': case(lambda m: lambda a: m.diag(a, -2), V),
    'diag of matrix k=1': case(lambda m: lambda a: m.diag(a, k=1), S),
    'diagflat k=-1': case(lambda m: lambda a: m.diagflat(a, k=-1), M[:2, :2]),
    'diagonal axes -1, 0': case(lambda m: lambda a: m.diagonal(a, 1, -1, 0), T),
    'trace offset axes': case(lambda m: lambda a: m.trace(a, offset=-1, axis1=2, axis2=1), T),
    'flip None': case(lambda m: lambda a: m.flip(a), T),
    'flip axes': case(lambda m: lambda a: m.flip(a, (0, 2)), T),
    'flipud': case(lambda m: m.flipud, M),
    'fliplr': case(lambda m: m.fliplr, M),
    'sort': case(lambda m: m.sort, V),
    'sort axis 0': case(lambda m: lambda a: m.sort(a, axis=0), M),
    'sort axis None stable': case(lambda m: lambda a: m.sort(a, axis=None, kind='stable'), M),
    'take_along_axis argsort': case(
        lambda m: lambda a: m.take_along_axis(a, np.argsort(M2, axis=1), axis=1), M),
    'take': case(lambda m: lambda a: m.take(a, [0, 3, 3, -1]), V),
    'take axis wrap': case(lambda m: lambda a: m.take(a, [[0, 5], [2, 1]], axis=1, mode='wrap'), M),
    'linspace': case(lambda m: lambda s, e: m.linspace(s, e, 5), 0.3, 1.7),
    'linspace arrays axis 1 no endpoint': case(
        lambda m: lambda s, e: m.linspace(s, e, 4, endpoint=False, axis=1), V[:2], W[:2]),
    'linspace retstep': case(lambda m: lambda s, e: m.linspace(s, e, 3, retstep=True)[0], -0.4, 2.5),
    'diff n=2 axis 1': case(lambda m: lambda a: m.diff(a, n=2, axis=1), M),
    'diff prepend append': case(lambda m: lambda a, p, q: m.diff(a, prepend=p, append=q),
                                V, 0.5, W[:2]),
    'var': case(lambda m: m.var, M),
    'var axis 1 ddof 1 keepdims': case(lambda m: lambda a: m.var(a, axis=1, ddof=1, keepdims=True), M),
    'var axes (0, 2)': case(lambda m: lambda a: m.var(a, axis=(0, 2)), T),
    'std': case(lambda m: m.std, M),
    'std axis 0 ddof 1': case(lambda m: lambda a: m.std(a, axis=0, ddof=1), M),
    'average weights': case(lambda m: lambda a, w: m.average(a, weights=w), M, M2),
    'average 1-d weights axis 1': case(lambda m: lambda a, w: m.average(a, axis=1, weights=w),
                                       M, M2[0]),
    'cov': case(lambda m: m.cov, M),
    'cov rowvar y bias': case(lambda m: lambda a, b: m.cov(a, b, rowvar=False, bias=True), M, M2),
    'cov aweights ddof': case(lambda m: lambda a, w: m.cov(a, aweights=w, ddof=2), M, M2[1]),
    'corrcoef': case(lambda m: m.corrcoef, M),
    'ptp axis 1': case(lambda m: lambda a: m.ptp(a, axis=1), M),
    'cumprod': case(lambda m: m.cumprod, Z),
    'cumprod axis 1': case(lambda m: lambda a: m.cumprod(a, axis=1), M),
    'cumprod axis 0 stack': case(lambda m: lambda a: m.cumprod(a, axis=0), T),
    'nansum': case(lambda m: lambda a: m.nansum(a, axis=0), NANS),
    'nanmean': case(lambda m: lambda a: m.nanmean(a, axis=1), NANS),
    'nanprod': case(lambda m: m.nanprod, NANS),
    'nanmax': case(lambda m: lambda a: m.nanmax(a, axis=1), NANS),
    'nanmin': case(lambda m: m.nanmin, NANS),
    'nanvar ddof 1': case(lambda m: lambda a: m.nanvar(a, axis=1, ddof=1), NANS),
    'nanstd': case(lambda m: m.nanstd, NANS),
    'nancumsum': case(lambda m: lambda a: m.nancumsum(a, axis=1), NANS),
    'nancumprod': case(lambda m: m.nancumprod, NANS),
    'median odd': case(lambda m: m.median, V),
    'median even axis 1': case(lambda m: lambda a: m.median(a, axis=1), M),
    'median axes keepdims': case(lambda m: lambda a: m.median(a, axis=(0, 2), keepdims=True), T),
    'quantile': case(lambda m: lambda a: m.quantile(a, 0.3), V),
    'quantile array q axis 1': case(lambda m: lambda a: m.quantile(a, np.array([0.1, 0.5, 0.95]),
                                                                   axis=1), M),
    'quantile lower keepdims': case(lambda m: lambda a: m.quantile(a, [0.4, 0.6], axis=0,
                                                                   method='lower', keepdims=True), M),
    'quantile midpoint': case(lambda m: lambda a: m.quantile(a, 0.3, method='midpoint'), M),
    'percentile nearest': case(lambda m: lambda a: m.percentile(a, 70, method='nearest'), V),
    'percentile higher axis 0': case(lambda m: lambda a: m.percentile(a, [10, 90], axis=0,
                                                                      method='higher'), M),
    'pad edge': case(lambda m: lambda a: m.pad(a, ((1, 2), (2, 0)), mode='edge'), M),
    'pad reflect': case(lambda m: lambda a: m.pad(a, 2, mode='reflect'), M),
    'pad symmetric': case(lambda m: lambda a: m.pad(a, (3,), mode='symmetric'), M),
    'pad wrap': case(lambda m: lambda a: m.pad(a, ((1, 2),), mode='wrap'), M),
    'pad constant pairs': case(lambda m: lambda a: m.pad(a, ((1, 0), (0, 2)),
                                                        constant_values=((0.5, -1.0), (2.0, 3.0))), M),
    'pad perturbed constant': case(lambda m: lambda a, c: m.pad(a, 1, constant_values=c), M, 0.7),
    'r_': case(lambda m: lambda a, b: m.r_[a, 1.5, b[:2], 0:3], V, W, numpy_call=False),
    'r_ axis directive': case(lambda m: lambda a, b: m.r_['1', a, b], M, M2, numpy_call=False),
    'c_': case(lambda m: lambda a, b: m.c_[a, b, a], V, W, numpy_call=False),
    # numpy.full_like(M, c) dispatches on M only (plain): numpy.copyto(out, c) then refuses c
    'full_like perturbed fill': case(lambda m: lambda a, c: m.full_like(M, c) * a, M, 0.7,
                                     numpy_call=False),
    'fmod': case(lambda m: m.fmod, np.array([2.3, -2.9, 1.7, -0.4]), np.array([0.7, 0.8, -0.9, 0.3])),
    'copysign': case(lambda m: m.copysign, V, W),
    # (x1 at 0 in its jump: only x2 is differentiated there)
    'heaviside': case(lambda m: lambda b: m.heaviside(np.array([-0.5, 0.0, 0.7, 0.0]), b),
                      np.array([0.3, 0.4, 0.5, -0.6])),
    'heaviside x1': case(lambda m: lambda a, b: m.heaviside(a, b), V, W),
    'float_power': case(lambda m: m.float_power, np.array([0.5, 1.5, 2.0]), np.array([1.3, -0.7, 2.0])),
}


def _primal_run(fn, args):
    """fn's value on perturbed arguments (the primal of a forward run): the composition's
    value, not numpy's own call on plain arguments."""
    return nd.jvp(fn, tuple(args), tuple(np.ones_like(a) for a in args))[0]


def _float32(a):
    return np.float32(a) if np.ndim(a) == 0 else np.asarray(a, dtype=np.float32)


@pytest.mark.parametrize('name', sorted(CASES))
@pytest.mark.parametrize('dtype', ['float64', 'float32'])
def test_values_are_numpys(name, dtype):
    np_fn, nd_fn, args, _ = CASES[name]
    if dtype == 'float32':
        if name.startswith('float_power') or name.startswith('cov') or name == 'corrcoef':
            pytest.skip("numpy computes these in float64")
        args = tuple(_float32(a) for a in args)
    expected = np.asarray(np_fn(*args))
    for got in (nd_fn(*args), _primal_run(nd_fn, args)):
        got = np.asarray(got)
        assert got.shape == expected.shape and got.dtype == expected.dtype, (got.dtype, expected.dtype)
        np.testing.assert_array_equal(got, expected)
        assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize('name', sorted(n for n in CASES if CASES[n][3]))
def test_numpys_own_call_on_a_nestad_value_differentiates(name):
    np_fn, nd_fn, args, _ = CASES[name]
    w = R.uniform(0.5, 1.5, size=np.shape(np_fn(*args)))
    nums = tuple(range(len(args)))
    ours = nd.gradient_r(lambda *a: anp.sum(w * nd_fn(*a)), argnums=nums)(*args)
    theirs = nd.gradient_r(lambda *a: anp.sum(w * np_fn(*a)), argnums=nums)(*args)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(t, o)


@pytest.mark.parametrize('name', sorted(CASES))
def test_rules(name):
    _, nd_fn, args, _ = CASES[name]
    if 'nan' in name:    # finite differences of a nan entry are nan: check the others
        mask = ~np.isnan(args[0])
        base = args[0]

        def fn(x):
            return nd_fn(anp.where(mask, x, base))
        check_rules(fn, np.where(mask, base, 0.0), order=2)
        return
    check_rules(nd_fn, *args, order=2)


# ---------------------------------------------------------------- exact derivatives

def test_cumprod_derivatives_are_products_of_the_other_entries_at_zeros():
    """d y_i / d x_k = prod_{j <= i, j != k} x_j: exact at a zero (no 0/0) and near one (no
    cancellation), to the second order."""
    x = np.array([0.5, 1e-200, 0.0, 2.0, -1.5])
    J = nd.jacobian_f(anp.cumprod)(x)
    Jr = nd.jacobian_r(anp.cumprod)(x)
    for i in range(5):
        for k in range(5):
            expected = np.prod([x[j] for j in range(i + 1) if j != k]) if k <= i else 0.0
            assert J[i, k] == expected and Jr[i, k] == expected, (i, k)
    # second derivatives of y_4 = x0 x1 x2 x3 x4: the product of the three others
    H = nd.hessian(lambda x: anp.cumprod(x)[-1])(x)
    for k in range(5):
        for m in range(5):
            expected = 0.0 if k == m else np.prod([x[j] for j in range(5) if j not in (k, m)])
            assert H[k, m] == expected, (k, m)


def test_std_of_one_entry_is_a_constant():
    """n = 1: the deviation is 0 whatever x is, so std is constant (derivative 0, not
    sqrt'(0) * 0 = nan)."""
    assert nd.gradient_r(anp.std)(3.5) == 0.0
    assert nd.derivative(anp.std)(3.5) == 0.0
    np.testing.assert_array_equal(nd.gradient_r(lambda x: anp.sum(anp.std(x, axis=0)))(M[:1]),
                                  np.zeros((1, 4)))


def test_std_and_var_of_a_list_of_nestad_scalars():
    """nestad.numpy's functions take lists of nestad numbers (numpy.std([x, x + 2]) cannot:
    numpy.array of a list reads its entries through __array__, with no dispatch)."""
    assert nd.gradient_r(lambda x: anp.std([x, x + 2]))(0.0) == 0.0
    assert nd.gradient_r(lambda x: anp.var((x, 3.0 * x)))(1.5) == pytest.approx(3.0)   # var = x^2
    assert nd.derivative(lambda x: anp.std([x, 2.0 * x, 0.0]))(1.0) == pytest.approx(np.std([1, 2, 0]))


def test_median_at_a_tie_takes_one_entrys_derivative():
    """At tied middle entries the median has a kink: its derivative is one-sided, the
    derivative of the entry argsort puts in the middle (documented in notes/arrays.md)."""
    x = np.array([1.0, 2.0, 2.0, 5.0, 0.0])
    g = nd.gradient_r(anp.median)(x)
    assert g.sum() == 1.0 and set(g) == {0.0, 1.0} and g[1] + g[2] == 1.0


def test_sort_of_a_tie_is_a_one_sided_derivative():
    x = np.array([0.3, 0.3, -1.0])
    g = nd.gradient_r(lambda x: anp.sort(x)[1])(x)
    assert g.tolist() in ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0])


# ---------------------------------------------------------------- call forms

def test_linspace_with_equal_end_points_and_small_num():
    for num in (0, 1, 5):
        for start, stop in ((1.2, 3.4), (1.2, -3.4), (1.2, 1.2)):
            f = lambda s, e: anp.sum(anp.linspace(s, e, num) * np.arange(1.0, num + 1))   # noqa: E731
            gs, ge = nd.gradient_r(f, argnums=(0, 1))(start, stop)
            k = np.arange(num)
            frac = k / (num - 1) if num > 1 else np.zeros(num)
            assert gs == pytest.approx(np.sum((1 - frac) * (k + 1)))
            assert ge == pytest.approx(np.sum(frac * (k + 1)))
            np.testing.assert_array_equal(_primal_run(lambda s, e: anp.linspace(s, e, num),
                                                      (start, stop)), np.linspace(start, stop, num))


def test_where_with_one_argument_gives_indices():
    x = np.array([[0.5, -1.0], [0.0, 2.0]])
    seen = []
    nd.gradient_r(lambda x: (seen.append(anp.where(x > 0)), anp.sum(x))[1])(x)
    for got, expected in zip(seen[0], np.where(x > 0)):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(anp.nonzero(x)[0], np.nonzero(x)[0])
    with pytest.raises(ValueError, match='both or neither'):
        anp.where(x > 0, x)


def test_integer_casts_give_numpys_integers_without_derivative():
    """An integer cast is piecewise constant, its derivative zero: numpy.int64(x) (numpy asks
    the value for an int64 array), numpy.asarray(x, dtype=int) and x.astype(int) give the
    integers.  autograd's test_cast_to_int indexes with them."""
    W_ = R.uniform(-1.0, 1.0, size=(5, 10))
    W_[:, -1] = [0, 3, 1, 4, 2]
    for cast in (np.int64, anp.int64, lambda v: np.asarray(v, dtype=np.intp), lambda v: v.astype(int)):
        def f(W):
            inds = cast(W[:, -1])
            assert inds.dtype == np.int64 and isinstance(inds, np.ndarray)
            return anp.sum(W[:, :-1][inds] ** 2)
        g = nd.gradient_r(f)(W_)
        expected = np.zeros_like(W_)
        expected[:, :-1] = 2 * W_[:, :-1]
        np.testing.assert_array_equal(g, expected)
        np.testing.assert_array_equal(nd.gradient_f(f)(W_), expected)
    assert nd.derivative(lambda s: s * np.int32(s))(2.5) == 2.0
    assert nd.derivative(lambda s: s * float(np.bool_(s)))(-2.5) == 1.0


def test_float_casts_keep_the_derivative_or_name_astype():
    x = np.array([0.5, 1.5])
    assert nd.gradient_r(lambda x: anp.sum(x.astype(np.float32) * 2.0))(x).tolist() == [2.0, 2.0]
    with pytest.raises(nd.PerturbedConversionError, match='astype'):
        nd.gradient_r(lambda x: anp.sum(np.float32(x)))(x)


def test_an_escaped_value_cast_to_int_is_refused():
    kept = []
    nd.derivative(lambda s: kept.append(s) or s)(1.5)
    with pytest.raises(nd.EscapedPerturbationError):
        np.int64(kept[0])


def test_pythons_int_stays_refused():
    with pytest.raises(nd.PerturbedConversionError, match='int'):
        nd.derivative(lambda x: int(x))(1.5)


def test_constants_of_a_nestad_values_shape():
    x = np.array([0.5, 1.5])
    for fn, value in ((anp.zeros_like, 0.0), (anp.ones_like, 1.0), (np.zeros_like, 0.0),
                      (lambda a: anp.full_like(a, 3.0), 3.0), (lambda a: np.full_like(a, 3.0), 3.0)):
        seen = []
        g = nd.gradient_r(lambda x: (seen.append(fn(x)), anp.sum(x * seen[-1]))[1])(x)
        assert isinstance(seen[0], np.ndarray) and seen[0].tolist() == [value, value]
        assert g.tolist() == [value, value]


def test_squeeze_and_expand_dims_edge_cases():
    x = R.uniform(size=(1, 3, 1))
    for f in (lambda m: lambda a: m.squeeze(a, axis=-1), lambda m: lambda a: m.squeeze(a, (0, 2)),
              lambda m: lambda a: m.expand_dims(a, (0, -1)), lambda m: lambda a: m.expand_dims(a, 2)):
        np_fn, nd_fn = both(f)
        np.testing.assert_array_equal(_primal_run(nd_fn, (x,)), np_fn(x))
        check_rules(nd_fn, x, order=1)


@pytest.mark.parametrize('call', [
    lambda a: anp.expand_dims(a, 5), lambda a: anp.expand_dims(a, (0, 0)),
    lambda a: anp.squeeze(a, 3), lambda a: anp.squeeze(a, 1), lambda a: anp.moveaxis(a, 0, 4),
    lambda a: anp.swapaxes(a, 0, 3), lambda a: anp.transpose(a, (0, 3)),
    lambda a: anp.transpose(a, (0, 0)), lambda a: anp.rollaxis(a, 0, 4),
    lambda a: anp.roll(a, 1, axis=2), lambda a: anp.flip(a, 2), lambda a: anp.cumprod(a, 2),
    lambda a: anp.diagonal(a, 0, 1, 1), lambda a: anp.diagonal(a, 0, 0, 2),
    lambda a: anp.diagonal(a[0]), lambda a: anp.trace(a, 0, 1, -1),
])
def test_axes_out_of_range_are_numpys_errors_not_wrapped_around(call):
    """An axis past the array's rank used to wrap around (a % ndim) and move another axis."""
    x = R.uniform(size=(1, 3))
    with pytest.raises(ValueError):          # numpy's AxisError is a ValueError
        call(x)
    with pytest.raises(ValueError):
        nd.gradient_r(lambda a: anp.sum(call(a)))(x)


# ---------------------------------------------------------------- refused cases

@pytest.mark.parametrize('call, match', [
    (lambda x: anp.pad(x, 1, mode='linear_ramp'), "mode='constant'"),
    (lambda x: anp.pad(x, 1, mode='reflect', reflect_type='odd'), "reflect_type='even'"),
    (lambda x: anp.var(x, out=np.zeros(())), 'out='),
    (lambda x: anp.quantile(x, 0.5, method='hazen'), "method 'hazen'"),
    (lambda x: anp.quantile(x, x[0] * 0 + 0.5), 'quantile q cannot carry a derivative'),
    (lambda x: anp.sort(x, order='a'), 'structured'),
    (lambda x: anp.r_['r', x, x], 'numpy.matrix'),
    (lambda x: anp.linspace(x[0], x[1], 3, dtype=int), 'drop their derivatives'),
    (lambda x: anp.take_along_axis(x, x, axis=0), 'cannot carry a perturbation'),
    (lambda x: x.astype(complex), 'astype'),
])
def test_refused_cases_name_the_cause(call, match):
    with pytest.raises(nd.InvalidInputError, match=match):
        nd.gradient_r(lambda x: anp.sum(call(x)))(V)


def test_split_that_does_not_divide_is_numpys_error():
    with pytest.raises(ValueError, match='equal division'):
        nd.gradient_r(lambda x: anp.sum(anp.split(x, 2)[0]))(V)


# ---------------------------------------------------------------- staged

STAGED = ['repeat axis 1 list', 'tile 3-d reps', 'tril k=-1 stack', 'roll tuples', 'append axis 0',
          'array_split indices axis 2', 'diag of vector k=1', 'flip axes', 'diff prepend append',
          'var axis 1 ddof 1 keepdims', 'average 1-d weights axis 1', 'cov', 'cumprod axis 1',
          'linspace', 'linspace arrays axis 1 no endpoint', 'pad reflect', 'r_', 'copysign',
          'fmod', 'nanmean', 'heaviside']


@pytest.mark.parametrize('name', STAGED)
def test_staged_equals_eager(name):
    _, nd_fn, args, _ = CASES[name]
    w = R.uniform(0.5, 1.5, size=np.shape(nd_fn(*args)))
    nums = tuple(range(len(args)))
    grad = nd.gradient_r(lambda *a: anp.sum(w * nd_fn(*a) ** 2), argnums=nums)
    staged = nd.stage(grad)
    for got, expected in zip(staged(*args), grad(*args)):
        np.testing.assert_allclose(got, expected, rtol=1e-14, atol=1e-15)


def test_staged_casts():
    x = np.array([1.5, -2.5])
    f = nd.gradient_r(lambda x: anp.sum(x.astype(int) * x + x.astype(np.float32) ** 2))
    np.testing.assert_array_equal(nd.stage(f)(x), f(x))
    np.testing.assert_array_equal(f(x), [1.0 + 3.0, -2.0 - 5.0])


def test_staged_sort_is_refused_with_the_cause():
    with pytest.raises(nd.StagingError, match='depends on the data'):
        nd.stage(lambda x: anp.sum(anp.sort(x)))(V)


# ---------------------------------------------------------------- float32

F32_CASES = ['cumprod axis 1', 'var axis 1 ddof 1 keepdims', 'roll tuples', 'median even axis 1',
             'quantile', 'diag of vector k=1', 'pad reflect', 'average weights',
             'linspace arrays axis 1 no endpoint', 'nanmean', 'copysign']


@pytest.mark.parametrize('name', F32_CASES)
def test_float32_arguments_keep_float32_values_and_derivatives(name):
    """float32 in, float32 out, and float32 derivatives in every mode (even where a float64
    constant promotes the computation: the derivative lives in the argument's space)."""
    _, nd_fn, args, _ = CASES[name]
    args32 = tuple(_float32(a) for a in args)
    if 'nan' not in name:
        assert np.asarray(_primal_run(nd_fn, args32)).dtype == np.float32
    w = R.uniform(0.5, 1.5, size=np.shape(nd_fn(*args)))          # float64 weights
    nums = tuple(range(len(args)))
    F = lambda *a: anp.sum(w * anp.nan_to_num(nd_fn(*a)))        # noqa: E731
    F64 = nd.gradient_r(F, argnums=nums)(*[np.float64(a) if np.ndim(a) == 0 else np.asarray(a, float)
                                           for a in args32])
    for op in (nd.gradient_r, nd.gradient_f):
        for g, a, ref in zip(op(F, argnums=nums)(*args32), args32, F64):
            assert np.asarray(g).dtype == np.float32, (op.__name__, np.asarray(g).dtype)
            np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-5)
    first = args32[0]
    h = nd.hessian(lambda a: F(a, *args32[1:]))(first)
    assert h.dtype == np.float32
    jr = nd.jacobian_r(lambda a: nd_fn(a, *args32[1:]))(first)
    jf = nd.jacobian_f(lambda a: nd_fn(a, *args32[1:]))(first)
    assert jr.dtype == np.float32 or 'nan' in name
    np.testing.assert_allclose(jr, jf, rtol=1e-5, atol=1e-6)
