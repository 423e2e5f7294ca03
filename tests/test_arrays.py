"""NumPy arrays: every array primitive in every mode, against independent answers.

Reference answers are closed forms, central finite differences (step ``H = 1e-6``,
compared with ``FD_RTOL = 1e-6`` / ``FD_ATOL = 1e-7``), or the other AD mode (compared
with ``AD_RTOL = 1e-10``).  Shapes are chosen to exercise broadcasting.  Linear algebra,
second derivatives, nesting and errors are in ``test_arrays_linalg.py``; the helpers
live here and are imported from there.
"""
import operator

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.values import Perturbed

H = 1e-6
FD_RTOL, FD_ATOL = 1e-6, 1e-7
AD_RTOL, AD_ATOL = 1e-10, 1e-12


# ---------------------------------------------------------------- helpers

def rng(seed=0):
    return np.random.default_rng(seed)


def uniform(shape, lo=-1.0, hi=1.0, seed=0):
    """A float in [lo, hi) for shape None, else an ndarray of that shape."""
    r = rng(seed)
    if shape is None:
        return float(r.uniform(lo, hi))
    return r.uniform(lo, hi, size=shape)


def assert_close(actual, expected, rtol=FD_RTOL, atol=FD_ATOL, what=""):
    """allclose, plus: the result is a plain numeric value of the expected shape."""
    assert not isinstance(actual, Perturbed), f"{what}: a perturbed value leaked out: {actual!r}"
    assert np.shape(actual) == np.shape(expected), \
        f"{what}: shape {np.shape(actual)} != expected {np.shape(expected)}"
    a = np.asarray(actual)
    assert a.dtype.kind in 'fiu', f"{what}: dtype {a.dtype} is not numeric"
    np.testing.assert_allclose(a, expected, rtol=rtol, atol=atol, err_msg=what)


def _with(args, j, value):
    a = list(args)
    a[j] = value if np.ndim(args[j]) else float(value)
    return a


def fd_jacobian(f, args, j=0, h=H):
    """Central differences of f(*args) w.r.t. args[j]: shape out.shape + args[j].shape."""
    x = np.array(args[j], dtype=float)
    out0 = np.asarray(f(*args), dtype=float)
    jac = np.zeros(out0.shape + x.shape)
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        fp = np.asarray(f(*_with(args, j, xp)), dtype=float)
        fm = np.asarray(f(*_with(args, j, xm)), dtype=float)
        jac[(Ellipsis,) + idx] = (fp - fm) / (2 * h)
    return jac


def fd_gradient(f, args, j=0, h=H):
    return fd_jacobian(f, args, j, h)


def _tuple(argnums):
    return argnums if isinstance(argnums, tuple) else (argnums,)


def check_gradient(f, *args, argnums=0, rtol=FD_RTOL, atol=FD_ATOL):
    """gradient_r and gradient_f of a scalar f agree with each other and with FD."""
    gr = nd.gradient_r(f, argnums=argnums)(*args)
    gf = nd.gradient_f(f, argnums=argnums)(*args)
    many = isinstance(argnums, tuple)
    for k, j in enumerate(_tuple(argnums)):
        r, fw = (gr[k], gf[k]) if many else (gr, gf)
        expected = fd_gradient(f, args, j)
        assert_close(r, expected, rtol, atol, f"gradient_r wrt arg {j}")
        assert_close(fw, expected, rtol, atol, f"gradient_f wrt arg {j}")
        assert_close(r, fw, AD_RTOL, AD_ATOL, f"gradient_r vs gradient_f wrt arg {j}")
    return gr


def check_jacobian(f, *args, argnums=0, rtol=FD_RTOL, atol=FD_ATOL):
    """jacobian_f and jacobian_r (shape out.shape + in.shape) agree with each other and FD."""
    jf = nd.jacobian_f(f, argnums=argnums)(*args)
    jr = nd.jacobian_r(f, argnums=argnums)(*args)
    many = isinstance(argnums, tuple)
    for k, j in enumerate(_tuple(argnums)):
        a, b = (jf[k], jr[k]) if many else (jf, jr)
        expected = fd_jacobian(f, args, j)
        assert expected.shape == np.shape(f(*args)) + np.shape(args[j])
        assert_close(a, expected, rtol, atol, f"jacobian_f wrt arg {j}")
        assert_close(b, expected, rtol, atol, f"jacobian_r wrt arg {j}")
        assert_close(a, b, AD_RTOL, AD_ATOL, f"jacobian_f vs jacobian_r wrt arg {j}")
    return jf


def check_hessian(f, x, rtol=FD_RTOL, atol=FD_ATOL):
    """hessian == jacobian_{f,r}(gradient_{r,f}) == FD of gradient_r, shape x.shape * 2."""
    hs = {
        'hessian': nd.hessian(f)(x),
        'jacobian_f(gradient_r)': nd.jacobian_f(nd.gradient_r(f))(x),
        'jacobian_r(gradient_r)': nd.jacobian_r(nd.gradient_r(f))(x),
        'jacobian_f(gradient_f)': nd.jacobian_f(nd.gradient_f(f))(x),
        'jacobian_r(gradient_f)': nd.jacobian_r(nd.gradient_f(f))(x),
    }
    expected = fd_jacobian(nd.gradient_r(f), (x,))
    assert expected.shape == np.shape(x) * 2
    for name, h in hs.items():
        assert_close(h, expected, rtol, atol, name)
        assert_close(h, hs['hessian'], 1e-9, 1e-11, f"{name} vs hessian")
    return hs['hessian']


def weights(shape, seed=7):
    """Fixed random weights: sum(w * f(x)) turns an array function into a scalar one."""
    return uniform(shape, 0.5, 1.5, seed)


# ---------------------------------------------------------------- unary elementwise

UNARY = {            # name: (low, high) of a domain where the function is smooth
    'sin': (-2, 2), 'cos': (-2, 2), 'tan': (-1.2, 1.2),
    'arcsin': (-0.9, 0.9), 'arccos': (-0.9, 0.9), 'arctan': (-3, 3),
    'sinh': (-2, 2), 'cosh': (-2, 2), 'tanh': (-2, 2),
    'arcsinh': (-3, 3), 'arccosh': (1.2, 3), 'arctanh': (-0.9, 0.9),
    'exp': (-2, 2), 'expm1': (-2, 2), 'log': (0.2, 3), 'log1p': (-0.8, 3),
    'log2': (0.2, 3), 'log10': (0.2, 3), 'sqrt': (0.2, 3), 'cbrt': (0.2, 3),
    'square': (-2, 2), 'reciprocal': (0.3, 3), 'absolute': (0.1, 2),
}
NEGATIVE_DOMAIN = {'cbrt': (-3, -0.2), 'absolute': (-2, -0.1), 'reciprocal': (-3, -0.3)}
UNARY_CASES = [(n, d) for n, d in UNARY.items()] + [(n, d) for n, d in NEGATIVE_DOMAIN.items()]
UNARY_IDS = [f"{n}[{d[0]},{d[1]}]" for n, d in UNARY_CASES]


@pytest.mark.parametrize('name,domain', UNARY_CASES, ids=UNARY_IDS)
def test_unary_jacobian_via_nestad_numpy(name, domain):
    fn = getattr(anp, name)
    x = uniform((3, 4), *domain, seed=1)
    jf = check_jacobian(fn, x)
    # elementwise: the Jacobian is diagonal
    off = jf.reshape(12, 12)[~np.eye(12, dtype=bool)]
    assert np.all(off == 0)
    np.testing.assert_allclose(fn(x), getattr(np, name)(x), rtol=1e-15)


@pytest.mark.parametrize('name,domain', UNARY_CASES, ids=UNARY_IDS)
def test_unary_gradient_via_plain_numpy(name, domain):
    npfn = getattr(np, name)
    x = uniform((2, 3), *domain, seed=2)
    w = weights((2, 3))
    check_gradient(lambda x: np.sum(w * npfn(x)), x)


@pytest.mark.parametrize('name,domain', UNARY_CASES, ids=UNARY_IDS)
def test_unary_second_derivative(name, domain):
    fn = getattr(anp, name)
    x = uniform((2, 3), *domain, seed=3)
    w = weights((2, 3))
    check_hessian(lambda x: anp.sum(w * fn(x)), x)


