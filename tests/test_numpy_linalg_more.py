"""Linear algebra and contractions of nestad.numpy: eigh, eigvalsh, eig, eigvals, svd,
svdvals, pinv, matrix_power, norm (every ord), matrix_norm, vector_norm, einsum in every
form, dot of N-D operands, tensordot, kron, cross, outer.

* values: numpy's, bit for bit (shape, dtype, values), on plain inputs and as the primal of a
  derivative run, through nestad.numpy and through numpy's own function on a nestad value;
* derivatives: check_rules (gradient_r, batched gradient_f and one jvp per direction
  against each other and central differences; second order in all four pairings) on single
  matrices and on stacks whose size equals and differs from the matrix size;
* closed forms, staged == eager, repeated eigenvalues and singular values, refusals.
"""
import warnings

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.extend import check_rules

R = np.random.default_rng(2024)


def rand(*shape):
    return R.uniform(-1.0, 1.0, size=shape)


def spread(*shape):
    """Matrices with real eigenvalues (of the whole matrix and of its lower and upper
    triangles) and singular values well apart: Gershgorin discs that do not meet."""
    n = shape[-1]
    return 0.3 * R.uniform(-1.0, 1.0, size=shape) + np.diag(1.0 + 2.0 * np.arange(n)) \
        * R.choice([-1.0, 1.0], size=n)


def joined(parts):
    """The factors of a decomposition as one vector (check_rules takes one array)."""
    return anp.concatenate([anp.ravel(p) for p in parts])


def assert_same(actual, expected, what=''):
    a, e = np.asarray(nd.primal_value(actual)), np.asarray(expected)
    assert a.shape == e.shape and a.dtype == e.dtype, (what, a.shape, e.shape, a.dtype, e.dtype)
    assert np.array_equal(a, e, equal_nan=True), (what, a, e)


def primal_of_run(f, *args):
    """f(*args) computed inside a gradient_r run (the primal of a derivative run)."""
    out = []

    def scalar(*xs):
        y = f(*xs)
        out.append(y)
        parts = y if isinstance(y, tuple) else (y,)
        return sum(anp.sum(p) for p in parts)
    nd.gradient_r(scalar, argnums=tuple(range(len(args))))(*args)
    y = out[0]
    return type(y)(*(nd.primal_value(p) for p in y)) if isinstance(y, tuple) else nd.primal_value(y)


# ---------------------------------------------------------------- values

