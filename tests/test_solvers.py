"""linear_solve, root, minimize and odeint: values and derivatives against closed forms,
finite differences of the solver at tight tolerance and JAX, first and second order in
every mode and pairing, hessian, staged."""
import math

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.errors import InvalidInputError, NestadError

D = {'f': nd.derivative, 'r': nd.gradient_r}
PAIRINGS = ['ff', 'fr', 'rf', 'rr']
JAC = {'f': nd.jacobian_f, 'r': nd.jacobian_r}


def nest(modes, f):
    for m in reversed(modes):
        f = D[m](f)
    return f


def assert_close(a, b, tol=1e-9):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.allclose(a, b, rtol=tol, atol=tol), np.max(np.abs(a - b))


RNG = np.random.default_rng(0)
A0 = RNG.normal(size=(4, 4)) + 4 * np.eye(4)
B0 = RNG.normal(size=4)
L0 = RNG.normal(size=(4, 4)) + 2 * np.eye(4)


# ---------------------------------------------------------------- linear_solve

def by_solver(method):
    """sum(sin(A^-1 b)) by linear_solve and by nestad.numpy.linalg.solve (the closed
    form, whose derivatives are tested elsewhere)."""
    if method == 'cg':                   # symmetric positive definite for every L
        mv = lambda x, L: (L @ L.T) @ x + x            # noqa: E731
        dense = lambda L: L @ L.T + np.eye(4)          # noqa: E731
    else:
        mv = lambda x, L: L @ x                        # noqa: E731
        dense = lambda L: L                            # noqa: E731
    f = lambda b, L: anp.sum(anp.sin(nd.linear_solve(mv, b, L, method=method)))  # noqa: E731
    g = lambda b, L: anp.sum(anp.sin(anp.linalg.solve(dense(L), b)))               # noqa: E731
    return f, g


@pytest.mark.parametrize('method', ['cg', 'gmres', 'direct'])
def test_linear_solve_value(method):
    f, g = by_solver(method)
    assert_close(f(B0, L0), g(B0, L0), 1e-11)


@pytest.mark.parametrize('method', ['cg', 'gmres', 'direct'])
@pytest.mark.parametrize('argnums', [0, 1])
def test_linear_solve_first_and_second_derivatives(method, argnums):
    f, g = by_solver(method)
    for op in (nd.gradient_r, nd.gradient_f):
        assert_close(op(f, argnums)(B0, L0), nd.gradient_r(g, argnums)(B0, L0))
    want = nd.hessian(g, argnums)(B0, L0)
    assert_close(nd.hessian(f, argnums)(B0, L0), want)
    for outer in 'fr':
        for inner in 'fr':
            inner_op = nd.gradient_r if inner == 'r' else nd.gradient_f
            assert_close(JAC[outer](inner_op(f, argnums), argnums)(B0, L0), want)


def test_linear_solve_of_structures_and_scalars():
    # a 2x2 system written on a dict: {u, v} with u + 2v = a, 3u - v = b
    mv = lambda x, k: {'u': x['u'] + k * x['v'], 'v': 3 * x['u'] - x['v']}   # noqa: E731
    sol = lambda a, k: nd.linear_solve(mv, {'u': a, 'v': 1.0}, k, method='direct')  # noqa: E731
    x = sol(2.0, 2.0)
    assert_close([x['u'], x['v']], np.linalg.solve([[1, 2], [3, -1]], [2, 1]))
    # u = (a + k) / (1 + 3k): du/dk = (1 + 3k - 3(a + k)) / (1 + 3k)^2
    u = lambda a, k: sol(a, k)['u']               # noqa: E731
    for modes in ['f', 'r']:
        assert_close(nest(modes, lambda k: u(2.0, k))(2.0), (7 - 12) / 49)
    d2 = lambda k: (-6 * (1 + 3 * k) + 18 * (2.0 + k)) / (1 + 3 * k) ** 3  # noqa: E731
    for modes in PAIRINGS:
        assert_close(nest(modes, lambda k: u(2.0, k))(2.0), d2(2.0))
    assert_close(nd.linear_solve(lambda x, a: a * x, 6.0, 3.0, method='gmres'), 2.0)
    assert_close(nd.derivative(lambda a: nd.linear_solve(lambda x, a: a * x, 6.0, a))(3.0), -6 / 9)


def test_linear_solve_staged():
    f, g = by_solver('gmres')
    st = nd.stage(nd.gradient_r(f, 1))
    assert_close(st(B0, L0), nd.gradient_r(g, 1)(B0, L0))
    assert_close(st(2 * B0, L0), nd.gradient_r(g, 1)(2 * B0, L0))
    assert_close(nd.stage(f)(B0, L0 + 1), g(B0, L0 + 1), 1e-11)


# ---------------------------------------------------------------- root

def sqrt_by_root(a):
    return nd.root(lambda x, a: x * x - a, 1.0, a)


@pytest.mark.parametrize('modes', ['f', 'r'] + PAIRINGS + ['fff', 'rfr', 'rrr'])
def test_root_scalar_closed_form_to_third_order(modes):
    want = {1: 0.5 * 4.0 ** -0.5, 2: -0.25 * 4.0 ** -1.5, 3: 0.375 * 4.0 ** -2.5}[len(modes)]
    assert_close(nest(modes, sqrt_by_root)(4.0), want, 1e-12)
    assert sqrt_by_root(9.0) == 3.0