CLOSED_FORM_DERIVATIVES = {
    'sin': np.cos, 'cos': lambda x: -np.sin(x), 'tan': lambda x: 1 / np.cos(x) ** 2,
    'arcsin': lambda x: 1 / np.sqrt(1 - x * x), 'arccos': lambda x: -1 / np.sqrt(1 - x * x),
    'arctan': lambda x: 1 / (1 + x * x), 'sinh': np.cosh, 'cosh': np.sinh,
    'tanh': lambda x: 1 / np.cosh(x) ** 2, 'arcsinh': lambda x: 1 / np.sqrt(x * x + 1),
    'arccosh': lambda x: 1 / np.sqrt(x * x - 1), 'arctanh': lambda x: 1 / (1 - x * x),
    'exp': np.exp, 'expm1': np.exp, 'log': lambda x: 1 / x, 'log1p': lambda x: 1 / (1 + x),
    'log2': lambda x: 1 / (x * np.log(2)), 'log10': lambda x: 1 / (x * np.log(10)),
    'sqrt': lambda x: 0.5 / np.sqrt(x), 'cbrt': lambda x: 1 / (3 * np.cbrt(x) ** 2),
    'square': lambda x: 2 * x, 'reciprocal': lambda x: -1 / x ** 2, 'absolute': np.sign,
}


@pytest.mark.parametrize('name,domain', UNARY_CASES, ids=UNARY_IDS)
def test_unary_closed_form_derivative(name, domain):
    x = uniform((5,), *domain, seed=4)
    g = nd.gradient_r(lambda x: anp.sum(getattr(anp, name)(x)))(x)
    assert_close(g, CLOSED_FORM_DERIVATIVES[name](x), 1e-13, 1e-15, name)


SCALAR_MODULE_NAMES = {'sin': 'sin', 'cos': 'cos', 'tan': 'tan', 'asin': 'arcsin',
                       'acos': 'arccos', 'atan': 'arctan', 'sinh': 'sinh', 'cosh': 'cosh',
                       'tanh': 'tanh', 'asinh': 'arcsinh', 'acosh': 'arccosh',
                       'atanh': 'arctanh', 'exp': 'exp', 'expm1': 'expm1', 'log': 'log',
                       'log1p': 'log1p', 'log2': 'log2', 'log10': 'log10', 'sqrt': 'sqrt',
                       'cbrt': 'cbrt', 'abs': 'absolute'}


@pytest.mark.parametrize('ndname', sorted(SCALAR_MODULE_NAMES))
def test_scalar_module_functions_accept_arrays(ndname):
    # nestad.sin(array) is routed to nestad.numpy.sin
    npname = SCALAR_MODULE_NAMES[ndname]
    x = uniform((4,), *UNARY[npname], seed=5)
    fn = getattr(nd, ndname)
    jr = nd.jacobian_r(fn)(x)
    jf = nd.jacobian_f(fn)(x)
    expected = np.diag(CLOSED_FORM_DERIVATIVES[npname](x))
    assert_close(jr, expected, 1e-13, 1e-15, 'jacobian_r')
    assert_close(jf, expected, 1e-13, 1e-15, 'jacobian_f')


# ---------------------------------------------------------------- binary elementwise

BINARY = {            # name: (function, x domain, y domain)
    'add': (anp.add, (-2, 2), (-2, 2)),
    'subtract': (anp.subtract, (-2, 2), (-2, 2)),
    'multiply': (anp.multiply, (-2, 2), (-2, 2)),
    'divide': (anp.divide, (-2, 2), (0.5, 2)),
    'power': (anp.power, (0.5, 2), (-1.5, 2.5)),
    'arctan2': (anp.arctan2, (-2, 2), (0.3, 2)),
    'hypot': (anp.hypot, (0.3, 2), (-2, -0.3)),
    'maximum': (anp.maximum, (-2, 2), (-2, 2)),
    'minimum': (anp.minimum, (-2, 2), (-2, 2)),
    'logaddexp': (anp.logaddexp, (-2, 2), (-2, 2)),
    'mod': (anp.mod, (2.2, 2.8), (1.0, 1.05)),        # floor(x / y) == 2 throughout
}
OPERATORS = {'+': operator.add, '-': operator.sub, '*': operator.mul,
             '/': operator.truediv, '**': operator.pow, '%': operator.mod}
OPERATOR_DOMAINS = {'+': 'add', '-': 'subtract', '*': 'multiply', '/': 'divide',
                    '**': 'power', '%': 'mod'}
UFUNC_OF = {'add': np.add, 'subtract': np.subtract, 'multiply': np.multiply,
            'divide': np.divide, 'power': np.power, 'arctan2': np.arctan2, 'hypot': np.hypot,
            'maximum': np.maximum, 'minimum': np.minimum, 'logaddexp': np.logaddexp,
            'mod': np.mod}

# None is a Python float (a perturbed scalar mixed with an array)
SHAPES = [((3, 1), (1, 4)), (None, (3, 4)), ((4,), (3, 4)), ((3, 4), (4,)),
          ((2, 3, 1), (3, 4)), ((3, 4), None), ((), (2, 3)), ((3, 4), (3, 4))]
SHAPE_IDS = ['3x1|1x4', 'float|3x4', '4|3x4', '3x4|4', '2x3x1|3x4', '3x4|float', '0d|2x3',
             '3x4|3x4']


def binary_operands(name, sx, sy, seed=0):
    _, dx, dy = BINARY[name]
    x = uniform(sx, *dx, seed=seed)
    y = uniform(sy, *dy, seed=seed + 100)
    if name in ('maximum', 'minimum'):      # keep |x - y| away from 0 so FD sees no kink
        xb, yb = np.broadcast_arrays(x, y)
        if np.min(np.abs(xb - yb)) < 1e-3:
            y = np.asarray(y) + 0.01 if np.ndim(y) else y + 0.01
    return x, y