SQUARE, STACK = spread(4, 4), spread(3, 4, 4)
TALL, WIDE = rand(5, 3), rand(2, 3, 5)
VALUE_CASES = {   # name: (nestad's function, numpy's, arguments)
    'eigh': (anp.linalg.eigh, np.linalg.eigh, (STACK,)),
    'eigh U': (lambda a: anp.linalg.eigh(a, 'U'), lambda a: np.linalg.eigh(a, 'U'), (SQUARE,)),
    'eigvalsh': (anp.linalg.eigvalsh, np.linalg.eigvalsh, (STACK,)),
    'eig': (anp.linalg.eig, np.linalg.eig, (STACK,)),
    'eigvals': (anp.linalg.eigvals, np.linalg.eigvals, (SQUARE,)),
    'svd reduced tall': (lambda a: anp.linalg.svd(a, full_matrices=False),
                         lambda a: np.linalg.svd(a, full_matrices=False), (TALL,)),
    'svd reduced wide stack': (lambda a: anp.linalg.svd(a, False), lambda a: np.linalg.svd(a, False), (WIDE,)),
    'svd square': (anp.linalg.svd, np.linalg.svd, (STACK,)),
    'svd hermitian': (lambda a: anp.linalg.svd(a, hermitian=True),
                      lambda a: np.linalg.svd(a, hermitian=True), (SQUARE,)),
    'svd values': (lambda a: anp.linalg.svd(a, compute_uv=False),
                   lambda a: np.linalg.svd(a, compute_uv=False), (WIDE,)),
    'pinv': (anp.linalg.pinv, np.linalg.pinv, (WIDE,)),
    'pinv rtol': (lambda a: anp.linalg.pinv(a, rtol=1e-3), lambda a: np.linalg.pinv(a, rtol=1e-3), (TALL,)),
    'pinv hermitian': (lambda a: anp.linalg.pinv(a, hermitian=True),
                       lambda a: np.linalg.pinv(a, hermitian=True), (SQUARE,)),
    'matrix_power 5': (lambda a: anp.linalg.matrix_power(a, 5), lambda a: np.linalg.matrix_power(a, 5), (STACK,)),
    'matrix_power -3': (lambda a: anp.linalg.matrix_power(a, -3), lambda a: np.linalg.matrix_power(a, -3),
                        (SQUARE,)),
    'matrix_norm': (lambda a: anp.linalg.matrix_norm(a, ord='nuc'),
                    lambda a: np.linalg.matrix_norm(a, ord='nuc'), (STACK,)),
    'vector_norm': (lambda a: anp.linalg.vector_norm(a, axis=(0, 2), ord=3, keepdims=True),
                    lambda a: np.linalg.vector_norm(a, axis=(0, 2), ord=3, keepdims=True), (STACK,)),
    'vector_norm all': (anp.linalg.vector_norm, np.linalg.vector_norm, (STACK,)),
    'svdvals': (anp.linalg.svdvals, np.linalg.svdvals, (WIDE,)),
    'einsum ellipsis': (lambda a, b: anp.einsum('...ij,...jk->...ik', a, b),
                        lambda a, b: np.einsum('...ij,...jk->...ik', a, b), (STACK, rand(4, 2))),
    'einsum implicit': (lambda a, b: anp.einsum('ij,k', a, b), lambda a, b: np.einsum('ij,k', a, b),
                        (TALL, rand(2))),
    'einsum trace': (lambda a: anp.einsum('ii', a), lambda a: np.einsum('ii', a), (SQUARE,)),
    'einsum diagonal stack': (lambda a: anp.einsum('...ii->...i', a),
                              lambda a: np.einsum('...ii->...i', a), (STACK,)),
    'einsum three': (lambda a, b, c: anp.einsum('ijk,lji,lli->lki', a, b, c),
                     lambda a, b, c: np.einsum('ijk,lji,lli->lki', a, b, c),
                     (rand(3, 4, 4), rand(4, 4, 3), rand(4, 4, 3))),
    'einsum optimize': (lambda a, b, c: anp.einsum('ij,jk,kl->il', a, b, c, optimize=True),
                        lambda a, b, c: np.einsum('ij,jk,kl->il', a, b, c, optimize=True),
                        (rand(2, 3), rand(3, 4), rand(4, 2))),
    'einsum sublists': (lambda a, b: anp.einsum(a, [Ellipsis, 0, 1], b, [1, 2], [Ellipsis, 0, 2]),
                        lambda a, b: np.einsum(a, [Ellipsis, 0, 1], b, [1, 2], [Ellipsis, 0, 2]),
                        (STACK, rand(4, 3))),
    'einsum broadcast size 1': (lambda a, b: anp.einsum('ij,jk->ik', a, b),
                                lambda a, b: np.einsum('ij,jk->ik', a, b), (rand(2, 1), rand(3, 4))),
    'dot 3-d 2-d': (anp.dot, np.dot, (rand(2, 3, 4), rand(4, 5))),
    'dot 2-d 3-d': (anp.dot, np.dot, (rand(2, 4), rand(3, 4, 5))),
    'dot 1-d 3-d': (anp.dot, np.dot, (rand(4), rand(3, 4, 5))),
    'dot 3-d 1-d': (anp.dot, np.dot, (rand(2, 3, 4), rand(4))),
    'dot signed zero': (anp.dot, np.dot, (np.array([[-0.0]]), np.array([[[1.0]]]))),
    'tensordot int': (lambda a, b: anp.tensordot(a, b, 1), lambda a, b: np.tensordot(a, b, 1),
                      (rand(2, 3), rand(3, 4))),
    'tensordot pairs': (lambda a, b: anp.tensordot(a, b, axes=[(1, 0), (2, 1)]),
                        lambda a, b: np.tensordot(a, b, axes=[(1, 0), (2, 1)]),
                        (rand(2, 3, 4), rand(2, 2, 3, 4))),
    'tensordot 0': (lambda a, b: anp.tensordot(a, b, 0), lambda a, b: np.tensordot(a, b, 0),
                    (rand(4), np.float64(1.5))),
    'kron': (anp.kron, np.kron, (rand(2, 3), rand(3, 2))),
    'kron ranks': (anp.kron, np.kron, (rand(3), rand(2, 2, 1))),
    'kron int': (anp.kron, np.kron, (np.arange(4).reshape(2, 2), np.arange(3))),
    'cross': (anp.cross, np.cross, (rand(4, 3), rand(3))),
    'cross axes': (lambda a, b: anp.cross(a, b, axisa=0, axisb=1, axisc=0),
                   lambda a, b: np.cross(a, b, axisa=0, axisb=1, axisc=0), (rand(3, 3), rand(3, 3))),
    'cross axis': (lambda a, b: anp.cross(a, b, axis=0), lambda a, b: np.cross(a, b, axis=0),
                   (rand(3, 2), rand(3, 2))),
    'outer n-d': (anp.outer, np.outer, (rand(2, 3), rand(3, 1, 2))),
    'matmul vector stack': (anp.matmul, np.matmul, (rand(3), rand(2, 3, 4))),
    'matmul broadcast': (anp.matmul, np.matmul, (rand(1, 2, 2), rand(3, 2, 1))),
    'multi_dot': (lambda *a: anp.linalg.multi_dot(a), lambda *a: np.linalg.multi_dot(a),
                  (rand(5, 3), rand(3, 4), rand(4, 2), rand(2, 6), rand(6))),
    'multi_dot three': (lambda *a: anp.linalg.multi_dot(a), lambda *a: np.linalg.multi_dot(a),
                        (rand(3), rand(3, 10), rand(10, 2))),
    'linalg.outer': (anp.linalg.outer, np.linalg.outer, (rand(3), rand(2))),
    'linalg.cross': (anp.linalg.cross, np.linalg.cross, (rand(2, 3), rand(3))),
    'linalg.trace': (lambda a: anp.linalg.trace(a, offset=1), lambda a: np.linalg.trace(a, offset=1),
                     (STACK,)),
    'linalg.diagonal': (anp.linalg.diagonal, np.linalg.diagonal, (STACK,)),
    'linalg.matrix_transpose': (anp.linalg.matrix_transpose, np.linalg.matrix_transpose, (STACK,)),
    'linalg.tensordot': (lambda a, b: anp.linalg.tensordot(a, b, axes=1),
                         lambda a, b: np.linalg.tensordot(a, b, axes=1), (STACK, rand(4))),
    'linalg.matmul': (anp.linalg.matmul, np.linalg.matmul, (STACK, rand(4, 2))),
}
if hasattr(np, 'vecdot'):
    VALUE_CASES['vecdot'] = (lambda a, b: anp.vecdot(a, b, axis=0), lambda a, b: np.vecdot(a, b, axis=0),
                             (rand(3, 2), rand(3, 1)))
    VALUE_CASES['linalg.vecdot'] = (anp.linalg.vecdot, np.linalg.vecdot, (rand(4, 1, 3), rand(2, 3)))