@pytest.mark.parametrize('a', [1e-30, 1e30, 1e-300, 1e300])
def test_root_at_extreme_scales(a):
    # relative accuracy at every scale (an absolute step tolerance stopped 25% off at 1e-15)
    x0 = 2 * math.sqrt(a)
    s = lambda a: nd.root(lambda x, a: x * x - a, x0, a, maxiter=200)   # noqa: E731
    assert_close(s(a) / math.sqrt(a), 1.0, 1e-14)
    for op in (nd.derivative, nd.gradient_r):
        assert_close(op(s)(a) * 2 * math.sqrt(a), 1.0, 1e-13)


P0 = np.array([0.5, -0.3, 1.0])
K = RNG.normal(size=(3, 3)) + 3 * np.eye(3)


def cubic(x, p):
    return K @ x + 0.1 * x ** 3 - p


def solve_cubic(p):
    return nd.root(cubic, np.zeros(3), p)


def test_root_vector_jacobian_closed_form():
    x = solve_cubic(P0)
    assert_close(cubic(x, P0), np.zeros(3), 1e-14)
    want = np.linalg.inv(K + np.diag(0.3 * x ** 2))       # dx/dp = -J_x^-1 J_p, J_p = -I
    assert_close(nd.jacobian_f(solve_cubic)(P0), want, 1e-12)
    assert_close(nd.jacobian_r(solve_cubic)(P0), want, 1e-12)


def fd_jacobian(f, x, eps=1e-5):
    cols = [(np.asarray(f(x + eps * e)) - np.asarray(f(x - eps * e))) / (2 * eps)
            for e in np.eye(x.size)]
    return np.moveaxis(np.array(cols), 0, -1)


def test_root_second_derivatives_every_pairing_and_hessian():
    # the second derivative tensor d2x/dp2, by each pairing, against finite differences
    # of the exact first derivative (the case of jaxopt issue 474 and optimistix 151)
    want = fd_jacobian(nd.jacobian_r(solve_cubic), P0)
    for outer in 'fr':
        for inner in 'fr':
            assert_close(JAC[outer](JAC[inner](solve_cubic))(P0), want, 1e-7)
    loss = lambda p: anp.sum(anp.sin(solve_cubic(p)))      # noqa: E731
    H = nd.hessian(loss)(P0)
    assert_close(H, fd_jacobian(nd.gradient_r(loss), P0), 1e-7)
    assert_close(H, H.T, 1e-14)


def test_root_against_finite_differences_of_the_solver():
    loss = lambda p: anp.sum(anp.sin(solve_cubic(p)))      # noqa: E731
    plain = lambda p: float(np.sum(np.sin(solve_cubic(p))))  # noqa: E731
    assert_close(nd.gradient_r(loss)(P0), fd_jacobian(plain, P0, 1e-6), 1e-8)


def test_root_against_jax_custom_root():
    jax = pytest.importorskip('jax')
    jax.config.update('jax_enable_x64', True)
    jnp = jax.numpy

    def jsolve(p):
        F = lambda x: jnp.asarray(K) @ x + 0.1 * x ** 3 - p         # noqa: E731

        def newton(F, x):
            for _ in range(30):
                x = x - jnp.linalg.solve(jax.jacfwd(F)(x), F(x))
            return x
        return jax.lax.custom_root(F, jnp.zeros(3), newton,
                                   lambda g, y: jnp.linalg.solve(jax.jacfwd(g)(y), y))
    jl = lambda p: jnp.sum(jnp.sin(jsolve(p)))               # noqa: E731
    loss = lambda p: anp.sum(anp.sin(solve_cubic(p)))        # noqa: E731
    assert_close(nd.gradient_r(loss)(P0), np.asarray(jax.grad(jl)(jnp.asarray(P0))), 1e-12)
    # (JAX's own custom_root has a Hessian; jaxopt's custom_root does not: issue 474)
    assert_close(nd.hessian(loss)(P0), np.asarray(jax.hessian(jl)(jnp.asarray(P0))), 1e-11)


def test_root_of_a_structure_with_structured_params():
    # u = p['a'] cos v, v = u / 2
    G = lambda x, p: {'u': x['u'] - p['a'] * nd.cos(x['v']), 'v': x['v'] - 0.5 * x['u']}  # noqa
    u = lambda a: nd.root(G, {'u': 0.0, 'v': 0.0}, {'a': a})['u']     # noqa: E731
    x = u(1.0)
    assert abs(x - math.cos(x / 2)) < 1e-14
    # implicit: du/da = cos(v) / (1 + a sin(v) / 2)
    v = x / 2
    assert_close(nd.derivative(u)(1.0), math.cos(v) / (1 + math.sin(v) / 2), 1e-13)
    second = nd.derivative(nd.derivative(u))(1.0)
    for modes in PAIRINGS:
        assert_close(nest(modes, u)(1.0), second, 1e-12)
    assert_close(second, (nd.derivative(u)(1 + 1e-5) - nd.derivative(u)(1 - 1e-5)) / 2e-5, 1e-8)


def test_root_staged():
    g = nd.gradient_r(lambda p: anp.sum(solve_cubic(p) ** 2))
    st = nd.stage(g)
    for p in (P0, 2 * P0):
        assert_close(st(p), g(p), 1e-13)
    h = nd.stage(nd.derivative(nd.gradient_r(sqrt_by_root)))
    assert_close(h(4.0), -0.25 * 4.0 ** -1.5, 1e-12)
    assert_close(h(9.0), -0.25 * 9.0 ** -1.5, 1e-12)


def test_root_with_a_given_solver():
    optimize = pytest.importorskip('scipy.optimize')

    def solver(fun, x0):
        return optimize.root(fun, x0, tol=1e-14).x
    sol = lambda p: nd.root(cubic, np.zeros(3), p, solver=solver)    # noqa: E731
    assert_close(sol(P0), solve_cubic(P0), 1e-12)
    assert_close(nd.jacobian_r(sol)(P0), nd.jacobian_f(solve_cubic)(P0), 1e-10)


