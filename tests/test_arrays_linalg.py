"""Arrays, part two: linear algebra, Hessians in all four mode pairings (matmul, tanh,
logsumexp, a small MLP), nesting with arrays, and errors.  Helpers and tolerances are
those of test_arrays.py (finite differences: step 1e-6, rtol 1e-6, atol 1e-7)."""
import itertools
import os
import sys

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp

sys.path.insert(0, os.path.dirname(__file__))
from test_arrays import (AD_ATOL, AD_RTOL, H, assert_close, check_gradient,  # noqa: E402
                         check_hessian, check_jacobian, fd_gradient, fd_jacobian, uniform,
                         weights)


def spd(n, seed=0):
    m = uniform((n, n), seed=seed)
    return m @ m.T + n * np.eye(n)


def well_conditioned(n, seed=0):
    return uniform((n, n), seed=seed) + 2.0 * np.eye(n)


# ---------------------------------------------------------------- norm

NORMS = {
    'vector': (lambda x: anp.linalg.norm(x), (5,)),
    'vector-ord2': (lambda x: np.linalg.norm(x, ord=2), (5,)),
    'matrix-fro': (lambda x: anp.linalg.norm(x), (3, 4)),
    'matrix-fro-named': (lambda x: np.linalg.norm(x, 'fro'), (3, 4)),
    'axis1': (lambda x: anp.linalg.norm(x, axis=1), (3, 4)),
    'axis0-keepdims': (lambda x: np.linalg.norm(x, axis=0, keepdims=True), (3, 4)),
    'axis-ord2': (lambda x: anp.linalg.norm(x, ord=2, axis=-1), (2, 3, 4)),
    'axis-tuple': (lambda x: np.linalg.norm(x, axis=(0, 2)), (2, 3, 4)),
}


@pytest.mark.parametrize('name', sorted(NORMS))
def test_norm(name):
    f, shape = NORMS[name]
    x = uniform(shape, seed=1)
    check_jacobian(f, x)
    check_hessian(lambda x: anp.sum(f(x) ** 3), x)


def test_norm_closed_forms():
    x = uniform((5,), seed=2)
    r = np.linalg.norm(x)
    assert nd.primal_value(anp.linalg.norm(x)) == pytest.approx(r)
    assert_close(nd.gradient_r(anp.linalg.norm)(x), x / r, 1e-14)
    assert_close(nd.gradient_f(np.linalg.norm)(x), x / r, 1e-14)
    assert_close(nd.hessian(anp.linalg.norm)(x), (np.eye(5) - np.outer(x, x) / r ** 2) / r, 1e-13, 1e-15)


# ---------------------------------------------------------------- solve, inv, det, slogdet

@pytest.mark.parametrize('rhs', [(3,), (3, 2)], ids=['vector-rhs', 'matrix-rhs'])
@pytest.mark.parametrize('solve', [anp.linalg.solve, np.linalg.solve], ids=['anp', 'np'])
def test_solve(solve, rhs):
    a = well_conditioned(3, seed=3)
    b = uniform(rhs, seed=4)
    np.testing.assert_allclose(solve(a, b), np.linalg.solve(a, b), rtol=1e-14)
    check_jacobian(solve, a, b, argnums=(0, 1))
    w = weights(rhs)
    check_hessian(lambda a: anp.sum(w * solve(a, b) ** 2), a)
    check_hessian(lambda b: anp.sum(anp.sin(solve(a, b * b))), b)


@pytest.mark.parametrize('rhs', [(3,), (3, 2)], ids=['vector-rhs', 'matrix-rhs'])
def test_solve_closed_form(rhs):
    a = well_conditioned(3, seed=5)
    b = uniform(rhs, seed=6)
    c = uniform(rhs, seed=7)
    x = np.linalg.solve(a, b)
    lam = np.linalg.solve(a.T, c)                         # adjoint solution
    ga, gb = nd.gradient_r(lambda a, b: anp.sum(c * anp.linalg.solve(a, b)), argnums=(0, 1))(a, b)
    expected_ga = -(np.outer(lam, x) if len(rhs) == 1 else lam @ x.T)
    assert_close(ga, expected_ga, 1e-12, 1e-14, 'd/dA')
    assert_close(gb, lam, 1e-12, 1e-14, 'd/db')


