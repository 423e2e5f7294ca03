"""The registry of primitives drives coverage: every primitive has a rule-test row here
(run through nestad.extend.check_rules: every mode, batched and unbatched, against finite
differences, to second order), or is a piecewise-constant operation whose derivative is
checked to be zero.  A primitive added without a row fails test_every_primitive_has_a_row.
The README's list of functions is the registry's (nestad.catalog)."""
import math
import pathlib

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
import nestad.scipy  # noqa: F401  (its primitives are nestad's own: their rows are in test_scipy)
from nestad.scipy import linalg as sla, signal
from nestad import registry
from nestad.extend import check_rules
from nestad.numpy import _banded
from nestad.staging import loops
from test_scipy import COMPOSITES as _SCIPY_COMPOSITES, SCIPY_ROWS  # noqa: F401

R = np.random.default_rng(7)


def _vec(lo=-1.0, hi=1.0, n=3):
    return R.uniform(lo, hi, size=n)


def _mat(n=3):
    return R.uniform(-0.5, 0.5, size=(n, n)) + 2.0 * np.eye(n)


_REAL_EIGENVALUES = np.array([[2.0, 0.5, 0.1], [0.3, 1.0, -0.4], [0.2, 0.1, -1.0]])


def _joined(parts):
    """The factors of a decomposition as one vector (check_rules takes one array)."""
    return anp.concatenate([anp.ravel(p) for p in parts])


# Scalar primitives: a point inside their smooth domain.  An elementwise one (with a numpy
# mirror) is also checked on an array of points through its nestad.numpy version, so one
# row covers both (nestad.registry.ELEMENTWISE).
SCALAR_ROWS = {
    'exp': 0.3, 'exp2': 0.3, 'expm1': 0.3, 'log': 1.3, 'log1p': 0.3, 'log2': 1.3,
    'log10': 1.3, 'sqrt': 1.3, 'cbrt': 1.3, 'sin': 0.3, 'cos': 0.3, 'tan': 0.3, 'asin': 0.3,
    'acos': 0.3, 'atan': 0.3, 'sinh': 0.3, 'cosh': 0.3, 'tanh': 0.3, 'asinh': 0.3,
    'acosh': 1.3, 'atanh': 0.3, 'erf': 0.3, 'erfc': 0.3, 'abs': -0.7, 'recip': 1.3,
    'neg': 0.3, 'sech2': 0.3,
}
SCALAR_BINARY_ROWS = {
    'pow': (1.3, 0.7), 'atan2': (0.3, -0.8), 'hypot': (0.3, -0.8), 'minimum': (0.3, -0.8),
    'maximum': (0.3, -0.8), 'add': (0.3, -0.8), 'sub': (0.3, -0.8), 'mul': (0.3, -0.8),
    'div': (0.3, -0.8), 'mod': (2.3, 0.7), 'python_pow': (1.3, 0.7),
}
_SCALAR_FNS = {'recip': lambda x: 1.0 / x, 'neg': lambda x: -x, 'add': lambda x, y: x + y,
               'sub': lambda x, y: x - y, 'mul': lambda x, y: x * y, 'div': lambda x, y: x / y,
               'mod': lambda x, y: x % y, 'sech2': nd.primitives.sech2,
               # ** on traced plain numbers (Python's operator); perturbed, it is pow's rule
               'python_pow': lambda x, y: x ** y}

