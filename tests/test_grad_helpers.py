"""The helpers autograd and JAX users expect: elementwise_grad, has_aux= on the gradient
and Jacobian operators, and check_grads."""
import math

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp

X = np.array([0.3, -1.2, 2.0])


def test_elementwise_grad_is_autograds():
    autograd = pytest.importorskip("autograd")
    import autograd.numpy as agnp
    assert np.allclose(nd.elementwise_grad(anp.tanh)(X), 1 / np.cosh(X) ** 2)
    f = lambda x, y: x * y ** 2 + anp.sin(x)                       # noqa: E731
    g = lambda x, y: x * y ** 2 + agnp.sin(x)                      # noqa: E731
    for argnum in (0, 1):
        assert np.allclose(nd.elementwise_grad(f, argnum)(X, X + 1),
                           autograd.elementwise_grad(g, argnum)(X, X + 1), rtol=1e-15)
    assert nd.elementwise_grad(nd.sin)(0.5) == math.cos(0.5)
    # nested: the second derivative of tanh, elementwise
    d2 = nd.elementwise_grad(nd.elementwise_grad(anp.tanh))(X)
    assert np.allclose(d2, -2 * np.tanh(X) / np.cosh(X) ** 2)


def _f(x):
    y = anp.sum(anp.sin(x) * x)
    return y, {'y': y, 'twice': 2 * x, 'label': 'run'}


@pytest.mark.parametrize('op', [nd.gradient_r, nd.gradient_f])
def test_has_aux_gradients(op):
    g, aux = op(_f, has_aux=True)(X)
    assert np.allclose(g, np.cos(X) * X + np.sin(X))
    assert aux['label'] == 'run' and np.allclose(aux['twice'], 2 * X)
    assert type(aux['twice']) is np.ndarray             # no perturbation left in aux
    assert np.allclose(g, op(lambda x: _f(x)[0])(X))


def test_has_aux_value_and_gradient_as_jax():
    (value, aux), g = nd.value_and_gradient_r(_f, has_aux=True)(X)
    assert value == aux['y'] and np.allclose(g, nd.gradient_r(lambda x: _f(x)[0])(X))


@pytest.mark.parametrize('op', [nd.jacobian_f, nd.jacobian_r])
def test_has_aux_jacobians(op):
    jac, aux = op(lambda x: (anp.sin(x), anp.cos(x)), has_aux=True)(X)
    assert np.allclose(jac, np.diag(np.cos(X))) and np.allclose(aux, np.cos(X))
    jac, aux = op(lambda x, y: (x * y, y), argnums=(0, 1), has_aux=True)(2.0, 3.0)
    assert jac == (3.0, 2.0) and aux == 3.0


@pytest.mark.parametrize('op', [nd.gradient_r, nd.gradient_f, nd.jacobian_f, nd.jacobian_r])
def test_aux_keeps_an_enclosing_runs_derivative(op):
    """aux has no derivative of its own run, but a value of an enclosing run keeps its
    perturbation there (JAX's rule)."""
    inner = lambda y: op(lambda x: (x * y, x * y * y), has_aux=True)(2.0)      # noqa: E731
    assert nd.derivative(lambda y: inner(y)[1])(3.0) == 12.0            # d(2 y^2)/dy
    assert nd.gradient_r(lambda y: inner(y)[1])(3.0) == 12.0
    assert nd.derivative(lambda y: inner(y)[0])(3.0) == 1.0


def test_has_aux_staged():
    f = lambda x: (anp.sum(anp.sin(x) * x), {'twice': 2 * x})          # noqa: E731
    staged = nd.stage(nd.gradient_r(f, has_aux=True))
    for _ in range(2):                          # traced, then the compiled program
        g, aux = staged(X)
        assert np.allclose(g, np.cos(X) * X + np.sin(X)) and np.allclose(aux['twice'], 2 * X)


@pytest.mark.parametrize('op', [nd.gradient_r, nd.value_and_gradient_r, nd.gradient_f,
                                nd.jacobian_f, nd.jacobian_r])
def test_has_aux_needs_a_pair(op):
    with pytest.raises(nd.InvalidInputError, match=r"has_aux=True\): f must return a pair "
                       r"\(output, aux\), but it returned a float.*drop has_aux=True"):
        op(lambda x: x * x, has_aux=True)(1.0)
    with pytest.raises(nd.InvalidInputError, match="returned a tuple of 3"):
        op(lambda x: (x, x, x), has_aux=True)(1.0)


def test_check_grads_passes_correct_derivatives():
    nd.check_grads(lambda x, p: anp.sum(anp.tanh(x) * p['w']) ** 2, order=3)(X, {'w': X[::-1]})
    nd.check_grads(nd.numpy.linalg.inv, modes=["rev"])(np.eye(2) + 0.1)
    nd.check_grads(lambda x: anp.exp(x) * 2.0, modes=("fwd",), order=1)(X)
    nd.check_grads(lambda x, scale: nd.sin(x) * scale)(0.4, scale=3.0)


def _wrong(order_of_error):
    """sin whose second derivative rule is off by 0.1% (first derivative right)."""
    @nd.primitive
    def cos_(x):
        return np.cos(x)
    cos_.defpartials(lambda x, out: -anp.sin(x) * (1.001 if order_of_error == 2 else 1.0))

    @nd.primitive
    def sin_(x):
        return np.sin(x)
    sin_.defpartials(lambda x, out: cos_(x) * (1.001 if order_of_error == 1 else 1.0))
    return sin_


@pytest.mark.parametrize('modes', [("fwd",), ("rev",), ("fwd", "rev")])
def test_check_grads_catches_a_wrong_rule(modes):
    with pytest.raises(AssertionError, match=r"check_grads of sin_.*(mode|disagree).*central "
                       r"differences give|disagree"):
        nd.check_grads(_wrong(1), modes=modes, order=1)(0.7)
    nd.check_grads(_wrong(2), modes=modes, order=1)(0.7)       # order 1 is right
    with pytest.raises(AssertionError, match=r"check_grads of (jvp|vjp) of sin_"):
        nd.check_grads(_wrong(2), modes=modes, order=2)(0.7)


def test_check_grads_catches_modes_that_disagree_beyond_rounding():
    @nd.primitive
    def f(x):
        return np.sin(x)
    f.defjvp(lambda t, x, out: anp.cos(x) * t)
    f.defvjp(lambda g, x, out: anp.cos(x) * g * (1 + 1e-7))        # below the FD tolerance
    with pytest.raises(AssertionError, match="forward and reverse mode disagree"):
        nd.check_grads(f, order=1)(0.7)


def test_check_grads_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match=r"modes must be among \('fwd', 'rev'\), not \['forward'\]"):
        nd.check_grads(nd.sin, modes=["forward"])


@pytest.mark.parametrize('op', [nd.gradient_r, nd.value_and_gradient_r, nd.gradient_f,
                                nd.jacobian_f, nd.jacobian_r])
def test_has_aux_operators_pickle(op):
    import pickle
    made = op(_f, has_aux=True)
    again = pickle.loads(pickle.dumps(made))
    k = 1 if op is nd.value_and_gradient_r else 0          # where the derivative is
    a, b = made(X), again(X)
    assert np.array_equal(a[k], b[k]) and a[1 - k] is not None
    assert made.__name__ == '_f'


def test_elementwise_grad_pickles():
    import pickle
    assert np.array_equal(pickle.loads(pickle.dumps(nd.elementwise_grad(anp.tanh)))(X),
                          nd.elementwise_grad(anp.tanh)(X))