@pytest.mark.parametrize('sa,sb', [((3, 3), (4, 3, 2)), ((4, 3, 3), (3, 2)), ((4, 3, 3), (4, 3, 2))],
                         ids=['A-broadcast', 'b-broadcast', 'both-batched'])
def test_solve_broadcasting_batch(sa, sb):
    # numpy broadcasts the stack dimensions of a and b; the gradient of each keeps its shape
    a = np.broadcast_to(well_conditioned(3, seed=30), sa) + uniform(sa, -0.1, 0.1, seed=31)
    b = uniform(sb, seed=32)
    check_jacobian(anp.linalg.solve, a, b, argnums=(0, 1))
    w = weights(np.broadcast_shapes(sa[:-2], sb[:-2]) + (3, 2))
    check_gradient(lambda a, b: anp.sum(w * anp.linalg.solve(a, b)), a, b, argnums=(0, 1))


@pytest.mark.parametrize('inv', [anp.linalg.inv, np.linalg.inv], ids=['anp', 'np'])
def test_inv(inv):
    a = well_conditioned(3, seed=8)
    check_jacobian(inv, a)
    ai = np.linalg.inv(a)
    # d inv(A)[i,j] / dA[k,l] = -inv[i,k] inv[l,j]
    assert_close(nd.jacobian_r(inv)(a), -np.einsum('ik,lj->ijkl', ai, ai), 1e-12, 1e-14)
    w = weights((3, 3))
    check_hessian(lambda a: anp.sum(w * inv(a)), a)


def test_inv_batched():
    a = np.stack([well_conditioned(3, seed=9), well_conditioned(3, seed=10)])
    check_jacobian(anp.linalg.inv, a)


@pytest.mark.parametrize('det', [anp.linalg.det, np.linalg.det], ids=['anp', 'np'])
def test_det(det):
    a = well_conditioned(3, seed=11)
    g = check_gradient(det, a)
    assert_close(g, np.linalg.det(a) * np.linalg.inv(a).T, 1e-12, 1e-14)
    check_hessian(det, a)
    # Hessian of det of a 2x2 [[a, b], [c, d]] is constant: d2/da dd = 1, d2/db dc = -1
    h = nd.hessian(det)(np.array([[1.0, 2.0], [3.0, 4.0]]))
    expected = np.zeros((2, 2, 2, 2))
    expected[0, 0, 1, 1] = expected[1, 1, 0, 0] = 1.0
    expected[0, 1, 1, 0] = expected[1, 0, 0, 1] = -1.0
    assert_close(h, expected, 1e-12, 1e-14)


def test_det_batched():
    a = np.stack([well_conditioned(3, seed=12), well_conditioned(3, seed=13)])
    check_jacobian(anp.linalg.det, a)
    check_hessian(lambda a: anp.sum(anp.linalg.det(a) ** 2), a)


@pytest.mark.parametrize('slogdet', [anp.linalg.slogdet, np.linalg.slogdet], ids=['anp', 'np'])
@pytest.mark.parametrize('negative', [False, True], ids=['det>0', 'det<0'])
def test_slogdet(slogdet, negative):
    a = well_conditioned(3, seed=14)
    if negative:
        a = a[::-1].copy()                 # a row swap flips the sign of the determinant
    sign, logabs = slogdet(a)
    ref_sign, ref_logabs = np.linalg.slogdet(a)
    assert sign == ref_sign and (sign < 0) == negative
    assert logabs == pytest.approx(ref_logabs)
    f = lambda a: slogdet(a)[1]                          # noqa: E731
    g = check_gradient(f, a)
    assert_close(g, np.linalg.inv(a).T, 1e-12, 1e-14)
    check_hessian(f, a)
    # the sign is a constant: it does not carry a perturbation
    s = nd.gradient_r(lambda a: slogdet(a)[0] * slogdet(a)[1])(a)
    assert_close(s, ref_sign * np.linalg.inv(a).T, 1e-12, 1e-14)


# ---------------------------------------------------------------- cholesky

def chol_objective(l):
    w = np.arange(1.0, 10.0).reshape(3, 3)
    return anp.sum(w * l) + anp.sum(anp.sin(l) * l)