def test_root_sees_params_of_enclosing_runs():
    # the root of x^2 = a b in an inner run of b, a from the enclosing run: d2/da db
    f = lambda a: nd.derivative(lambda b: nd.root(lambda x, a, b: x * x - a * b, 1.0, a, b))(2.0)
    assert_close(nd.derivative(f)(2.0), 0.25 / 2.0, 1e-12)       # sqrt(ab): d2/dadb = 1/(4 sqrt(ab))
    assert_close(nd.gradient_r(f)(2.0), 0.25 / 2.0, 1e-12)


# ---------------------------------------------------------------- minimize

X = RNG.normal(size=(20, 4))
Y = RNG.normal(size=20)


def ridge_loss(w, lam):
    return anp.sum((X @ w - Y) ** 2) + lam * anp.sum(w ** 2)


def ridge_closed(lam):
    return anp.linalg.solve(X.T @ X + lam * np.eye(4), X.T @ Y)


@pytest.mark.parametrize('method', ['bfgs', 'l-bfgs', 'newton', 'scipy:BFGS', 'scipy:trust-ncg'])
def test_minimize_ridge_closed_form(method):
    if method.startswith('scipy'):
        pytest.importorskip('scipy')
    w = nd.minimize(ridge_loss, np.zeros(4), 0.7, method=method)
    assert_close(w, ridge_closed(0.7), 1e-10)


@pytest.mark.parametrize('modes', ['f', 'r'] + PAIRINGS)
def test_minimize_derivatives_closed_form(modes):
    sol = lambda lam: anp.sum(anp.sin(nd.minimize(ridge_loss, np.zeros(4), lam)))  # noqa: E731
    want = lambda lam: anp.sum(anp.sin(ridge_closed(lam)))                          # noqa: E731
    assert_close(nest(modes, sol)(0.7), nest(modes, want)(0.7), 1e-8)


def test_minimize_hessian_with_respect_to_params():
    # the argmin of sum((w - p)^4) / 4 + |w|^2 / 2 moves with p; hessian of a loss of it
    f = lambda w, p: anp.sum((w - p) ** 4) / 4 + anp.sum(w ** 2) / 2   # noqa: E731
    sol = lambda p: nd.minimize(f, np.zeros(3), p, method='newton')     # noqa: E731
    w = sol(P0)
    assert_close((w - P0) ** 3 + w, np.zeros(3), 1e-12)
    # per entry: (w - p)^3 + w = 0, dw/dp = 3(w - p)^2 / (3(w - p)^2 + 1)
    d = 3 * (w - P0) ** 2
    assert_close(nd.jacobian_r(sol)(P0), np.diag(d / (d + 1)), 1e-10)
    loss = lambda p: anp.sum(sol(p) ** 3)                               # noqa: E731
    H = nd.hessian(loss)(P0)
    assert_close(H, fd_jacobian(nd.gradient_r(loss), P0), 1e-7)
    assert_close(nd.jacobian_r(nd.gradient_r(loss))(P0), H, 1e-10)


def test_minimize_staged():
    g = nd.gradient_r(lambda lam: anp.sum(nd.minimize(ridge_loss, np.zeros(4), lam) ** 2))
    st = nd.stage(g)
    for lam in (0.7, 2.0):
        assert_close(st(lam), g(lam), 1e-12)


# ---------------------------------------------------------------- odeint

def lotka_volterra(y, t, a, b, c, d):
    return anp.stack([a * y[0] - b * y[0] * y[1], c * y[0] * y[1] - d * y[1]])


LV_T = np.linspace(0.0, 5.0, 11)
LV_Y0 = np.array([1.0, 0.5])
LV_P = (1.0, 0.6, 0.4, 0.8)


@pytest.mark.parametrize('t', [LV_T, LV_T[::-1], LV_T[:1], np.array([0.0, 1e-3, 7.0])])
def test_odeint_values_are_solve_ivp_rk45(t):
    integrate = pytest.importorskip('scipy.integrate')
    ys = nd.odeint(lotka_volterra, LV_Y0, t, *LV_P, rtol=1e-6, atol=1e-9)
    assert ys.shape == (t.size, 2)
    if t.size == 1:
        assert np.array_equal(ys, LV_Y0[None])
        return
    fun = lambda s, y: np.asarray(lotka_volterra(y, s, *LV_P))          # noqa: E731
    want = integrate.solve_ivp(fun, (t[0], t[-1]), LV_Y0, t_eval=t, rtol=1e-6, atol=1e-9).y.T
    assert_close(ys, want, 1e-13)


M = np.array([[-0.5, 1.0], [-1.0, -0.2]])
TIMES = np.linspace(0.0, 3.0, 4)


def expm_series(k):
    """exp(k M T), d/dk and d2/dk2 of it at T = 3, exactly: Van Loan's block matrices
    (the exponential of [[A, B, 0], [0, A, B], [0, 0, A]] holds the derivatives along B)."""
    scipy_linalg = pytest.importorskip('scipy.linalg')
    A, B = k * M * 3.0, M * 3.0
    Z = np.zeros((2, 2))
    E = scipy_linalg.expm(np.block([[A, B, Z], [Z, A, B], [Z, Z, A]]))
    return E[:2, :2], E[:2, 2:4], 2 * E[:2, 4:]


def linear_ode(k, y0=np.array([1.0, 0.5])):
    return nd.odeint(lambda y, t, k: k * (M @ y), y0, TIMES, k, rtol=1e-12, atol=1e-12)[-1]


def test_odeint_linear_closed_form():
    E, _, _ = expm_series(1.3)
    assert_close(linear_ode(1.3), E @ np.array([1.0, 0.5]), 1e-10)


