"""nestad.vmap: against explicit Python loops and against JAX's vmap, alone, nested with
itself and with every derivative operator (all orders to depth 3), eager and staged."""
import itertools

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import batching

jax = pytest.importorskip("jax", reason="JAX is the independent answer for nestings")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

rng = np.random.default_rng(15)


def loop(f, *args, in_axes=0):
    """vmap's meaning: f on each member, results stacked (leading axis)."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)])
            for i in range(size)]
    return np.stack([np.asarray(o) for o in outs])


# ---------------------------------------------------------------- primitives, one family at a time

A3 = rng.normal(size=(3, 3))
SPD = A3 @ A3.T + 3 * np.eye(3)

CASES = {
    'elementwise': (lambda x: anp.sin(x) * anp.exp(-x) + x ** 2 / (1.0 + anp.abs(x)), [(4, 3)]),
    'binary broadcast': (lambda x, y: anp.arctan2(x, y) + anp.maximum(x, y) - anp.hypot(x, 1.0),
                         [(4, 3), (4, 3)]),
    'scalar member': (lambda x: nd.sin(x) * x + nd.exp(x) / 3.0, [(5,)]),
    'sum axis': (lambda x: anp.sum(x * x, axis=0) + anp.mean(x), [(4, 2, 3)]),
    'reductions': (lambda x: anp.max(x, axis=-1) - anp.min(x, axis=(0,)) + anp.prod(x, axis=1)
                   + anp.sum(x, keepdims=True)[0], [(4, 3, 3)]),
    'logsumexp': (lambda x: anp.logaddexp(x, 0.5) + anp.cumsum(x, axis=0), [(4, 3)]),
    'shapes': (lambda x: anp.transpose(anp.reshape(x, (3, 2)))[1] + anp.ravel(x.T)[:3], [(4, 2, 3)]),
    'indexing': (lambda x: x[1:, 0] * x[anp.array([0, 2]), 1] + x[..., -1][::-1][:2], [(4, 3, 2)]),
    'advanced indices apart': (lambda x: x[anp.array([0, 2]), 1:, anp.array([1, 3])], [(4, 3, 5, 6)]),
    'updates': (lambda x, v: anp.at(x)[1, anp.array([0, 0, 2])].add(v * x[0, :3])
                + anp.at(x)[:, 2].set(v[0]), [(4, 3, 5), (4, 3)]),
    'concat': (lambda x, y: anp.concatenate([x, y, anp.ones(2)]) * 2.0, [(4, 3), (4, 3)]),
    'stack': (lambda x: anp.stack([x, anp.sin(x)], axis=1), [(4, 3)]),
    'matmul matrix': (lambda x: A3 @ x @ A3, [(4, 3, 3)]),
    'matmul vector': (lambda x: x @ A3 + A3 @ x + x @ x, [(4, 3)]),
    'matmul batched both': (lambda x, y: x @ y, [(4, 3, 3), (4, 3)]),
    'dot': (lambda x, y: anp.dot(x, y) + anp.dot(A3, y) + anp.dot(2.0, y), [(4, 3), (4, 3)]),
    'einsum': (lambda x, y: anp.einsum('ij,j->i', x, y) + anp.einsum('ii', x), [(4, 3, 3), (4, 3)]),
    'where': (lambda x: anp.where(x > 0.1, x * 2.0, anp.sin(x)) + nd.where(x[0] > 0, 1.0, x[1]),
              [(4, 3)]),
    'constants': (lambda x: anp.floor(x * 3) + anp.sign(x) + anp.argmax(x) + (x < 0.2), [(4, 3)]),
    'linalg': (lambda x: anp.linalg.inv(SPD + x) @ anp.ones(3) + anp.linalg.det(SPD + x)
               + anp.linalg.solve(SPD + x, anp.ones(3)), [(4, 3, 3)]),
    'linalg stacked': (lambda x: anp.linalg.slogdet(SPD + x @ x.T)[1]
                       + anp.sum(anp.linalg.eigh(SPD + x + x.T)[0])
                       + anp.sum(anp.linalg.cholesky(SPD + x @ x.T)), [(4, 3, 3)]),
    'solve batched rhs': (lambda b: anp.linalg.solve(SPD, b), [(4, 3)]),
    'scipy': (lambda x: nd.scipy.special.expit(x) + nd.scipy.stats.norm.logpdf(x, 0.5, 2.0),
              [(4, 3)]),
}


@pytest.mark.parametrize('name', list(CASES))
def test_vmap_equals_the_loop(name):
    import nestad.scipy.special, nestad.scipy.stats  # noqa: F401,E401
    f, shapes = CASES[name]
    args = [rng.normal(size=s) * 0.3 for s in shapes]
    np.testing.assert_allclose(nd.vmap(f)(*args), loop(f, *args), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize('name', ['elementwise', 'sum axis', 'matmul vector', 'linalg', 'dot'])
def test_vmap_over_each_argument_in_turn(name):
    f, shapes = CASES[name]
    args = [rng.normal(size=s) * 0.3 for s in shapes]
    for k in range(len(args)):
        axes = tuple(0 if i == k else None for i in range(len(args)))
        fixed = [a if i == k else a[0] for i, a in enumerate(args)]
        np.testing.assert_allclose(nd.vmap(f, in_axes=axes)(*fixed),
                                   loop(f, *fixed, in_axes=axes), rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------- in_axes, out_axes, structures

def test_in_axes_and_out_axes_as_jax():
    x = rng.normal(size=(3, 5))
    y = rng.normal(size=(5, 2))

    def f(a, b, scale=1.0):
        return {'s': anp.sum(a) * scale, 'v': a[:2] * b[0]}
    ours = nd.vmap(f, in_axes=(1, 0), out_axes={'s': 0, 'v': 1})(x, y, scale=2.0)
    theirs = jax.vmap(lambda a, b: {'s': jnp.sum(a) * 2.0, 'v': a[:2] * b[0]},
                      in_axes=(1, 0), out_axes={'s': 0, 'v': 1})(x, y)
    for k in ('s', 'v'):
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-13)
    # negative axes, None, a structure prefix, an unmapped output, axis_size
    p = {'w': rng.normal(size=(4, 3)), 'b': rng.normal(size=3)}
    got = nd.vmap(lambda p, z: (anp.sum(p['w'] * p['b']) + z, z), in_axes=({'w': -2, 'b': None}, None),
                  out_axes=(0, None))(p, 1.5)
    np.testing.assert_allclose(got[0], np.sum(p['w'] * p['b'], axis=1) + 1.5)
    assert got[1] == 1.5
    np.testing.assert_allclose(nd.vmap(lambda: anp.ones(2) * 3.0, axis_size=4)(), np.full((4, 2), 3.0))
    np.testing.assert_allclose(nd.vmap(lambda a: 2.0, in_axes=0)(np.ones(3)), np.full(3, 2.0))


def test_vmap_errors_name_the_cause_and_the_fix():
    x = np.ones((3, 2))
    with pytest.raises(nd.InvalidInputError, match=r"different sizes.*size 3.*size 4"):
        nd.vmap(lambda a, b: a + b)(x, np.ones(4))
    with pytest.raises(nd.InvalidInputError, match=r"axis 2 of argument leaf 0.*shape \(3, 2\)"):
        nd.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(nd.InvalidInputError, match="in_axes has 1 entries.*2 positional"):
        nd.vmap(lambda a, b: a, in_axes=(0,))(x, x)
    with pytest.raises(nd.InvalidInputError, match="not a prefix"):
        nd.vmap(lambda p: p[0], in_axes=((0, 0, 0),))((x, x))
    with pytest.raises(nd.InvalidInputError, match="no argument is mapped.*axis_size"):
        nd.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(nd.InvalidInputError, match="out_axes is None.*depends on the mapped"):
        nd.vmap(lambda a: a, out_axes=None)(x)
    with pytest.raises(nd.InvalidInputError, match="ints or None"):
        nd.vmap(lambda a: a, in_axes='0')
    with pytest.raises(nd.BatchedConversionError, match="nestad.numpy.where.*while_loop"):
        nd.vmap(lambda a: a if a > 0 else -a)(np.ones(3))
    with pytest.raises(nd.BatchedConversionError, match="batched by nestad.vmap"):
        nd.vmap(lambda a: float(a))(np.ones(3))
    # an index mapped by vmap is refused by name (not supported yet), never mis-selected
    with pytest.raises(nd.BatchedConversionError, match="index batched by nestad.vmap.*one-hot"):
        nd.vmap(lambda i: np.arange(5.0)[i])(np.array([0, 3]))
    with pytest.raises(nd.InvalidInputError, match="index batched by nestad.vmap.*one-hot"):
        nd.vmap(lambda i: anp.getitem(np.arange(5.0), i))(np.array([0, 3]))


# ---------------------------------------------------------------- derivatives

def mlp_loss(params, x, y):
    w1, b1, w2 = params
    h = anp.tanh(x @ w1 + b1)
    return anp.sum((h @ w2 - y) ** 2)


M34, V3, S243 = rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=(2, 4, 3))


def _products(x, y, z):
    """x (3,), y (3, 4), z (2, 4, 3) per member: matmul with a shared operand on either side
    (one product for the batch), a shared stack (the general rule), outer products."""
    return (x @ M34 + M34.T @ x + V3 @ y + anp.sum(S243 @ x, axis=0) + anp.sum(z @ x, axis=0)
            + anp.sum(z @ M34, axis=(0, 1)) + anp.sum(anp.expand_dims(x, -1) @ y[:1], axis=0)
            + anp.sum(M34.T @ anp.expand_dims(x, -1), axis=-1))


def test_matmul_with_shared_operands_and_outer_products_equal_the_loop():
    args = [rng.normal(size=(5,) + s) for s in ((3,), (3, 4), (2, 4, 3))]
    for axes in ((0, 0, 0), (0, None, None), (None, 0, None), (None, None, 0)):
        fixed = [a if ax == 0 else a[0] for a, ax in zip(args, axes)]
        np.testing.assert_allclose(nd.vmap(_products, in_axes=axes)(*fixed),
                                   loop(_products, *fixed, in_axes=axes), rtol=1e-12, atol=1e-13)
    # a contraction of 1 against one of 3 is refused as numpy refuses it, not broadcast
    with pytest.raises(ValueError):
        nd.vmap(lambda x, y: anp.expand_dims(x, -1) @ y)(args[2][:, :, :3, 0], args[2][:, :, :3])


def test_per_example_gradients_of_vector_matrix_products_equal_the_loop_and_jax():
    def f(w, x):                      # x @ w and w.T @ x: both adjoints of both forms
        return anp.sum(anp.tanh(x @ w) * (w.T @ x)) + anp.sum((w.T @ x) ** 2)

    def jf(w, x):
        return jnp.sum(jnp.tanh(x @ w) * (w.T @ x)) + jnp.sum((w.T @ x) ** 2)
    w, xs = rng.normal(size=(3, 4)), rng.normal(size=(6, 3))
    for argnums in (0, 1, (0, 1)):
        ours = nd.vmap(nd.gradient_r(f, argnums=argnums), in_axes=(None, 0))(w, xs)
        theirs = jax.vmap(jax.grad(jf, argnums=argnums), in_axes=(None, 0))(w, xs)
        loops = [nd.gradient_r(f, argnums=argnums)(w, x) for x in xs]
        for k, (a, b) in enumerate(zip(*(map(list, (ours, theirs)) if argnums == (0, 1)
                                         else ([ours], [theirs])))):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
            mine = [g[k] for g in loops] if argnums == (0, 1) else loops
            np.testing.assert_allclose(a, np.stack(mine), rtol=1e-12, atol=1e-13)


def test_staged_per_example_gradients_are_the_hand_written_program():
    # stage(vmap(gradient_r)) of the MLP: per-example outer products are one einsum each,
    # with no reshapes around them (the adjoint of a vector times a matrix used to be
    # expand_dims, matmul and its batch rule's reshapes: eight np.reshape lines)
    params = (rng.normal(size=(4, 5)), rng.normal(size=5), rng.normal(size=(5, 2)))
    xs, ys = rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    for staged in (nd.stage(nd.vmap(nd.gradient_r(mlp_loss), in_axes=(None, 0, 0))),
                   nd.vmap(nd.stage(nd.gradient_r(mlp_loss)), in_axes=(None, 0, 0))):
        for _ in range(2):                    # the trace, then the program
            got = staged(params, xs, ys)
            loops = [nd.gradient_r(mlp_loss)(params, x, y) for x, y in zip(xs, ys)]
            for k in range(3):
                np.testing.assert_allclose(got[k], np.stack([g[k] for g in loops]), rtol=1e-13)
    prog = nd.stage(nd.vmap(nd.gradient_r(mlp_loss), in_axes=(None, 0, 0)))
    prog(params, xs, ys)
    source = '\n'.join(p.source() for p in prog.programs())
    assert 'reshape' not in source and 'moveaxis' not in source, source
    assert source.count('einsum') == 2 and source.count('transpose') == 1, source
    # outside vmap the same adjoint stays a column times a row, which numba's backend
    # compiles (it has no einsum): the same numbers
    g = nd.stage(nd.gradient_r(mlp_loss))
    for _ in range(2):
        got = g(params, xs[0], ys[0])
        for a, b in zip(got, loops[0]):
            np.testing.assert_array_equal(a, b)
    assert 'einsum' not in '\n'.join(p.source() for p in g.programs())


def test_per_example_gradients_equal_the_loop_and_jax():
    params = (rng.normal(size=(4, 5)), rng.normal(size=5), rng.normal(size=(5, 2)))
    xs, ys = rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    before = dict(batching.fallbacks())
    ours = nd.vmap(nd.gradient_r(mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    assert batching.fallbacks() == before       # every rule batched (tanh's sech2 too)

    def jloss(p, x, y):
        return jnp.sum((jnp.tanh(x @ p[0] + p[1]) @ p[2] - y) ** 2)
    theirs = jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))(params, xs, ys)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
    loops = [nd.gradient_r(mlp_loss)(params, x, y) for x, y in zip(xs, ys)]
    for k in range(3):
        np.testing.assert_allclose(ours[k], np.stack([g[k] for g in loops]), rtol=1e-12)
    # indexing's adjoint (scatter_add) and functional updates batched too, no fallback
    g = nd.gradient_r(lambda x, v: anp.sum(anp.sin(x[anp.array([0, 2, 0]), 1:]) ** 2)
                      + anp.sum(anp.at(x)[1, anp.array([0, 0])].add(v[:2] * x[0, :2]) ** 2),
                      argnums=(0, 1))
    xs5, vs = rng.normal(size=(4, 3, 5)), rng.normal(size=(4, 3))
    before = dict(batching.fallbacks())
    got = nd.vmap(g)(xs5, vs)
    assert batching.fallbacks() == before
    for k in range(2):
        np.testing.assert_allclose(got[k], np.stack([g(x, v)[k] for x, v in zip(xs5, vs)]), rtol=1e-12)
    # the gradient of a batched sum is the sum of the per-example gradients
    total = nd.gradient_r(lambda p: anp.sum(nd.vmap(mlp_loss, in_axes=(None, 0, 0))(p, xs, ys)))(params)
    for k in range(3):
        np.testing.assert_allclose(total[k], ours[k].sum(axis=0), rtol=1e-11)


def _program(seed, np_):
    """A random smooth program R^3 -> R^2 written with the given numpy (nestad's or JAX's)."""
    r = np.random.default_rng(seed)
    M = r.normal(size=(3, 3)) * 0.5
    ops = [lambda v: np_.sin(v), lambda v: np_.tanh(v) * 1.5, lambda v: v * v * 0.3 + v,
           lambda v: np_.exp(-v * v), lambda v: M @ v, lambda v: v / (1.0 + v * v),
           lambda v: v * np_.sum(np_.cos(v))]
    chosen = [ops[i] for i in r.integers(0, len(ops), size=4)]

    def f(x):
        for op in chosen:
            x = op(x)
        return np_.stack([np_.sum(x * x), x[0] * x[2]])
    return f


TRANSFORMS = {
    'vmap': (nd.vmap, jax.vmap),
    'jacobian_f': (nd.jacobian_f, jax.jacfwd),
    'jacobian_r': (nd.jacobian_r, jax.jacrev),
    # the derivative along ones (shapes kept)
    'jvp': (lambda f: lambda x: nd.jvp(f, (x,), (np.ones(np.shape(x)),))[1],
            lambda f: lambda x: jax.jvp(f, (x,), (jnp.ones(np.shape(x)),))[1]),
}


def _transformed(order, which, np_):
    seed = sum(ord(c) for c in ''.join(order))
    f = _program(seed, np_)
    for name in order:
        f = TRANSFORMS[name][which](f)
    return f, np.random.default_rng(seed).normal(size=(2,) * order.count('vmap') + (3,)) * 0.7


def _python_map(f):
    """vmap's meaning as a Python loop of nestad values (differentiable by nestad)."""
    return lambda x: anp.stack([f(x[i]) for i in range(len(x))])