def symmetric_fd_gradient(f, a, h=H):
    """FD of f along the symmetric directions (e_i e_j^T + e_j e_i^T) / 2: for a gradient
    G that is symmetric, <G, E_ij> = G[i, j]."""
    g = np.zeros_like(a)
    for i, j in np.ndindex(*a.shape):
        e = np.zeros_like(a)
        e[i, j] += 0.5
        e[j, i] += 0.5
        g[i, j] = (f(a + h * e) - f(a - h * e)) / (2 * h)
    return g


def test_cholesky_value_and_reverse_gradient():
    a = spd(3, seed=15)
    l = anp.linalg.cholesky(a)
    assert_close(l, np.linalg.cholesky(a), 1e-14, 0)
    f = lambda a: chol_objective(anp.linalg.cholesky(a))      # noqa: E731
    expected = symmetric_fd_gradient(f, a)
    assert_close(nd.gradient_r(f)(a), expected, what='gradient_r')
    assert_close(nd.gradient_r(lambda a: chol_objective(np.linalg.cholesky(a)))(a), expected,
                 what='gradient_r via np.linalg.cholesky')


def test_cholesky_forward_along_symmetric_direction():
    a = spd(3, seed=16)
    e = uniform((3, 3), seed=17)
    e = e + e.T
    lf = lambda a: anp.linalg.cholesky(a)                     # noqa: E731
    expected = (np.linalg.cholesky(a + H * e) - np.linalg.cholesky(a - H * e)) / (2 * H)
    _, tangent = nd.jvp(lf, (a,), (e,))
    assert_close(tangent, expected, what='jvp')
    assert np.allclose(np.triu(tangent, 1), 0)               # dL stays lower triangular


def test_cholesky_forward_gradient_agrees_with_reverse():
    # gradient_f seeds the non-symmetric basis directions E_ij; for a function of a
    # symmetric matrix the answer must be the same (symmetric) gradient as gradient_r.
    a = spd(3, seed=18)
    f = lambda a: chol_objective(anp.linalg.cholesky(a))      # noqa: E731
    expected = symmetric_fd_gradient(f, a)
    assert_close(nd.gradient_f(f)(a), expected, what='gradient_f')
    assert_close(nd.jacobian_f(anp.linalg.cholesky)(a), nd.jacobian_r(anp.linalg.cholesky)(a),
                 AD_RTOL, AD_ATOL, 'jacobian_f vs jacobian_r')


def test_cholesky_second_derivative():
    a = spd(3, seed=19)
    f = lambda a: chol_objective(anp.linalg.cholesky(a))      # noqa: E731
    # FD of the (reverse, symmetric) gradient along symmetric directions
    expected = np.zeros((3, 3, 3, 3))
    for i, j in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[i, j] += 0.5
        e[j, i] += 0.5
        expected[:, :, i, j] = (nd.gradient_r(f)(a + H * e) - nd.gradient_r(f)(a - H * e)) / (2 * H)
    assert_close(nd.jacobian_r(nd.gradient_r(f))(a), expected, what='jacobian_r(gradient_r)')
    assert_close(nd.hessian(f)(a), expected, what='hessian (forward over reverse)')


# ---------------------------------------------------------------- stacks of matrices

# A function of each matrix of a stack (det, slogdet, a norm over the matrix axes) has a
# cotangent of shape (k,): the rules must send entry i to matrix i, not broadcast it
# against the matrices' last axis, which fails for k != n and is silently wrong for k == n.
STACK_SIZES = [(3, 3), (2, 3), (4, 3), (2, 2), (1, 2)]
STACK_IDS = [f'k{k}-n{n}' for k, n in STACK_SIZES]


def stack_of_matrices(k, n, seed=0):
    return uniform((k, n, n), seed=seed) * 0.5 + 2.0 * np.eye(n)


def _rhs(shape, seed):
    return uniform(shape, seed=seed)