@pytest.mark.parametrize('modes', ['f', 'r'] + PAIRINGS)
def test_odeint_derivatives_against_the_matrix_exponential(modes):
    E, dE, d2E = expm_series(1.3)
    w = np.array([0.3, -0.7])
    y0 = np.array([1.0, 0.5])
    want = {1: w @ dE @ y0, 2: w @ d2E @ y0}[len(modes)]
    assert_close(nest(modes, lambda k: anp.sum(w * linear_ode(k)))(1.3), want, 1e-8)


def test_odeint_initial_value_derivatives_every_pairing():
    # y(T) = E y0: the Jacobian is E, the Hessian of |y(T)|^2 is 2 E^T E
    E, _, _ = expm_series(1.0)
    y0 = np.array([1.0, 0.5])
    sol = lambda y0: linear_ode(1.0, y0)                  # noqa: E731
    assert_close(nd.jacobian_f(sol)(y0), E, 1e-9)
    assert_close(nd.jacobian_r(sol)(y0), E, 1e-9)
    sq = lambda y0: anp.sum(sol(y0) ** 2)                 # noqa: E731
    for outer in 'fr':
        for inner in (nd.gradient_f, nd.gradient_r):
            assert_close(JAC[outer](inner(sq))(y0), 2 * E.T @ E, 1e-8)


def test_odeint_against_jax():
    jax = pytest.importorskip('jax')
    jax.config.update('jax_enable_x64', True)
    jnp = jax.numpy
    from jax.experimental.ode import odeint as jodeint

    def jlv(y, t, a, b, c, d):
        return jnp.stack([a * y[0] - b * y[0] * y[1], c * y[0] * y[1] - d * y[1]])
    L = lambda y0, *p: anp.sum(nd.odeint(lotka_volterra, y0, LV_T, *p) ** 2)       # noqa: E731
    JL = lambda y0, *p: jnp.sum(jodeint(jlv, y0, jnp.asarray(LV_T), *p) ** 2)      # noqa: E731
    want = jax.grad(JL, (0, 1, 2, 3, 4))(jnp.asarray(LV_Y0), *LV_P)
    for op in (nd.gradient_r, nd.gradient_f):
        got = op(L, (0, 1, 2, 3, 4))(LV_Y0, *LV_P)
        for g, w in zip(got, want):
            assert_close(g, np.asarray(w), 1e-6)
    # jax.hessian fails on odeint (no forward mode), and jax.jacrev(jax.grad) compiles for
    # 25 s: the Hessian against finite differences of the gradient, which JAX confirmed
    Lp = lambda p: anp.sum(nd.odeint(lotka_volterra, LV_Y0, LV_T, *p, rtol=1e-11,   # noqa
                                     atol=1e-11) ** 2)
    H = nd.hessian(Lp)(np.array(LV_P))
    assert_close(H, fd_jacobian(nd.gradient_r(Lp), np.array(LV_P), 1e-4), 1e-5)


# y' = k M y with eigenvalues -50 k and -k: at T = 2 the fast mode is exp(-100) of its
# start, below the tolerance, so y(T) holds nothing of it and integrating y backwards
# from y(T) (the adjoint method as JAX implements it) amplifies the forward error by
# exp(100).  nestad's adjoint reads y from the forward steps instead.
STIFF_M = np.array([[-50.0, 0.0], [1.0, -1.0]])
STIFF_Y0 = np.array([1.0, 1.0])
STIFF_W = np.array([0.3, 1.0])


def stiff_exact(k):
    """w y(T), its first and second derivatives in k, and the Jacobian of y(T) in y0."""
    scipy_linalg = pytest.importorskip('scipy.linalg')
    A, B, Z = k * STIFF_M * 2.0, STIFF_M * 2.0, np.zeros((2, 2))
    E = scipy_linalg.expm(np.block([[A, B, Z], [Z, A, B], [Z, Z, A]]))
    return (STIFF_W @ E[:2, :2] @ STIFF_Y0, STIFF_W @ E[:2, 2:4] @ STIFF_Y0,
            STIFF_W @ (2 * E[:2, 4:]) @ STIFF_Y0, E[:2, :2])


def stiff(k, y0=STIFF_Y0, checkpoints=None):
    return nd.odeint(lambda y, t, k: k * (STIFF_M @ y), y0, np.array([0.0, 2.0]), k,
                     rtol=1e-10, atol=1e-10, checkpoints=checkpoints)[-1]


@pytest.mark.parametrize('modes', ['f', 'r'] + PAIRINGS)
def test_odeint_derivatives_of_a_dissipative_system(modes):
    # every pairing reads y from forward steps (fr and rr through _flow_vjp's rules)
    want = stiff_exact(1.0)[len(modes)]
    assert_close(nest(modes, lambda k: anp.sum(STIFF_W * stiff(k)))(1.0), want, 1e-8)


@pytest.mark.parametrize('checkpoints', [None, 2, 5])
def test_odeint_reverse_mode_of_a_dissipative_system_checkpointed(checkpoints):
    _, d1, _, E = stiff_exact(1.0)
    assert_close(nd.jacobian_r(lambda y0: stiff(1.0, y0, checkpoints))(STIFF_Y0), E, 1e-9)
    assert_close(nd.gradient_r(lambda k: anp.sum(STIFF_W * stiff(k, checkpoints=checkpoints)))(1.0),
          d1, 1e-8)
    assert_close(nd.stage(nd.gradient_r(lambda k: anp.sum(STIFF_W * stiff(k, checkpoints=checkpoints))))
          (1.0), d1, 1e-8)


