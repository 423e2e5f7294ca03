"""API behaviour on valid but less common input: 0-d array outputs, keyword arguments,
formatting, value predicates, numeric protocol methods, containers."""
import collections
import dataclasses
import math
import re

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import NonScalarOutputError


# ---------------------------------------------------------------- 0-d outputs are scalars

def as0d(y):
    """y as a (perturbed) 0-d array."""
    return anp.reshape(y * np.ones(1), ())


SCALAR_GRADIENTS = [nd.gradient_r, nd.gradient_f,
                    lambda f: (lambda x: nd.value_and_gradient_r(f)(x)[1])]


@pytest.mark.parametrize('grad', SCALAR_GRADIENTS)
@pytest.mark.parametrize('const', [np.array(0.25), np.array(2), np.float64(0.25), np.float32(0.25),
                                   np.int64(3)])
def test_constant_0d_and_numpy_scalar_outputs(grad, const):
    # gradient_r(lambda t: np.array(0.25)) raised NonScalarOutputError.
    g = grad(lambda t: const)(1.5)
    assert g == 0.0 and np.shape(g) == ()
    g = grad(lambda v: const)(np.ones(3))
    assert np.shape(g) == (3,) and not np.any(g)


@pytest.mark.parametrize('grad', SCALAR_GRADIENTS)
def test_perturbed_0d_outputs(grad):
    assert grad(lambda t: as0d(t ** 3))(2.0) == pytest.approx(12.0)
    assert grad(lambda t: as0d(t * np.float32(2.0)))(2.0) == pytest.approx(2.0)
    g = grad(lambda v: anp.sum(v * v).reshape(()))(np.array([1.0, 2.0]))
    assert np.allclose(g, [2.0, 4.0])


def test_value_of_a_0d_output():
    v, g = nd.value_and_gradient_r(lambda t: as0d(t * t))(3.0)
    assert v == 9.0 and np.shape(v) == () and g == 6.0
    v, g = nd.value_and_gradient_r(lambda t: np.array(0.25))(3.0)
    assert v == 0.25 and g == 0.0


def test_0d_outputs_nested():
    # The form in which the bug was met: an inner operator returns a plain 0-d array.
    assert nd.gradient_r(lambda y: nd.derivative(lambda x: np.array(0.25))(y))(1.0) == 0.0
    g = lambda x: as0d(x ** 4)
    for outer in (nd.gradient_r, nd.gradient_f, nd.derivative):
        assert outer(nd.derivative(nd.gradient_r(g)))(0.5) == pytest.approx(24 * 0.5)
        assert outer(nd.gradient_r(nd.gradient_f(g)))(0.5) == pytest.approx(24 * 0.5)
    assert nd.hessian(g)(0.5) == pytest.approx(3.0)
    H = nd.hessian(lambda v: anp.sum(v ** 3).reshape(()))(np.array([1.0, 2.0]))
    assert np.allclose(H, [[6.0, 0.0], [0.0, 12.0]])


# ------------------------------------------- one-element outputs are scalars, bools are not

ONE = [(1,), (1, 1), (1, 1, 1)]
X2 = np.array([0.3, -1.2])


def cube_sum(v):
    """sum(v^3) (a scalar); gradient 3 v^2, Hessian diag(6 v)."""
    return anp.sum(v ** 3)


def in_shape(shape, f):
    """f's scalar output as an array of ``shape`` (one element)."""
    return lambda *a, **k: anp.reshape(f(*a, **k), shape)


@pytest.mark.parametrize('shape', ONE)
def test_one_element_outputs_are_scalars(shape):
    # As autograd and PyTorch take them (a changed decision: JAX refuses them).
    f = in_shape(shape, cube_sum)
    for x in (X2, X2.reshape(2, 1), 0.7):
        grad = 3 * np.asarray(x) ** 2
        for op in (nd.gradient_r, nd.gradient_f):
            g = op(f)(x)
            assert np.shape(g) == np.shape(x) and np.allclose(g, grad), op
        value, g = nd.value_and_gradient_r(f)(x)
        assert np.shape(value) == shape and np.allclose(value, cube_sum(x))   # f's own value
        assert np.shape(g) == np.shape(x) and np.allclose(g, grad)
    H = nd.hessian(f)(X2)
    assert H.shape == (2, 2) and np.allclose(H, np.diag(6 * X2))
    assert np.allclose(nd.hvp(f, X2, np.array([1.0, 2.0])), [6 * 0.3, 2 * 6 * -1.2])
    # A constant one-element output (plain, int or float) has gradient zero.
    for const in (np.ones(shape), np.ones(shape, int)):
        for op in (nd.gradient_r, nd.gradient_f):
            g = op(lambda v: const)(X2)
            assert g.shape == (2,) and not np.any(g)