STACKED_LINALG = {       # name: (f(a, n, k), plain numpy reference)
    'det': (lambda a, n, k: anp.linalg.det(a), lambda a, n, k: np.linalg.det(a)),
    'np.det': (lambda a, n, k: np.linalg.det(a), lambda a, n, k: np.linalg.det(a)),
    'slogdet': (lambda a, n, k: anp.linalg.slogdet(a)[1], lambda a, n, k: np.linalg.slogdet(a)[1]),
    'np.slogdet': (lambda a, n, k: np.linalg.slogdet(a)[1], lambda a, n, k: np.linalg.slogdet(a)[1]),
    'inv': (lambda a, n, k: anp.linalg.inv(a), lambda a, n, k: np.linalg.inv(a)),
    'solve-vector-rhs': (lambda a, n, k: anp.linalg.solve(a, _rhs((n,), 1)),
                         lambda a, n, k: np.linalg.solve(a, _rhs((n,), 1))),
    'solve-matrix-rhs': (lambda a, n, k: anp.linalg.solve(a, _rhs((k, n, 2), 2)),
                         lambda a, n, k: np.linalg.solve(a, _rhs((k, n, 2), 2))),
    'solve-shared-rhs': (lambda a, n, k: np.linalg.solve(a, _rhs((n, 2), 3)),
                         lambda a, n, k: np.linalg.solve(a, _rhs((n, 2), 3))),
    'solve-rhs-stack-of-stacks': (lambda a, n, k: anp.linalg.solve(a, _rhs((2, k, n, 1), 4)),
                                  lambda a, n, k: np.linalg.solve(a, _rhs((2, k, n, 1), 4))),
    # a general function of a (cholesky of a a^T + n I), so plain FD applies
    'cholesky': (lambda a, n, k: anp.linalg.cholesky(a @ anp.swapaxes(a, -1, -2) + n * np.eye(n)),
                 lambda a, n, k: np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + n * np.eye(n))),
    'norm-rows': (lambda a, n, k: anp.linalg.norm(a, axis=-1),
                  lambda a, n, k: np.linalg.norm(a, axis=-1)),
    'norm-matrices': (lambda a, n, k: anp.linalg.norm(a, axis=(-2, -1)),
                      lambda a, n, k: np.linalg.norm(a, axis=(-2, -1))),
    'norm-matrices-keepdims': (lambda a, n, k: np.linalg.norm(a, axis=(1, 2), keepdims=True),
                               lambda a, n, k: np.linalg.norm(a, axis=(1, 2), keepdims=True)),
    'norm-stack-axis': (lambda a, n, k: anp.linalg.norm(a, ord=2, axis=0, keepdims=True),
                        lambda a, n, k: np.linalg.norm(a, ord=2, axis=0, keepdims=True)),
}


@pytest.mark.parametrize('k,n', STACK_SIZES, ids=STACK_IDS)
@pytest.mark.parametrize('name', sorted(STACKED_LINALG))
def test_stacked_linalg_jacobian_and_hessian(name, k, n):
    f, ref = STACKED_LINALG[name]
    a = stack_of_matrices(k, n, seed=k + 10 * n)
    np.testing.assert_allclose(f(a, n, k), ref(a, n, k), rtol=1e-13, atol=1e-15)
    check_jacobian(lambda a: f(a, n, k), a)
    w = weights(np.shape(ref(a, n, k)))
    # Hessian of a scalar function of every output: five pairings (ff fr rf rr, batched fr) vs FD
    check_hessian(lambda a: anp.sum(w * anp.sin(f(a, n, k))), a)


@pytest.mark.parametrize('k,n', STACK_SIZES, ids=STACK_IDS)
def test_stacked_slogdet_and_det_closed_form_gradients(k, n):
    # d log|det A_i| / dA_i = A_i^-T, d det A_i / dA_i = det A_i A_i^-T, weighted per matrix
    a = stack_of_matrices(k, n, seed=5)
    w = np.arange(1.0, k + 1.0)
    inv_t = np.swapaxes(np.linalg.inv(a), -1, -2)
    expected = w[:, None, None] * inv_t
    for grad in (nd.gradient_r, nd.gradient_f):
        assert_close(grad(lambda a: anp.sum(w * anp.linalg.slogdet(a)[1]))(a), expected, 1e-12,
                     1e-14, f'slogdet {grad.__name__}')
        assert_close(grad(lambda a: anp.sum(w * anp.linalg.det(a)))(a),
                     np.linalg.det(a)[:, None, None] * expected, 1e-12, 1e-14, f'det {grad.__name__}')


@pytest.mark.parametrize('k,n', STACK_SIZES, ids=STACK_IDS)
def test_stacked_solve_gradient_wrt_both_arguments(k, n):
    a = stack_of_matrices(k, n, seed=6)
    for b in (_rhs((n,), 7), _rhs((k, n, 2), 8), _rhs((n, 3), 9)):
        w = weights(np.shape(np.linalg.solve(a, b)))
        check_gradient(lambda a, b: anp.sum(w * anp.linalg.solve(a, b) ** 2), a, b, argnums=(0, 1))