@pytest.mark.parametrize('name', sorted(VALUE_CASES))
def test_values_are_numpys(name):
    mine, theirs, args = VALUE_CASES[name]
    expected = theirs(*args)
    for got in (mine(*args), primal_of_run(mine, *[np.asarray(a, dtype=float) for a in args])
                if all(np.asarray(a).dtype.kind == 'f' for a in args) else mine(*args)):
        if isinstance(expected, tuple):
            assert type(got) is type(expected), (type(got), type(expected))
            for g, e in zip(got, expected):
                assert_same(g, e, name)
        else:
            assert_same(got, expected, name)


NORM_ORDS = {1: [None, 2, 1, -1, 0, np.inf, -np.inf, 3, 0.5, -2, 2.5],
             2: [None, 'fro', 'f', 'nuc', 1, -1, 2, -2, np.inf, -np.inf]}


@pytest.mark.parametrize('axis', [None, 0, -1, (0, 1), (2, 0), (-1, -2)])
@pytest.mark.parametrize('keepdims', [False, True])
def test_norm_values_for_every_ord(axis, keepdims):
    x = rand(3, 4, 5)
    if axis is None:
        cases = [(x[0], o) for o in NORM_ORDS[2]] + [(x[0, 0], o) for o in NORM_ORDS[1]] + [(x, None)]
    else:
        cases = [(x, o) for o in NORM_ORDS[1 if isinstance(axis, int) else 2]]
    for a, o in cases:
        expected = np.linalg.norm(a, o, axis, keepdims)
        assert_same(anp.linalg.norm(a, o, axis, keepdims), expected, (o, axis))
        assert_same(primal_of_run(lambda a: anp.linalg.norm(a, o, axis, keepdims), a), expected, (o, axis))
        if o != 0:
            assert_same(np.linalg.norm(nd.jvp(lambda a: a, (a,), (a,))[0], o, axis, keepdims), expected)