@pytest.mark.parametrize('shape', ONE)
def test_one_element_outputs_nested(shape):
    # x^2 y^3 summed to one element; nested in every pairing, with inner and outer outputs
    # one-element arrays.
    f = in_shape(shape, lambda x, y: x * x * y ** 3)
    inner = lambda y: in_shape(shape, lambda y: nd.gradient_r(f)(0.5, y))(y)   # 2 x y^3 = y^3
    assert np.allclose(nd.derivative(inner)(2.0), np.full(shape, 12.0))
    for outer in (nd.derivative, nd.gradient_r, nd.gradient_f):
        if outer is not nd.derivative:
            assert outer(inner)(2.0) == pytest.approx(12.0)
        for op in (nd.gradient_r, nd.gradient_f):
            d = outer(lambda y: op(f, argnums=1)(0.5, y))(2.0)     # d/dy 3 x^2 y^2 = 6 x^2 y
            assert d == pytest.approx(6 * 0.25 * 2.0), (outer, op)
    # An outer run's perturbation inside the one-element output: d/dx d/dy (x^2 y^3).
    assert nd.gradient_r(lambda x: nd.gradient_r(f, argnums=1)(x, 2.0))(0.5) == pytest.approx(12.0)
    assert nd.derivative(lambda x: nd.gradient_f(f, argnums=1)(x, 2.0))(0.5) == pytest.approx(12.0)
    assert nd.hessian(f, argnums=(0, 1))(0.5, 2.0) == (
        (pytest.approx(16.0), pytest.approx(12.0)), (pytest.approx(12.0), pytest.approx(3.0)))


@pytest.mark.parametrize('shape', ONE)
def test_one_element_outputs_staged(shape):
    f = in_shape(shape, cube_sum)
    for op in (nd.gradient_r, nd.gradient_f, nd.hessian):
        staged = nd.stage(op(f))
        for x in (X2, np.array([2.0, 0.5])):
            assert np.allclose(staged(x), op(f)(x)), op
    # A staged function with a one-element output, differentiated from outside.
    sf = nd.stage(f)
    assert np.allclose(nd.gradient_r(sf)(X2), 3 * X2 ** 2)
    assert np.allclose(nd.hessian(sf)(X2), np.diag(6 * X2))
    value, g = nd.stage(nd.value_and_gradient_r(f))(X2)
    assert np.shape(value) == shape and np.allclose(g, 3 * X2 ** 2)


def test_one_element_outputs_keep_narrow_floats():
    x = X2.astype(np.float32)
    f = in_shape((1,), cube_sum)
    for op in (nd.gradient_r, nd.gradient_f):
        g = op(f)(x)
        assert g.dtype == np.float32 and np.allclose(g, 3 * x ** 2), op


@pytest.mark.parametrize('op', [nd.gradient_r, nd.value_and_gradient_r, nd.gradient_f, nd.hessian])
@pytest.mark.parametrize('shape', [(2,), (1, 2), (2, 1, 1)])
def test_larger_arrays_are_not_scalars(op, shape):
    with pytest.raises(NonScalarOutputError, match=rf"shape {re.escape(str(shape))}.*jacobian_r"):
        op(lambda t: t * np.ones(shape))(1.0)


BOOLS = [lambda x: np.allclose(x, (x * 3.0) / 3.0), lambda x: x > 0.0, lambda x: True,
         lambda x: np.bool_(True), lambda x: np.array(True), lambda x: np.array([False]),
         lambda x: anp.sum(x) > 0.0, lambda x: np.asarray(nd.primal_value(x)) > 0]
OPS = {'gradient_r': nd.gradient_r, 'value_and_gradient_r': nd.value_and_gradient_r,
       'gradient_f': nd.gradient_f, 'hessian': nd.hessian,
       'hvp': lambda f: (lambda x: nd.hvp(f, x, x))}


@pytest.mark.parametrize('name', OPS)
@pytest.mark.parametrize('k', range(len(BOOLS)))
def test_bool_outputs_are_refused(name, k):
    # A comparison has no derivative; gradient_r(np.allclose...) gave zeros.
    for x in (1.5, np.array([1.0, 2.0])):
        message = rf"{name}.*returned (a bool|an? \w+ of bools).*comparison.*no derivative"
        with pytest.raises(NonScalarOutputError, match=message):
            OPS[name](BOOLS[k])(x)