# Array primitives: (function, arguments).
ARRAY_ROWS = {
    'numpy.absolute': (anp.absolute, (np.array([-0.7, 0.4, 1.2]),)),
    'numpy.reciprocal': (anp.reciprocal, (_vec(0.5, 2.0),)),
    'numpy.sech2': (anp._sech2, (np.array([-30.0, 0.3, 800.0]),)),
    'numpy.negative': (anp.negative, (_vec(),)),
    'numpy.add': (anp.add, (_mat(), _vec())),
    'numpy.subtract': (anp.subtract, (_vec(), _mat())),
    'numpy.multiply': (anp.multiply, (_mat(), _vec())),
    'numpy.divide': (anp.divide, (_vec(), _vec(0.5, 2.0))),
    'numpy.power': (anp.power, (_vec(0.5, 2.0), _vec())),
    'numpy.mod': (anp.mod, (_vec(2.1, 2.9), np.array([0.7, 0.8, 0.9]))),
    'numpy.maximum': (anp.maximum, (np.array([0.3, -0.2, 0.9]), np.array([-0.1, 0.5, 0.2]))),
    'numpy.minimum': (anp.minimum, (np.array([0.3, -0.2, 0.9]), np.array([-0.1, 0.5, 0.2]))),
    'numpy.logaddexp': (anp.logaddexp, (_vec(), _mat())),
    'numpy.logaddexp2': (anp.logaddexp2, (_vec(), _mat())),
    'numpy.sum': (lambda x: anp.sum(x, axis=1), (_mat(),)),
    'numpy.prod': (lambda x: anp.prod(x, axis=0), (_mat(),)),
    'numpy.max': (lambda x: anp.max(x, axis=1), (_mat(),)),
    'numpy.min': (lambda x: anp.min(x, axis=0, keepdims=True), (_mat(),)),
    'numpy.reshape': (lambda x: anp.reshape(x, (9,)), (_mat(),)),
    'numpy.transpose': (anp.transpose, (R.uniform(size=(2, 3)),)),
    'numpy.broadcast_to': (lambda x: anp.broadcast_to(x, (2, 3)), (_vec(),)),
    'numpy.sum_to': (lambda x: anp.sum_to(x, (3,)), (R.uniform(size=(2, 3)),)),
    'numpy.getitem': (lambda x: x[1:, ::-1], (_mat(),)),
    'numpy.scatter_add': (lambda x: anp.at(np.zeros(5))[np.array([0, 2, 2])].add(x), (_vec(),)),
    'numpy.at.add': (lambda x, v: anp.at(x)[1:].add(v), (_vec(), np.array([0.5, -0.5]))),
    'numpy.at.set': (lambda x, v: anp.at(x)[0].set(v * v), (_vec(), 0.7)),
    'numpy.concatenate': (lambda x, y: anp.concatenate([x, y]), (_vec(), _vec())),
    'numpy.where': (lambda x, y: anp.where(np.array([True, False, True]), x, y), (_vec(), _vec())),
    'numpy.matmul': (anp.matmul, (_mat(), R.uniform(size=(3, 2)))),
    'numpy.dot': (anp.dot, (_mat(), _vec())),
    'numpy.inner': (anp.inner, (_vec(), _vec())),
    'numpy.vdot': (anp.vdot, (_vec(), _vec())),
    'numpy.einsum': (lambda a, b: anp.einsum('ij,jk->ik', a, b), (_mat(), _mat())),
    'numpy.cumsum': (lambda x: anp.cumsum(x, axis=0), (_mat(),)),
    'numpy.cumprod': (lambda x: anp.cumprod(x, axis=1), (np.array([[0.7, 0.0, -1.3, 0.4],
                                                                   [1.1, -0.6, 0.9, 0.0]]),)),
    'numpy.fmod': (anp.fmod, (np.array([2.3, -2.9, 1.7]), np.array([0.7, 0.8, -0.9]))),
    'numpy.float_power': (anp.float_power, (np.array([0.5, 1.5, 2.0]), np.array([1.3, -0.7, 2.0]))),
    'numpy.astype': (lambda x: x.astype(np.float64) * 2.0, (_vec(),)),
    'numpy.linalg.solve': (anp.linalg.solve, (_mat(), _vec())),
    'numpy.linalg.norm': (lambda a: anp.linalg.norm(a), (np.asfortranarray(_mat()),)),
    'numpy.linalg.inv': (anp.linalg.inv, (_mat(),)),
    'numpy.linalg.det': (anp.linalg.det, (_mat(),)),
    'numpy.linalg.slogdet': (lambda a: anp.linalg.slogdet(a)[1], (_mat(),)),
    'numpy.linalg.cholesky': (lambda a: anp.linalg.cholesky(a @ a.T), (_mat(),)),
    'numpy.linalg.eigh': (lambda a: _joined(anp.linalg.eigh(a)), (_mat(),)),
    'numpy.linalg.eigvalsh': (lambda a: anp.linalg.eigvalsh(a, 'U'), (_mat(),)),
    'numpy.linalg.eig': (lambda a: _joined(anp.linalg.eig(a)), (_REAL_EIGENVALUES,)),
    'numpy.linalg.eigvals': (anp.linalg.eigvals, (_REAL_EIGENVALUES,)),
    'numpy.linalg.svd': (lambda a: _joined(anp.linalg.svd(a, full_matrices=False)),
                         (R.uniform(-1.0, 1.0, size=(3, 2)),)),
    'numpy.linalg.svdvals': (lambda a: anp.linalg.svd(a, compute_uv=False), (_mat(),)),
    'numpy.linalg.pinv': (anp.linalg.pinv, (R.uniform(-1.0, 1.0, size=(2, 3)),)),
}
_SPD = _mat() @ _mat().T
ARRAY_ROWS.update({
    'numpy.convolve': (lambda a, v: anp.convolve(a, v, 'same'), (_vec(n=5), _vec())),
    'numpy.correlate': (lambda a, v: anp.correlate(a, v, 'full'), (_vec(), _vec(n=5))),
    'scipy.signal.convolve': (lambda a, b: signal.convolve(a, b, 'valid'), (_mat(), R.uniform(size=(2, 2)))),
    'scipy.linalg.expm': (sla.expm, (_mat() - 2.0 * np.eye(3),)),
    'scipy.linalg.sqrtm': (sla.sqrtm, (_SPD,)),
    'scipy.linalg.solve_sylvester': (sla.solve_sylvester, (_mat(), _mat(), _mat())),
    'scipy.linalg.solve_triangular': (lambda a, b: sla.solve_triangular(a, b, trans=1, lower=True),
                                      (_mat(), _vec())),
    'scipy.linalg.cholesky': (lambda a: sla.cho_factor(a)[0], (_SPD,)),
    'scipy.linalg.cho_solve': (lambda c, b: sla.cho_solve((c, True), b),
                               (np.linalg.cholesky(_SPD), _vec())),
    'scipy.linalg.solve_banded': (lambda ab, b: sla.solve_banded((1, 0), ab, b),
                                  (np.array([[2.0, 3.0, 2.5], [0.5, -0.4, 0.0]]), _vec())),
})
if hasattr(np, 'vecdot'):
    ARRAY_ROWS['numpy.vecdot'] = (anp.vecdot, (_mat(), _vec()))
