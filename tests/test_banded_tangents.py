"""Banded basis directions (nestad/numpy/_banded.py): jacobian_f, gradient_f and hessian
of vector inputs push the identity as a few diagonals while the operations keep that
structure, and as a dense array after any other.  Each result is compared with the same
derivative through the dense basis (the threshold raised past n), with JAX's, and with
nested derivatives; eager and staged, at extreme arguments, on functions mixing
structure-keeping operations with ones that are not."""
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
import nestad.operators as operators
from nestad.numpy import _banded

N = 16                       # (every test below uses the banded basis from 1 direction on)
rng = np.random.default_rng(1919)
X = rng.normal(size=N) * 0.6
M = rng.normal(size=(N, N)) / np.sqrt(N)
C = rng.normal(size=N - 2)


@pytest.fixture(autouse=True)
def banded_basis(monkeypatch):
    monkeypatch.setattr(operators, "BANDED_MIN", 1)


def dense_basis(monkeypatch):
    monkeypatch.setattr(operators, "BANDED_MIN", 10 ** 9)


def rosen(np_, x):
    return np_.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def mixed(np_, x):
    """Structure-keeping steps (elementwise, slices, their scatters, sums) between ones
    that make the tangent dense (a matrix product, a strided and a reversed slice, a
    cumulative sum, a concatenation, a reshape, where)."""
    y = np_.sin(x[2:]) * C - x[:-2] / (2.0 + x[1:-1] ** 2)
    z = np_.exp(0.3 * x[::2]) @ np_.cos(x[1::2])
    w = np_.tanh(M @ x) * x[::-1]
    v = np_.cumsum(x[:10]) ** 2
    u = np_.reshape(np_.concatenate([x[:4], y[:4]]), (2, 4))
    s = np_.where(x > 0.0, x ** 3, -x)
    return (np_.sum(y ** 2) + z * np_.sum(np_.log1p(x[3:] ** 2)) + np_.sum(w)
            + np_.sum(v) + np_.sum(u[0] * u[1]) + np_.sum(s * x))


def jax_hessian(f, x):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return np.asarray(jax.jit(jax.hessian(lambda y: f(jax.numpy, y)))(x))


@pytest.mark.parametrize("f", [rosen, mixed], ids=["rosen", "mixed"])
def test_banded_hessians_equal_the_dense_basis_and_independent_answers(f, monkeypatch):
    # rosen against JAX's Hessian; mixed (whose XLA compile takes seconds) against reverse
    # over reverse, which pushes no basis at all
    want = (jax_hessian(f, X) if f is rosen
            else nd.jacobian_r(nd.gradient_r(lambda x: f(anp, x)))(X))
    h = nd.hessian(lambda x: f(anp, x))
    s = nd.stage(nd.hessian(lambda x: f(anp, x)))
    got = [h(X), s(X), s(X)]                          # eager; staged: its trace, its program
    dense_basis(monkeypatch)
    dense = nd.hessian(lambda x: f(anp, x))(X)
    for g in got:
        assert g.__class__ is np.ndarray and g.shape == (N, N)
        np.testing.assert_allclose(g, dense, rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-11)


def test_rosenbrock_hessian_keeps_the_bands_until_the_result(monkeypatch):
    # at the default threshold (n = 70 is above it) the structure is kept through every
    # step (nothing made dense before the result), and the off-band zeros are exact
    monkeypatch.undo()
    N = 70
    X = np.linspace(-1.2, 1.9, N)
    before = dict(_banded.DENSIFIED)
    h = nd.hessian(lambda x: rosen(anp, x))(X)
    assert _banded.DENSIFIED == before
    far = np.abs(np.subtract.outer(np.arange(N), np.arange(N))) > 1
    assert np.all(h[far] == 0.0)
    # a staged Hessian's program computes on vectors: its one n x n step writes the result
    s = nd.stage(nd.hessian(lambda x: rosen(anp, x)))
    s(X)
    names = [getattr(e.op, "qualname", e.op) for p in s.programs() for e in p.eqns]
    assert names.count("numpy.banded_dense") == 1, names