def stiff_hessians(k):
    """With y(T) = E(k) y0 and L = w y(T) + |y(T)|^2 / 2: the Hessian of L in (y0, k)."""
    scipy_linalg = pytest.importorskip('scipy.linalg')
    A, B, Z = k * STIFF_M * 2.0, STIFF_M * 2.0, np.zeros((2, 2))
    X = scipy_linalg.expm(np.block([[A, B, Z], [Z, A, B], [Z, Z, A]]))
    E, dE, d2E = X[:2, :2], X[:2, 2:4], 2 * X[:2, 4:]
    y = E @ STIFF_Y0
    H = np.zeros((3, 3))
    H[:2, :2] = E.T @ E
    H[:2, 2] = H[2, :2] = dE.T @ (STIFF_W + y) + E.T @ (dE @ STIFF_Y0)
    H[2, 2] = (STIFF_W + y) @ (d2E @ STIFF_Y0) + (dE @ STIFF_Y0) @ (dE @ STIFF_Y0)
    return H


def stiff_loss(z, checkpoints=None):
    y = stiff(z[2], z[:2], checkpoints)
    return anp.sum(STIFF_W * y) + 0.5 * anp.sum(y * y)


Z0 = np.array([1.0, 1.0, 1.0])


@pytest.mark.parametrize('outer, inner', [(o, i) for o in 'fr' for i in 'fr'])
def test_odeint_hessian_in_y0_and_a_parameter_of_a_dissipative_system(outer, inner):
    H = stiff_hessians(1.0)
    grad = {'f': nd.gradient_f, 'r': nd.gradient_r}[inner]
    assert_close(JAC[outer](grad(stiff_loss))(Z0), H, 1e-8)
    if (outer, inner) == ('f', 'r'):
        assert_close(nd.hessian(stiff_loss)(Z0), H, 1e-8)
        v = np.array([0.5, -1.0, 2.0])
        assert_close(nd.hvp(stiff_loss, Z0, v), H @ v, 1e-8)


def test_odeint_nested_reverse_of_a_dissipative_system_checkpointed():
    loss = lambda z: stiff_loss(z, 3)                        # noqa: E731
    assert_close(nd.hessian(loss)(Z0), stiff_hessians(1.0), 1e-8)
    assert_close(nd.gradient_r(nd.gradient_r(lambda k: anp.sum(STIFF_W * stiff(k, checkpoints=3))))(1.0),
          stiff_exact(1.0)[2], 1e-8)


def test_odeint_nested_reverse_of_a_dissipative_system_staged():
    H = stiff_hessians(1.0)
    assert_close(nd.stage(nd.hessian(stiff_loss))(Z0), H, 1e-8)
    rr = nd.stage(nd.gradient_r(nd.gradient_r(lambda k: anp.sum(STIFF_W * stiff(k)))))
    assert_close(rr(1.0), stiff_exact(1.0)[2], 1e-8)


def test_odeint_third_derivatives_through_the_adjoint():
    # y' = -k y: y(T) = y0 exp(-k T); d3/dk3 = -T^3 y(T), at several output times
    t = np.array([0.0, 0.5, 1.0, 2.0])
    L = lambda k: anp.sum(nd.odeint(lambda y, t, k: -k * y, 1.5, t, k, rtol=1e-11,  # noqa
                                    atol=1e-11))
    want = sum(-s ** 3 * 1.5 * math.exp(-0.7 * s) for s in t)
    for modes in ('frr', 'rrr', 'rfr', 'ffr', 'rrf'):
        assert_close(nest(modes, L)(0.7), want, 1e-7)


def test_odeint_backward_reintegration_fails_on_the_dissipative_system():
    # the demonstration: JAX's odeint integrates y backwards with the adjoint
    jax = pytest.importorskip('jax')
    jax.config.update('jax_enable_x64', True)
    from jax.experimental.ode import odeint as jodeint
    M = jax.numpy.asarray(STIFF_M)
    g = jax.grad(lambda k: jax.numpy.dot(STIFF_W, jodeint(
        lambda y, t, k: k * (M @ y), jax.numpy.asarray(STIFF_Y0), jax.numpy.array([0.0, 2.0]),
        k, rtol=1e-10, atol=1e-10, mxstep=2000)[-1]))(1.0)
    want = stiff_exact(1.0)[1]
    assert not abs(float(g) - want) < 1e3 * abs(want)       # off by orders of magnitude
    assert_close(nd.gradient_r(lambda k: anp.sum(STIFF_W * stiff(k)))(1.0), want, 1e-8)


def test_odeint_checkpointed_memory_does_not_grow_with_the_steps():
    import tracemalloc
    rng = np.random.default_rng(1)
    W = rng.normal(size=(100, 100)) / 10
    f = lambda y, t, k: anp.tanh(W @ y) - k * y                               # noqa: E731

    def peak(T, checkpoints):
        loss = lambda y0: anp.sum(nd.odeint(f, y0, np.array([0.0, T]), 0.5, rtol=1e-6,  # noqa
                                            atol=1e-6, checkpoints=checkpoints)[-1] ** 2)
        tracemalloc.start()
        try:
            g = nd.gradient_r(loss)(np.ones(100))
            return tracemalloc.get_traced_memory()[1], g
        finally:
            tracemalloc.stop()
    (kept_5, g5), (kept_80, g80) = peak(5.0, None), peak(80.0, None)
    (bound_5, h5), (bound_80, h80) = peak(5.0, 6), peak(80.0, 6)
    assert_close(g5, h5, 1e-5)
    assert_close(g80, h80, 1e-5)
    assert kept_80 > kept_5 + 0.3e6           # every step kept: about 4 kB a step
    assert bound_80 < bound_5 + 0.1e6         # at most 6 at a time (and the recursion's)


