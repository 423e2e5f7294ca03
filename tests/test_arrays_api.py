"""Arrays, part three: the array API around the rules.  ndarray subclasses are refused,
nestad.numpy gives numpy's own values (signed zeros, nan, dtypes), accepts lists,
names unsupported numpy functions in full, and offers the ndarray methods and a
functional update ``x.at[i].set(v)``."""
import os
import sys

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp

pytestmark = pytest.mark.filterwarnings('ignore::PendingDeprecationWarning')   # numpy.matrix

sys.path.insert(0, os.path.dirname(__file__))
from test_arrays import check_gradient, check_hessian, check_jacobian, uniform  # noqa: E402


# ---------------------------------------------------------------- ndarray subclasses

def masked():
    return np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])


def matrix():
    return np.matrix([[1.0, 2.0], [3.0, 4.0]])


class Tagged(np.ndarray):
    """A user's ndarray subclass."""


def tagged():
    return np.arange(3.0).view(Tagged)


SUBCLASSES = {   # name: (constructor, words the message must contain)
    'masked': (masked, ['numpy.ma.MaskedArray', 'filled', 'numpy.asarray']),
    'matrix': (matrix, ['numpy.matrix', 'numpy.asarray', '@']),
    'user-subclass': (tagged, ['Tagged', 'subclass of numpy.ndarray', 'numpy.asarray']),
}


def total(x):
    return anp.sum(x * x)


OPERATORS_ON_INPUT = {
    'gradient_r': lambda x: nd.gradient_r(total)(x),
    'gradient_f': lambda x: nd.gradient_f(total)(x),
    'jacobian_f': lambda x: nd.jacobian_f(lambda x: x * 2.0)(x),
    'jacobian_r': lambda x: nd.jacobian_r(lambda x: x * 2.0)(x),
    'hessian': lambda x: nd.hessian(total)(x),
    'hvp': lambda x: nd.hvp(total, x, np.ones(np.shape(x))),
    'jvp-primal': lambda x: nd.jvp(total, (x,), (np.ones(np.shape(x)),)),
    'jvp-tangent': lambda x: nd.jvp(total, (np.ones(np.shape(x)),), (x,)),
    'vjp': lambda x: nd.vjp(total, x),
    'in-a-dict': lambda x: nd.gradient_r(lambda p: total(p['w']))({'w': x}),
    'vjp-cotangent': lambda x: nd.vjp(lambda y: y * 2.0, np.ones(np.shape(x)))[1](x),
}


@pytest.mark.parametrize('op', sorted(OPERATORS_ON_INPUT))
@pytest.mark.parametrize('kind', sorted(SUBCLASSES))
def test_operator_refuses_ndarray_subclass_input_naming_it(kind, op):
    make, words = SUBCLASSES[kind]
    with pytest.raises(nd.InvalidInputError) as info:
        OPERATORS_ON_INPUT[op](make())
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_memmap_input_is_refused_with_asarray_advice(tmp_path):
    m = np.memmap(tmp_path / 'x.dat', dtype=float, mode='w+', shape=(3,))
    with pytest.raises(nd.InvalidInputError, match='numpy.memmap.*numpy.asarray'):
        nd.gradient_r(total)(m)
    np.testing.assert_allclose(nd.gradient_r(total)(np.asarray(m)), np.zeros(3))


USES_INSIDE = {     # a subclass met by nestad.numpy inside a differentiated function
    'array-times-subclass': lambda x, m: x * m,
    'np-ufunc': lambda x, m: np.add(m, x),
    'anp-function': lambda x, m: anp.multiply(m, x),
    'matmul': lambda x, m: x @ m,
    'scalar-function-of-subclass': lambda x, m: nd.sin(m) * x,
    'where': lambda x, m: anp.where(np.ones(np.shape(m), dtype=bool), m, x),
    'concatenate': lambda x, m: anp.concatenate([x, m]),
}


@pytest.mark.parametrize('use', sorted(USES_INSIDE))
@pytest.mark.parametrize('kind', sorted(SUBCLASSES))
@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f'])
def test_subclass_operand_inside_differentiated_code_is_refused(op, kind, use):
    make, words = SUBCLASSES[kind]
    m = make()
    x = np.ones(np.shape(m))
    with pytest.raises(nd.InvalidInputError) as info:
        getattr(nd, op)(lambda x: anp.sum(USES_INSIDE[use](x, m)))(x)
    assert words[0] in str(info.value)


@pytest.mark.parametrize('kind', sorted(SUBCLASSES))
def test_perturbed_scalar_times_subclass_is_refused(kind):
    make, words = SUBCLASSES[kind]
    with pytest.raises(nd.InvalidInputError) as info:
        nd.derivative(lambda s: s * make())(1.0)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_masked_array_on_the_left_of_an_operator_is_refused():
    # MaskedArray's own __mul__ converts its operand to a plain array: that is refused
    # (a TypeError naming masked arrays), not silently computed without the derivative.
    with pytest.raises(TypeError, match='masked'):
        nd.gradient_r(lambda x: anp.sum(masked() * x))(np.ones(3))


@pytest.mark.parametrize('fn', [anp.sum, anp.mean, anp.prod, anp.max, anp.sin, anp.exp, anp.square,
                                anp.positive, anp.negative, anp.linalg.norm, anp.cumsum,
                                anp.logsumexp, lambda m: anp.dot(m, m)],
                         ids=['sum', 'mean', 'prod', 'max', 'sin', 'exp', 'square', 'positive',
                              'negative', 'norm', 'cumsum', 'logsumexp', 'dot'])