def test_bool_outputs_are_refused_nested_and_staged():
    with pytest.raises(NonScalarOutputError, match="gradient_r.*bool"):
        nd.derivative(lambda y: nd.gradient_r(lambda x: x * y > 1.0)(1.0))(2.0)
    with pytest.raises(NonScalarOutputError, match="gradient_r.*bool"):
        nd.stage(nd.gradient_r(lambda x: x * x > 1.0))(2.0)
    with pytest.raises(NonScalarOutputError, match="gradient_f.*bool"):
        nd.stage(nd.gradient_f(lambda v: anp.sum(v) > 1.0))(X2)
    # A comparison that chooses a branch still differentiates the branch it chose.
    assert nd.gradient_r(lambda x: x * x if x > 0.0 else -x)(2.0) == 4.0


def test_operators_keep_the_name_and_doc_of_f():
    def loss(x, y=1.0):
        """the loss"""
        return x * y
    for op in (nd.derivative, nd.gradient_r, nd.value_and_gradient_r, nd.gradient_f,
               nd.jacobian_f, nd.jacobian_r, nd.hessian, nd.stage, nd.checkpoint):
        g = op(loss)
        assert (g.__name__, g.__doc__) == ('loss', 'the loss'), op
    assert nd.gradient_r(loss, argnums=1).__name__ == 'loss'


# ---------------------------------------------------------------- keyword arguments

def fk(x, *, y=1.0, scale=1.0):
    """x^2 y^3 scale: keyword arguments are passed through, never differentiated."""
    return scale * x * x * y ** 3


def fv(v, *, y=1.0):
    return anp.sum(v * v) * y ** 3


def test_keyword_arguments_in_every_operator():
    x, y = 1.5, 2.0
    want = 2 * x * y ** 3                                    # d/dx at y
    assert nd.derivative(fk)(x, y=y) == want
    assert nd.gradient_r(fk)(x, y=y) == want
    assert nd.value_and_gradient_r(fk)(x, y=y) == (x * x * y ** 3, want)
    assert nd.gradient_f(fk)(x, y=y) == want
    assert nd.jacobian_f(fk)(x, y=y) == want
    assert nd.jacobian_r(fk)(x, y=y) == want
    assert nd.hessian(fk)(x, y=y) == 2 * y ** 3
    assert nd.jvp(fk, (x,), (1.0,), y=y) == (x * x * y ** 3, want)
    assert nd.directional_derivative(fk, x, 1.0, y=y) == want
    assert nd.hvp(fk, x, 1.0, y=y) == 2 * y ** 3
    value, pull = nd.vjp(fk, x, y=y)
    assert value == x * x * y ** 3 and pull(1.0) == (want,)
    # Several keywords, and array inputs (the batched forward path).
    v = np.array([1.0, -2.0])
    assert nd.gradient_f(fv)(v, y=y).tolist() == (2 * v * y ** 3).tolist()
    assert nd.gradient_r(fv)(v, y=y).tolist() == (2 * v * y ** 3).tolist()
    assert np.array_equal(nd.hessian(fv)(v, y=y), 2 * y ** 3 * np.eye(2))
    assert nd.derivative(fk)(x, y=y, scale=3.0) == 3 * want


@pytest.mark.parametrize('outer', [nd.derivative, nd.gradient_r, nd.gradient_f])
def test_keyword_arguments_are_constants_of_the_inner_run(outer):
    # A keyword is not differentiated by the operator it is passed through, but a value of
    # an enclosing run keeps its perturbation: d/dy (df/dx)(x, y) = 6 x y^2.
    x, y = 1.5, 2.0
    for inner in (nd.derivative, nd.gradient_r, nd.gradient_f):
        assert outer(lambda y: inner(fk)(x, y=y))(y) == pytest.approx(6 * x * y * y)
    assert outer(lambda y: nd.vjp(fk, x, y=y)[1](1.0)[0])(y) == pytest.approx(6 * x * y * y)
    assert outer(lambda y: nd.jvp(fk, (x,), (1.0,), y=y)[1])(y) == pytest.approx(6 * x * y * y)