def test_odeint_of_structures_and_numbers():
    # y = {'x': x, 'v': v}: the harmonic oscillator x'' = -w^2 x; x(t) = cos(w t)
    f = lambda y, t, w: {'x': y['v'], 'v': -w * w * y['x']}              # noqa: E731
    x = lambda w: nd.odeint(f, {'x': 1.0, 'v': 0.0}, np.array([0.0, 2.0]), w,
                            rtol=1e-10, atol=1e-10)['x'][-1]
    assert_close(x(1.5), math.cos(3.0), 1e-10)
    assert_close(nd.derivative(x)(1.5), -2.0 * math.sin(3.0), 1e-9)
    for modes in PAIRINGS:
        assert_close(nest(modes, x)(1.5), -4.0 * math.cos(3.0), 1e-8)
    decay = lambda k: nd.odeint(lambda y, t, k: -k * y, 2.0, np.array([0.0, 1.0]), k)  # noqa
    assert decay(0.5).shape == (2,)
    assert_close(nd.derivative(lambda k: decay(k)[1])(0.5), -2.0 * math.exp(-0.5), 1e-7)


def test_odeint_and_root_staged_to_second_order():
    L = lambda a: anp.sum(nd.odeint(lotka_volterra, LV_Y0, LV_T[:4], a, 0.6, 0.4, 0.8) ** 2)  # noqa
    d2 = nd.derivative(nd.gradient_r(L))
    st = nd.stage(d2)
    for a in (1.0, 1.1):
        assert_close(st(a), d2(a), 1e-12)
    sq = lambda a: nd.root(lambda x, a: x * x - a, 1.0, a)                # noqa: E731
    h = nd.stage(nd.hessian(lambda p: sq(p[0]) * sq(p[1])))
    for p in ([4.0, 9.0], [16.0, 1.0]):
        a, b = p
        want = [[-0.25 * a ** -1.5 * b ** 0.5, 0.25 / math.sqrt(a * b)],
                [0.25 / math.sqrt(a * b), -0.25 * b ** -1.5 * a ** 0.5]]
        assert_close(h(np.array(p)), want, 1e-12)


def test_odeint_staged():
    L = lambda p: anp.sum(nd.odeint(lotka_volterra, LV_Y0, LV_T, *p) ** 2)   # noqa: E731
    g = nd.gradient_r(L)
    st = nd.stage(g)
    for p in (LV_P, (1.1, 0.5, 0.4, 0.9)):
        assert_close(st(p), g(p), 1e-12)


def test_odeint_with_a_function_staging_cannot_hold():
    # f converts a value to a Python float (fine on plain values, refused on traced ones):
    # the adjoint's right-hand side, staged when it can be, then runs eagerly
    def f(y, t, k):
        c = 2.0 if float(nd.primal_value(t)) < 10 else 0.0
        return -k * c * y
    g = nd.gradient_r(lambda k: nd.odeint(f, 1.0, np.array([0.0, 1.0]), k)[-1])(0.5)
    assert_close(g, -2.0 * math.exp(-1.0), 1e-7)


def test_minimize_with_a_given_method():
    def descent(value_and_grad, w):
        for _ in range(2000):
            w = w - 0.01 * value_and_grad(w)[1]
        return w
    sol = lambda lam: nd.minimize(ridge_loss, np.zeros(4), lam, method=descent)  # noqa: E731
    assert_close(sol(0.7), ridge_closed(0.7), 1e-10)
    assert_close(nd.jacobian_r(sol)(0.7), nd.jacobian_f(ridge_closed)(0.7), 1e-8)


def test_traced_programs_with_solvers_transform():
    # nd.trace records each solve as one call; Program.jvp/vjp run it with its rule
    p = nd.trace(sqrt_by_root, 4.0)
    assert p(9.0) == 3.0
    assert_close(p.jvp()(9.0, 1.0), [3.0, 1 / 6], 1e-14)
    assert_close(p.vjp()(9.0, 1.0), [3.0, 1 / 6], 1e-14)
    assert_close(p.jvp().vjp()(9.0, 1.0, 1.0, 1.0), [3.0, 1 / 6, 1 / 6 - 1 / 108, 1 / 6], 1e-13)
    decay = lambda k: nd.odeint(lambda y, t, k: -k * y, 1.0, np.array([0.0, 1.0]), k)[1]  # noqa
    assert_close(nd.trace(decay, 0.5).vjp()(0.5, 1.0), [math.exp(-0.5), -math.exp(-0.5)], 1e-7)
    ls = lambda b, s: nd.linear_solve(lambda x, s: s * (A0 @ x), b, s)   # noqa: E731
    got = nd.trace(ls, B0, 2.0).jvp()(B0, 2.0, np.zeros(4), 1.0)
    assert_close(got[1], -np.linalg.solve(A0, B0) / 4, 1e-12)


def test_minimize_with_a_function_staging_cannot_hold():
    # long iterations run the gradient staged; a function that converts a value to a
    # Python float (refused when traced) runs eagerly throughout, with the same answer
    def rosen(x, a):
        weight = 100.0 if float(nd.primal_value(x[0])) > -10 else 100.0
        return (a - x[0]) ** 2 + weight * (x[1] - x[0] ** 2) ** 2
    x = nd.minimize(rosen, np.array([-1.2, 1.0]), 1.0)
    assert_close(x, [1.0, 1.0], 1e-9)
    assert_close(nd.derivative(lambda a: nd.minimize(rosen, np.array([-1.2, 1.0]), a))(1.0),
          [1.0, 2.0], 1e-7)                               # the minimum is (a, a^2)


# ---------------------------------------------------------------- Taylor mode

def nested_derivatives(f, k, x):
    out = []
    for _ in range(k + 1):
        out.append(f(x))
        f = nd.derivative(f)
    return out