def test_nestad_numpy_functions_refuse_masked_arrays_even_unperturbed(fn):
    # e.g. mean would divide the masked sum by the count of all entries: refused instead
    with pytest.raises(nd.InvalidInputError, match='MaskedArray'):
        fn(masked())


# ---------------------------------------------------------------- numpy's own values

def assert_same_as_numpy(actual, expected, what=''):
    """Equal to numpy's result bit for bit where it matters: shape, dtype, values with nan
    in the same places, and the sign of every zero."""
    a, e = np.asarray(nd.primal_value(actual)), np.asarray(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} != {e.dtype}"
    assert np.array_equal(a, e, equal_nan=True), f"{what}: {a} != {e}"
    if a.dtype.kind == 'f':
        assert np.array_equal(np.signbit(a), np.signbit(e)), f"{what}: signs of {a} != {e}"


SPECIAL = np.array([[-0.0, 0.0, 1.5, -2.0], [np.nan, np.inf, -np.inf, 1e-310]])
VALUES = {
    'special': SPECIAL,
    'float32': np.array([[0.5, -0.0, 2.0], [1.0, 0.0, -1.5]], dtype=np.float32),
    'int': np.array([[1, 0, 2], [-3, 4, 5]]),
    'python-float': -0.0,
    'python-int': 3,
}
UNARY = ['sin', 'cos', 'tan', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'tanh', 'arcsinh',
         'arccosh', 'arctanh', 'exp', 'expm1', 'log', 'log1p', 'log2', 'log10', 'sqrt', 'cbrt',
         'absolute', 'square', 'negative', 'positive', 'sign', 'floor', 'ceil', 'rint', 'trunc']
BINARY = ['add', 'subtract', 'multiply', 'divide', 'power', 'arctan2', 'hypot', 'maximum',
          'minimum', 'logaddexp', 'mod']


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('kind', sorted(VALUES))
@pytest.mark.parametrize('name', UNARY)
def test_unary_values_equal_numpys(name, kind):
    x = VALUES[kind]
    assert_same_as_numpy(getattr(anp, name)(x), getattr(np, name)(x), name)


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('ky', sorted(VALUES))
@pytest.mark.parametrize('kx', sorted(VALUES))
@pytest.mark.parametrize('name', BINARY)
def test_binary_values_equal_numpys(name, kx, ky):
    x, y = VALUES[kx], VALUES[ky]
    if np.ndim(x) and np.ndim(y) and np.shape(x) != np.shape(y):
        y = np.resize(y, np.shape(x)).astype(np.result_type(y))
    try:
        expected = getattr(np, name)(x, y)
    except ValueError:               # numpy refuses integers to negative integer powers
        with pytest.raises(ValueError):
            getattr(anp, name)(x, y)
        return
    assert_same_as_numpy(getattr(anp, name)(x, y), expected, name)


def test_integer_reciprocal_is_the_true_reciprocal():
    # numpy.reciprocal of an integer is integer division (0 for |x| > 1), a step function
    # its derivative -1/x^2 would contradict: nestad returns 1/x in float64, as JAX does.
    assert_same_as_numpy(anp.reciprocal(np.array([1, 2, -4])), np.array([1.0, 0.5, -0.25]))
    assert_same_as_numpy(anp.reciprocal(4), np.float64(0.25))
    for kind in ('special', 'float32', 'python-float'):
        with np.errstate(divide='ignore', over='ignore'):
            assert_same_as_numpy(anp.reciprocal(VALUES[kind]), np.reciprocal(VALUES[kind]), kind)


REDUCTIONS = ['sum', 'mean', 'prod', 'max', 'min']


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('keepdims', [False, True])
@pytest.mark.parametrize('axis', [None, 0, -1])
@pytest.mark.parametrize('kind', ['special', 'float32', 'int'])
@pytest.mark.parametrize('name', REDUCTIONS)
def test_reduction_values_and_dtypes_equal_numpys(name, kind, axis, keepdims):
    x = VALUES[kind]
    assert_same_as_numpy(getattr(anp, name)(x, axis=axis, keepdims=keepdims),
                  getattr(np, name)(x, axis=axis, keepdims=keepdims), name)