# a loop's reads and writes of one row of a stack (scan's xs and ys, stored iterates)
ARRAY_ROWS.update({
    'nestad.loops.loop_row': (lambda s: loops.row(s, 1), (_mat(),)),
    'nestad.loops.loop_row_at': (lambda s: loops.row(s, 2, axis=1), (_mat(),)),
    'nestad.loops.loop_row_set': (lambda b, v: loops.row_set(b, 1, v), (_mat(), _vec())),
})

# the banded basis's dense form and its adjoint (nestad/numpy/_banded.py; last, so that
# drawing their data does not change the rows above)
ARRAY_ROWS.update({
    'numpy.banded_dense': (lambda a, b: _banded.banded_dense(a, b, offsets=(1, -2), shape=(4, 3)),
                           (_vec(), _vec())),
    'numpy.banded_take': (lambda x: _banded.banded_take(x, offset=-1, m=3), (R.uniform(size=(2, 4, 3)),)),
})


def _series_rows():
    """Taylor mode's fused recurrences (``nestad.series``): their rules are their
    compositions; stacks (K + 1, 3) at K = 3, weights and pairs as the rules make them."""
    from nestad import taylor_stack as ts
    g = np.random.default_rng(16)
    K = 3
    X = g.uniform(-0.5, 0.5, size=(K + 1, 3))
    pos = X + np.array([[2.0], [0], [0], [0]])
    We, Wl = ts._grid(K, X, ts._exp_weight), ts._grid(K, X, ts._log_weight)
    i, j, grid = ts._pairs(K)
    M, N = g.uniform(-1, 1, size=(K + 1, 2, 3)), g.uniform(-1, 1, size=(K + 1, 3, 2))

    def trig(x):
        return anp.concatenate([ts.SERIES_TRIG.lifted(x, We, whole=w, sign=s, first=f)
                                for s, f, w in ((-1, True, True), (-1, False, False),
                                                (1, True, False), (1, False, True))])
    return {
        'series_exp': (lambda x: ts.SERIES_EXP.lifted(x, We, whole=True), (X,)),
        'series_log': (lambda x: ts.SERIES_LOG.lifted(x, Wl, whole=False), (pos,)),
        'series_trig': (trig, (X,)),
        'series_divide': (lambda a, b: anp.concatenate([ts.SERIES_DIVIDE.lifted(a, b),
                                                        ts.SERIES_DIVIDE.lifted(a[:1], b, stacked=False)]),
                          (X, pos)),
        'series_multiply': (lambda a, b: ts.SERIES_MULTIPLY.lifted(a, b, i, j, grid), (X, pos)),
        'series_matmul': (lambda a, b: ts.SERIES_MATMUL.lifted(a, b, i, j, grid), (M, N)),
    }