def test_root_under_taylor_mode_closed_form():
    # sqrt(a) as the root of x^2 - a: d^k/da^k a^(1/2) = (1/2)(-1/2)...(3/2 - k) a^(1/2 - k)
    for a in (2.0, 1e-6, 1e6):
        d = nd.derivatives(sqrt_by_root, 6)(a)
        for k in range(7):
            want = math.prod(0.5 - j for j in range(k)) * a ** (0.5 - k)
            assert abs(d[k] - want) <= 1e-12 * abs(want), (a, k, d[k], want)


def test_root_of_a_system_under_taylor_mode_against_nested_derivative():
    def f(x, p):
        return anp.stack([x[0] + p['a'] * x[1] ** 2 - 1.0,
                          x[1] + p['b'] * anp.sin(x[0]) - p['a']])
    sol = lambda s: anp.sum(nd.root(f, np.array([0.0, 1.0]),             # noqa: E731
                                    {'a': 0.5 + s, 'b': 0.3 - 2 * s}) ** 2)
    assert_close(nd.derivatives(sol, 4)(0.1), nested_derivatives(sol, 4, 0.1), 1e-9)


@pytest.mark.parametrize('method', ['cg', 'gmres', 'direct'])
def test_linear_solve_under_taylor_mode_closed_form(method):
    # x(s) = (S + s I)^-1 b: d^k x / ds^k = (-1)^k k! (S + s I)^-(k+1) b
    S = L0 @ L0.T + np.eye(4)
    x = lambda s: nd.linear_solve(lambda v, s: S @ v + s * v, B0, s, method=method)  # noqa: E731
    d = nd.derivatives(x, 5)(0.3)
    inv = np.linalg.inv(S + 0.3 * np.eye(4))
    for k in range(6):
        assert_close(d[k], (-1) ** k * math.factorial(k) * np.linalg.matrix_power(inv, k + 1) @ B0,
              1e-10)


def test_minimize_under_taylor_mode():
    mpmath = pytest.importorskip('mpmath')
    # argmin cosh(x) - a x = asinh(a): against mpmath's derivatives of asinh
    m = lambda a: nd.minimize(lambda x, a: anp.cosh(x) - a * x, 0.0, a, tol=1e-13)  # noqa: E731
    want = mpmath.diffs(mpmath.asinh, mpmath.mpf('0.7'), 5)
    assert_close(nd.derivatives(m, 5)(0.7), [float(w) for w in want], 1e-10)
    # ridge regression's minimiser against nested derivatives of its closed form
    ridge = lambda lam: nd.minimize(ridge_loss, np.zeros(4), lam, method='newton')  # noqa: E731
    want = nested_derivatives(ridge_closed, 4, 0.7)
    for got, w in zip(nd.derivatives(ridge, 4)(0.7), want):
        assert_close(got, w, 1e-8 * max(1.0, np.abs(w).max()))


def test_odeint_under_taylor_mode():
    # y' = -k y: d^j/dk^j y(t) = y0 (-t)^j exp(-k t), at every time
    t = np.array([0.0, 0.5, 2.0])
    decay = lambda k: nd.odeint(lambda y, t, k: -k * y, 1.5, t, k, rtol=1e-12,  # noqa: E731
                                atol=1e-12)
    for j, d in enumerate(nd.derivatives(decay, 5)(0.7)):
        assert_close(d, 1.5 * (-t) ** j * np.exp(-0.7 * t), 1e-9)
    # the linear system y' = k M y against the matrix exponential, y0 and k moving
    E, dE, d2E = expm_series(1.3)
    y0, v = np.array([1.0, 0.5]), np.array([0.2, -1.0])
    curve = lambda s: linear_ode(1.3 + s, y0 + s * v)                     # noqa: E731
    d = nd.derivatives(curve, 2)(0.0)
    assert_close(d[0], E @ y0, 1e-10)
    assert_close(d[1], dE @ y0 + E @ v, 1e-9)
    assert_close(d[2], d2E @ y0 + 2 * dE @ v, 1e-8)
    # Lotka-Volterra (a structure of params) against nested derivatives
    L = lambda a: anp.sum(nd.odeint(lotka_volterra, LV_Y0, LV_T[:4], a, 0.6, 0.4, 0.8,  # noqa
                                    rtol=1e-11, atol=1e-11) ** 2)
    assert_close(nd.derivatives(L, 3)(1.0), nested_derivatives(L, 3, 1.0), 1e-7)


def test_solvers_under_taylor_mode_nest_and_stage():
    # derivative of a jet, a jet of gradient_r, a staged jet, a jet inside hessian
    d3 = lambda a: nd.derivatives(sqrt_by_root, 3)(a)[3]                  # noqa: E731
    assert_close(nd.derivative(d3)(4.0), 0.5 * -0.5 * -1.5 * -2.5 * 4.0 ** -3.5, 1e-12)
    g = nd.gradient_r(lambda a: sqrt_by_root(a) ** 3)                     # 1.5 a^(1/2)
    assert_close(nd.derivatives(g, 3)(4.0), [1.5 * 2.0, 0.75 / 2.0, -0.375 / 8.0, 0.5625 / 32.0], 1e-12)
    st = nd.stage(nd.derivatives(sqrt_by_root, 4))
    for a in (4.0, 9.0):
        assert_close(st(a), nd.derivatives(sqrt_by_root, 4)(a), 1e-13)
    decay = lambda k: nd.odeint(lambda y, t, k: -k * y, 1.0, np.array([0.0, 1.0]), k,  # noqa
                                rtol=1e-12, atol=1e-12)[1]
    st = nd.stage(nd.derivatives(decay, 3))
    for k in (0.7, 0.9):
        assert_close(st(k), [(-1) ** j * math.exp(-k) for j in range(4)], 1e-10)
    assert_close(nd.derivative(lambda k: nd.derivatives(decay, 2)(k)[2])(0.5), -math.exp(-0.5), 1e-9)