# ---------------------------------------------------------------- Hessians: four pairings

def mlp_unpack(theta):
    w1 = anp.reshape(theta[:20], (4, 5))
    b1 = theta[20:24]
    w2 = anp.reshape(theta[24:36], (3, 4))
    b2 = theta[36:39]
    return w1, b1, w2, b2


MLP_X = uniform((6, 5), seed=20)
MLP_Y = np.eye(3)[[0, 2, 1, 1, 0, 2]]


def mlp_loss_batch(theta):
    """5-4-3 tanh MLP, softmax cross-entropy (anp.logsumexp) averaged over 6 examples."""
    w1, b1, w2, b2 = mlp_unpack(theta)
    h = anp.tanh(MLP_X @ w1.T + b1)
    logits = h @ w2.T + b2
    logp = logits - anp.logsumexp(logits, axis=-1, keepdims=True)
    return -anp.mean(anp.sum(MLP_Y * logp, axis=-1))


def mlp_loss_single(theta):
    """The same network on one example, with the max-shifted log-sum-exp written out."""
    w1, b1, w2, b2 = mlp_unpack(theta)
    h = anp.tanh(w1 @ MLP_X[0] + b1)
    logits = w2 @ h + b2
    m = anp.max(logits)
    lse = m + anp.log(anp.sum(anp.exp(logits - m)))
    return lse - logits[0]


def mlp_loss_batch_no_bias_broadcast(theta):
    """Batch MLP written per example (no (6, 4) + (4,) broadcasting)."""
    total = 0.0
    w1, b1, w2, b2 = mlp_unpack(theta)
    for x, y in zip(MLP_X, MLP_Y):
        logits = w2 @ anp.tanh(w1 @ x + b1) + b2
        total = total + anp.logsumexp(logits) - anp.sum(y * logits)
    return total / 6


A34 = uniform((3, 4), seed=21)
B32 = uniform((3, 2), seed=22)
HESSIAN_CASES = {
    'tanh-matmul-vector': (lambda x: anp.sum(anp.tanh(A34 @ x + 0.5) ** 2), (4,)),
    'tanh-matmul-matrix': (lambda x: anp.sum(anp.tanh(A34 @ x) * B32), (4, 2)),
    'quadratic-form': (lambda x: x @ (A34.T @ A34) @ x + anp.sum(x), (4,)),
    'logsumexp': (lambda x: anp.logsumexp(x), (5,)),
    'logsumexp-axis': (lambda x: anp.sum(anp.logsumexp(x, axis=1) * np.array([1.0, 2.0, 3.0])), (3, 4)),
    'logsumexp-manual-shift': (lambda x: anp.max(x) + anp.log(anp.sum(anp.exp(x - anp.max(x)))), (5,)),
    'logsumexp-manual-axis': (lambda x: anp.sum(anp.max(x, axis=0) + anp.log(anp.sum(
        anp.exp(x - anp.max(x, axis=0, keepdims=True)), axis=0))), (3, 4)),
    'softmax-weighted': (lambda x: anp.sum(np.arange(1.0, 6.0) * anp.exp(x) / anp.sum(anp.exp(x))), (5,)),
    'normalise': (lambda x: anp.sum(np.arange(1.0, 6.0) * x / anp.linalg.norm(x)), (5,)),
    'shift-by-sum': (lambda x: anp.sum(anp.exp(x - anp.sum(x))), (3,)),
    'scale-by-entry': (lambda x: anp.sum(anp.sin(x * x[0])), (3,)),
    'mlp-single-example': (mlp_loss_single, (39,)),
    'mlp-batch-per-example': (mlp_loss_batch_no_bias_broadcast, (39,)),
    'mlp-batch': (mlp_loss_batch, (39,)),
}


@pytest.mark.parametrize('name', list(HESSIAN_CASES))
def test_hessian_four_pairings_and_fd(name):
    f, shape = HESSIAN_CASES[name]
    x = uniform(shape, seed=23)
    h = check_hessian(f, x)
    n = int(np.prod(shape))
    hm = h.reshape(n, n)
    assert_close(hm, hm.T, 1e-9, 1e-12, 'symmetric')
    check_gradient(f, x)