@pytest.mark.parametrize('keepdims', [False, True])
@pytest.mark.parametrize('axis', [0, -1, ()])
@pytest.mark.parametrize('name', REDUCTIONS + ['logsumexp', 'cumsum'])
def test_reductions_of_a_0d_array_over_axis_0_in_every_mode(name, axis, keepdims):
    # numpy reduces a 0-d array over axis 0 or -1 as over no axis (its mean refuses them);
    # the rules crashed with "integer modulo by zero" (found by fuzzing against JAX).
    x = np.array(0.7)
    if name == 'cumsum':
        if keepdims or axis == ():
            return
        f, expected = (lambda x: anp.cumsum(x, axis=axis)), np.cumsum(x, axis=axis)
    else:
        f = lambda x: getattr(anp, name)(x, axis=axis, keepdims=keepdims)    # noqa: E731
        if name == 'mean' and axis != ():
            with pytest.raises(ValueError, match='axis'):
                np.mean(x, axis=axis)
            for op in (nd.gradient_r, nd.gradient_f):
                with pytest.raises(ValueError, match='axis'):
                    op(f)(x)
            return
        expected = x if name == 'logsumexp' else getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert np.shape(f(x)) == np.shape(expected) and np.allclose(f(x), expected)
    F = lambda x: anp.sum(f(x) ** 3)                                           # noqa: E731
    for op in (nd.gradient_r, nd.gradient_f):
        assert np.isclose(op(F)(x), 3 * 0.7 ** 2)
    for outer in (nd.jacobian_f, nd.jacobian_r):
        for inner in (nd.gradient_r, nd.gradient_f):
            assert np.isclose(outer(inner(F))(x), 6 * 0.7)


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('mode', ['derivative', 'gradient_r', 'f-over-r'])
def test_divide_and_mod_of_perturbed_python_floats_are_ieee_as_numpys(mode):
    # nestad.numpy.divide(1.0, 0.0) is inf (numpy's), but on a perturbed Python float it took
    # the scalar operator's path and raised ZeroDivisionError (inside scipy rules too).
    d = {'derivative': nd.derivative, 'gradient_r': nd.gradient_r,
         'f-over-r': lambda f: lambda x: nd.jvp(lambda s: nd.gradient_r(f)(x + s), (0.0,), (1.0,))[0]}[mode]
    assert d(lambda x: anp.divide(1.0, x))(0.0) == -np.inf
    assert d(lambda x: anp.divide(x, 0.0))(1.0) == np.inf
    assert d(lambda y: anp.mod(7.5, y))(2.0) == -3.0
    assert np.isnan(nd.jvp(lambda x: anp.mod(x, 0.0), (1.0,), (1.0,))[0])
    # the / operator keeps Python's semantics
    with pytest.raises(ZeroDivisionError):
        nd.derivative(lambda x: x / 0.0)(1.0)


NEG0, ONE = np.array([-0.0]), np.array([1.0])
PRODUCTS = {   # name: (nestad, numpy, arguments); numpy.dot([-0.], [1.]) is -0.0, vdot's +0.0
    'dot-vectors': (anp.dot, np.dot, (NEG0, ONE)),
    'dot-scalar': (anp.dot, np.dot, (2.0, SPECIAL)),
    'dot-matrix-vector': (anp.dot, np.dot, (np.array([[-0.0, -0.0]]), np.array([1.0, 1.0]))),
    'dot-int': (anp.dot, np.dot, (VALUES['int'], VALUES['int'].T)),
    'dot-float32': (anp.dot, np.dot, (VALUES['float32'], VALUES['float32'].T)),
    'inner-vectors': (anp.inner, np.inner, (NEG0, ONE)),
    'inner-stacks': (anp.inner, np.inner, (uniform((2, 3, 50)), uniform((4, 50), seed=1))),
    'vdot-vectors': (anp.vdot, np.vdot, (NEG0, ONE)),
    'vdot-matrices': (anp.vdot, np.vdot, (uniform((30, 40)), uniform((30, 40), seed=1))),
    'matmul': (anp.matmul, np.matmul, (np.array([[-0.0]]), np.array([[1.0]]))),
    'outer': (anp.outer, np.outer, (SPECIAL, NEG0)),
    'einsum': (lambda a, b: anp.einsum('i,i->', a, b), lambda a, b: np.einsum('i,i->', a, b), (NEG0, ONE)),
    'cumsum-inf-nan': (anp.cumsum, np.cumsum, (np.array([1.0, np.inf, 2.0, np.nan, 3.0]),)),
    'cumsum-signed-zeros': (anp.cumsum, np.cumsum, (np.array([-0.0, -0.0]),)),
    'cumsum-int': (lambda x: anp.cumsum(x, axis=1), lambda x: np.cumsum(x, axis=1), (VALUES['int'],)),
    'cumsum-rounding': (anp.cumsum, np.cumsum, (uniform((1000,)),)),
    'mean-float32': (anp.mean, np.mean, (VALUES['float32'],)),
    'mean-int': (lambda x: anp.mean(x, axis=0), lambda x: np.mean(x, axis=0), (VALUES['int'],)),
    'trace-stack': (anp.trace, np.trace, (uniform((2, 3, 4)),)),
    'trace-offset-axes': (lambda a: anp.trace(a, 1, 2, 0), lambda a: np.trace(a, 1, 2, 0),
                          (uniform((3, 2, 4)),)),
    'diagonal-stack': (anp.diagonal, np.diagonal, (uniform((2, 3, 4)),)),
    'diagonal-negative-offset': (lambda a: anp.diagonal(a, -1, -1, -2), lambda a: np.diagonal(a, -1, -1, -2),
                                 (uniform((2, 3, 4)),)),
    'norm-float32': (anp.linalg.norm, np.linalg.norm, (VALUES['float32'],)),
    'norm-int': (anp.linalg.norm, np.linalg.norm, (VALUES['int'],)),
    'clip-nan': (lambda x: anp.clip(x, -1, 1), lambda x: np.clip(x, -1, 1), (SPECIAL,)),
    'clip-int': (lambda x: anp.clip(x, -1, 1), lambda x: np.clip(x, -1, 1), (VALUES['int'],)),
    'where-float32': (lambda x: anp.where(x > 0, x, 0.0), lambda x: np.where(x > 0, x, 0.0),
                      (VALUES['float32'],)),
    'power-int': (anp.power, np.power, (VALUES['int'], 2)),
    'power-negative-zero': (anp.power, np.power, (NEG0, np.array([-1.0]))),
}