def test_keyword_arguments_named_like_operator_parameters():
    # The operators' own parameters are positional-only: any keyword goes to f.
    f = lambda x, *, primals, tangents, v: x * primals * tangents * v   # noqa: E731
    assert nd.jvp(f, (2.0,), (1.0,), primals=3.0, tangents=5.0, v=7.0)[1] == 105.0
    assert nd.vjp(f, 2.0, primals=3.0, tangents=5.0, v=7.0)[1](1.0) == (105.0,)
    assert nd.hvp(lambda x, *, x_: x * x * x_, 1.0, 1.0, x_=2.0) == 4.0
    assert nd.gradient_r(lambda x, *, argnums: x * argnums, argnums=0)(2.0, argnums=3.0) == 3.0


# ---------------------------------------------------------------- reading values

MODES = [nd.derivative, nd.gradient_r, nd.gradient_f,
         # f' again, with f's values perturbed by an enclosing run of the other mode too:
         # d/ds (s f)'(x) at s = 1.
         lambda f: lambda x: nd.derivative(lambda s: nd.gradient_r(lambda y: f(y) * s)(x))(1.0),
         lambda f: lambda x: nd.gradient_r(lambda s: nd.derivative(lambda y: f(y) * s)(x))(1.0)]
MODE_IDS = ['derivative', 'gradient_r', 'gradient_f', 'f-over-r', 'r-over-f']


@pytest.mark.parametrize('D', MODES, ids=MODE_IDS)
def test_format_spec_formats_the_value(D):
    # f"{x:.3f}" crashed; formatting is output, so the value is shown.
    seen = []

    def f(x):
        y = x * x
        seen.append((f"{y:.3f}", f"{y:>9.2e}", format(y, "g"), "{:+.1f}".format(y)))
        return y
    assert D(f)(1.5) == 3.0
    assert seen[-1] == ("2.250", " 2.25e+00", "2.25", "+2.2")


def test_format_of_perturbed_arrays_and_empty_spec():
    seen = []

    def f(v):
        seen.append((f"{v * 2.0:.2f}", f"{anp.sum(v):.1f}", f"{anp.reshape(v[:1], ()):.1f}"))
        return anp.sum(v * v)
    for D in (nd.gradient_r, nd.gradient_f):
        D(f)(np.array([1.0, 2.5]))
        assert seen.pop() == ("[2.00 5.00]", "3.5", "1.0")
    # An empty spec is str(): it shows the perturbation, as print(x) does.
    nd.derivative(lambda x: seen.append((f"{x}", str(x))) or x)(1.0)
    assert seen[0][0] == seen[0][1] and seen[0][0].startswith("Bundle(")


@pytest.mark.parametrize('D', MODES, ids=MODE_IDS)
def test_value_predicates(D):
    seen = []

    def f(x):
        y = x * x
        seen.append((nd.isnan(y), nd.isfinite(y), nd.isinf(y), nd.isnan(y - y)))
        return y
    D(f)(1.5)
    assert seen[-1] == (False, True, False, False) and all(type(b) is bool for b in seen[-1])


def test_value_predicates_on_plain_and_array_values():
    assert nd.isnan(math.nan) and nd.isinf(-math.inf) and nd.isfinite(3) and not nd.isfinite(math.inf)
    assert nd.isnan(np.float32('nan')) is True and nd.isnan(np.array(math.nan)) is True
    assert nd.isnan(np.array([1.0, math.nan])).tolist() == [False, True]
    seen = []

    def f(v):
        w = v * np.array([1.0, math.inf, math.nan])
        seen.append((nd.isnan(w).tolist(), nd.isinf(w).tolist(), nd.isfinite(w).tolist()))
        return anp.sum(v)
    for D in (nd.gradient_r, nd.gradient_f):
        with np.errstate(invalid='ignore'):          # inf * 0 in the tangent of w
            D(f)(np.ones(3))
        assert seen.pop() == ([False, False, True], [False, True, False], [True, False, False])
    # nestad.isnan works inside control flow: a guarded update differentiates.
    clamp = lambda x: 0.0 if nd.isnan(nd.sqrt(x)) else nd.sqrt(x)   # noqa: E731
    assert nd.derivative(clamp)(4.0) == 0.25 and nd.gradient_r(clamp)(-1.0) == 0.0


@pytest.mark.parametrize('D', MODES, ids=MODE_IDS)
def test_real_imag_conjugate(D):
    # The values are real: .real is the value, .imag zero, .conjugate() the value.
    f = lambda x: x.real * x + x.imag + x.conjugate() + x.conj()   # noqa: E731
    assert D(f)(3.0) == pytest.approx(2 * 3.0 + 2.0)
    v = np.array([1.0, 2.0])
    g = nd.gradient_r(lambda v: anp.sum(v.real * v + v.imag + v.conjugate()))(v)
    assert g.tolist() == [3.0, 5.0]