@pytest.mark.parametrize('name', list(HESSIAN_CASES))
def test_hvp_matches_hessian_times_vector(name):
    f, shape = HESSIAN_CASES[name]
    x = uniform(shape, seed=24)
    v = uniform(shape, seed=25)
    h = nd.jacobian_r(nd.gradient_r(f))(x)
    expected = np.tensordot(h, v, axes=len(shape))
    assert_close(nd.hvp(f, x, v), expected, 1e-9, 1e-12)


def test_logsumexp_closed_form_hessian():
    x = np.array([0.3, -1.2, 2.0, 0.5, 1000.0 / 1000])
    p = np.exp(x - np.log(np.sum(np.exp(x))))
    expected = np.diag(p) - np.outer(p, p)
    for f in (HESSIAN_CASES['logsumexp'][0], HESSIAN_CASES['logsumexp-manual-shift'][0]):
        assert_close(nd.gradient_r(f)(x), p, 1e-13, 1e-15)
        assert_close(nd.hessian(f)(x), expected, 1e-12, 1e-14)
    # stable for large inputs: the shift keeps exp from overflowing
    big = x + 1000.0
    assert_close(nd.gradient_r(anp.logsumexp)(big), p, 1e-12, 1e-15)
    assert_close(nd.hessian(anp.logsumexp)(big), expected, 1e-10, 1e-13)


def test_mlp_structured_parameters():
    # the same batch loss with parameters in a dict of arrays: gradients keep the structure
    theta = uniform((39,), seed=26)
    w1, b1, w2, b2 = (np.asarray(p) for p in mlp_unpack(theta))
    params = {'w1': w1, 'b1': b1, 'w2': w2, 'b2': b2}

    def loss(p):
        return mlp_loss_batch(anp.concatenate([anp.ravel(p['w1']), p['b1'],
                                               anp.ravel(p['w2']), p['b2']]))
    flat = nd.gradient_r(mlp_loss_batch)(theta)
    g = nd.gradient_r(loss)(params)
    assert {k: v.shape for k, v in g.items()} == {k: v.shape for k, v in params.items()}
    got = np.concatenate([g['w1'].ravel(), g['b1'], g['w2'].ravel(), g['b2']])
    assert_close(got, flat, AD_RTOL, AD_ATOL)
    assert_close(flat, fd_gradient(mlp_loss_batch, (theta,)))


# ---------------------------------------------------------------- nesting

VEC = np.array([0.3, -0.7, 1.1, 0.4])
INNER_GRADIENTS = {'gradient_r': nd.gradient_r, 'gradient_f': nd.gradient_f}


@pytest.mark.parametrize('inner', sorted(INNER_GRADIENTS))
@pytest.mark.parametrize('outer', ['derivative', 'gradient_r', 'gradient_f'])
def test_scalar_derivative_of_array_gradient(outer, inner):
    # d/ds [w . grad_x sum(sin(s x))] = w . (cos(s x) - s x sin(s x))
    x, s0 = VEC, 0.8
    w = weights((4,))
    grad = INNER_GRADIENTS[inner]

    def f(s):
        return anp.sum(w * grad(lambda x: anp.sum(anp.sin(s * x)))(x))
    expected = np.sum(w * (np.cos(s0 * x) - s0 * x * np.sin(s0 * x)))
    assert getattr(nd, outer)(f)(s0) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize('inner', sorted(INNER_GRADIENTS))
def test_derivative_of_array_valued_gradient(inner):
    # derivative returns the whole array d/ds grad_x sum(sin(s x)) = cos(s x) - s x sin(s x)
    x, s0 = VEC, 0.8
    grad = INNER_GRADIENTS[inner]
    got = nd.derivative(lambda s: grad(lambda x: anp.sum(anp.sin(s * x)))(x))(s0)
    assert_close(got, np.cos(s0 * x) - s0 * x * np.sin(s0 * x), 1e-12, 1e-14)
    jac = nd.jacobian_r(lambda s: grad(lambda x: anp.sum(anp.sin(s * x)))(x))(s0)
    assert_close(jac, got, 1e-12, 1e-14)