@pytest.mark.parametrize('order', [o for n in (1, 2) for o in itertools.product(TRANSFORMS, repeat=n)
                                   if 'vmap' in o or n == 1]
                         + [('vmap', 'jacobian_f', 'jacobian_r'), ('jacobian_r', 'vmap', 'vmap'),
                            ('jacobian_f', 'jacobian_r', 'vmap')], ids='-'.join)
def test_nestings_against_jax(order):
    """f's transforms in order (the first applied innermost): vmap adds a mapped axis of
    size 2 to the input, a Jacobian adds the input's axes to the output."""
    ours, x = _transformed(order, 0, anp)
    theirs, _ = _transformed(order, 1, jnp)
    np.testing.assert_allclose(ours(x), jax.jit(theirs)(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('order', [o for o in itertools.product(TRANSFORMS, repeat=3) if 'vmap' in o],
                         ids='-'.join)
def test_nestings_of_depth_three_against_python_loops(order):
    """Every order of depth 3 with a vmap: the same as with each vmap a Python loop
    (whose derivatives nestad takes by overloading, as tested elsewhere against JAX)."""
    ours, x = _transformed(order, 0, anp)
    seed = sum(ord(c) for c in ''.join(order))
    reference = _program(seed, anp)
    for name in order:
        reference = _python_map(reference) if name == 'vmap' else TRANSFORMS[name][0](reference)
    np.testing.assert_allclose(ours(x), reference(x), rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize('order', [('vmap', 'jacobian_r'), ('jacobian_f', 'vmap'),
                                   ('vmap', 'vmap', 'jacobian_f'), ('jacobian_r', 'vmap', 'jacobian_f')],
                         ids='-'.join)
def test_staged_nestings_against_jax(order):
    seed = 7 + len(order)
    ours, theirs = _program(seed, anp), _program(seed, jnp)
    for name in order:
        ours, theirs = TRANSFORMS[name][0](ours), TRANSFORMS[name][1](theirs)
    staged, theirs = nd.stage(ours), jax.jit(theirs)
    for k in range(2):        # the trace, then the compiled program at other inputs
        x = np.random.default_rng(k).normal(size=(2,) * order.count('vmap') + (3,))
        np.testing.assert_allclose(staged(x), theirs(x), rtol=1e-10, atol=1e-12)


def test_hessians_jvps_and_second_derivatives_batched():
    f = _program(3, anp)
    g = _program(3, jnp)
    xs = rng.normal(size=(4, 3)) * 0.5
    scalar = (lambda h: lambda x: h(x)[0])
    np.testing.assert_allclose(nd.vmap(nd.hessian(scalar(f)))(xs),
                               jax.jit(jax.vmap(jax.hessian(scalar(g))))(xs), rtol=1e-10, atol=1e-12)
    v = rng.normal(size=3)
    np.testing.assert_allclose(nd.vmap(lambda x: nd.jvp(f, (x,), (v,))[1])(xs),
                               jax.jit(jax.vmap(lambda x: jax.jvp(g, (x,), (v,))[1]))(xs), rtol=1e-11)
    # vmap over the tangents: a Jacobian by columns
    np.testing.assert_allclose(nd.vmap(lambda t: nd.jvp(f, (xs[0],), (t,))[1])(np.eye(3)).T,
                               jax.jit(jax.jacfwd(g))(xs[0]), rtol=1e-11)
    # a derivative of a vmap, with the mapped function's parameter closed over
    np.testing.assert_allclose(
        nd.derivative(lambda s: anp.sum(nd.vmap(lambda x: f(x * s))(xs)))(1.3),
        jax.jit(jax.grad(lambda s: jnp.sum(jax.vmap(lambda x: g(x * s))(xs))))(1.3), rtol=1e-11)


def test_vmap_of_vmap_is_the_double_loop():
    f = _program(11, anp)
    x = rng.normal(size=(3, 2, 3))
    np.testing.assert_allclose(nd.vmap(nd.vmap(f))(x), np.stack([loop(f, xi) for xi in x]),
                               rtol=1e-12)
    np.testing.assert_allclose(nd.vmap(nd.vmap(f), in_axes=1)(x),
                               np.stack([loop(f, x[:, j]) for j in range(2)]), rtol=1e-12)


# ---------------------------------------------------------------- functions with rules of their own

def test_while_loop_runs_until_every_member_is_done():
    def f(x):
        return nd.while_loop(lambda s: s[0] < 10.0, lambda s: (s[0] * s[0] + 1.0, s[1] + 1.0),
                             (x, 0.0))
    xs = np.array([1.0, 3.0, 20.0, 0.5])
    expect = loop(lambda x: np.array(f(x)), xs)
    for g in (nd.vmap(f), nd.stage(nd.vmap(f))):
        got = g(xs)
        np.testing.assert_allclose(np.stack(got, axis=1), expect)
    d = loop(nd.derivative(lambda x: f(x)[0]), xs)
    for g in (nd.vmap(nd.derivative(lambda x: f(x)[0])), nd.stage(nd.vmap(nd.gradient_r(lambda x: f(x)[0])))):
        np.testing.assert_allclose(g(xs), d)


def test_fixed_point_checkpoint_and_staged_functions_under_vmap():
    f = lambda x, a: anp.cos(x) * a                                      # noqa: E731
    a = np.array([0.2, 0.5, 0.8])
    np.testing.assert_allclose(nd.vmap(lambda a: nd.fixed_point(f, 0.0, a))(a),
                               loop(lambda a: nd.fixed_point(f, 0.0, a), a))
    np.testing.assert_allclose(nd.vmap(nd.derivative(lambda a: nd.fixed_point(f, 0.0, a)))(a),
                               loop(nd.derivative(lambda a: nd.fixed_point(f, 0.0, a)), a))
    body = nd.checkpoint(lambda x, w: anp.sin(x * w) * x)
    grad_w = nd.gradient_r(lambda w: anp.sum(nd.vmap(body, in_axes=(0, None))(a, w)))(1.5)
    np.testing.assert_allclose(grad_w, sum(nd.gradient_r(lambda w: body(x, w))(1.5) for x in a))
    staged = nd.stage(lambda x: anp.sum(anp.sin(x) * x))
    xs = rng.normal(size=(5, 3))
    np.testing.assert_allclose(nd.vmap(staged)(xs), loop(staged, xs))
    np.testing.assert_allclose(nd.vmap(nd.gradient_r(staged))(xs), loop(nd.gradient_r(staged), xs))


def test_custom_primitive_rules_are_batched_and_a_missing_batch_rule_falls_back_visibly():
    calls = []

    @nd.primitive
    def cube(x):
        calls.append(np.shape(x))
        return x ** 3
    cube.defjvp(lambda t, x, out: 3.0 * x * x * t)
    cube.defvjp(lambda g, x, out: 3.0 * x * x * g)
    xs = rng.normal(size=(5, 2))
    before = batching.fallbacks().get(cube.primitive.qualname, 0)
    np.testing.assert_allclose(nd.vmap(cube)(xs), xs ** 3)
    assert batching.fallbacks()[cube.primitive.qualname] == before + 1     # counted
    assert calls[-5:] == [(2,)] * 5                                        # member by member
    # the user's JVP rule runs once on the batched tangents (no Python loop over them)
    calls.clear()
    x0 = rng.normal(size=2)
    tangents = rng.normal(size=(5, 2))
    got = nd.vmap(lambda t: nd.jvp(cube, (x0,), (t,))[1])(tangents)
    np.testing.assert_allclose(got, 3 * x0 ** 2 * tangents)
    assert calls == [(2,)]
    np.testing.assert_allclose(nd.vmap(nd.gradient_r(lambda x: anp.sum(cube(x))))(xs), 3 * xs ** 2)

    # elementwise partials declare an elementwise primitive: batched in one call
    @nd.primitive
    def softplus(x):
        calls.append(np.shape(x))
        return np.logaddexp(0.0, x)
    softplus.defpartials(lambda x, out: anp.exp(x - out))
    calls.clear()
    before = dict(batching.fallbacks())
    np.testing.assert_allclose(nd.vmap(nd.gradient_r(lambda x: anp.sum(softplus(x))))(xs),
                               1 / (1 + np.exp(-xs)), rtol=1e-12)
    assert calls == [(5, 2)] and batching.fallbacks() == before


# ---------------------------------------------------------------- a new transform from the public protocol

def test_recipe_for_a_new_transform_counts_primitive_applications():
    """A transform in under 60 lines: a value class, an interpretation, an operator."""
    from collections import Counter
    from nestad import perturbation
    from nestad.interpret import Interpretation
    from nestad.values import Perturbed

    class Counting(Interpretation):
        name = 'count'

        def __init__(self):
            self.counts = Counter()

        def process(self, prim, top, args, carried, primals, params):
            self.counts[prim.name] += 1
            return Counted(top, prim.lifted(*primals, **params), self)   # the next one down

    class Counted(Perturbed):
        __slots__ = ('tag', 'primal', 'interp')

        def __init__(self, tag, primal, interp):
            self.tag, self.primal, self.interp = tag, primal, interp

        @property
        def interpretation(self):
            return self.interp

    Counted.__add__ = lambda s, o: nd.numpy.add(s, o)
    Counted.__mul__ = lambda s, o: nd.numpy.multiply(s, o)
    Counted.__rmul__ = lambda s, o: nd.numpy.multiply(o, s)

    def count_primitives(f):
        def counted(*args):
            tag, interp = perturbation.fresh(), Counting()
            try:
                out = f(*[Counted(tag, a, interp) for a in args])
            finally:
                perturbation.retire(tag)
            return (out.primal if isinstance(out, Counted) else out), dict(interp.counts)
        return counted
    def f(x):
        return anp.sum(anp.sin(x) * x + 2.0 * x)
    x = np.array([0.5, 1.5])
    value, counts = count_primitives(f)(x)
    assert value == pytest.approx(np.sum(np.sin(x) * x + 2 * x))
    assert counts == {'sin': 1, 'multiply': 2, 'add': 1, 'sum': 1}
    # it composes with the other interpretations by the tag order
    (grad, counts) = count_primitives(nd.gradient_r(f))(x)
    np.testing.assert_allclose(grad, np.cos(x) * x + np.sin(x) + 2)
    assert counts['sin'] == 1 and counts['cos'] == 1
    batched, counts = count_primitives(nd.vmap(f))(np.stack([x, 2 * x]))
    np.testing.assert_allclose(batched, [f(x), f(2 * x)])
    assert counts['sin'] == 1
    def g(x):     # operators with rules of their own meet it through the same dispatch
        y = nd.checkpoint(anp.sin)(x)
        return anp.sum(nd.stage(anp.square)(nd.fixed_point(lambda z, a: anp.tanh(z) / 2 + a, x, y)))
    value, counts = count_primitives(g)(x)
    assert value == pytest.approx(g(x))
    assert counts['checkpoint'] == counts['fixed_point'] == counts['stage'] == 1


def test_vmap_refuses_a_leaked_perturbation_returned_as_an_output():
    # vmap and jet check their output leaves with the one check extraction has
    leaked = []
    nd.derivative(lambda x: leaked.append(x * 2.0) or x * x)(3.0)
    with pytest.raises(nd.EscapedPerturbationError, match="escaped through a side effect"):
        nd.vmap(lambda x: (x, leaked[0]))(np.ones(3))
    with pytest.raises(nd.EscapedPerturbationError, match="escaped through a side effect"):
        nd.jet(lambda x: leaked[0] + x, (1.0,), ((1.0,),))


# ---------------------------------------------------------------- jacobian_f as vmap of jvp

def jacobian_by_vmap_of_jvp(f, x):
    """The forward Jacobian as vmap of jvp over the basis tangents of x (JAX's jacfwd)."""
    shape = np.shape(nd.primal_value(x))            # (a member's shape, under a vmap)
    n = int(np.prod(shape))
    basis = np.eye(n).reshape((n,) + tuple(shape))
    cols = nd.vmap(lambda v: nd.jvp(f, (x,), (v,))[1])(basis)      # (n,) + out shape
    return anp.reshape(anp.moveaxis(cols, 0, -1), anp.shape(cols)[1:] + tuple(shape))


JACOBIAN_PROGRAMS = [
    (lambda x: anp.tanh(A3 @ x) * x[0] + anp.sum(x ** 2),
     lambda x: jnp.tanh(A3 @ x) * x[0] + jnp.sum(x ** 2), (3,)),
    (lambda x: anp.exp(x) @ A3 - anp.sin(x.T)[..., 0],
     lambda x: jnp.exp(x) @ A3 - jnp.sin(x.T)[..., 0], (2, 3)),
    (lambda x: anp.cumsum(x) / (1.0 + anp.sum(x * x)),
     lambda x: jnp.cumsum(x) / (1.0 + jnp.sum(x * x)), (4,)),
    (lambda x: anp.linalg.solve(A3 + 3 * np.eye(3), x) * anp.log1p(x * x),
     lambda x: jnp.linalg.solve(A3 + 3 * np.eye(3), x) * jnp.log1p(x * x), (3,)),
]


@pytest.mark.parametrize('k', range(len(JACOBIAN_PROGRAMS)))
def test_jacobian_f_equals_vmap_of_jvp_over_basis_tangents_and_jax(k):
    f, jf, shape = JACOBIAN_PROGRAMS[k]
    x = rng.normal(size=shape) * 0.7
    ours = nd.jacobian_f(f)(x)
    by_vmap = jacobian_by_vmap_of_jvp(f, x)
    assert np.shape(by_vmap) == np.shape(ours)
    np.testing.assert_allclose(by_vmap, ours, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours, jax.jacfwd(jf)(x), rtol=1e-10, atol=1e-13)
    # staged: the same program class either way
    np.testing.assert_allclose(nd.stage(lambda x: jacobian_by_vmap_of_jvp(f, x))(x), ours,
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize('k', range(len(JACOBIAN_PROGRAMS)))
def test_jacobian_f_as_vmap_of_jvp_nested_with_gradient_r_and_derivative(k):
    f, jf, shape = JACOBIAN_PROGRAMS[k]
    x = rng.normal(size=shape) * 0.7
    d = rng.normal(size=shape)
    W = rng.normal(size=np.shape(nd.jacobian_f(f)(x)))
    # gradient_r of a contraction of the Jacobian (reverse over forward)
    ours = nd.gradient_r(lambda x: anp.sum(nd.jacobian_f(f)(x) * W))(x)
    by_vmap = nd.gradient_r(lambda x: anp.sum(jacobian_by_vmap_of_jvp(f, x) * W))(x)
    theirs = jax.grad(lambda x: jnp.sum(jax.jacfwd(jf)(x) * W))(x)
    np.testing.assert_allclose(by_vmap, ours, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    # derivative along a line (forward over forward), and jacobian_f of a gradient_r (a Hessian)
    ours = nd.derivative(lambda s: nd.jacobian_f(f)(x + s * d))(0.3)
    by_vmap = nd.derivative(lambda s: jacobian_by_vmap_of_jvp(f, x + s * d))(0.3)
    theirs = jax.jvp(jax.jacfwd(jf), (x + 0.3 * d,), (d,))[1]
    np.testing.assert_allclose(by_vmap, ours, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    g = lambda x: anp.sum(f(x) * W[(...,) + (0,) * len(shape)])       # noqa: E731
    H = nd.jacobian_f(nd.gradient_r(g))(x)
    np.testing.assert_allclose(jacobian_by_vmap_of_jvp(nd.gradient_r(g), x), H,
                               rtol=1e-10, atol=1e-12)
    # per-example Jacobians: vmap of jacobian_f, and jacobian_f inside the vmap of jvp
    X = rng.normal(size=(3,) + shape) * 0.7
    per_example = nd.vmap(nd.jacobian_f(f))(X)
    np.testing.assert_allclose(per_example, np.stack([nd.jacobian_f(f)(a) for a in X]),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(nd.vmap(lambda a: jacobian_by_vmap_of_jvp(f, a))(X), per_example,
                               rtol=1e-12, atol=1e-14)