@pytest.mark.parametrize('D', MODES, ids=MODE_IDS)
def test_divmod(D):
    # divmod(x, y) == (x // y, x % y): the quotient is piecewise constant, the remainder
    # x - y * (x // y) has derivative 1 in x and -(x // y) in y.
    assert D(lambda x: divmod(x, 2.0)[1])(7.5) == 1.0
    assert D(lambda x: divmod(7.5, x)[1])(2.0) == -3.0
    assert D(lambda x: divmod(x * x, x)[1])(2.5) == pytest.approx(2 * 2.5 - 2.0)
    assert D(lambda x: divmod(x, 2.0)[0] * x)(7.5) == 3.0
    q, r = nd.derivative(lambda x: divmod(x, 2.0))(7.5)
    assert (q, r) == (0.0, 1.0)
    g = nd.gradient_r(lambda v: anp.sum(divmod(v, 2.0)[1] * divmod(10.0, v)[1]))(np.array([3.0, 4.5]))
    want = [1 * (10 % 3.0) + (3.0 % 2) * -(10 // 3.0), 1 * (10 % 4.5) + (4.5 % 2) * -(10 // 4.5)]
    assert g.tolist() == pytest.approx(want)


# ---------------------------------------------------------------- containers

def _loss(p):
    return p['a'] * p['b'] ** 2


def _check_dict_gradient(g, cls, want):
    assert type(g) is cls and list(g) == list(want) and dict(g) == pytest.approx(want)


@pytest.mark.parametrize('grad', [nd.gradient_r, nd.gradient_f,
                                  lambda f: lambda p: nd.vjp(f, p)[1](1.0)[0]])
def test_ordered_dict_and_defaultdict_inputs(grad):
    od = collections.OrderedDict([('b', 3.0), ('a', 2.0)])
    _check_dict_gradient(grad(_loss)(od), collections.OrderedDict, {'b': 12.0, 'a': 9.0})
    dd = collections.defaultdict(lambda: 7.0, {'a': 2.0, 'b': 3.0})
    g = grad(_loss)(dd)
    _check_dict_gradient(g, collections.defaultdict, {'a': 9.0, 'b': 12.0})
    assert g.default_factory is dd.default_factory and g['missing'] == 7.0


def test_ordered_dict_and_defaultdict_in_every_operator():
    od = collections.OrderedDict([('x', 1.5), ('y', np.array([1.0, 2.0]))])
    f = lambda p: collections.OrderedDict([('s', p['x'] * anp.sum(p['y'])), ('t', p['x'])])  # noqa: E731
    Jf, Jr = nd.jacobian_f(f)(od), nd.jacobian_r(f)(od)
    for J in (Jf, Jr):
        assert type(J) is collections.OrderedDict and type(J['s']) is collections.OrderedDict
        assert J['s']['x'] == 3.0 and J['s']['y'].tolist() == [1.5, 1.5] and J['t']['x'] == 1.0
    H = nd.hessian(lambda p: p['x'] ** 2 * anp.sum(p['y']))(od)
    assert H['x']['x'] == 6.0 and H['x']['y'].tolist() == [3.0, 3.0]
    out = nd.derivative(lambda t: collections.defaultdict(list, {'a': t * t, 'b': 2.0}))(3.0)
    assert type(out) is collections.defaultdict and out.default_factory is list
    assert dict(out) == {'a': 6.0, 'b': 0.0}
    _, tangent = nd.jvp(_loss, (od | {'a': 2.0, 'b': 3.0},), (collections.OrderedDict(
        [('x', 0.0), ('y', np.zeros(2)), ('a', 1.0), ('b', 0.0)]),))
    assert tangent == 9.0


def test_registered_structure_paths_and_gradient():
    @dataclasses.dataclass
    class Layer:
        w: list
        label: str

    # A registered dataclass uses its own flatten; error paths index its children.
    nd.register_structure(Layer, lambda l: ([l.w], l.label), lambda label, ch: Layer(ch[0], label))
    g = nd.gradient_r(lambda l: l.w[0] * l.w[1])(Layer([2.0, 3.0], "dense"))
    assert g == Layer([3.0, 2.0], "dense")
    with pytest.raises(nd.InvalidInputError, match=r"argument\[0\]\[0\]\[1\] is a str"):
        nd.gradient_r(lambda l: l.w[0])(Layer([2.0, "x"], "dense"))