@pytest.mark.parametrize('name', sorted(PRODUCTS))
def test_product_reduction_and_linalg_values_equal_numpys(name):
    fn, npfn, args = PRODUCTS[name]
    with np.errstate(divide='ignore', invalid='ignore'):
        assert_same_as_numpy(fn(*args), npfn(*args), name)


@pytest.mark.parametrize('name', sorted(PRODUCTS))
def test_primal_values_under_every_mode_equal_numpys(name):
    # the value a derivative run computes is numpy's value too
    fn, npfn, args = PRODUCTS[name]
    floats = [j for j, a in enumerate(args) if np.result_type(a).kind == 'f' and np.ndim(a)]
    with np.errstate(divide='ignore', invalid='ignore'):
        expected = npfn(*args)
        for j in floats:
            def f(x):
                return fn(*(x if i == j else a for i, a in enumerate(args)))
            assert_same_as_numpy(nd.jvp(f, (args[j],), (np.ones(np.shape(args[j])),))[0], expected, 'jvp')
            assert_same_as_numpy(nd.vjp(f, args[j])[0], expected, 'vjp')


@pytest.mark.filterwarnings('ignore::RuntimeWarning')
@pytest.mark.parametrize('name', UNARY[:-5] + ['reciprocal'])
def test_float32_scalar_under_perturbation_keeps_its_dtype(name):
    # a reduction of a float32 array is a float32 scalar; functions of it stay float32
    x = np.array([0.25, 0.5], dtype=np.float32)
    v = nd.vjp(lambda x: getattr(anp, name)(anp.sum(x)), x)[0]
    assert_same_as_numpy(v, getattr(np, name)(np.sum(x)) if name != 'reciprocal' else np.reciprocal(np.sum(x)))


def test_negative_flips_the_sign_of_nan_like_numpy():
    x = np.array([np.nan, 0.0, -0.0])
    assert_same_as_numpy(anp.negative(x), np.negative(x))
    assert_same_as_numpy(nd.vjp(lambda x: -x, x)[0], -x)
    np.testing.assert_array_equal(nd.jacobian_r(anp.negative)(np.array([1.0, 2.0])), -np.eye(2))
    np.testing.assert_array_equal(nd.jacobian_f(np.negative)(np.array([1.0, 2.0])), -np.eye(2))


def test_cumsum_with_inf_has_finite_jacobian():
    # a triangular matmul gave nan before an inf (inf * 0); the Jacobian is triangular ones
    x = np.array([1.0, np.inf, 2.0])
    for jac in (nd.jacobian_f, nd.jacobian_r):
        np.testing.assert_array_equal(jac(anp.cumsum)(x), np.tril(np.ones((3, 3))))


@pytest.mark.parametrize('args', [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (0, 1, 2), (1, -1, 0), (0, 2, 0)],
                         ids=['default', 'offset1', 'offset-1', 'axes12', 'offset1-axes-1,0', 'axes2,0'])
def test_trace_and_diagonal_follow_numpys_axes_on_stacks(args):
    # numpy.trace/diagonal use axes 0 and 1 by default, not the last two
    a = uniform((3, 3, 4), seed=3)
    for name in ('trace', 'diagonal'):
        fn = getattr(anp, name)
        np.testing.assert_array_equal(fn(a, *args), getattr(np, name)(a, *args))
        check_jacobian(lambda a: fn(a, *args), a, atol=1e-9)
    check_hessian(lambda a: anp.sum(anp.trace(a * a, *args) ** 2), a)


def test_slogdet_returns_numpys_named_result():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    result = anp.linalg.slogdet(a)
    expected = np.linalg.slogdet(a)
    assert type(result) is type(expected)
    assert result.sign == expected.sign and result.logabsdet == expected.logabsdet
    g = nd.gradient_r(lambda a: np.linalg.slogdet(a).logabsdet)(a)
    np.testing.assert_allclose(g, np.linalg.inv(a).T, rtol=1e-14)


@pytest.mark.parametrize('name', ['dot', 'inner', 'vdot'])
def test_dot_inner_vdot_derivatives_on_all_operand_ranks(name):
    fn = getattr(anp, name)
    shapes = {'dot': [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)), ((), (2, 3)),
                      ((2, 3), ())],
              'inner': [((3,), (3,)), ((2, 3), (4, 3)), ((2, 2, 3), (3,)), ((3,), (2, 2, 3)), ((), (2, 3))],
              'vdot': [((3,), (3,)), ((2, 3), (3, 2)), ((6,), (2, 3))]}[name]
    for sa, sb in shapes:
        a, b = uniform(sa if sa else None, seed=1), uniform(sb if sb else None, seed=2)
        assert_same_as_numpy(fn(a, b), getattr(np, name)(a, b), f'{name}{sa}{sb}')
        check_jacobian(fn, a, b, argnums=(0, 1))
        w = uniform(np.shape(getattr(np, name)(a, b)) or None, seed=3)
        check_gradient(lambda a, b: anp.sum(w * fn(a, b) ** 2), a, b, argnums=(0, 1))
        if sa:
            check_hessian(lambda a: anp.sum(w * anp.sin(fn(a, b))), a)