@pytest.mark.parametrize('shapes', SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize('name', sorted(BINARY))
def test_binary_jacobian_broadcasting(name, shapes):
    fn = BINARY[name][0]
    x, y = binary_operands(name, *shapes)
    np.testing.assert_allclose(fn(x, y), UFUNC_OF[name](x, y), rtol=1e-15)
    check_jacobian(fn, x, y, argnums=(0, 1))


@pytest.mark.parametrize('shapes', SHAPES[:4], ids=SHAPE_IDS[:4])
@pytest.mark.parametrize('name', sorted(BINARY))
def test_binary_gradient_via_plain_numpy_ufunc(name, shapes):
    ufunc = UFUNC_OF[name]
    x, y = binary_operands(name, *shapes, seed=3)
    w = weights(np.broadcast_shapes(np.shape(x), np.shape(y)))
    check_gradient(lambda x, y: np.sum(w * ufunc(x, y)), x, y, argnums=(0, 1))


@pytest.mark.parametrize('shapes', SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize('op', sorted(OPERATORS))
def test_operators_broadcasting(op, shapes):
    f = OPERATORS[op]
    x, y = binary_operands(OPERATOR_DOMAINS[op], *shapes, seed=5)
    check_jacobian(f, x, y, argnums=(0, 1))


@pytest.mark.parametrize('op', sorted(OPERATORS))
def test_operators_with_plain_array_on_either_side(op):
    # plain ndarray (op) nestad array goes through ndarray's operator -> __array_ufunc__
    f = OPERATORS[op]
    name = OPERATOR_DOMAINS[op]
    x, c = binary_operands(name, (3, 4), (4,), seed=11)
    check_jacobian(lambda x: f(x, c), x)
    c2, x2 = binary_operands(name, (3, 1), (3, 4), seed=12)
    check_jacobian(lambda x: f(c2, x), x2)


@pytest.mark.parametrize('name', sorted(BINARY))
def test_binary_second_derivatives_with_broadcasting(name):
    fn = BINARY[name][0]
    x, y = binary_operands(name, (3, 1), (1, 4), seed=21)
    w = weights((3, 4))
    check_hessian(lambda x: anp.sum(w * anp.tanh(fn(x, y))), x)
    check_hessian(lambda y: anp.sum(w * anp.tanh(fn(x, y))), y)

    # mixed second partial d^2 / dy dx, both orders of modes
    def g(x, y):
        return anp.sum(w * fn(x, y) * fn(x, y))
    expected = fd_jacobian(lambda y: nd.gradient_r(g)(x, y), (y,))
    assert_close(nd.jacobian_f(nd.gradient_r(g), argnums=1)(x, y), expected, what='f over r')
    assert_close(nd.jacobian_r(nd.gradient_f(g), argnums=1)(x, y), expected, what='r over f')


def test_power_closed_forms():
    x = uniform((2, 3), 0.5, 2.0, seed=1)
    y = uniform((3,), -1.0, 2.0, seed=2)
    gx, gy = nd.gradient_r(lambda x, y: anp.sum(x ** y), argnums=(0, 1))(x, y)
    assert_close(gx, y * x ** (y - 1), 1e-13, 1e-15)
    assert_close(gy, np.sum(np.log(x) * x ** y, axis=0), 1e-13, 1e-15)
    # integer and fractional constant exponents, negative bases, a Python float base
    z = uniform((5,), -2.0, 2.0, seed=3)
    assert_close(nd.gradient_r(lambda z: anp.sum(z ** 3))(z), 3 * z ** 2, 1e-13)
    assert_close(nd.gradient_f(lambda z: anp.sum(z ** 2))(z), 2 * z, 1e-13)
    assert_close(nd.gradient_r(lambda z: anp.sum(2.0 ** z))(z), np.log(2) * 2.0 ** z, 1e-13)
    assert_close(nd.gradient_r(lambda x: anp.sum(x ** 0.5))(x), 0.5 / np.sqrt(x), 1e-13)
    assert_close(nd.hessian(lambda z: anp.sum(z ** 3))(z), np.diag(6 * z), 1e-13, 1e-14)


def test_where_and_clip():
    x = uniform((3, 4), -2, 2, seed=1)
    y = uniform((4,), -2, 2, seed=2)
    cond = uniform((3, 1), seed=3) > 0
    cond = np.broadcast_to(cond, (3, 4)).copy()
    cond[0, 0] = not cond[0, 0]
    for where in (anp.where, np.where):
        check_jacobian(lambda x, y: where(cond, x, y), x, y, argnums=(0, 1))
        check_jacobian(lambda x: where(x > 0, x * x, 0.5), x)
    gx, gy = nd.gradient_r(lambda x, y: anp.sum(anp.where(cond, x, y)), argnums=(0, 1))(x, y)
    assert_close(gx, cond.astype(float), 0, 0)
    assert_close(gy, np.sum(~cond, axis=0).astype(float), 0, 0)
    # clip: derivative 1 inside, 0 where clipped (points kept away from the bounds)
    z = np.array([-1.5, -0.9, -0.2, 0.3, 0.8, 1.7])
    for clip in (anp.clip, np.clip):
        check_jacobian(lambda z: clip(z, -0.5, 0.5) * z, z)
        g = nd.gradient_r(lambda z: anp.sum(clip(z, -0.5, 0.5)))(z)
        assert_close(g, (np.abs(z) < 0.5).astype(float), 0, 0)
    # array bounds that are themselves differentiated
    lo = np.full(6, -0.5)
    glo = nd.gradient_r(lambda lo: anp.sum(anp.clip(z, lo, 0.5)), argnums=0)(lo)
    assert_close(glo, (z < -0.5).astype(float), 0, 0)


def test_maximum_minimum_closed_form_and_reductions_to_scalar():
    x = np.array([[0.1, 0.9], [0.5, -0.3]])
    y = np.array([0.4, 0.2])
    gx, gy = nd.gradient_r(lambda x, y: anp.sum(anp.maximum(x, y)), argnums=(0, 1))(x, y)
    assert_close(gx, (x > y).astype(float), 0, 0)
    assert_close(gy, np.sum(x < y, axis=0).astype(float), 0, 0)
    gx, gy = nd.gradient_f(lambda x, y: anp.sum(anp.minimum(x, y)), argnums=(0, 1))(x, y)
    assert_close(gx, (x < y).astype(float), 0, 0)
    assert_close(gy, np.sum(x > y, axis=0).astype(float), 0, 0)


# ---------------------------------------------------------------- reductions

REDUCTIONS = {'sum': (anp.sum, np.sum), 'mean': (anp.mean, np.mean),
              'prod': (anp.prod, np.prod), 'max': (anp.max, np.max), 'min': (anp.min, np.min)}
AXES = [None, 0, 1, -1, (0, 2), (-1, 0), (0, 1, 2)]
AXIS_IDS = ['None', '0', '1', '-1', '(0,2)', '(-1,0)', '(0,1,2)']


@pytest.mark.parametrize('keepdims', [False, True])
@pytest.mark.parametrize('axis', AXES, ids=AXIS_IDS)
@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_reduction_jacobian(name, axis, keepdims):
    fn, npfn = REDUCTIONS[name]
    x = uniform((2, 3, 4), 0.5, 1.5, seed=9)      # distinct entries: no ties for max/min
    out = fn(x, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(out, npfn(x, axis=axis, keepdims=keepdims), rtol=1e-14)
    check_jacobian(lambda x: fn(x, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize('keepdims', [False, True])
@pytest.mark.parametrize('axis', [None, 1, (0, 2)], ids=['None', '1', '(0,2)'])
@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_reduction_via_plain_numpy_and_methods(name, axis, keepdims):
    fn, npfn = REDUCTIONS[name]
    x = uniform((2, 3, 4), 0.5, 1.5, seed=10)
    w = weights(np.shape(npfn(x, axis=axis, keepdims=keepdims)))
    check_gradient(lambda x: np.sum(w * npfn(x, axis=axis, keepdims=keepdims)), x)
    check_gradient(lambda x: anp.sum(w * getattr(x, name)(axis=axis, keepdims=keepdims)), x)


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_reduction_second_derivative(name):
    fn = REDUCTIONS[name][0]
    x = uniform((3, 4), 0.5, 1.5, seed=12)
    check_hessian(lambda x: anp.sum(anp.sin(fn(x, axis=0))) * fn(x * x) + fn(anp.exp(x), axis=(0, 1)), x)
    check_hessian(lambda x: anp.sum(fn(anp.tanh(x), axis=-1, keepdims=True) ** 2 * x), x)


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
def test_reduction_second_derivative_with_broadcast_product(name):
    # (4,) * (3, 1) -> (3, 4): the reverse rules sum the (3, 4) sensitivity back to (4,)
    fn = REDUCTIONS[name][0]
    x = uniform((3, 4), 0.5, 1.5, seed=12)
    check_hessian(lambda x: anp.sum(anp.sin(fn(x, axis=0)) * fn(x * x, axis=-1, keepdims=True)), x)


@pytest.mark.parametrize('n', [2, 3, 4])
def test_hessian_through_broadcast_that_adds_leading_axes(n):
    # f(v) = sum_ij sin(v_j) v_j = n * sum_j v_j sin(v_j) for v of shape (n,) broadcast to (n, n)
    # Hessian: n * diag(2 cos v - v sin v).  (When the number of inputs equals the number of
    # added rows, a wrong rule can still produce an array of the right shape.)
    v = uniform((n,), seed=n)
    f = lambda v: anp.sum(anp.sin(v) * (v * np.ones((n, n))))   # noqa: E731
    expected = n * np.diag(2 * np.cos(v) - v * np.sin(v))
    assert_close(nd.jacobian_r(nd.gradient_r(f))(v), expected, 1e-12, 1e-13, 'rr')
    assert_close(nd.jacobian_f(nd.gradient_r(f))(v), expected, 1e-12, 1e-13, 'fr')
    assert_close(nd.hessian(f)(v), expected, 1e-12, 1e-13, 'hessian')
    assert_close(nd.hvp(f, v, np.ones(n)), expected.sum(axis=1), 1e-12, 1e-13, 'hvp')


def test_ufunc_reduce_methods():
    x = uniform((3, 4), 0.5, 1.5, seed=13)
    for ufunc, npfn in ((np.add, np.sum), (np.multiply, np.prod), (np.maximum, np.max),
                        (np.minimum, np.min)):
        check_jacobian(lambda x: ufunc.reduce(x, axis=1), x)
        np.testing.assert_allclose(npfn(x, axis=1), ufunc.reduce(x, axis=1))


PROD_WITH_ZEROS = [
    np.array([0.0, 3.0, 2.0, 0.5]),                 # one zero
    np.array([0.0, 3.0, 0.0, 0.5]),                 # two zeros
    np.array([0.0, 0.0, 0.0, 2.0]),                 # three zeros
    np.array([1.5, -2.0, 0.5, 3.0]),                # no zero
]


def prod_gradient_closed_form(x):
    return np.array([np.prod(np.delete(x, i)) for i in range(x.size)])


def prod_hessian_closed_form(x):
    n = x.size
    h = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                h[i, j] = np.prod(np.delete(x, [i, j]))
    return h


@pytest.mark.parametrize('x', PROD_WITH_ZEROS, ids=['one-zero', 'two-zeros', 'three-zeros', 'no-zero'])
def test_prod_gradient_with_zero_entries(x):
    g = check_gradient(anp.prod, x)
    assert_close(g, prod_gradient_closed_form(x), 1e-14, 0)
    # along an axis, with a zero in some rows only
    m = np.stack([x, x[::-1] + 1.0, np.roll(x, 1)])
    check_jacobian(lambda m: anp.prod(m, axis=1), m)
    check_jacobian(lambda m: anp.prod(m, axis=0, keepdims=True), m)


@pytest.mark.parametrize('x', PROD_WITH_ZEROS, ids=['one-zero', 'two-zeros', 'three-zeros', 'no-zero'])
def test_prod_third_derivative_with_zero_entries(x):
    # d3 prod / dx_i dx_j dx_k = product of the entries other than i, j, k (distinct i, j, k)
    n = x.size
    expected = np.zeros((n, n, n))
    for i, j, k in np.ndindex(n, n, n):
        if len({i, j, k}) == 3:
            expected[i, j, k] = np.prod(np.delete(x, [i, j, k]))
    assert_close(nd.jacobian_f(nd.hessian(anp.prod))(x), expected, 1e-13, 1e-14, 'f(f(r))')
    assert_close(nd.jacobian_r(nd.jacobian_r(nd.gradient_r(anp.prod)))(x), expected, 1e-13, 1e-14, 'r(r(r))')


@pytest.mark.parametrize('x', PROD_WITH_ZEROS, ids=['one-zero', 'two-zeros', 'three-zeros', 'no-zero'])
def test_prod_hessian_with_zero_entries(x):
    expected = prod_hessian_closed_form(x)
    assert_close(nd.hessian(anp.prod)(x), expected, 1e-13, 1e-14, 'hessian')
    assert_close(nd.jacobian_r(nd.gradient_r(anp.prod))(x), expected, 1e-13, 1e-14, 'rr')
    assert_close(nd.jacobian_f(nd.gradient_f(anp.prod))(x), expected, 1e-13, 1e-14, 'ff')
    assert_close(nd.jacobian_r(nd.gradient_f(anp.prod))(x), expected, 1e-13, 1e-14, 'rf')


# Points with tiny entries (no zero): prod / x cancels catastrophically in the second
# derivative ([1e-16, 1, 1] gave a Hessian row sum of 0 instead of 2; [.., 1e-200, ..] was off
# by 1e184) and is 0 where the product underflows.  The rule must be the product of the
# other entries at every order.  Tolerances are relative; atol 1e-300 only forgives
# subnormal products (below 2.2e-308), which have few significant bits.
PROD_NEAR_ZERO = {
    'tiny': np.array([1e-16, 1.0, 1.0]),
    'very-tiny': np.array([0.5, 1e-200, 2.0, -1.5]),
    'underflowing-product': np.array([1e-200, 1e-200, 3.0]),
    'tiny-and-zero': np.array([0.0, 1e-300, 2.0, -3.0]),
    'two-tiny': np.array([1e-160, -2.0, 1e-170, 0.5, 4.0]),
}


def prod_derivative_closed_form(x, order, axis=None, keepdims=False, w=None):
    """The order-th derivative tensor of sum(w * prod(x, axis, keepdims)): for distinct
    entries p1..pm of one reduced group, w[group] times the product of the group's other
    entries (zero for repeated entries or entries of different groups)."""
    out_index = np.arange(x.size).reshape(x.shape)
    groups = np.moveaxis(out_index, _axes(axis, x.ndim), range(-len(_axes(axis, x.ndim)), 0))
    groups = groups.reshape(-1, int(np.prod([x.shape[a] for a in _axes(axis, x.ndim)])))
    wf = np.ones(len(groups)) if w is None else np.ravel(w)
    flat = x.ravel()
    t = np.zeros((x.size,) * order)
    for g, group in enumerate(groups):
        for combo in np.ndindex(*(len(group),) * order):
            if len(set(combo)) == order:
                rest = np.delete(group, list(combo))
                t[tuple(group[list(combo)])] += wf[g] * np.prod(flat[rest])
    return t.reshape(x.shape * order)


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))


@pytest.mark.parametrize('name', sorted(PROD_NEAR_ZERO))
def test_prod_derivatives_near_zero_are_exact_at_every_order(name):
    x = PROD_NEAR_ZERO[name]
    g1, h2, t3 = (prod_derivative_closed_form(x, k) for k in (1, 2, 3))
    rel = dict(rtol=1e-13, atol=1e-300)
    for grad in (nd.gradient_r, nd.gradient_f):
        assert_close(grad(anp.prod)(x), g1, what=grad.__name__, **rel)
    assert_close(nd.hvp(anp.prod, x, np.ones(x.size)), h2.sum(axis=1), what='hvp', **rel)
    pairings = {'hessian': nd.hessian(anp.prod),
                'rr': nd.jacobian_r(nd.gradient_r(anp.prod)),
                'ff': nd.jacobian_f(nd.gradient_f(anp.prod)),
                'rf': nd.jacobian_r(nd.gradient_f(anp.prod))}
    for what, h in pairings.items():
        assert_close(h(x), h2, what=what, **rel)
    triples = {'f(f(r))': nd.jacobian_f(nd.hessian(anp.prod)),
               'r(r(r))': nd.jacobian_r(nd.jacobian_r(nd.gradient_r(anp.prod))),
               'r(f(f))': nd.jacobian_r(nd.jacobian_f(nd.gradient_f(anp.prod)))}
    for what, t in triples.items():
        assert_close(t(x), t3, what=what, **rel)


def test_prod_hessian_near_zero_exact_values_from_the_issue():
    assert_close(nd.hvp(anp.prod, np.array([1e-16, 1., 1.]), np.ones(3)), [2.0, 1.0, 1.0], 0, 0)
    assert_close(nd.hvp(anp.prod, np.array([0.5, 1e-200, 2, -1.5]), np.ones(4)),
                 [-3.0, -2.75, -0.75, 1.0], 1e-15, 0)


PROD_NEAR_ZERO_3D = {
    'tiny': np.array([[[1e-16, 1.0, 2.0], [0.5, 1e-200, -1.5]],
                      [[1e-170, 3.0, 1e-150], [1.5, -0.5, 2.0]]]),
    'tiny-and-zero': np.array([[[1e-16, 1.0, 2.0], [0.5, 1e-200, -1.5]],
                               [[0.0, 3.0, 1e-300], [1.5, -0.5, 2.0]]]),
}


@pytest.mark.parametrize('keepdims', [False, True])
@pytest.mark.parametrize('axis', [0, 1, -1, (0, 2), None], ids=['0', '1', '-1', '(0,2)', 'None'])
@pytest.mark.parametrize('entries', sorted(PROD_NEAR_ZERO_3D))
def test_prod_near_zero_with_axis_and_keepdims(entries, axis, keepdims):
    x = PROD_NEAR_ZERO_3D[entries]
    w = weights(np.shape(np.prod(x, axis=axis, keepdims=keepdims)))
    f = lambda x: anp.sum(w * anp.prod(x, axis=axis, keepdims=keepdims))    # noqa: E731
    rel = dict(rtol=1e-13, atol=1e-300)
    expected = [prod_derivative_closed_form(x, k, axis, keepdims, w) for k in (1, 2, 3)]
    assert_close(nd.gradient_r(f)(x), expected[0], what='gradient_r', **rel)
    assert_close(nd.gradient_f(f)(x), expected[0], what='gradient_f', **rel)
    assert_close(nd.hessian(f)(x), expected[1], what='hessian', **rel)
    assert_close(nd.jacobian_r(nd.gradient_r(f))(x), expected[1], what='rr', **rel)
    assert_close(nd.jacobian_f(nd.hessian(f))(x), expected[2], what='f(f(r))', **rel)


def test_max_min_closed_form():
    x = np.array([[0.3, 2.0, -1.0], [4.0, 0.1, 0.2]])
    assert_close(nd.gradient_r(anp.max)(x), np.array([[0, 0, 0], [1.0, 0, 0]]), 0, 0)
    assert_close(nd.gradient_f(anp.min)(x), np.array([[0, 0, 1.0], [0, 0, 0]]), 0, 0)
    g = nd.gradient_r(lambda x: anp.sum(anp.max(x, axis=1) * np.array([2.0, 3.0])))(x)
    assert_close(g, np.array([[0, 2.0, 0], [3.0, 0, 0]]), 0, 0)


def test_mean_closed_form():
    x = uniform((2, 3, 4), seed=1)
    assert_close(nd.gradient_r(anp.mean)(x), np.full(x.shape, 1 / 24), 1e-15)
    g = nd.gradient_r(lambda x: anp.sum(anp.mean(x, axis=(0, 2)) * np.arange(3.0)))(x)
    assert_close(g, np.broadcast_to(np.arange(3.0)[None, :, None] / 8, x.shape), 1e-15)


# ---------------------------------------------------------------- shapes

SHAPE_OPS = {
    'reshape': lambda x: anp.reshape(x, (4, 6)),
    'reshape-1': lambda x: anp.reshape(x, (3, -1)),
    'method-reshape': lambda x: x.reshape(6, 4),
    'np.reshape': lambda x: np.reshape(x, (24,)),
    'ravel': anp.ravel,
    'np.ravel': np.ravel,
    'method-flatten': lambda x: x.flatten(),
    'transpose': anp.transpose,
    'transpose-axes': lambda x: anp.transpose(x, (1, 2, 0)),
    'np.transpose-axes': lambda x: np.transpose(x, (2, 0, 1)),
    'method-transpose': lambda x: x.transpose(2, 0, 1),
    '.T': lambda x: x.T,
    'swapaxes': lambda x: anp.swapaxes(x, 0, 2),
    'np.swapaxes': lambda x: np.swapaxes(x, -1, 1),
    'expand_dims': lambda x: anp.expand_dims(x, 1),
    'expand_dims-neg': lambda x: np.expand_dims(x, -1),
    'expand_dims-tuple': lambda x: anp.expand_dims(x, (0, 3)),
    'squeeze': lambda x: anp.squeeze(anp.expand_dims(x, 1)),
    'squeeze-axis': lambda x: np.squeeze(x[:, None, :, None], axis=3),
    'moveaxis': lambda x: anp.moveaxis(x, 0, -1),
    'np.moveaxis': lambda x: np.moveaxis(x, 2, 0),
    'broadcast_to': lambda x: anp.broadcast_to(x, (5, 2, 3, 4)),
    'atleast_2d': lambda x: anp.atleast_2d(x[0, 0]),
}


@pytest.mark.parametrize('name', sorted(SHAPE_OPS))
def test_shape_operation(name):
    f = SHAPE_OPS[name]
    x = uniform((2, 3, 4), seed=14)
    jf = check_jacobian(f, x, atol=1e-9)
    # reference: the same operation on plain numpy (the Jacobian of a linear map is exact)
    plain = f(x)
    assert isinstance(plain, np.ndarray)
    assert_close(np.tensordot(jf, x, axes=3), plain, 1e-14, 1e-15, 'J @ x == f(x)')


def test_shape_operation_second_derivative():
    x = uniform((2, 3), seed=15)

    def f(x):
        y = anp.moveaxis(anp.expand_dims(x, 0), 2, 0).T.reshape(-1)      # a permutation of x
        return anp.sum(anp.sin(y) * y[::-1]) + anp.sum(anp.squeeze(x[:, None]) ** 3)
    check_hessian(f, x)


INDEXES = {
    'int': 1,
    'neg-int': -1,
    'slice': (slice(None), slice(1, 3)),
    'neg-step': slice(None, None, -1),
    'neg-step-inner': (slice(None), slice(None, None, -2), 1),
    'ellipsis-0': (Ellipsis, 0),
    'ellipsis-mid': (0, Ellipsis, slice(1, None)),
    'ints': (1, -2, 3),
    'int-array': np.array([1, 0, 1]),
    'list': [0, 1, 1],
    'int-array-axis2': (Ellipsis, np.array([3, 0, 0])),
    'int-then-array': (1, np.array([0, 2])),
    'adjacent-arrays': (slice(None), np.array([0, 2]), np.array([1, 3])),
    'separated-arrays': (np.array([0, 1]), slice(None), np.array([1, 3])),
    'int-slice-array': (0, slice(None), np.array([1, 2])),
    'bool-mask-full': lambda x: x > 0.1,
    'bool-mask-2d-of-3d': lambda x: x[:, :, 0] > 0,
    'bool-mask-axis1': (slice(None), np.array([True, False, True])),
    'ellipsis-bool-mask': (Ellipsis, np.array([True, False, True, True])),
    'broadcast-arrays': (np.array([[0], [1]]), np.array([0, 2])),
    'ellipsis-array-slice': (Ellipsis, np.array([1, 2]), slice(None)),
    'newaxis': (None, 1, slice(0, 2)),
    'newaxis-array-neg-step': (None, np.array([1, 0]), slice(None, None, -1)),
    'neg-step-then-array': (slice(None, None, -1), np.array([2, 0])),
}


def make_index(name, x):
    idx = INDEXES[name]
    return idx(x) if callable(idx) else idx


@pytest.mark.parametrize('name', sorted(INDEXES))
def test_indexing_read(name):
    x = uniform((2, 3, 4), seed=16)
    idx = make_index(name, x)
    assert np.array_equal(nd.primal_value(x[idx]), x[idx])
    jf = check_jacobian(lambda x: x[idx], x, atol=1e-9)
    assert_close(np.tensordot(jf, x, axes=3), x[idx], 1e-14, 1e-15, 'J @ x == x[idx]')


@pytest.mark.parametrize('name', sorted(INDEXES))
def test_indexing_second_derivative(name):
    x = uniform((2, 3, 4), seed=17)
    idx = make_index(name, x)
    w = weights(np.shape(x[idx]))
    check_hessian(lambda x: anp.sum(w * x[idx] ** 3) + anp.sum(x[idx]) * anp.sum(x), x)


def test_indexing_repeated_entries_accumulate():
    x = np.array([1.0, 2.0, 3.0])
    g = nd.gradient_r(lambda x: anp.sum(x[np.array([0, 0, 2, 0])] * np.array([1.0, 2.0, 3.0, 4.0])))(x)
    assert_close(g, np.array([7.0, 0.0, 3.0]), 0, 0)


def test_iteration_and_len():
    x = uniform((3, 2), seed=18)
    f = lambda x: sum(anp.sum(row * row) * (i + 1) for i, row in enumerate(x)) + len(x)  # noqa: E731
    g = check_gradient(f, x)
    assert_close(g, 2 * x * np.array([[1.0], [2.0], [3.0]]), 1e-14)


JOINS = {
    'concatenate-0': (lambda a, b: anp.concatenate([a, b], axis=0), (2, 3), (4, 3)),
    'concatenate-1': (lambda a, b: np.concatenate([a, b], axis=1), (2, 3), (2, 1)),
    'concatenate-neg': (lambda a, b: anp.concatenate((a, b, a), axis=-1), (2, 3), (2, 2)),
    'concatenate-None': (lambda a, b: anp.concatenate([a, b], axis=None), (2, 3), (4,)),
    'stack-0': (lambda a, b: anp.stack([a, b]), (2, 3), (2, 3)),
    'stack-neg': (lambda a, b: np.stack([a, b, a], axis=-1), (2, 3), (2, 3)),
    'stack-1': (lambda a, b: anp.stack([a, b], axis=1), (4,), (4,)),
    'hstack-1d': (lambda a, b: anp.hstack([a, b]), (3,), (2,)),
    'hstack-2d': (lambda a, b: np.hstack([a, b]), (2, 3), (2, 1)),
    'vstack-1d': (lambda a, b: anp.vstack([a, b]), (3,), (3,)),
    'vstack-2d': (lambda a, b: np.vstack([a, b]), (1, 3), (2, 3)),
}


@pytest.mark.parametrize('name', sorted(JOINS))
def test_join(name):
    f, sa, sb = JOINS[name]
    a, b = uniform(sa, seed=19), uniform(sb, seed=20)
    check_jacobian(f, a, b, argnums=(0, 1), atol=1e-9)
    check_jacobian(lambda a: f(a, b), a, atol=1e-9)          # b a plain array
    check_jacobian(lambda b: f(a, b), b, atol=1e-9)          # a a plain array
    w = weights(np.shape(f(a, b)))
    check_hessian(lambda a: anp.sum(w * f(a, b) ** 3), a)
    check_hessian(lambda b: anp.sum(f(a * a, b) * f(a, b * b)), b)


def test_join_of_perturbed_scalars():
    # nestad.numpy.array / stack of perturbed scalars builds a perturbed array
    def f(v):
        a, b = v[0], v[1]
        m = anp.array([[a * b, a], [nd.sin(b), 2.0]])
        return anp.sum(m * m)
    check_gradient(f, np.array([0.7, -1.3]))


# ---------------------------------------------------------------- products

PRODUCTS = {
    'dot-1d-1d': (anp.dot, (4,), (4,)),
    'dot-2d-1d': (anp.dot, (3, 4), (4,)),
    'dot-1d-2d': (anp.dot, (3,), (3, 4)),
    'dot-2d-2d': (anp.dot, (2, 3), (3, 4)),
    'dot-scalar': (anp.dot, None, (2, 3)),
    'np.dot-2d-2d': (np.dot, (2, 3), (3, 4)),
    'matmul-1d-1d': (anp.matmul, (4,), (4,)),
    'matmul-2d-1d': (anp.matmul, (3, 4), (4,)),
    'matmul-1d-2d': (anp.matmul, (3,), (3, 4)),
    'matmul-2d-2d': (anp.matmul, (2, 3), (3, 4)),
    'matmul-3d-3d': (anp.matmul, (2, 3, 4), (2, 4, 2)),
    'matmul-3d-2d': (anp.matmul, (2, 3, 4), (4, 2)),
    'matmul-2d-3d': (anp.matmul, (3, 4), (2, 4, 2)),
    'matmul-1d-3d': (anp.matmul, (4,), (2, 4, 3)),
    'matmul-3d-1d': (anp.matmul, (2, 3, 4), (4,)),
    'matmul-bcast-batch': (anp.matmul, (2, 1, 3, 4), (3, 4, 2)),
    'np.matmul-3d-3d': (np.matmul, (2, 3, 4), (2, 4, 2)),
    '@-2d-2d': (operator.matmul, (2, 3), (3, 4)),
    '@-1d-2d': (operator.matmul, (3,), (3, 4)),
    '@-3d-3d': (operator.matmul, (2, 3, 4), (2, 4, 2)),
    'einsum-ij,jk->ik': (lambda a, b: anp.einsum('ij,jk->ik', a, b), (2, 3), (3, 4)),
    'einsum-i,i->': (lambda a, b: anp.einsum('i,i->', a, b), (4,), (4,)),
    'einsum-ij,j->i': (lambda a, b: anp.einsum('ij,j->i', a, b), (3, 4), (4,)),
    'einsum-bij,bjk->bik': (lambda a, b: anp.einsum('bij,bjk->bik', a, b), (2, 3, 4), (2, 4, 2)),
    'einsum-ij,ij->i': (lambda a, b: np.einsum('ij,ij->i', a, b), (3, 4), (3, 4)),
    'einsum-i,j->ij': (lambda a, b: anp.einsum('i,j->ij', a, b), (3,), (4,)),
    'einsum-ij,k->ki': (lambda a, b: anp.einsum('ij,k->ki', a, b), (3, 2), (4,)),
    'outer': (anp.outer, (3,), (4,)),
    'np.outer': (np.outer, (3,), (4,)),
    'inner': (anp.inner, (4,), (4,)),
    'vdot': (anp.vdot, (2, 3), (2, 3)),
}


@pytest.mark.parametrize('name', sorted(PRODUCTS))
def test_product(name):
    f, sa, sb = PRODUCTS[name]
    a, b = uniform(sa, seed=22), uniform(sb, seed=23)
    np.testing.assert_allclose(f(a, b), f(np.asarray(a), b), rtol=1e-15)
    check_jacobian(f, a, b, argnums=(0, 1))
    check_jacobian(lambda a: f(a, b), a)
    check_jacobian(lambda b: f(a, b), b)


@pytest.mark.parametrize('name', sorted(PRODUCTS))
def test_product_second_derivative(name):
    f, sa, sb = PRODUCTS[name]
    a, b = uniform(sa, seed=24), uniform(sb, seed=25)
    check_hessian(lambda a: anp.sum(anp.tanh(f(a, b)) ** 2), a)
    check_hessian(lambda b: anp.sum(anp.tanh(f(a * a, b)) * f(a, b)), b)


def test_dot_method_of_nestad_array():
    a, b = uniform((2, 3), seed=43), uniform((3,), seed=44)
    check_jacobian(lambda a, b: a.dot(b), a, b, argnums=(0, 1))
    check_jacobian(lambda a: a.dot(np.ones((3, 2))), a)
    check_hessian(lambda a: anp.sum(anp.tanh(a.dot(b)) ** 2), a)


def test_plain_matrix_at_nestad_vector():
    # np.ones(...) @ x and W @ x with W plain: ndarray.__matmul__ -> __array_ufunc__
    W = uniform((3, 4), seed=26)
    x = uniform((4,), seed=27)
    check_jacobian(lambda x: W @ x, x)
    check_jacobian(lambda x: np.ones((2, 3)) @ x.reshape(3, 1) @ np.ones((1, 2)), uniform((3,), seed=1))
    assert_close(nd.jacobian_r(lambda x: W @ x)(x), W, 1e-15, 0)
    assert_close(nd.jacobian_f(lambda x: x @ W.T)(x), W, 1e-15, 0)
    assert_close(nd.gradient_r(lambda x: np.ones(3) @ (W @ x))(x), W.sum(axis=0), 1e-14, 0)


@pytest.mark.parametrize('spec,sa', [('ij->ji', (3, 4)), ('ij->i', (3, 4)), ('ijk->kj', (2, 3, 4)),
                                     ('ij->', (3, 4))])
def test_einsum_one_operand(spec, sa):
    a = uniform(sa, seed=28)
    check_jacobian(lambda a: anp.einsum(spec, a), a, atol=1e-9)
    check_jacobian(lambda a: np.einsum(spec, a), a, atol=1e-9)


@pytest.mark.parametrize('spec,sa', [('ij->ji', (3, 4)), ('ij->i', (3, 4)), ('ijk->kj', (2, 3, 4)),
                                     ('ij->', (3, 4))])
def test_einsum_one_operand_second_derivative(spec, sa):
    a = uniform(sa, seed=28)
    check_hessian(lambda a: anp.sum(anp.einsum(spec, a * a) ** 2), a)


def test_einsum_with_uppercase_subscripts():
    # the user's subscripts may use any letters, including the upper-case ones
    a, b = uniform((2, 3), seed=45), uniform((3, 4), seed=46)
    for spec in ('Ij,jk->Ik', 'Aj,jB->AB', 'AB,BC->AC'):
        check_jacobian(lambda a, b: anp.einsum(spec, a, b), a, b, argnums=(0, 1))


@pytest.mark.parametrize('shape', [(3, 3), (3, 4), (2, 3, 3)])
def test_trace_and_diagonal(shape):
    a = uniform(shape, seed=29)
    for tr in (anp.trace, np.trace):
        if len(shape) == 2:
            check_jacobian(tr, a, atol=1e-9)
            assert_close(nd.gradient_r(tr)(a), np.eye(*shape), 0, 0)
            assert tr(a) == pytest.approx(np.trace(a))
    check_jacobian(anp.diagonal, a, atol=1e-9)
    check_hessian(lambda a: anp.sum(anp.diagonal(a) ** 3), a)


def test_cumsum():
    x = uniform((3, 4), seed=30)
    for axis in (None, 0, 1, -1):
        check_jacobian(lambda x: anp.cumsum(x, axis=axis), x, atol=1e-9)
        np.testing.assert_allclose(anp.cumsum(x, axis=axis), np.cumsum(x, axis=axis), rtol=1e-14)


# ---------------------------------------------------------------- dtypes and scalars

@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f'])
def test_float32_input_gives_float_gradient_of_same_shape(op):
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
    g = getattr(nd, op)(lambda x: anp.sum(anp.sin(x) * x))(x)
    assert isinstance(g, np.ndarray) and g.shape == x.shape and g.dtype.kind == 'f'
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(g, np.cos(x64) * x64 + np.sin(x64), rtol=1e-6)


@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f'])
def test_integer_input_gives_float_gradient(op):
    x = np.array([1, -2, 3])
    g = getattr(nd, op)(lambda x: anp.sum(x * x * x) + anp.sum(x / 2))(x)
    assert isinstance(g, np.ndarray) and g.shape == (3,) and g.dtype.kind == 'f'
    assert_close(g, 3.0 * x * x + 0.5, 0, 0)
    jr = nd.jacobian_r(lambda x: x * x)(x)
    jf = nd.jacobian_f(lambda x: x * x)(x)
    for j in (jr, jf):
        assert j.dtype.kind == 'f'
        assert_close(j, np.diag(2.0 * x), 0, 0)


def test_python_float_times_perturbed_array():
    x = uniform((2, 3), seed=31)
    check_jacobian(lambda x: 2.5 * x - x / 4.0 + 1.0 ** x + 3 - x * np.float64(0.5), x)
    check_jacobian(lambda x: np.float64(2.0) * x + np.float32(3.0) * x, x)


def test_perturbed_scalar_times_plain_array():
    a = uniform((2, 3), seed=32)
    s0 = 0.7
    # forward: derivative of an array-valued function of a scalar
    assert_close(nd.derivative(lambda s: s * a)(s0), a, 0, 0)
    assert_close(nd.derivative(lambda s: a * s)(s0), a, 0, 0)
    assert_close(nd.derivative(lambda s: anp.sin(s * a))(s0), a * np.cos(s0 * a), 1e-14)
    assert_close(nd.derivative(lambda s: np.exp(a / s))(s0), -a / s0 ** 2 * np.exp(a / s0), 1e-13)
    # reverse: scalar input, array computation, scalar output
    g = nd.gradient_r(lambda s: anp.sum(anp.exp(s * a)))(s0)
    assert np.shape(g) == () and g == pytest.approx(np.sum(a * np.exp(s0 * a)), rel=1e-14)
    b = np.abs(a) + 0.1
    g = nd.gradient_f(lambda s: np.sum(b ** s))(s0)
    assert np.shape(g) == () and g == pytest.approx(np.sum(np.log(b) * b ** s0), rel=1e-13)
    # Jacobian of array output w.r.t. a scalar has shape out.shape
    check_jacobian(lambda s: anp.tanh(s * a) + s, s0)


def test_perturbed_scalar_from_derivative_broadcast_into_arrays():
    a = uniform((3, 4), seed=33)
    v = uniform((4,), seed=34)

    def f(s):
        x = s * a + nd.sin(s)             # scalar Bundle with array
        y = anp.tanh(x @ v) * s           # array result scaled by the scalar again
        return anp.sum(y) + s * s
    expected = fd_gradient(f, (0.4,))
    for op in (nd.derivative, nd.gradient_r, nd.gradient_f):
        assert op(f)(0.4) == pytest.approx(float(expected), rel=1e-7)


def test_mixed_scalar_and_array_arguments():
    def f(s, x, t):
        return anp.sum(anp.sin(s * x) * t) + s * t
    s, x, t = 0.3, uniform((2, 3), seed=35), 1.7
    check_gradient(f, s, x, t, argnums=(0, 1, 2))
    gs, gx, gt = nd.gradient_r(f, argnums=(0, 1, 2))(s, x, t)
    assert np.shape(gs) == () and np.shape(gt) == () and gx.shape == (2, 3)


def test_structures_of_arrays():
    p = {'W': uniform((3, 2), seed=36), 'b': uniform((3,), seed=37), 'c': 0.5}

    def loss(p):
        return anp.sum(anp.tanh(p['W'] @ np.array([1.0, -2.0]) + p['b']) ** 2) * p['c']
    gr = nd.gradient_r(loss)(p)
    gf = nd.gradient_f(loss)(p)
    assert set(gr) == {'W', 'b', 'c'} and gr['W'].shape == (3, 2) and gr['b'].shape == (3,)
    for k in p:
        expected = fd_gradient(lambda v: loss({**p, k: v}), (p[k],))
        assert_close(gr[k], expected, what=f'gradient_r[{k}]')
        assert_close(gf[k], expected, what=f'gradient_f[{k}]')


def test_output_independent_of_input():
    x = uniform((2,), seed=38)
    const = np.arange(3.0)
    for jac in (nd.jacobian_f, nd.jacobian_r):
        assert_close(jac(lambda x: const)(x), np.zeros((3, 2)), 0, 0, jac.__name__)
        assert_close(jac(lambda x: const + 0 * anp.sum(x))(x), np.zeros((3, 2)), 0, 0, jac.__name__)
    for grad in (nd.gradient_r, nd.gradient_f):
        assert_close(grad(lambda x: 3.0)(x), np.zeros(2), 0, 0, grad.__name__)
    assert_close(nd.derivative(lambda s: const)(1.0), np.zeros(3), 0, 0)


def test_plain_ndarray_method_on_nestad_value_is_not_silently_constant():
    # ndarray.dot and np.asarray cannot be intercepted by numpy's protocols; they build an
    # object array of nestad scalars.  Whatever happens, the answer must not be a silent zero:
    # either the right Jacobian or an exception.
    a = np.arange(6.0).reshape(2, 3)
    b = np.array([1.0, 2.0, 3.0])
    for name, op in (('jacobian_r', nd.jacobian_r), ('jacobian_f', nd.jacobian_f)):
        try:
            j = op(lambda b: a.dot(b))(b)
        except (TypeError, ValueError):
            continue
        assert_close(j, a, 1e-15, 0, f'{name} of ndarray.dot')
    try:
        d = nd.derivative(lambda s: a.dot(b * s))(1.0)
    except (TypeError, ValueError):
        d = a @ b
    assert_close(d, a @ b, 1e-15, 0, 'derivative of ndarray.dot')


@pytest.mark.parametrize('op', ['jacobian_r', 'jacobian_f'])
def test_np_asarray_of_nestad_array_is_not_silently_constant(op):
    # x = np.asarray(x) at the top of a function is common numpy style
    x = np.array([0.3, -0.5, 0.8])
    try:
        j = getattr(nd, op)(lambda x: np.asarray(x) * 2.0)(x)
    except (TypeError, ValueError):
        return
    assert_close(j, 2.0 * np.eye(3), 1e-15, 0)


def test_jvp_vjp_with_arrays():
    A = uniform((3, 4), seed=39)
    x = uniform((4,), seed=40)
    v = uniform((4,), seed=41)
    c = uniform((3,), seed=42)

    def f(x):
        return anp.tanh(A @ x) * anp.sum(x * x)
    J = fd_jacobian(f, (x,))
    y, jv = nd.jvp(f, (x,), (v,))
    assert_close(y, f(x), 1e-15, 0)
    assert_close(jv, J @ v)
    y, pullback = nd.vjp(f, x)
    (ct,) = pullback(c)
    assert_close(ct, c @ J)
    (ct2,) = pullback(2 * c)              # the pullback may be reused
    assert_close(ct2, 2 * (c @ J))
    assert_close(nd.directional_derivative(f, x, v), J @ v)


def test_unary_operators_and_builtins():
    x = uniform((2, 3), 0.2, 1.0, seed=47) * np.array([1.0, -1.0, 1.0])
    check_jacobian(lambda x: -x + abs(x) * (+x) - np.negative(x) * np.positive(x), x)
    g = nd.gradient_r(lambda x: anp.sum(abs(x)))(x)
    assert_close(g, np.sign(x), 0, 0)


@pytest.mark.parametrize('name', ['floor', 'ceil', 'rint', 'trunc', 'sign', 'floor_divide'])
def test_piecewise_constant_functions_have_zero_derivative(name):
    x = np.array([[0.3, -1.7, 2.2], [4.6, -0.2, 1.4]])
    fn = (lambda x: np.floor_divide(x, 0.7)) if name == 'floor_divide' else getattr(np, name)
    expected = fn(x)
    for jac in (nd.jacobian_f, nd.jacobian_r):
        j = jac(lambda x: fn(x) + x)(x)          # + x keeps the output perturbed
        assert_close(j, np.eye(6).reshape(2, 3, 2, 3), 0, 0, f'{jac.__name__} of {name}')
    assert_close(nd.jacobian_r(lambda x: x // 0.7 + x)(x), np.eye(6).reshape(2, 3, 2, 3), 0, 0)
    seen = []

    def record(x):
        seen.append(fn(x))                       # on a perturbed array: a plain result
        return anp.sum(x)
    nd.gradient_r(record)(x)
    assert isinstance(seen[0], np.ndarray)
    np.testing.assert_array_equal(seen[0], expected)


def test_hessian_with_two_array_arguments():
    x, y = uniform((2,), seed=48), uniform((3,), seed=49)

    def f(x, y):
        return anp.sum(anp.tanh(anp.outer(x, y)) ** 2) + anp.sum(x ** 3) * anp.sum(y)
    h = nd.hessian(f, argnums=(0, 1))(x, y)
    args = (x, y)
    for i, j in np.ndindex(2, 2):
        expected = fd_jacobian(lambda v: nd.gradient_r(f, argnums=i)(*_with(args, j, v)), (args[j],))
        assert np.shape(h[i][j]) == np.shape(args[i]) + np.shape(args[j])
        assert_close(h[i][j], expected, what=f'H[{i}][{j}]')


def test_structured_outputs_of_jacobians():
    x = uniform((3,), seed=50)

    def f(x):
        return {'vec': anp.sin(x) * 2.0, 'scalar': anp.sum(x * x), 'mat': anp.outer(x, x[:2])}
    for jac in (nd.jacobian_f, nd.jacobian_r):
        j = jac(f)(x)
        assert set(j) == {'vec', 'scalar', 'mat'}
        assert_close(j['vec'], np.diag(2 * np.cos(x)), 1e-14, 0, jac.__name__)
        assert_close(j['scalar'], 2 * x, 1e-14, 0, jac.__name__)
        assert_close(j['mat'], fd_jacobian(lambda x: np.outer(x, x[:2]), (x,)), what=jac.__name__)


def test_value_and_gradient_and_multi_argument_jvp():
    x, y = uniform((2, 3), seed=51), uniform((3,), seed=52)

    def f(x, y):
        return anp.sum(anp.exp(x * y) - x)
    v, (gx, gy) = nd.value_and_gradient_r(f, argnums=(0, 1))(x, y)
    assert v == pytest.approx(np.sum(np.exp(x * y) - x), rel=1e-14)
    assert_close(gx, y * np.exp(x * y) - 1, 1e-14)
    assert_close(gy, np.sum(x * np.exp(x * y), axis=0), 1e-14)
    vx, vy = uniform((2, 3), seed=53), uniform((3,), seed=54)
    _, t = nd.jvp(f, (x, y), (vx, vy))
    assert t == pytest.approx(np.sum(gx * vx) + np.sum(gy * vy), rel=1e-13)
    _, pullback = nd.vjp(lambda x, y: (x * y, anp.sum(y)), x, y)
    cx, cy = pullback((np.ones((2, 3)), 2.0))
    assert_close(cx, np.broadcast_to(y, (2, 3)), 0, 0)
    assert_close(cy, np.sum(x, axis=0) + 2.0, 1e-15)


def test_function_valued_derivative_applied_to_arrays():
    # fh = d/ds (v -> sum(sin(s v))) at s0, i.e. fh(v) = sum(v cos(s0 v))
    s0 = 0.7
    x = uniform((4,), seed=55)
    fh = nd.derivative(lambda s: lambda v: anp.sum(anp.sin(s * v)))(s0)
    assert fh(x) == pytest.approx(np.sum(x * np.cos(s0 * x)), rel=1e-14)
    # applied inside forward mode: d/dt fh(t x) at t = 1
    got = nd.derivative(lambda t: fh(t * x))(1.0)
    assert got == pytest.approx(np.sum(x * np.cos(s0 * x) - s0 * x * x * np.sin(s0 * x)), rel=1e-12)
    g = nd.gradient_f(fh)(x)
    assert_close(g, np.cos(s0 * x) - s0 * x * np.sin(s0 * x), 1e-12, 1e-14)
    # inside reverse mode on arrays: the tape of the array ops is split (VJP partials too)
    g = nd.gradient_r(fh)(x)
    assert_close(g, np.cos(s0 * x) - s0 * x * np.sin(s0 * x), 1e-12, 1e-14)
    # and a second derivative through it, forward over reverse, agrees with forward over forward
    M = uniform((2, 4), seed=57)
    gm = nd.derivative(lambda x_: lambda m: anp.sum(anp.tanh(m @ (x_ * x))))(s0)
    h_fr = nd.derivative(lambda t: nd.gradient_r(lambda m: gm(m * t))(M))(1.3)
    h_ff = nd.derivative(lambda t: nd.jacobian_f(lambda m: gm(m * t))(M))(1.3)
    assert_close(h_fr, h_ff, 1e-12, 1e-14)


def test_escaped_array_perturbation_is_detected():
    leaked = []

    def f(x):
        leaked.append(x * 2.0)
        return anp.sum(x)
    x = uniform((3,), seed=56)
    nd.gradient_r(f)(x)
    with pytest.raises(nd.EscapedPerturbationError):
        nd.gradient_r(lambda y: anp.sum(leaked[0] * y))(x)


def test_where_condition_with_more_axes_than_operands():
    x = uniform((4,), seed=57)
    cond = uniform((3, 4), seed=58) > 0
    check_jacobian(lambda x: anp.where(cond, x, 0.5), x)
    check_jacobian(lambda x: anp.where(cond, 2.0, x * x), x)
    check_hessian(lambda x: anp.sum(anp.where(cond, anp.sin(x), x ** 3)), x)


def test_lists_of_perturbed_scalars_as_array_arguments():
    x = uniform((3,), seed=59)
    check_gradient(lambda x: anp.sum([x[0], x[1] * 2.0, anp.sin(x[2])]) * anp.mean([x[0], x[2]]), x)
    check_jacobian(lambda x: anp.stack([x[0] * x[1], x[2], 1.0 + x[1]]), x)


def test_scalar_results_have_numpy_scalar_methods():
    # A reduction gives a scalar nestad value; like a numpy scalar it answers .sum() etc.
    w = np.array([1.0, 2.0, 3.0])
    g = nd.gradient_r(lambda x: (w * x.max()).sum())(np.array([0.5, 2.0, 1.0]))
    np.testing.assert_allclose(g, [0.0, 6.0, 0.0])
    d = nd.derivative(lambda s: (s * s).reshape(1).sum())(3.0)
    assert d == 6.0


def test_inner_of_matrices():
    # numpy.inner sums over the last axes: shape a.shape[:-1] + b.shape[:-1].
    a = uniform((2, 3), seed=71)
    b = uniform((4, 3), seed=72)
    np.testing.assert_allclose(anp.inner(a, b), np.inner(a, b), rtol=1e-15)
    g = nd.gradient_r(lambda a_: anp.sum(anp.sin(anp.inner(a_, b))))(a)
    np.testing.assert_allclose(g, np.cos(np.inner(a, b)) @ b, rtol=1e-13)
    np.testing.assert_allclose(nd.gradient_f(lambda a_: anp.sum(np.inner(a_, b)))(a),
                               np.broadcast_to(b.sum(0), (2, 3)), rtol=1e-13)