def test_odeint_gradient_under_taylor_mode():
    # a jet of a reverse gradient through odeint: the adjoint of the ODE of the Taylor
    # coefficients.  d/dk y(1) = -y0 exp(-k), so its derivatives are (-1)^(j+1) y0 exp(-k)
    g = nd.gradient_r(lambda k: nd.odeint(lambda y, t, k: -k * y, 1.5, np.array([0.0, 0.5, 1.0]),
                                          k, rtol=1e-12, atol=1e-12)[2])
    assert_close(nd.derivatives(g, 4)(0.7), [(-1) ** (j + 1) * 1.5 * math.exp(-0.7) for j in range(5)],
          1e-10)
    # Lotka-Volterra, the gradient in y0 and a parameter, along a curve moving both
    L = lambda y0, a: anp.sum(nd.odeint(lotka_volterra, y0, LV_T[:4], a, 0.6, 0.4, 0.8,  # noqa
                                        rtol=1e-11, atol=1e-11) ** 2)

    def G(s):
        gy, ga = nd.gradient_r(L, (0, 1))(LV_Y0 * (1 + 0.1 * s), 1.0 + s)
        return anp.concatenate([gy, anp.reshape(ga, (1,))])
    for got, want in zip(nd.derivatives(G, 2)(0.0), nested_derivatives(G, 2, 0.0)):
        assert_close(got, want, 1e-8 * np.abs(want).max())


# ---------------------------------------------------------------- vmap and stop_gradient

def test_solvers_under_vmap():
    a = np.array([1.0, 4.0, 9.0])
    assert_close(nd.vmap(sqrt_by_root)(a), np.sqrt(a), 1e-12)
    assert_close(nd.vmap(nd.derivative(sqrt_by_root))(a), 0.5 / np.sqrt(a), 1e-12)
    assert_close(nd.vmap(nd.gradient_r(sqrt_by_root))(a), 0.5 / np.sqrt(a), 1e-12)
    assert_close(nd.gradient_r(lambda a: anp.sum(nd.vmap(sqrt_by_root)(a)))(a), 0.5 / np.sqrt(a), 1e-12)
    # vmap over the start point: each member its own root of x^2 - 4
    assert_close(nd.vmap(lambda x0: nd.root(lambda x, a: x * x - a, x0, 4.0))(np.array([-3.0, 3.0])),
          [-2.0, 2.0], 1e-12)
    lams = np.array([0.3, 0.7])
    assert_close(nd.vmap(lambda lam: nd.minimize(ridge_loss, np.zeros(4), lam))(lams),
          np.stack([ridge_closed(lam) for lam in lams]), 1e-8)
    assert_close(nd.vmap(nd.jacobian_r(lambda lam: nd.minimize(ridge_loss, np.zeros(4), lam)))(lams),
          np.stack([nd.jacobian_f(ridge_closed)(lam) for lam in lams]), 1e-7)
    bs = np.stack([B0, 2 * B0, -B0])
    assert_close(nd.vmap(lambda b: nd.linear_solve(lambda x, A: A @ x, b, A0))(bs),
          np.linalg.solve(A0, bs.T).T, 1e-10)
    ks = np.array([0.5, 1.0, 2.0])
    decay = lambda k: nd.odeint(lambda y, t, k: -k * y, 1.0, np.array([0.0, 1.0]), k,  # noqa
                                rtol=1e-11, atol=1e-11)[1]
    assert_close(nd.vmap(decay)(ks), np.exp(-ks), 1e-9)
    assert_close(nd.vmap(nd.gradient_r(decay))(ks), -np.exp(-ks), 1e-9)
    assert_close(nd.vmap(nd.hessian(decay))(ks), np.exp(-ks), 1e-8)


def test_solvers_under_stop_gradient():
    # a stopped answer has no derivative; a stopped solver keeps its arguments' derivative
    # and cuts the value it reads from its closure
    assert_close(nd.derivative(lambda a: sqrt_by_root(a) + nd.stop_gradient(sqrt_by_root(a)))(4.0),
          0.25, 1e-12)

    def h(b):
        # root of x^2 - a b in a: sqrt(a b), with b (closed over) held constant
        solve = lambda a: nd.root(lambda x, a: x * x - a * nd.primal_value(b), 1.0, a)  # noqa
        return nd.stop_gradient(solve)(b)
    assert_close(h(4.0), 4.0, 1e-12)
    assert_close(nd.derivative(h)(4.0), 0.5 * math.sqrt(4.0 / 4.0), 1e-12)      # d/da sqrt(a b) at a=b
    assert_close(nd.gradient_r(h)(4.0), 0.5, 1e-12)
    for op in (nd.derivative, nd.gradient_r):
        k = op(lambda k: nd.stop_gradient(nd.odeint(lambda y, t, k: -k * y, 1.0,
                                                    np.array([0.0, 1.0]), k))[1] + k)(0.5)
        assert_close(k, 1.0, 1e-15)


def test_a_member_that_does_not_converge_under_vmap_raises():
    # x^2 = -1 has no real root: the member's solve says so, as it would alone
    with pytest.raises(NestadError, match="not a root: it did not converge"):
        nd.vmap(sqrt_by_root)(np.array([4.0, -1.0]))
    with pytest.raises(NestadError, match="odeint: more than mxstep=50 steps"):
        nd.vmap(lambda k: nd.odeint(lambda y, t, k: -k * y, 1.0, np.array([0.0, 1.0]), k,
                                    mxstep=50))(np.array([1.0, 1e4]))