# ---------------------------------------------------------------- lists and tuples

L23 = [[0.5, -1.0, 2.0], [1.5, 0.25, 3.0]]
V3 = [3.0, 4.0, 0.5]
S22 = [[2.0, 1.0], [1.0, 3.0]]
LIST_CALLS = {    # name: arguments (lists stand where numpy takes an array)
    'sin': (L23,), 'exp': (V3,), 'square': (L23,), 'negative': (L23,), 'positive': (L23,),
    'reciprocal': (V3,), 'absolute': (L23,), 'add': (L23, V3), 'multiply': (V3, V3),
    'power': (V3, [2.0, 1.0, 3.0]), 'maximum': (V3, [1.0, 5.0, 0.0]), 'hypot': (V3, V3),
    'where': ([True, False, True], V3, [0.0, 1.0, 2.0]), 'clip': (V3, 0.7, 3.5),
    'sum': (L23,), 'mean': (L23,), 'prod': (L23,), 'max': (L23,), 'min': (L23,),
    'logsumexp': (V3,), 'cumsum': (L23,), 'reshape': (L23, (3, 2)), 'ravel': (L23,),
    'transpose': (L23,), 'swapaxes': (L23, 0, 1), 'moveaxis': (L23, 0, 1),
    'expand_dims': (L23, 0), 'squeeze': ([[1.0, 2.0]],), 'atleast_1d': (1.0,),
    'atleast_2d': (V3,), 'broadcast_to': (V3, (2, 3)), 'sum_to': (L23, (3,)),
    'matmul': (L23, V3), 'dot': (L23, V3), 'inner': (V3, V3), 'outer': (V3, V3), 'vdot': (V3, V3),
    'concatenate': ([V3, V3],), 'stack': ([V3, V3],), 'hstack': ([V3, V3],), 'vstack': ([V3, V3],),
    'trace': (S22,), 'diagonal': (S22,), 'linalg.norm': (V3,), 'linalg.solve': (S22, [1.0, 2.0]),
    'linalg.inv': (S22,), 'linalg.det': (S22,), 'linalg.slogdet': (S22,), 'linalg.cholesky': (S22,),
    'einsum': ('ij,j->i', L23, V3), 'copy': (L23,), 'astype': (L23, np.float64),
}
NO_NUMPY_TWIN = {'sum_to', 'logsumexp', 'astype'}     # numpy.astype takes arrays only


def lookup(module, name):
    for part in name.split('.'):
        module = getattr(module, part)
    return module


def scaled(a, s):
    """The lists in a with every float entry multiplied by s (nestad scalars when s is one)."""
    if isinstance(a, list):
        return [scaled(v, s) for v in a]
    return a * s if isinstance(a, float) else a


def scalar_of(out):
    out = out[1] if isinstance(out, tuple) else out        # slogdet: log|det|
    shape = np.shape(nd.primal_value(out))
    return anp.sum(out * np.arange(1.0, np.prod(shape) + 1).reshape(shape))


@pytest.mark.parametrize('name', sorted(LIST_CALLS))
def test_lists_and_tuples_are_accepted_wherever_numpy_takes_an_array(name):
    fn, args = lookup(anp, name), LIST_CALLS[name]
    out = fn(*args)
    if name not in NO_NUMPY_TWIN:
        expected = lookup(np, name)(*args)
        np.testing.assert_allclose(out[1] if isinstance(out, tuple) else out,
                                   expected[1] if isinstance(expected, tuple) else expected, rtol=1e-14)
    as_tuples = [tuple(tuple(r) if isinstance(r, list) else r for r in a) if isinstance(a, list) else a
                 for a in args]
    np.testing.assert_allclose(scalar_of(fn(*as_tuples)), scalar_of(out), rtol=1e-14)
    # lists holding nestad numbers: d/ds f(s * lists) against central differences
    f = lambda s: scalar_of(fn(*[scaled(a, s) for a in args]))           # noqa: E731
    fd = (f(1.0 + 1e-6) - f(1.0 - 1e-6)) / 2e-6
    for op in (nd.derivative, nd.gradient_r):
        assert op(f)(1.0) == pytest.approx(fd, rel=1e-6, abs=1e-7), op.__name__


def test_norm_of_a_python_list():
    assert anp.linalg.norm([3.0, 4.0]) == 5.0
    assert nd.gradient_r(lambda x: anp.linalg.norm([x[0], 4.0]))(np.array([3.0])) == pytest.approx([0.6])


# ---------------------------------------------------------------- unsupported numpy functions

M22 = np.array([[2.0, 1.0], [1.0, 3.0]])
UNSUPPORTED = {   # call on a nestad value: (full public name, words of the alternative)
    'qr': (lambda x: np.linalg.qr(x)[0], 'numpy.linalg.qr', 'nestad.primal_value'),
    'tensorsolve': (lambda x: np.linalg.tensorsolve(x, x[0]), 'numpy.linalg.tensorsolve', 'nestad.numpy'),
    'fft': (lambda x: np.fft.fft(x).real, 'numpy.fft.fft', 'nestad.numpy'),
    'polyval': (lambda x: np.polyval(x[0], x[1]), 'numpy.polyval', 'nestad.numpy'),
    'scimath-sqrt': (np.emath.sqrt, 'numpy.lib.scimath.sqrt', 'nestad.numpy'),
    'lstsq': (lambda x: np.linalg.lstsq(x, x)[0], 'numpy.linalg.lstsq', 'nestad.numpy.linalg.pinv'),
    'add.accumulate': (np.add.accumulate, 'numpy.add.accumulate', 'nestad.numpy.cumsum'),
    'add.at': (lambda x: np.add.at(x, 0, 1.0), 'numpy.add.at', 'x.at[index].add(values)'),
}