ARRAY_ROWS.update(_series_rows())

# Piecewise-constant operations: their derivative is zero (checked), their values
# numpy's / Python's (tested with the functions that use them).
CONSTANTS = {'sign', 'floor', 'ceil', 'floordiv', 'lt', 'le', 'gt', 'ge', 'eq', 'ne',
             'and', 'or', 'xor', 'not', 'tie_split', 'select'}


def _elementwise_names():
    return {f"numpy.{npfn.__name__}": prim.name for prim, npfn in registry.ELEMENTWISE}


def test_every_primitive_has_a_row():
    covered = (set(SCALAR_ROWS) | set(SCALAR_BINARY_ROWS) | set(ARRAY_ROWS) | CONSTANTS
               | set(_elementwise_names()) | set(SCIPY_ROWS))
    missing = sorted(q for q in registry.PRIMITIVES if q not in covered and q not in registry.USER)
    assert not missing, f"primitives without a rule test row: {missing}"


def _scalar_fn(name):
    return _SCALAR_FNS.get(name) or getattr(nd, name)


@pytest.mark.parametrize('name', sorted(SCALAR_ROWS))
def test_scalar_rules(name):
    check_rules(_scalar_fn(name), SCALAR_ROWS[name], order=3)
    mirror = {prim.name: npfn for prim, npfn in registry.ELEMENTWISE}.get(name)
    if mirror is not None:          # the array version made from the same rule
        x = SCALAR_ROWS[name]
        check_rules(getattr(anp, mirror.__name__), np.array([x, x * 0.9, x * 1.1]), order=2)


@pytest.mark.parametrize('name', sorted(SCALAR_BINARY_ROWS))
def test_scalar_binary_rules(name):
    check_rules(_scalar_fn(name), *SCALAR_BINARY_ROWS[name], order=3)
    mirror = {prim.name: npfn for prim, npfn in registry.ELEMENTWISE}.get(name)
    if mirror is not None:
        x, y = SCALAR_BINARY_ROWS[name]
        check_rules(getattr(anp, mirror.__name__), np.array([x, x * 0.9]), np.array([y, y * 1.1]),
                    order=2)


@pytest.mark.parametrize('name', sorted(ARRAY_ROWS))
def test_array_rules(name):
    fn, args = ARRAY_ROWS[name]
    check_rules(fn, *args, order=2)


@pytest.mark.parametrize('name', sorted(CONSTANTS - {'select', 'tie_split', 'and', 'or', 'xor', 'not'}))
def test_piecewise_constant_primitives_have_zero_derivative(name):
    prim = registry.PRIMITIVES[name]
    args = (1.3,) if name in ('sign', 'floor', 'ceil') else (1.3, 0.7)
    for op in (nd.derivative, nd.gradient_r):
        assert op(lambda x: prim.lifted(x, *args[1:]) * 1.0 + 0.0 * x)(args[0]) == 0.0


def test_adding_a_function_is_one_definition():
    """exp2 is defined once (nestad/primitives.py: unary('exp2', math.exp2, numpy.exp2,
    rule)): that gives nestad.exp2, nestad.numpy.exp2, numpy.exp2 on nestad values, and
    staged code for it."""
    x = np.array([0.5, 1.5])
    assert nd.exp2(3.0) == 8.0 and np.all(anp.exp2(x) == np.exp2(x))
    assert nd.derivative(nd.exp2)(3.0) == 8.0 * math.log(2.0)
    assert np.allclose(nd.gradient_r(lambda v: np.sum(np.exp2(v)))(x), np.exp2(x) * math.log(2.0))
    assert "math.exp2" in nd.trace(nd.exp2, 1.0).source()


def test_namespaces_and_dispatch_come_from_the_registry():
    from nestad.numpy import _dispatch
    for name, fn in registry.exported('nestad').items():
        assert getattr(nd, name) is fn and name in nd.__all__
    for prim, npfn in registry.ELEMENTWISE:
        target = _dispatch.UFUNCS.get(npfn)
        assert target is getattr(anp, npfn.__name__), npfn.__name__


def test_readme_lists_the_registry():
    from nestad.catalog import catalog
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    assert catalog() in readme, "README's function list is stale: run python -m nestad.catalog"