@pytest.mark.parametrize('inner', ['derivative', 'jvp'])
@pytest.mark.parametrize('outer', ['gradient_r', 'gradient_f'])
def test_array_gradient_of_function_calling_derivative_inside(outer, inner):
    # f(x) = sum(x * d/ds sin(s x) at s0) = sum(x^2 cos(s0 x))
    # grad = 2 x cos(s0 x) - s0 x^2 sin(s0 x)
    x, s0 = VEC, 0.6
    if inner == 'derivative':
        d = lambda x: nd.derivative(lambda s: anp.sin(s * x))(s0)                    # noqa: E731
    else:
        d = lambda x: nd.jvp(lambda s: anp.sin(s * x), (s0,), (1.0,))[1]           # noqa: E731
    g = getattr(nd, outer)(lambda x: anp.sum(x * d(x)))(x)
    assert_close(g, 2 * x * np.cos(s0 * x) - s0 * x * x * np.sin(s0 * x), 1e-12, 1e-14)


NEST = {'derivative': nd.derivative, 'gradient_r': nd.gradient_r, 'gradient_f': nd.gradient_f}


@pytest.mark.parametrize('outer,inner', list(itertools.product(
    ['derivative', 'gradient_r', 'gradient_f'], ['gradient_r', 'gradient_f'])))
def test_perturbation_confusion_with_arrays(outer, inner):
    # d/dx [x * sum(grad_y sum(x * y))] at y = y0: grad_y = x * ones(n), so the bracket is
    # n x^2 and the answer 2 n x.  A confused system also differentiates the inner x.
    n, x0 = 4, 1.5
    y0 = np.linspace(0.1, 0.4, n)
    D, G = NEST[outer], INNER_GRADIENTS[inner]
    got = D(lambda x: x * anp.sum(G(lambda y: anp.sum(x * y))(y0)))(x0)
    assert got == pytest.approx(2 * n * x0, rel=1e-14)
    # d/dx [x * sum(grad_y sum(x + y))] = n (the Siskind-Pearlmutter example on arrays)
    got = D(lambda x: x * anp.sum(G(lambda y: anp.sum(x + y))(y0)))(x0)
    assert got == pytest.approx(n, rel=1e-14)


@pytest.mark.parametrize('outer,inner', list(itertools.product(
    ['gradient_r', 'gradient_f'], ['gradient_r', 'gradient_f', 'derivative'])))
def test_perturbation_confusion_array_outer(outer, inner):
    # outer gradient w.r.t. an array xv; inner derivative w.r.t. a scalar or array y.
    # f(xv) = sum(xv) * [d/dy sum(xv + y)] = sum(xv) * n  ->  grad = n * ones
    xv = VEC
    n = xv.size
    if inner == 'derivative':
        inner_val = lambda xv: anp.sum(nd.derivative(lambda y: anp.sum(xv + y))(0.5)) / 1.0  # noqa: E731
    else:
        inner_val = lambda xv: anp.sum(INNER_GRADIENTS[inner](                             # noqa: E731
            lambda y: anp.sum(xv + y))(np.zeros(n)))
    g = NEST[outer](lambda xv: anp.sum(xv) * inner_val(xv))(xv)
    assert_close(g, np.full(n, float(n)), 0, 0)
    # f(xv) = sum(xv * grad_y sum(xv * y)) = sum(xv^2) -> 2 xv
    if inner != 'derivative':
        g = NEST[outer](lambda xv: anp.sum(xv * INNER_GRADIENTS[inner](
            lambda y: anp.sum(xv * y))(np.ones(n))))(xv)
        assert_close(g, 2 * xv, 1e-15, 0)


@pytest.mark.parametrize('modes', [''.join(p) for p in itertools.product('fr', repeat=3)])
def test_third_derivative_through_array_code(modes):
    # d^3/ds^3 sum(exp(s a)) = sum(a^3 exp(s a)), each level in its own mode
    a = np.array([0.5, -1.0, 1.5])
    s0 = 0.3
    op = {'f': nd.derivative, 'r': nd.gradient_r}
    d1, d2, d3 = (op[m] for m in modes)
    got = d1(lambda s: d2(lambda t: d3(lambda u: anp.sum(anp.exp(u * a)))(t))(s))(s0)
    assert got == pytest.approx(np.sum(a ** 3 * np.exp(s0 * a)), rel=1e-12)