@pytest.mark.parametrize('name', sorted(UNSUPPORTED))
@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f'])
def test_unsupported_numpy_function_is_named_in_full_with_the_alternative(op, name):
    f, public, alternative = UNSUPPORTED[name]
    with pytest.raises(TypeError) as info:
        getattr(nd, op)(lambda x: anp.sum(f(x)))(M22)
    message = str(info.value)
    assert message.startswith(f"{public} is not differentiable by nestad"), message
    assert alternative in message, message


def test_numpy_keyword_nestad_does_not_take_is_named():
    with pytest.raises(TypeError, match=r"numpy\.sum\(\.\.\., dtype=") as info:
        nd.gradient_r(lambda x: np.sum(x, dtype=float))(M22)
    assert 'dtype' in str(info.value)


# ---------------------------------------------------------------- array methods

X34 = uniform((3, 4), seed=11)


@pytest.mark.parametrize('copy', [lambda x: x.copy(), np.copy, anp.copy],
                         ids=['method', 'np.copy', 'anp.copy'])
def test_copy_keeps_the_derivative(copy):
    check_jacobian(lambda x: copy(x) * 2.0, X34)
    np.testing.assert_array_equal(copy(X34), X34)
    assert nd.derivative(lambda s: copy(s * 2.0))(1.0) == 2.0      # a nestad scalar's copy


@pytest.mark.parametrize('dtype', [float, np.float64, 'float64', np.float32, 'float32', np.float16])
def test_astype_float_keeps_the_derivative(dtype):
    f = lambda x: anp.sin(x.astype(dtype)) * x                   # noqa: E731
    out = nd.jvp(f, (X34,), (np.ones((3, 4)),))[0]
    np.testing.assert_array_equal(out, np.sin(X34.astype(dtype)) * X34)
    eps = np.finfo(np.dtype(dtype)).eps
    expected = np.cos(X34) * X34 + np.sin(X34)
    for grad in (nd.gradient_r, nd.gradient_f):
        g = grad(lambda x: anp.sum(f(x)))(X34)
        assert g.dtype == np.float64                         # the argument's dtype
        np.testing.assert_allclose(g, expected, rtol=10 * eps, atol=10 * eps)
    # a second derivative through the cast, and an int argument made float
    h = nd.hessian(lambda x: anp.sum(x.astype(dtype) ** 3))(X34[0])
    np.testing.assert_allclose(h, np.diag(6 * X34[0]), rtol=10 * eps)
    np.testing.assert_array_equal(nd.gradient_r(lambda x: anp.sum(x.astype(dtype) * 3.0))(np.arange(3)),
                                  np.full(3, 3.0))


@pytest.mark.parametrize('dtype', [int, np.int32, bool, 'uint8'])
def test_astype_to_an_integer_dtype_gives_numpys_values_without_derivative(dtype):
    """An integer cast is piecewise constant (as floor is): its derivative is zero, and the
    result carries none."""
    for op in (nd.gradient_r, nd.gradient_f):
        seen = []
        g = op(lambda x: (seen.append(x.astype(dtype)), anp.sum(x * seen[-1]))[1])(X34)
        np.testing.assert_array_equal(seen[0], X34.astype(dtype))
        assert seen[0].dtype == X34.astype(dtype).dtype and isinstance(seen[0], np.ndarray)
        np.testing.assert_array_equal(g, X34.astype(dtype))
    np.testing.assert_array_equal(anp.astype(X34, dtype), X34.astype(dtype))   # plain: numpy's


def test_astype_to_complex_is_refused():
    for op in (nd.gradient_r, nd.gradient_f):
        with pytest.raises(nd.InvalidInputError, match='astype.*drop its derivative.*primal_value'):
            op(lambda x: anp.sum(x.astype(complex)))(X34)
    np.testing.assert_array_equal(anp.astype(X34, complex), X34.astype(complex))


def nested_shape_and_leaves(items):
    if not isinstance(items, list):
        return (), [items]
    parts = [nested_shape_and_leaves(i) for i in items]
    inner = parts[0][0] if parts else ()
    assert all(p[0] == inner for p in parts)
    return (len(items),) + inner, [leaf for p in parts for leaf in p[1]]


@pytest.mark.parametrize('shape', [(), (3,), (2, 3), (2, 1, 2)])
def test_tolist_gives_nestad_scalars_that_keep_their_derivatives(shape):
    x = np.asarray(uniform(shape or None, seed=12))
    w = np.arange(1.0, x.size + 1)

    def f(x):
        structure, leaves = nested_shape_and_leaves(x.tolist())
        assert structure == shape and all(isinstance(v, nd.Bundle | nd.TapeCell) for v in leaves)
        return sum(wi * v * v for wi, v in zip(w, leaves))
    for grad in (nd.gradient_r, nd.gradient_f):
        np.testing.assert_allclose(grad(f)(x), 2 * w.reshape(shape) * x, rtol=1e-15)
    assert nested_shape_and_leaves(x.tolist())[0] == shape       # numpy's own, for comparison