def test_norm_refuses_what_numpy_refuses():
    for a, o, axis in [(rand(3), 'fro', None), (rand(3, 3), 3, None), (rand(3, 3), 'nuc', 0),
                       (rand(2, 2, 2), None, (0, 1, 2)), (rand(2, 2), 1, (0, 0))]:
        with pytest.raises(ValueError):
            np.linalg.norm(a, o, axis)
        with pytest.raises(ValueError):
            nd.gradient_r(lambda a: anp.sum(anp.linalg.norm(a, o, axis)))(a)


def test_numpys_own_functions_on_nestad_values():
    a = spread(3, 3)
    for name, args in [('eigh', ()), ('eigvalsh', ()), ('eig', ()), ('eigvals', ()),
                       ('svd', (False,)), ('pinv', ()), ('matrix_power', (3,)), ('svdvals', ()),
                       ('matrix_norm', ()), ('vector_norm', ())]:
        f = getattr(np.linalg, name)
        g = getattr(anp.linalg, name)
        res = nd.jvp(lambda a: joined(f(a, *args)) if isinstance(f(a, *args), tuple)
                     else f(a, *args), (a,), (a,))
        ref = nd.jvp(lambda a: joined(g(a, *args)) if isinstance(g(a, *args), tuple)
                     else g(a, *args), (a,), (a,))
        np.testing.assert_array_equal(res[0], ref[0])
        np.testing.assert_array_equal(res[1], ref[1])
    for f, args in [(np.tensordot, (rand(3, 2), 1)), (np.kron, (rand(2),)), (np.cross, (rand(3),)),
                    (np.einsum, ()), (np.dot, (rand(2, 3, 4),))]:
        if f is np.einsum:
            g = nd.gradient_r(lambda a: np.sum(np.einsum('ij,jk,kl', a, a, a)))(a)
            assert np.allclose(g, nd.gradient_r(lambda a: anp.sum(a @ a @ a))(a))
            continue
        g = nd.gradient_r(lambda a: np.sum(f(a, *args) ** 2))(a)
        h = nd.gradient_r(lambda a: anp.sum(getattr(anp, f.__name__)(a, *args) ** 2))(a)
        np.testing.assert_array_equal(g, h)


# ---------------------------------------------------------------- rules, to second order

def eigh_fn(uplo):
    return lambda a: joined(anp.linalg.eigh(a, uplo))


