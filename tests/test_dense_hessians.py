"""Dense Hessians and Jacobians of array functions: the batched-tangent rules that carry
all n basis directions at once (a vector operand's directions through one matrix product,
basic indices applied with the batch axes left in front), against closed forms, JAX,
nested derivatives and finite differences; eager and staged."""
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp

rng = np.random.default_rng(19)
N = 40
A = rng.normal(size=(N, N))
X = rng.normal(size=N) * 0.7


def quadlog(x):
    return 0.5 * x @ (A @ x) + anp.sum(anp.log(1.0 + x ** 2))


def quadlog_hessian(x):
    return 0.5 * (A + A.T) + np.diag(2.0 * (1.0 - x ** 2) / (1.0 + x ** 2) ** 2)


def rosen(x):
    return anp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosen_hessian(x):
    n = len(x)
    h = np.zeros((n, n))
    d = np.zeros(n)
    d[:-1] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    d[1:] += 200.0
    h[np.arange(n), np.arange(n)] = d
    off = -400.0 * x[:-1]
    h[np.arange(n - 1), np.arange(1, n)] = off
    h[np.arange(1, n), np.arange(n - 1)] = off
    return h


@pytest.mark.parametrize("staged", [False, True])
def test_quadratic_form_hessian_is_the_closed_form(staged):
    h = nd.hessian(quadlog)
    h = nd.stage(h) if staged else h
    for _ in range(2 if staged else 1):              # a staged function's trace, then its program
        np.testing.assert_allclose(h(X), quadlog_hessian(X), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("staged", [False, True])
def test_rosenbrock_hessian_is_the_closed_form(staged):
    x = np.linspace(-1.5, 2.0, N)
    h = nd.stage(nd.hessian(rosen)) if staged else nd.hessian(rosen)
    for _ in range(2 if staged else 1):
        got = h(x)
        np.testing.assert_allclose(got, rosen_hessian(x), rtol=1e-14, atol=1e-12)
        # the structure is exact: entries off the three diagonals are exact zeros
        assert np.all(got[np.abs(np.subtract.outer(np.arange(N), np.arange(N))) > 1] == 0.0)


def test_third_derivative_of_a_quadratic_form_through_nested_batched_tangents():
    # d3/dx3 of 0.5 x A x + sum(x^4)/4: only the diagonal 6 x_i survives; the matrix
    # product's rule sees tangents with two batch axes (the outer Jacobian's over the
    # Hessian's)
    f = lambda x: 0.5 * x @ (A @ x) + anp.sum(x ** 4) / 4.0        # noqa: E731
    t = nd.jacobian_f(nd.hessian(f))(X)
    want = np.zeros((N, N, N))
    want[np.arange(N), np.arange(N), np.arange(N)] = 6.0 * X
    np.testing.assert_allclose(t, want, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("case", ["v@M", "M@v", "v@v", "M@v (M depends on x)", "v@M@v"])
def test_matmul_jacobians_of_vector_operands_match_jax(case):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    m, n = 7, 5
    M = rng.normal(size=(n, m))
    K = rng.normal(size=(m, n))
    fs = {
        "v@M": lambda np_, x: np_.sin(x) @ M,
        "M@v": lambda np_, x: K @ np_.cos(x),
        "v@v": lambda np_, x: np_.sin(x) @ np_.exp(x),
        "M@v (M depends on x)": lambda np_, x: (K * np_.sum(x)) @ np_.sin(x),
        "v@M@v": lambda np_, x: np_.tanh(x) @ (M @ K) @ np_.sin(x),
    }
    f = fs[case]
    x = rng.normal(size=n)
    for ours, theirs in ((nd.jacobian_f, jax.jacfwd), (nd.jacobian_r, jax.jacrev)):
        got = ours(lambda x: f(anp, x))(x)
        np.testing.assert_allclose(got, theirs(lambda x: f(jnp, x))(x), rtol=1e-12, atol=1e-13)
    # second order: the Hessian of the output's sum (forward over reverse) against JAX's
    # and against the Jacobian of nestad's reverse gradient by central differences
    s = lambda np_, x: np_.sum(f(np_, x) ** 2)                    # noqa: E731
    h = nd.hessian(lambda x: s(anp, x))(x)
    np.testing.assert_allclose(h, jax.hessian(lambda x: s(jnp, x))(x), rtol=1e-11, atol=1e-12)
    g = nd.gradient_r(lambda x: s(anp, x))
    eps = 1e-6
    fd = np.stack([(g(x + eps * e) - g(x - eps * e)) / (2 * eps) for e in np.eye(n)], axis=1)
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("index", [
    (slice(1, None), slice(None, None, 2)),
    (Ellipsis, 1),
    (0, Ellipsis, None),
    (slice(None, -1), None, slice(2, 4)),
    (1,),
    np.s_[::-1, 1:3],
])
def test_basic_indices_under_batched_tangents_match_jax(index):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    x = rng.normal(size=(4, 5))

    def f(np_, x):
        y = np_.sin(x)[index]
        return np_.exp(y) * np_.sum(y ** 2)

    got = nd.jacobian_f(lambda x: f(anp, x))(x)
    np.testing.assert_allclose(got, jax.jacfwd(lambda x: f(jnp, x))(x), rtol=1e-12, atol=1e-13)
    # the scatter (indexing's adjoint) under batched tangents: a Hessian of the sum
    s = lambda np_, x: np_.sum(f(np_, x) ** 2)                    # noqa: E731
    for h in (nd.hessian(lambda x: s(anp, x)), nd.stage(nd.hessian(lambda x: s(anp, x)))):
        for _ in range(2):
            np.testing.assert_allclose(h(x), jax.hessian(lambda x: s(jnp, x))(x),
                                       rtol=1e-11, atol=1e-11)


def test_dense_hessian_at_extreme_arguments_matches_the_closed_form():
    # large and tiny arguments: the closed form's numbers, no overflow in the rules
    for scale in (1e-150, 1e60):
        x = X * scale
        np.testing.assert_allclose(nd.hessian(quadlog)(x), quadlog_hessian(x), rtol=1e-13, atol=1e-13)