def test_item_gives_a_nestad_scalar():
    x = uniform((2, 3), seed=13)
    for grad in (nd.gradient_r, nd.gradient_f):
        g = grad(lambda x: x.item(4) * x.item(0, 1) + x[1:, 2:].item() ** 2)(x)
        expected = np.zeros((2, 3))
        expected[1, 1] += x[0, 1]
        expected[0, 1] += x[1, 1]
        expected[1, 2] += 2 * x[1, 2]
        np.testing.assert_allclose(g, expected, rtol=1e-15)
    with pytest.raises(ValueError, match='size 1'):
        nd.gradient_r(lambda x: x.item())(x)
    assert nd.derivative(lambda s: (s * 3.0).item())(1.0) == 3.0   # a scalar's item is itself


# ---------------------------------------------------------------- functional updates

INDICES = {     # name: index into a (3, 4) array
    'int': 1,
    'pair': (0, 2),
    'column': (slice(None), 1),
    'ellipsis': (Ellipsis, -1),
    'strided': (slice(None, None, 2), slice(1, None)),
    'newaxis': (None, 2),
    'rows-repeated': np.array([0, 2, 0]),
    'list-repeated': [2, 2, 1],
    'pairs-repeated': (np.array([0, 1, 1, 0]), np.array([2, 0, 0, 2])),
    'mask': X34 > 0,
    'mixed-repeated': (slice(1, None), np.array([3, 0, 3])),
}


def values_for(index, seed=14):
    return uniform(np.broadcast_to(X34, X34.shape)[index].shape, seed=seed)


def numpy_update(kind, x, index, v):
    out = x.copy()
    if kind == 'set':
        out[index] = v
    elif kind == 'add':
        np.add.at(out, index, v)
    else:
        np.multiply.at(out, index, v)
    return out


UPDATES = ['set', 'add', 'multiply']


@pytest.mark.parametrize('kind', UPDATES)
@pytest.mark.parametrize('name', sorted(INDICES))
def test_at_update_values_and_jacobians_in_both_modes(name, kind):
    index = INDICES[name]
    v = values_for(index)
    np_index = np.asarray(index) if isinstance(index, list) else index
    if kind == 'multiply' and name.endswith('repeated'):
        with pytest.raises(nd.InvalidInputError, match='repeats'):
            anp.at(X34)[index].multiply(v)
        return
    update = lambda x, v: getattr(anp.at(x)[index], kind)(v)          # noqa: E731
    np.testing.assert_array_equal(update(X34, v), numpy_update(kind, X34, np_index, v))
    check_jacobian(update, X34, v, argnums=(0, 1))
    # a scalar and a broadcast value
    check_jacobian(update, X34, 0.7, argnums=(0, 1))
    if np.ndim(v) >= 1:
        row = v.reshape(-1, v.shape[-1])[0] if np.ndim(v) > 1 else v
        check_jacobian(update, X34, row, argnums=(0, 1))
    # the method on a nestad array is the same update
    for grad in (nd.gradient_r, nd.gradient_f):
        g_method = grad(lambda x: anp.sum(anp.sin(getattr(x.at[index], kind)(v))))(X34)
        g_function = grad(lambda x: anp.sum(anp.sin(update(x, v))))(X34)
        np.testing.assert_array_equal(g_method, g_function)


@pytest.mark.parametrize('kind', UPDATES)
@pytest.mark.parametrize('name', ['pair', 'column', 'rows-repeated', 'pairs-repeated', 'mask',
                                  'mixed-repeated'])
def test_at_update_second_derivatives_in_all_pairings(name, kind):
    # five pairings of Hessians (ff fr rf rr, batched fr) against FD, w.r.t. x and the values
    index = INDICES[name]
    if kind == 'multiply' and name.endswith('repeated'):
        return
    v = values_for(index)
    w = uniform((3, 4), seed=15)

    def f(x, v):
        return anp.sum(w * anp.sin(getattr(anp.at(x)[index], kind)(v * v)) * x)
    check_hessian(lambda x: f(x, v), X34)
    check_hessian(lambda v: f(X34, v), v)


def test_at_get_is_indexing():
    check_jacobian(lambda x: anp.at(x)[1:, ::2].get() * 2.0, X34)
    index = INDICES['pairs-repeated']
    np.testing.assert_array_equal(anp.at(X34)[index].get(), X34[index])


def test_set_with_repeated_index_keeps_the_last_value_and_only_its_derivative():
    idx, w, v = np.array([0, 2, 0]), np.arange(1.0, 5.0), np.array([1.0, 2.0, 3.0])
    for grad in (nd.gradient_r, nd.gradient_f):
        g = grad(lambda v: anp.sum(anp.at(np.zeros(4))[idx].set(v) * w))(v)
        np.testing.assert_array_equal(g, [0.0, 3.0, 1.0])           # v[0] is overwritten by v[2]
        g = grad(lambda v: anp.sum(anp.at(np.zeros(4))[idx].add(v) * w))(v)
        np.testing.assert_array_equal(g, [1.0, 3.0, 1.0])           # add accumulates