RULE_CASES = {   # name: (function, arguments); every argument is differentiated
    'eigh': (eigh_fn('L'), (spread(3, 3),)),
    'eigh U': (eigh_fn('U'), (spread(3, 3),)),
    'eigh stack k==n': (eigh_fn('L'), (spread(3, 3, 3),)),
    'eigh stack k!=n': (eigh_fn('U'), (spread(2, 3, 3),)),
    'eigvalsh stack k==n': (anp.linalg.eigvalsh, (spread(3, 3, 3),)),
    'eigvalsh U stack k!=n': (lambda a: anp.linalg.eigvalsh(a, UPLO='U'), (spread(4, 3, 3),)),
    'eig': (lambda a: joined(anp.linalg.eig(a)), (spread(3, 3),)),
    'eig stack k==n': (lambda a: joined(anp.linalg.eig(a)), (spread(3, 3, 3),)),
    'eig stack k!=n': (lambda a: joined(anp.linalg.eig(a)), (spread(2, 3, 3),)),
    'eigvals stack': (anp.linalg.eigvals, (spread(2, 3, 3),)),
    'svd square': (lambda a: joined(anp.linalg.svd(a)), (spread(3, 3),)),
    'svd tall': (lambda a: joined(anp.linalg.svd(a, full_matrices=False)), (rand(4, 2),)),
    'svd wide stack k==n': (lambda a: joined(anp.linalg.svd(a, full_matrices=False)), (rand(3, 2, 3),)),
    'svd tall stack k!=n': (lambda a: joined(anp.linalg.svd(a, full_matrices=False)), (rand(2, 3, 2),)),
    'svd hermitian': (lambda a: joined(anp.linalg.svd(a, hermitian=True)), (spread(3, 3),)),
    'svd values stack': (lambda a: anp.linalg.svd(a, compute_uv=False), (rand(2, 3, 2),)),
    'svdvals hermitian': (lambda a: anp.linalg.svd(a, compute_uv=False, hermitian=True), (spread(3, 3),)),
    'pinv wide': (anp.linalg.pinv, (rand(2, 3),)),
    'pinv stack k==n': (anp.linalg.pinv, (rand(3, 2, 3),)),
    'pinv stack k!=n': (anp.linalg.pinv, (rand(2, 3, 2),)),
    'pinv hermitian': (lambda a: anp.linalg.pinv(a, hermitian=True), (spread(3, 3),)),
    'pinv of fixed rank': (lambda x: anp.linalg.pinv(x.T @ x), (rand(2, 3),)),
    'matrix_power 4': (lambda a: anp.linalg.matrix_power(a, 4), (spread(2, 2, 2) / 3,)),
    'matrix_power -2': (lambda a: anp.linalg.matrix_power(a, -2), (spread(3, 2, 2),)),
    'norm nuc stack': (lambda a: anp.linalg.norm(a, 'nuc', axis=(1, 2)), (rand(3, 3, 2),)),
    'norm 2 and -2': (lambda a: anp.stack([anp.linalg.norm(a, 2), anp.linalg.norm(a, -2)]),
                      (rand(3, 2),)),
    'norm 1 inf': (lambda a: anp.stack([anp.linalg.norm(a, o) for o in (1, -1, np.inf, -np.inf)]),
                   (rand(3, 4),)),
    'norm p': (lambda a: anp.stack([anp.linalg.norm(a, p) for p in (3, 0.5, -2, np.inf, 1)]),
               (rand(5),)),
    'norm axis keepdims': (lambda a: anp.linalg.norm(a, 3, axis=1, keepdims=True), (rand(2, 3, 2),)),
    'vector_norm tuple axis': (lambda a: anp.linalg.vector_norm(a, axis=(0, 2), ord=4), (rand(2, 3, 2),)),
    'einsum ellipsis': (lambda a, b: anp.einsum('...ij,...jk->...ik', a, b), (rand(2, 2, 3), rand(3, 2))),
    'einsum trace and diagonal': (lambda a: anp.stack([anp.einsum('ii', a), anp.einsum('ii->i', a)[0]]),
                                  (rand(3, 3),)),
    'einsum three operands': (lambda a, b, c: anp.einsum('ijk,lji,lli->lki', a, b, c),
                              (rand(2, 3, 3), rand(3, 3, 2), rand(3, 3, 2))),
    'einsum implicit': (lambda a, b: anp.einsum('ij,k', a, b), (rand(2, 3), rand(2))),
    'einsum broadcast': (lambda a, b: anp.einsum('ij,jk->ik', a, b), (rand(2, 1), rand(3, 2))),
    'einsum sum inside one operand': (lambda a, b: anp.einsum('ijk,k->i', a, b), (rand(2, 3, 2), rand(2))),
    'einsum sublists': (lambda a, b: anp.einsum(a, [0, 1], b, [1, 0]), (rand(2, 3), rand(3, 2))),
    'dot n-d': (anp.dot, (rand(2, 2, 3), rand(2, 3, 2))),
    'dot 1-d n-d': (anp.dot, (rand(3), rand(2, 3, 2))),
    'tensordot': (lambda a, b: anp.tensordot(a, b, axes=([0, 2], [1, 0])), (rand(2, 3, 2), rand(2, 2, 3))),
    'kron': (anp.kron, (rand(2, 2), rand(3))),
    'cross': (lambda a, b: anp.cross(a, b, axisa=0, axisc=0), (rand(3, 2), rand(2, 3))),
    'cross 2-d vectors': (anp.cross, (rand(2, 2), rand(2, 3))),
    'outer': (anp.outer, (rand(2, 2), rand(3))),
    'multi_dot': (lambda a, b, c, d: anp.linalg.multi_dot([a, b, c, d]),
                  (rand(3), rand(3, 2), rand(2, 4), rand(4, 2))),
    'vecdot broadcast': (lambda a, b: anp.linalg.vecdot(a, b, axis=0), (rand(3, 1, 2), rand(3, 2))),
    'array-API names': (lambda a, b: anp.stack([anp.linalg.trace(anp.linalg.matmul(a, b)),
                                                anp.sum(anp.linalg.diagonal(a) * anp.linalg.cross(a, b)),
                                                anp.sum(anp.linalg.matrix_transpose(a) @ b)]),
                        (rand(3, 3), rand(3, 3))),
}