def test_jacobians_of_several_vector_arguments_and_gradient_f(monkeypatch):
    def f(x, y):
        return anp.concatenate([anp.sin(x[1:]) * y[:-2], x * anp.exp(y[:-1][::-1]) + y[1:] ** 2])

    y = rng.normal(size=N // 2 + 1)
    x = X[:N // 2]
    got = nd.jacobian_f(f, argnums=(0, 1))(x, y)
    g = nd.gradient_f(lambda x: anp.sum(anp.log1p(x ** 2) * X[::-1]))(X)
    dense_basis(monkeypatch)
    want = nd.jacobian_f(f, argnums=(0, 1))(x, y)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(g, nd.gradient_r(lambda x: anp.sum(anp.log1p(x ** 2) * X[::-1]))(X),
                               rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(nd.jacobian_r(f, argnums=(0, 1))(x, y)[1], got[1], rtol=1e-14)


def test_nested_hessians_with_banded_bases():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    x = X[:13]

    # a Hessian of a function with a Jacobian inside (the inner basis carries the outer runs)
    def f(np_, jac, x):
        j = jac(lambda y: np_.sin(y[1:]) * y[:-1])(x)
        return np_.sum(j * j) + np_.sum(x ** 4)
    got = nd.hessian(lambda x: f(anp, nd.jacobian_f, x))(x)
    np.testing.assert_allclose(got, jax.jit(jax.hessian(lambda x: f(jnp, jax.jacfwd, x)))(x),
                               rtol=1e-11, atol=1e-11)
    # the third derivative: a banded Jacobian of a Hessian
    g = lambda np_, x: np_.sum(np_.sin(x[1:]) * x[:-1] ** 2)      # noqa: E731
    t = nd.jacobian_f(nd.hessian(lambda x: g(anp, x)))(x)
    np.testing.assert_allclose(t, jax.jit(jax.jacfwd(jax.hessian(lambda x: g(jnp, x))))(x),
                               rtol=1e-11, atol=1e-11)
    # vmap of a Hessian (batched inputs: the dense basis) and the gradient of a staged
    # banded Hessian (banded_dense's reverse rule)
    xs = np.stack([x, x[::-1]])
    hv = nd.vmap(nd.hessian(lambda x: g(anp, x)))(xs)
    for k in range(2):
        np.testing.assert_allclose(hv[k], nd.hessian(lambda x: g(anp, x))(xs[k]), rtol=1e-14)
    sh = nd.stage(nd.hessian(lambda x: g(anp, x)))
    w = rng.normal(size=(13, 13))
    dw = nd.gradient_r(lambda x: anp.sum(sh(x) * w))(x)
    np.testing.assert_allclose(dw, jax.jit(jax.grad(lambda x: jnp.sum(jax.hessian(lambda x: g(jnp, x))(x) * w)))(x),
                               rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("scale", [1e-150, 1e60])
def test_banded_hessians_at_extreme_arguments(scale, monkeypatch):
    # tiny and huge arguments: the same numbers as the dense basis, no overflow in the rules
    f = lambda x: anp.sum(anp.log1p(x[1:] ** 2) * anp.sin(x[:-1] / scale)) + anp.sum(x[1:] * x[:-1])  # noqa: E731
    x = X * scale
    got = nd.hessian(f)(x)
    dense_basis(monkeypatch)
    np.testing.assert_allclose(got, nd.hessian(f)(x), rtol=1e-13, atol=0.0)
    assert np.all(np.isfinite(got))


def test_an_infinite_partial_reaches_only_its_own_direction(monkeypatch):
    # sqrt at x3 = 0: the dense basis multiplies directions' zeros by inf (nan entries in
    # rows besides direction 3's); the bands never multiply their off-band zeros, so only
    # direction 3's row has nan, and every other entry is the exact one: inf where the
    # mixed partial is infinite, else the Hessian at x3 = 1e-300 (which differs by < 1e-149)
    x = np.abs(X)
    x[3] = 0.0
    f = lambda x: anp.sum(anp.sqrt(x) * x[::-1] ** 2) + anp.sum(anp.sqrt(x[1:]) * x[:-1])  # noqa: E731
    with np.errstate(all="ignore"):
        got = nd.hessian(f)(x)
        dense_basis(monkeypatch)
        dense = nd.hessian(f)(x)
        ref = nd.hessian(f)(np.where(np.arange(N) == 3, 1e-300, x))
    assert np.all(np.isnan(got[3]) | np.isinf(got[3]))
    others = np.arange(N) != 3
    seen = ~np.isnan(dense)
    assert not seen[others].all()                # (the dense basis lost entries there)
    np.testing.assert_array_equal(got[seen], dense[seen])
    np.testing.assert_array_equal(np.isnan(got[others]), False)
    assert got[2, 3] == np.inf and got[N - 4, 3] == np.inf      # d2/dx2dx3 and d2/dx12dx3
    np.testing.assert_allclose(got[4, 3], 0.5 / np.sqrt(x[4]), rtol=1e-15)
    np.testing.assert_allclose(got[others][:, others], ref[others][:, others],
                               rtol=1e-14, atol=1e-140)


def test_a_staged_banded_hessian_exports_and_pickles():
    import pickle
    x = np.linspace(-1.0, 1.5, N)
    want = nd.hessian(lambda x: rosen(anp, x))(x)
    namespace = {}
    exec(compile(nd.export(nd.hessian(rosen_anp), x), "exported", "exec"), namespace)
    np.testing.assert_array_equal(namespace["rosen_anp"](x), want)
    s = nd.stage(nd.hessian(rosen_anp))
    s(x)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(s))(x), want)


def rosen_anp(x):
    return rosen(anp, x)