def test_storing_a_nestad_scalar_into_a_plain_array_functionally():
    # the numpy idiom out = zeros(n); out[i] = f(x) becomes out = at(out)[i].set(f(x))
    def f(s):
        out = np.zeros(3)
        for i in range(3):
            out = anp.at(out)[i].set(s ** (i + 1))
        return out
    for jac in (nd.jacobian_f, nd.jacobian_r):
        np.testing.assert_allclose(jac(f)(2.0), [1.0, 4.0, 12.0])
    assert nd.derivative(lambda s: nd.derivative(lambda t: anp.sum(f(t)))(s))(2.0) == pytest.approx(2 + 12)


def test_item_assignment_on_a_nestad_array_names_the_functional_update():
    def f(x):
        x[0] = 1.0
        return anp.sum(x)
    for op in (nd.gradient_r, nd.gradient_f):
        with pytest.raises(TypeError, match=r'x\.at\[i\]\.set\(v\)'):
            op(f)(X34[0])


@pytest.mark.parametrize('op', ['derivative', 'gradient_r'])
def test_storing_a_nestad_value_into_a_numpy_array_names_the_cause_and_alternatives(op):
    def scalar_into_array(s):
        out = np.zeros(3)
        out[0] = s * 2.0
        return anp.sum(out)

    def array_into_array(s):
        out = np.zeros(3)
        out[:2] = anp.stack([s, s])
        return anp.sum(out)
    for f in (scalar_into_array, array_into_array):
        with pytest.raises(nd.PerturbedConversionError) as info:
            getattr(nd, op)(f)(1.0)
        message = str(info.value)
        for words in ('storing', 'numpy array', 'nestad.numpy.array', 'stack', 'nestad.numpy.at(out)[i].set'):
            assert words in message, (words, message)


def test_separated_advanced_indices_under_batched_tangents():
    # numpy moves the advanced axes of x[i, :, j] to the front; batch axes, moved to the end
    # for the indexing, stay behind them, so jacobian_f (batched) agrees with FD and reverse
    x = uniform((3, 4, 5), seed=16)
    i, j = np.array([0, 2, 1]), np.array([4, 0, 4])
    check_jacobian(lambda x: x[i, :, j] * x[0, 0, 0], x)
    check_jacobian(lambda x: anp.at(x)[i, :, j].add(x[i, :, j] ** 2), x)


@pytest.mark.parametrize('kind', UPDATES)
def test_at_update_dtypes(kind):
    # float32 stays float32 (as numpy's in-place update); an integer x takes a float v's dtype
    # (an in-place update would truncate v, and its derivative with it)
    x32 = X34.astype(np.float32)
    v32 = np.float32(0.5)
    same = getattr(anp.at(x32)[1], kind)(v32)
    np.testing.assert_array_equal(same, numpy_update(kind, x32, 1, v32))
    assert same.dtype == np.float32
    assert nd.vjp(lambda x: getattr(x.at[1], kind)(v32), x32)[0].dtype == np.float32
    xi = np.arange(6).reshape(2, 3)
    promoted = getattr(anp.at(xi)[0, 1], kind)(2.5)
    assert promoted.dtype == np.float64
    np.testing.assert_array_equal(promoted, numpy_update(kind, xi.astype(float), (0, 1), 2.5))


@pytest.mark.parametrize('x', [np.array([0.5, 1.5], np.float32), np.float32(0.5),
                               np.array([0.5, 1.5], np.float16)], ids=['f32', 'f32-scalar', 'f16'])
def test_gradients_have_their_inputs_float_dtype(x):
    # A float32 array's gradient was float64 (the float64 seed, promoted), a float32
    # scalar's float32, and staged code's float32.
    f = lambda x: anp.sum(anp.sin(x) * x) / 3.0      # noqa: E731
    ops = {'gradient_r': nd.gradient_r(f), 'gradient_f': nd.gradient_f(f),
           'value_and_gradient_r': lambda x: nd.value_and_gradient_r(f)(x)[1],
           'vjp': lambda x: nd.vjp(f, x)[1](1.0)[0],
           'staged gradient_r': nd.stage(nd.gradient_r(f))}
    expected = (np.sin(x.astype(float)) + x.astype(float) * np.cos(x.astype(float))) / 3.0
    for name, op in ops.items():
        g = op(x)
        assert np.result_type(g) == x.dtype, name
        assert np.allclose(g, expected, rtol=np.finfo(x.dtype).eps * 8), name
    assert np.result_type(nd.gradient_r(lambda x, y: anp.sum(x * y), argnums=(0, 1))(
        x, np.ones(np.shape(x)))[1]) == np.float64


def test_divide_rules_cancel_exactly_at_a_removable_singularity():
    # sin(x) / x at 1e-300: the y-term (1 / y) g rounded apart from the x-term g / y, and
    # the gradient was 1.5e284 (exact: -x/3, 0 in floating point); the scalar rules cancel
    f = lambda x: anp.sum(anp.sin(x) / x)              # noqa: E731
    x = np.array([1e-300, 1e-8, 0.5])
    exact = (np.cos(x[2]) * x[2] - np.sin(x[2])) / x[2] ** 2
    for op in (nd.gradient_r, nd.gradient_f):
        g = op(f)(x)
        assert g[0] == 0.0 and g[1] == 0.0 and np.isclose(g[2], exact, rtol=1e-15)
    assert nd.gradient_r(lambda x: nd.sin(x) / x)(1e-300) == 0.0       # the scalar path