@pytest.mark.parametrize('name', sorted(RULE_CASES))
def test_rules_to_second_order(name):
    f, args = RULE_CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)     # cross of 2-element vectors
        check_rules(f, *args, order=2)


# ---------------------------------------------------------------- closed forms

def test_eigenvalue_derivatives_closed_form():
    a = spread(4, 4)
    s = np.tril(a) + np.tril(a, -1).T            # the symmetric matrix eigh reads
    w, v = np.linalg.eigh(s)
    t = rand(4, 4)
    ts = np.tril(t) + np.tril(t, -1).T
    dw = nd.jvp(anp.linalg.eigvalsh, (a,), (t,))[1]
    np.testing.assert_allclose(dw, np.diag(v.T @ ts @ v), rtol=1e-12, atol=1e-14)
    # the gradient of the largest eigenvalue: v v^T on the lower triangle (doubled off the diagonal)
    g = nd.gradient_r(lambda a: anp.linalg.eigh(a)[0][-1])(a)
    vv = np.outer(v[:, -1], v[:, -1])
    np.testing.assert_allclose(g, np.tril(2 * vv) - np.diag(np.diag(vv)), rtol=1e-12, atol=1e-14)


def test_nuclear_norm_gradient_is_u_vt():
    a = rand(4, 3)
    u, _, vt = np.linalg.svd(a, full_matrices=False)
    for op in (nd.gradient_r, nd.gradient_f):
        np.testing.assert_allclose(op(lambda a: anp.linalg.norm(a, 'nuc'))(a), u @ vt, rtol=1e-12, atol=1e-14)


def test_pinv_of_an_invertible_matrix_is_inv():
    a, t = spread(3, 3), rand(3, 3)
    ai = np.linalg.inv(a)
    np.testing.assert_allclose(nd.jvp(anp.linalg.pinv, (a,), (t,))[1], -ai @ t @ ai, rtol=1e-10, atol=1e-12)


def test_eig_reconstructs_its_derivative():
    # A V = V diag(w) differentiated: dA V + A dV = dV diag(w) + V diag(dw)
    a, t = spread(3, 3), rand(3, 3)
    (w, v), (dw, dv) = nd.jvp(anp.linalg.eig, (a,), (t,))
    np.testing.assert_allclose(t @ v + a @ dv, dv * w + v * dw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.sum(v * dv, axis=0), 0.0, atol=1e-12)      # unit columns