def test_mixed_partial_array_arguments_all_pairings():
    # d/dy of grad_x f(x, y), f = sum(tanh(x[:, None] * y[None, :]))
    x, y = VEC[:3], np.array([0.2, -0.5])

    def f(x, y):
        return anp.sum(anp.tanh(x[:, None] * y[None, :]) ** 2)
    expected = fd_jacobian(lambda y: nd.gradient_r(f)(x, y), (y,))
    for jac, grad in itertools.product((nd.jacobian_f, nd.jacobian_r), (nd.gradient_r, nd.gradient_f)):
        got = jac(grad(f, argnums=0), argnums=1)(x, y)
        assert_close(got, expected, what=f'{jac.__name__}({grad.__name__})')


# ---------------------------------------------------------------- errors

UNSUPPORTED = {
    'polyval': (lambda x: np.polyval(x, 0.5), 'polyval'),
    'fft': (lambda x: np.fft.fft(x), 'fft'),
    'spacing (ufunc)': (lambda x: np.spacing(x), 'spacing'),
    'add.accumulate': (lambda x: np.add.accumulate(x), 'accumulate'),
    'trapezoid': (lambda x: np.trapezoid(x) if hasattr(np, 'trapezoid') else np.trapz(x), 'trap'),
}


@pytest.mark.parametrize('name', sorted(UNSUPPORTED))
@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f'])
def test_unsupported_numpy_function_raises_type_error_naming_it(name, op):
    f, fname = UNSUPPORTED[name]
    with pytest.raises(TypeError, match=fname):
        getattr(nd, op)(lambda x: anp.sum(f(x)))(VEC)


def test_ufunc_out_argument_refused():
    buf = np.zeros(4)
    with pytest.raises(TypeError, match='out'):
        nd.gradient_r(lambda x: anp.sum(np.sin(x, out=buf)))(VEC)


@pytest.mark.parametrize('shape', [(3,), (2, 3)])
@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f'])
def test_gradient_of_array_output_raises_non_scalar_output_error(op, shape):
    x = uniform(shape, seed=27)
    with pytest.raises(nd.NonScalarOutputError, match=repr(shape).replace('(', r'\(').replace(')', r'\)')):
        getattr(nd, op)(anp.sin)(x)
    with pytest.raises(nd.NonScalarOutputError):
        getattr(nd, op)(lambda x: x * 2.0)(x)


def test_derivative_of_array_argument_is_refused():
    with pytest.raises(nd.InvalidInputError):
        nd.derivative(anp.sin)(VEC)


# ---------------------------------------------------------------- third derivatives

M3 = uniform((3, 3), seed=40)
THIRD_ORDER_CASES = {
    'tanh-matmul': lambda x: anp.sum(anp.tanh(M3 @ x) ** 3),
    'quadratic-times-sum': lambda x: (x @ M3 @ x) * anp.sum(x),
    'logsumexp': lambda x: anp.logsumexp(x * np.array([1.0, 2.0, -1.0])),
    'advanced-index': lambda x: anp.sum(anp.outer(x, x)[np.array([0, 2]), :][:, np.array([1, 1, 0])] ** 2),
    'einsum-broadcast': lambda x: anp.sum(anp.sin(anp.einsum('i,j->ij', x, x * x) - anp.sum(x))),
    'inv': lambda x: anp.sum(anp.linalg.inv(np.eye(3) * 2 + anp.outer(x, x)) * M3),
}


@pytest.mark.parametrize('name', sorted(THIRD_ORDER_CASES))
def test_third_derivative_tensor_all_batched_pairings(name):
    # three nested batched runs: the tangents of each run are primals of the next one
    f = THIRD_ORDER_CASES[name]
    x = np.array([0.4, -0.3, 0.7])
    expected = fd_jacobian(nd.jacobian_r(nd.gradient_r(f)), (x,))
    assert expected.shape == (3, 3, 3)
    results = {
        'f(f(r))': nd.jacobian_f(nd.hessian(f))(x),
        'f(f(f))': nd.jacobian_f(nd.jacobian_f(nd.gradient_f(f)))(x),
        'r(r(r))': nd.jacobian_r(nd.jacobian_r(nd.gradient_r(f)))(x),
        'r(f(r))': nd.jacobian_r(nd.jacobian_f(nd.gradient_r(f)))(x),
        'f(r(f))': nd.jacobian_f(nd.jacobian_r(nd.gradient_f(f)))(x),
    }
    for k, t in results.items():
        assert_close(t, expected, 1e-5, 1e-6, k)
        assert_close(t, results['r(r(r))'], 1e-9, 1e-11, f'{k} vs r(r(r))')
