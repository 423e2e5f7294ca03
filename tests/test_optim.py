"""nestad.optim and nd.flatten: the update equations, autograd's optimizers iterate for
iterate, any parameter structure, and derivatives through both."""
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import optim

autograd_optimizers = pytest.importorskip("autograd.misc.optimizers")
import autograd  # noqa: E402
import autograd.numpy as agnp  # noqa: E402

R = np.random.default_rng(5)
A = R.normal(size=(4, 3))
Y = R.normal(size=4)


def params():
    return {'w': np.array([0.3, -0.2, 0.1]), 'b': [0.5, np.array([[1.0, -1.0]])]}


def loss(p, i=0, np=anp):
    r = np.dot(A, p['w']) + p['b'][0] - Y
    return np.sum(r * r) * (1.0 + 0.1 * i % 3) + np.sum(p['b'][1] ** 4)


def exact_grad(p, i):
    """The gradient of loss in plain numpy (no AD): the optimizers alone are compared."""
    s = 1.0 + 0.1 * i % 3
    r = A @ p['w'] + p['b'][0] - Y
    return {'w': 2 * s * A.T @ r, 'b': [2 * s * float(np.sum(r)), 4 * p['b'][1] ** 3]}


def _record(run, grad, **kw):
    seen = []
    final = run(grad, params(), lambda x, i, g: seen.append(nd.flatten(x)[0]), **kw)
    return np.array(seen + [nd.flatten(final)[0]]), final


@pytest.mark.parametrize('name, kw', [('sgd', dict(num_iters=30, step_size=0.05)),
                                      ('rmsprop', dict(num_iters=30, step_size=0.01)),
                                      ('adam', dict(num_iters=30, step_size=0.05))])
def test_iterates_are_autograds(name, kw):
    ours, final = _record(getattr(optim, name), exact_grad, **kw)
    theirs, _ = _record(getattr(autograd_optimizers, name), exact_grad, **kw)
    assert np.array_equal(ours, theirs)              # the same operations, bit for bit
    assert isinstance(final, dict) and final['b'][1].shape == (1, 2)
    # with each library's own gradient: equal to rounding
    ours, _ = _record(getattr(optim, name), nd.gradient_r(loss), **kw)
    theirs, _ = _record(getattr(autograd_optimizers, name),
                        autograd.grad(lambda p, i: loss(p, i, agnp)), **kw)
    assert np.allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_update_equations():
    """Two steps of each written out on a flat vector."""
    g = lambda x, i: np.array([2.0, -1.0]) * x + i                    # noqa: E731
    x0 = np.array([1.0, 2.0])
    # sgd (momentum 0.9, as autograd's): v = m v - (1 - m) g; x += s v
    v = -(0.1) * g(x0, 0)
    x1 = x0 + 0.5 * v
    v = 0.9 * v - 0.1 * g(x1, 1)
    assert np.allclose(optim.sgd(g, x0, num_iters=2, step_size=0.5), x1 + 0.5 * v)
    # momentum: v = m v + g; x -= s v
    v = g(x0, 0)
    x1 = x0 - 0.5 * v
    v = 0.9 * v + g(x1, 1)
    assert np.allclose(optim.momentum(g, x0, num_iters=2, step_size=0.5), x1 - 0.5 * v)
    # rmsprop: a = gamma a + (1 - gamma) g^2, starting at ones; x -= s g / (sqrt(a) + eps)
    a = 0.9 + 0.1 * g(x0, 0) ** 2
    x1 = x0 - 0.5 * g(x0, 0) / (np.sqrt(a) + 1e-8)
    a = 0.9 * a + 0.1 * g(x1, 1) ** 2
    assert np.allclose(optim.rmsprop(g, x0, num_iters=2, step_size=0.5),
                       x1 - 0.5 * g(x1, 1) / (np.sqrt(a) + 1e-8))
    # adam: bias-corrected moments
    m, s = 0.1 * g(x0, 0), 0.001 * g(x0, 0) ** 2
    x1 = x0 - 0.5 * (m / 0.1) / (np.sqrt(s / 0.001) + 1e-8)
    m, s = 0.9 * m + 0.1 * g(x1, 1), 0.999 * s + 0.001 * g(x1, 1) ** 2
    x2 = x1 - 0.5 * (m / (1 - 0.9 ** 2)) / (np.sqrt(s / (1 - 0.999 ** 2)) + 1e-8)
    assert np.allclose(optim.adam(g, x0, num_iters=2, step_size=0.5), x2)


def test_optimizers_minimize():
    for run, kw in [(optim.sgd, {}), (optim.momentum, dict(step_size=0.01, num_iters=300)),
                    (optim.rmsprop, dict(step_size=0.01, num_iters=500)),
                    (optim.adam, dict(step_size=0.05, num_iters=500))]:
        p = run(nd.gradient_r(loss), params(), **kw)
        assert loss(p) < 0.5 * loss(params()), run.__name__


def test_derivative_through_an_optimizer():
    """Meta-optimization: the final loss differentiates in the step size (forward and
    reverse agree, and match a central difference)."""
    def final_loss(step):
        return loss(optim.adam(nd.gradient_r(loss), params(), num_iters=5, step_size=step))
    d_f = nd.derivative(final_loss)(0.05)
    d_r = nd.gradient_r(final_loss)(0.05)
    h = 1e-6
    fd = (final_loss(0.05 + h) - final_loss(0.05 - h)) / (2 * h)
    assert np.isclose(d_f, d_r, rtol=1e-10) and np.isclose(d_f, fd, rtol=1e-5)


def test_flatten_round_trip():
    p = params()
    v, unflatten = nd.flatten(p)
    assert v.shape == (6,) and np.array_equal(v, [0.3, -0.2, 0.1, 0.5, 1.0, -1.0])
    q = unflatten(v * 2)
    assert np.array_equal(q['w'], p['w'] * 2) and q['b'][0] == 1.0
    assert q['b'][1].shape == (1, 2) and np.ndim(q['b'][0]) == 0
    empty, rebuild = nd.flatten([])
    assert empty.shape == (0,) and rebuild(empty) == []


def test_flatten_differentiates_both_ways():
    v, unflatten = nd.flatten(params())
    f = lambda v: loss(unflatten(v))                                    # noqa: E731
    g = nd.gradient_r(f)(v)
    assert np.allclose(g, nd.flatten(nd.gradient_r(loss)(params()))[0])
    assert np.allclose(g, nd.gradient_f(f)(v))
    h = nd.gradient_r(lambda p: anp.sum(nd.flatten(p)[0] ** 3))(params())
    assert np.allclose(nd.flatten(h)[0], 3 * v ** 2)
    assert np.allclose(nd.hessian(lambda v: anp.sum(nd.flatten(unflatten(v))[0] ** 3))(v),
                       np.diag(6 * v))


def test_flatten_refuses_a_non_number_leaf():
    with pytest.raises(nd.InvalidInputError, match="str"):
        nd.flatten({'a': 1.0, 'name': 'x'})[0]