def test_svd_reconstructs_its_derivative():
    a, t = rand(4, 3), rand(4, 3)
    (u, s, vt), (du, ds, dvt) = nd.jvp(lambda a: anp.linalg.svd(a, full_matrices=False), (a,), (t,))
    np.testing.assert_allclose((du * s) @ vt + (u * ds) @ vt + (u * s) @ dvt, t, rtol=1e-10, atol=1e-12)


def test_kron_and_cross_closed_forms():
    a, b = rand(2, 2), rand(3, 3)
    np.testing.assert_allclose(nd.jacobian_r(lambda a: anp.kron(a, b))(a).reshape(6, 6, 4),
                               np.stack([np.kron(e.reshape(2, 2), b) for e in np.eye(4)], -1), atol=0)
    x, y = rand(3), rand(3)
    np.testing.assert_allclose(nd.gradient_r(lambda x: anp.cross(x, y) @ np.ones(3))(x),
                               np.cross(y, np.ones(3)), rtol=1e-14)


# ---------------------------------------------------------------- staged == eager

STAGED = {
    'eigh': (lambda a: anp.sum(anp.linalg.eigh(a)[0] ** 3) + anp.sum(anp.linalg.eigh(a)[1][:, 0] ** 4),
             spread(3, 3)),
    'svd': (lambda a: anp.sum(anp.linalg.svd(a, full_matrices=False)[1] ** 3)
            + anp.sum(anp.linalg.svd(a, full_matrices=False)[0][:, 0] ** 3), rand(4, 3)),
    'eig': (lambda a: anp.sum(anp.linalg.eig(a)[1] ** 3), spread(3, 3)),
    'pinv and norms': (lambda a: anp.sum(anp.linalg.pinv(a) ** 2) + anp.linalg.norm(a, 'nuc')
                       + anp.linalg.norm(a, np.inf), rand(3, 2)),
    'einsum': (lambda a: anp.sum(anp.einsum('ij,jk,...k->...i', a, a.T, a.T) ** 2)
               + anp.einsum('ii', a @ a.T), rand(3, 2)),
    'tensordot kron cross': (lambda a: anp.sum(anp.tensordot(a, a, 2) * anp.kron(a, a))
                             + anp.sum(anp.cross(a, a[::-1])), rand(2, 3)),
}


@pytest.mark.parametrize('name', sorted(STAGED))
@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f', 'hessian'])
def test_staged_equals_eager(name, op):
    f, x = STAGED[name]
    g = getattr(nd, op)(f)
    staged = nd.stage(g)
    for y in (x, x * 1.01):
        np.testing.assert_allclose(staged(y), g(y), rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------- repeated values, refusals

def test_repeated_eigenvalues_have_the_derivative_of_their_mean():
    d = np.diag([1.0, 1.0, 2.0])
    for op in (nd.gradient_r, nd.gradient_f):
        # a function of the eigenvalues that is not symmetric in the repeated pair
        g = op(lambda a: anp.linalg.eigvalsh(a)[0])(d)
        np.testing.assert_array_equal(g, np.diag([0.5, 0.5, 0.0]))
        g = op(lambda a: anp.linalg.eigh(a)[0][1])(d)
        np.testing.assert_array_equal(g, np.diag([0.5, 0.5, 0.0]))
        # a symmetric one: exact (d/dA of trace(A^2) on the lower triangle)
        g = op(lambda a: anp.sum(anp.linalg.eigh(a)[0] ** 2))(np.eye(3))
        np.testing.assert_allclose(g, 2 * np.eye(3), rtol=1e-14)


def test_repeated_eigenvalues_leave_their_vectors_without_derivative():
    d = np.diag([1.0, 1.0, 2.0])
    with pytest.raises(nd.InvalidInputError, match='repeated eigenvalue'):
        nd.gradient_r(lambda a: anp.sum(anp.linalg.eigh(a)[1][:, 0]))(d)
    # the vector of the distinct eigenvalue keeps its derivative
    g = nd.gradient_r(lambda a: anp.linalg.eigh(a)[1][2, 2])(d + 0.1 * np.eye(3)[[2, 0, 1]])
    assert np.all(np.isfinite(g))
    # forward mode: nan in the tangents of the vectors the direction mixes, not elsewhere
    t = np.zeros((3, 3))
    t[1, 0] = t[0, 1] = 1.0
    (w, v), (dw, dv) = nd.jvp(anp.linalg.eigh, (d,), (t,))
    assert np.all(np.isnan(dv[:, :2])) and np.all(dv[:, 2] == 0.0) and np.all(np.isfinite(dw))
    (w, v), (dw, dv) = nd.jvp(anp.linalg.eigh, (d,), (np.diag([1.0, 2.0, 3.0]),))
    np.testing.assert_array_equal(dw, [1.5, 1.5, 3.0])     # the repeated pair's mean
    assert np.all(np.isfinite(dv))


def test_zero_and_repeated_singular_values():
    a = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]])        # rank 1: one zero singular value
    for op in (nd.gradient_r, nd.gradient_f):
        np.testing.assert_array_equal(op(lambda a: anp.linalg.norm(a, 'nuc'))(a),
                                      [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
        np.testing.assert_array_equal(op(lambda a: anp.linalg.svd(a, compute_uv=False)[1])(a), 0 * a)
    with pytest.raises(nd.InvalidInputError, match='zero singular value'):
        nd.gradient_r(lambda a: anp.sum(anp.linalg.svd(a, full_matrices=False)[0]))(a)
    with pytest.raises(nd.InvalidInputError, match='repeated eigenvalue'):
        nd.gradient_r(lambda a: anp.sum(anp.linalg.svd(a)[0]))(np.eye(2))
    np.testing.assert_allclose(nd.gradient_r(lambda a: anp.sum(anp.linalg.svd(a)[1]))(np.eye(2)),
                               np.eye(2))


def test_eig_refuses_complex_and_repeated_eigenvalues():
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])
    for f in (lambda a: anp.sum(anp.linalg.eig(a)[0]), lambda a: anp.sum(anp.linalg.eigvals(a))):
        for op in (nd.gradient_r, nd.gradient_f):
            with pytest.raises(nd.InvalidInputError, match='complex eigenvalues'):
                op(f)(rotation)
            with pytest.raises(nd.InvalidInputError, match='repeated eigenvalue'):
                op(f)(np.eye(2))
    assert np.iscomplexobj(anp.linalg.eig(rotation)[0])        # plain arrays: numpy's answer


def test_svd_full_matrices_of_non_square_is_refused():
    with pytest.raises(nd.InvalidInputError, match='full_matrices=False'):
        nd.gradient_r(lambda a: anp.sum(anp.linalg.svd(a)[0]))(rand(3, 2))
    assert nd.gradient_r(lambda a: anp.sum(anp.linalg.svd(a)[1]))(spread(3, 3)).shape == (3, 3)


def test_einsum_errors_are_numpys():
    a = rand(2, 3)
    for spec, ops in [('...i->', (a,)), ('ij->ii', (a,)), ('ijk', (a,)), ('ij,jk', (a,)),
                      ('ii', (a,)), ('ij,ij->', (a, rand(3, 2)))]:
        with pytest.raises(ValueError):
            np.einsum(spec, *ops)
        with pytest.raises(ValueError):
            nd.gradient_r(lambda a: anp.sum(anp.einsum(spec, a, *ops[1:])))(a)


def test_matmul_edge_cases():
    with pytest.raises(ValueError):
        nd.gradient_r(lambda a: anp.sum(anp.matmul(a, 2.0)))(rand(2, 2))
    check_rules(anp.matmul, rand(3), rand(3), order=2)
    check_rules(anp.matmul, rand(3), rand(2, 3, 2), order=1)
    check_rules(anp.matmul, rand(2, 2, 3), rand(3), order=1)
