"""Taylor mode (nestad.jet, derivatives, taylor_series): against nested ``derivative`` (orders
1 to 6), mpmath (order 10), JAX's jet, at generic points and near domain edges; arrays,
structures, user primitives, control operators, staging, and nesting with every operator."""
import math

import mpmath
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import taylor
from nestad.scipy import special

mpmath.mp.dps = 40


def nested(f, k):
    """[f, f', ..., f^(k)] at a point by nesting ``derivative`` (the reference of orders <= 6)."""
    fs = [f]
    for _ in range(k):
        fs.append(nd.derivative(fs[-1]))
    return lambda x: [g(x) for g in fs]


def assert_close(a, b, rtol, atol=0.0):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert np.all(np.isclose(a, b, rtol=rtol, atol=atol) | (np.isnan(a) & np.isnan(b))), (a, b)


# name: (nestad function, mpmath function, points: generic ones and near domain edges)
SCALAR = {
    'exp': (nd.exp, mpmath.exp, [0.3, -20.0, 5.0]),
    'expm1': (nd.expm1, mpmath.expm1, [1e-8, -0.5]),
    'exp2': (nd.exp2, lambda x: mpmath.power(2, x), [0.7, -3.0]),
    'log': (nd.log, mpmath.log, [0.3, 2.5, 1e-4]),
    'log1p': (nd.log1p, mpmath.log1p, [-0.999, 0.4, 1e-9]),
    'log2': (nd.log2, lambda x: mpmath.log(x, 2), [1.7, 1e-3]),
    'log10': (nd.log10, mpmath.log10, [1.7, 1e-3]),
    'sqrt': (nd.sqrt, mpmath.sqrt, [1e-4, 2.0]),
    'cbrt': (nd.cbrt, lambda x: mpmath.sign(x) * mpmath.cbrt(abs(x)), [0.5, -3.0]),
    'sin': (nd.sin, mpmath.sin, [0.3, 10.0, 1e-9]),
    'cos': (nd.cos, mpmath.cos, [0.3, -4.0, math.pi / 2]),
    'tan': (nd.tan, mpmath.tan, [0.3, 1.55]),
    'asin': (nd.asin, mpmath.asin, [0.2, 0.999, -0.9999]),
    'acos': (nd.acos, mpmath.acos, [0.2, 0.999]),
    'atan': (nd.atan, mpmath.atan, [0.2, 30.0]),
    'sinh': (nd.sinh, mpmath.sinh, [0.2, 3.0]),
    'cosh': (nd.cosh, mpmath.cosh, [0.2, -3.0]),
    'tanh': (nd.tanh, mpmath.tanh, [0.2, 3.0]),
    'sech2': (nd.primitives.sech2, lambda x: mpmath.sech(x) ** 2, [0.2, -3.0, 30.0]),
    'asinh': (nd.asinh, mpmath.asinh, [0.2, -5.0]),
    'acosh': (nd.acosh, mpmath.acosh, [1.001, 5.0]),
    'atanh': (nd.atanh, mpmath.atanh, [0.2, 0.999]),
    'erf': (nd.erf, mpmath.erf, [0.2, 3.0]),
    'erfc': (nd.erfc, mpmath.erfc, [0.2, 3.0]),
    'abs': (nd.abs, abs, [0.2, -3.0]),
    'recip': (lambda x: 1.0 / x, lambda x: 1 / x, [0.2, -3.0]),
    'square': (lambda x: x * x, lambda x: x * x, [0.2, -3.0]),
    'pow 3': (lambda x: x ** 3, lambda x: x ** 3, [0.2, -3.0]),
    'pow 2.5': (lambda x: x ** 2.5, lambda x: x ** 2.5, [0.2, 3.0]),
    'pow -1.5': (lambda x: x ** -1.5, lambda x: x ** -1.5, [0.2, 3.0]),
    'pow x x': (lambda x: x ** x, lambda x: x ** x, [0.2, 3.0]),
    'pow 2 x': (lambda x: 2.0 ** x, lambda x: 2 ** x, [0.2, 3.0]),
    'nd.pow': (lambda x: nd.pow(x, 0.3), lambda x: x ** 0.3, [0.2, 3.0]),
    'atan2 y': (lambda x: nd.atan2(x, 0.7), lambda x: mpmath.atan2(x, 0.7), [0.2, -3.0]),
    'atan2 x': (lambda x: nd.atan2(0.7, x), lambda x: mpmath.atan2(0.7, x), [0.2, -3.0]),
    'hypot': (lambda x: nd.hypot(x, 0.7), lambda x: mpmath.sqrt(x * x + 0.49), [0.2, -3.0]),
    'maximum': (lambda x: nd.maximum(x * x, 0.5), lambda x: max(x * x, 0.5), [0.2, -3.0]),
    'mod': (lambda x: (x * x) % 1.5, lambda x: x * x - 1.5 * mpmath.floor(x * x / 1.5), [0.7, -3.1]),
    'div': (lambda x: nd.sin(x) / (x + 2.0), lambda x: mpmath.sin(x) / (x + 2), [0.2, -1.9]),
    'gammaln': (special.gammaln, mpmath.loggamma, [0.5, 4.0]),
    'digamma': (special.digamma, mpmath.digamma, [0.5, 4.0]),
    'expit': (special.expit, lambda x: 1 / (1 + mpmath.exp(-x)), [0.5, -4.0]),
}
CASES = [(name, x) for name, (_, _, xs) in SCALAR.items() for x in xs]


@pytest.mark.parametrize("name,x", CASES, ids=[f"{n}@{x:g}" for n, x in CASES])
def test_scalar_primitive_against_nested_derivative_and_mpmath(name, x):
    f, g, _ = SCALAR[name]
    ours = nd.derivatives(f, 10)(x)
    assert_close(ours[:7], nested(f, 6)(x), rtol=1e-12, atol=1e-300)
    ref = [float(v) for v in mpmath.diffs(g, mpmath.mpf(x), 10)]
    scale = max(abs(v) for v in ref)
    assert_close(ours, ref, rtol=1e-11, atol=1e-13 * scale)
    series = nd.taylor_series(f, 10)(x)
    assert_close(series, [v / math.factorial(k) for k, v in enumerate(ref)], rtol=1e-11,
          atol=1e-13 * max(abs(v / math.factorial(k)) for k, v in enumerate(ref)))


def test_every_scalar_primitive_with_a_derivative_is_covered():
    """Each differentiable scalar primitive has a recurrence or the ODE rule from its
    partials; the ones named above are all of nestad's (with the operators)."""
    from nestad import registry
    from nestad.lifting import Primitive
    names = {q for q, p in registry.PRIMITIVES.items() if isinstance(p, Primitive)
             and p.partials is not None}
    tested = {'exp', 'expm1', 'exp2', 'log', 'log1p', 'log2', 'log10', 'sqrt', 'cbrt', 'sin',
              'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'tanh', 'asinh', 'acosh',
              'atanh', 'erf', 'erfc', 'abs', 'recip', 'pow', 'atan2', 'hypot', 'maximum',
              'minimum', 'add', 'sub', 'mul', 'div', 'mod', 'neg', 'sech2',
              # ** of traced plain numbers: a jet meets it as ** of jets (pow's recurrence)
              'python_pow'}
    assert names <= tested, names - tested


def test_powers_at_zero_are_exact_or_not_finite():
    assert nd.derivatives(lambda x: x ** 3, 5)(0.0) == [0.0, 0.0, 0.0, 6.0, 0.0, 0.0]
    assert nd.derivatives(lambda x: x ** 0, 3)(0.0) == [1.0, 0.0, 0.0, 0.0]
    d = nd.derivatives(nd.sqrt, 3)(0.0)
    assert d[0] == 0.0 and not any(math.isfinite(v) for v in d[1:])   # inf or nan, never a number


def test_recurrences_agree_with_the_ode_rule_from_partials():
    """The hand recurrences against the generic rule (the ODE y' = f'(x) x' through each
    primitive's partial) at order 8."""
    from nestad import primitives as P
    x0 = 0.37
    for name in ('exp', 'log', 'sin', 'cos', 'tan', 'tanh', 'sinh', 'cosh', 'sqrt', 'cbrt',
                 'expm1', 'log1p', 'exp2', 'log2', 'log10', 'recip'):
        prim = getattr(P, name.upper())
        fn = prim.lifted
        rule = taylor.RULES.pop(name)
        try:
            generic = nd.derivatives(fn, 8)(x0)
        finally:
            taylor.RULES[name] = rule
        assert_close(nd.derivatives(fn, 8)(x0), generic, rtol=1e-12)


def test_jet_follows_jax_convention():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from jax.experimental.jet import jet as jjet
    jnp = jax.numpy
    pairs = [(nd.sin, jnp.sin), (nd.exp, jnp.exp), (nd.log, jnp.log), (nd.tanh, jnp.tanh),
             (nd.sqrt, jnp.sqrt), (nd.atan2, jnp.arctan2), (nd.asinh, jnp.arcsinh),
             (lambda x: x ** 3.5, lambda x: x ** 3.5), (lambda x: 1.0 / x, lambda x: 1.0 / x),
             (nd.erf, jax.scipy.special.erf), (nd.log1p, jnp.log1p), (nd.expm1, jnp.expm1),
             (nd.atanh, jnp.arctanh), (nd.cosh, jnp.cosh), (nd.sinh, jnp.sinh),
             (nd.cos, jnp.cos), (special.expit, jax.nn.sigmoid), (nd.abs, jnp.abs)]
    series = (0.7, -1.3, 2.0, 0.5, -0.25)
    for ours, theirs in pairs:
        if ours is nd.atan2:
            ours, theirs = (lambda x: nd.atan2(x, 0.3)), (lambda x: jnp.arctan2(x, 0.3))
        p, s = nd.jet(ours, (0.4,), (series,))
        jp, js = jjet(theirs, (0.4,), (series,))
        assert_close(p, jp, rtol=1e-13)
        assert_close(s, js, rtol=1e-10)


rng = np.random.default_rng(16)
A = rng.normal(size=(3, 4))
X0, V1, V2, V3 = (rng.normal(size=4) for _ in range(4))


def net(x, np=anp):
    h = np.tanh(A @ x)
    return (np.sum(np.exp(h) * np.sin(x[:3]) / (2.0 + np.cos(h))) + np.sum(np.sqrt(x * x + 1.0))
            + np.log(np.sum(x ** 2) + 1.0) + np.dot(x, x) * h[1] + x[1] ** 2 * x[2] ** 3)


def test_arrays_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from jax.experimental.jet import jet as jjet
    p, s = nd.jet(net, (X0,), ((V1, V2, V3),))
    jp, js = jjet(lambda x: net(x, jax.numpy), (X0,), ((V1, V2, V3),))
    assert_close(p, jp, rtol=1e-13)
    assert_close(s, js, rtol=1e-10)
    # an array output: elementwise, matmul, reshape, transpose, concatenate, where, indexing
    g = lambda x, np=anp: np.concatenate([np.reshape(np.outer(x, x), (-1,))[::3], np.where(x > 0, x, np.exp(x)),
                                          (A @ np.sin(x)).T, np.cumsum(x) / np.sum(x * x)])
    p, s = nd.jet(g, (X0,), ((V1, V2),))
    jp, js = jjet(lambda x: g(x, jax.numpy), (X0,), ((V1, V2),))
    assert_close(p, jp, rtol=1e-13)
    assert_close(s, js, rtol=1e-10)


def test_directional_derivatives_of_an_array_function():
    g = lambda x: net(x) + anp.prod(x[1:3] ** 2) * anp.max(x) + anp.sum(anp.arctan(x))
    ours = nd.derivatives(g, 5)(X0, V1)
    ref = nested(lambda t: g(X0 + t * V1), 5)(0.0)
    assert_close(ours, ref, rtol=1e-11)
    # linear algebra primitives through the ODE rule from their jvps
    M = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    h = lambda t: anp.linalg.det(M + t * A[:, :3]) + anp.sum(anp.linalg.inv(M + t * A[:, :3]))
    assert_close(nd.derivatives(h, 4)(0.0), nested(h, 4)(0.0), rtol=1e-11)
    S, B = M @ M.T, A[:, :3] + A[:, :3].T
    for g in (lambda t: anp.linalg.eigh(S + t * B)[1][0, 0], lambda t: anp.linalg.svd(M + t * B)[0][1, 2],
              lambda t: anp.linalg.slogdet(S + t * B)[1], lambda t: anp.linalg.cholesky(S + t * B)[2, 1],
              lambda t: anp.linalg.pinv(M + t * B)[0, 1], lambda t: anp.linalg.solve(M + t * B, X0[:3])[1]):
        assert_close(nd.derivatives(g, 3)(0.3), nested(g, 3)(0.3), rtol=1e-10, atol=1e-12)


def test_structures_in_and_out():
    def f(d, y):
        return {'a': d['u'] * nd.sin(d['v']), 'b': [y * y, 3.0]}
    prim, series = nd.jet(f, ({'u': 1.5, 'v': 0.2}, 2.0), (({'u': 1.0, 'v': 0.0}, {'u': 0.0, 'v': 0.0}),
                                                            (0.5, 1.0)))
    assert prim == {'a': 1.5 * math.sin(0.2), 'b': [4.0, 3.0]}
    assert_close(series['a'], [math.sin(0.2), 0.0], rtol=1e-15)
    assert_close(series['b'][0], [2.0, 2 * (0.25 + 2.0)], rtol=1e-15)     # (y^2)'' = 2 y'^2 + 2 y y''
    assert series['b'][1] == [0.0, 0.0]
    out = nd.derivatives(lambda x: (nd.exp(x), [x * x]), 2)(1.0)
    assert out[2][0] == math.exp(1.0) and out[2][1] == [2.0]


def test_user_primitives_get_rules_from_partials_and_jvps():
    @nd.primitive
    def softplus(x):
        return np.logaddexp(0.0, x)
    softplus.defpartials(lambda x, out: anp.exp(x - out))      # reads out: the recursive form

    @nd.primitive
    def cube(x):
        return x ** 3
    cube.defjvp(lambda t, x, out: 3.0 * x * x * t)

    ref = [float(v) for v in mpmath.diffs(lambda x: mpmath.log(1 + mpmath.exp(x)), 0.3, 8)]
    assert_close(nd.derivatives(softplus, 8)(0.3), ref, rtol=1e-11)
    assert_close(nd.derivatives(lambda x: cube(nd.sin(x)), 6)(0.3), nested(lambda x: nd.sin(x) ** 3, 6)(0.3),
          rtol=1e-12)


def test_nesting_with_every_operator():
    f = lambda x: nd.sin(x) * nd.exp(x) / (1.0 + x * x)
    # jet inside derivative: d/da of the 4th derivative of t -> f(a t)
    d = nd.derivative(lambda a: nd.derivatives(lambda t: f(a * t), 4)(0.3)[4])(1.2)
    ref = nd.derivative(lambda a: nested(lambda t: f(a * t), 4)(0.3)[4])(1.2)
    assert_close(d, ref, rtol=1e-12)
    # derivative inside jet (no perturbation confusion: the inner derivative closes over x)
    assert_close(nd.derivatives(lambda x: x * nd.derivative(lambda y: x * y)(1.0), 2)(3.0), [9.0, 6.0, 2.0],
          rtol=0)
    assert_close(nd.derivatives(nd.derivative(f), 4)(0.3), nested(f, 5)(0.3)[1:], rtol=1e-12)
    # gradient_r of a jet output (a Laplacian-style loss), against JAX
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    from jax.experimental.jet import jet as jjet
    g = nd.gradient_r(lambda x: nd.jet(net, (x,), ((V1, V2, V3),))[1][2])(X0)
    jg = jax.grad(lambda x: jjet(lambda x: net(x, jax.numpy), (x,), ((V1, V2, V3),))[1][2])(X0)
    assert_close(g, jg, rtol=1e-10)
    # jet of gradient_r
    p, s = nd.jet(nd.gradient_r(net), (X0,), ((V1, V2),))
    jp, js = jjet(jax.grad(lambda x: net(x, jax.numpy)), (X0,), ((V1, V2),))
    assert_close(s, js, rtol=1e-10)
    # vmap of jet, jet of vmap
    Xs = rng.normal(size=(5, 4))
    third = lambda x: nd.jet(net, (x,), ((V1, V2, V3),))[1][2]
    assert_close(nd.vmap(third)(Xs), [third(x) for x in Xs], rtol=1e-12)
    p, s = nd.jet(nd.vmap(net), (Xs,), ((np.ones((5, 4)), Xs),))
    for i, x in enumerate(Xs):
        assert_close([s[0][i], s[1][i]], nd.jet(net, (x,), ((np.ones(4), x),))[1], rtol=1e-12)
    # jet of jet: the mixed derivative d^2/ds dt of f(x + s + t) is f''
    inner = lambda x: nd.jet(f, (x,), ((1.0,),))[1][0]
    assert_close(nd.derivatives(inner, 3)(0.3), nested(f, 4)(0.3)[1:], rtol=1e-12)


def test_staged_jets_and_jets_of_staged_functions():
    f = lambda x: nd.sin(x) * nd.exp(x) / (1.0 + x * x)
    staged = nd.stage(nd.derivatives(f, 8))
    for x in (0.7, -0.3):
        assert_close(staged(x), nd.derivatives(f, 8)(x), rtol=1e-14)
    assert_close(nd.derivatives(nd.stage(f), 5)(0.7), nd.derivatives(f, 5)(0.7), rtol=1e-14)


def test_control_operators_under_jet():
    loop = lambda x: nd.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * nd.sin(x)), (0, 1.0))[1]
    ref = nd.derivatives(lambda x: nd.sin(x) ** 3, 5)(0.5)
    assert_close(nd.derivatives(loop, 5)(0.5), ref, rtol=1e-13)
    assert_close(nd.stage(nd.derivatives(loop, 5))(0.5), ref, rtol=1e-13)
    g = lambda x: nd.checkpoint(lambda y: nd.sin(y) * y)(x)
    assert_close(nd.derivatives(g, 4)(0.5), nested(lambda y: nd.sin(y) * y, 4)(0.5), rtol=1e-12)
    assert_close(nd.derivatives(lambda x: nd.stop_gradient(x) * x, 3)(2.0), [4.0, 2.0, 0.0, 0.0], rtol=0)


def test_fixed_point_under_jet_gives_every_order():
    newton_sqrt = lambda x: nd.fixed_point(lambda z, a: 0.5 * (z + a / z), 1.0, x)
    assert_close(nd.derivatives(newton_sqrt, 8)(2.0), nd.derivatives(nd.sqrt, 8)(2.0), rtol=1e-13)
    assert_close(nd.stage(nd.derivatives(newton_sqrt, 4))(3.0), nd.derivatives(nd.sqrt, 4)(3.0), rtol=1e-13)
    assert_close(nd.gradient_r(lambda x: nd.derivatives(newton_sqrt, 3)(x)[3])(2.0),
          nd.derivatives(nd.sqrt, 4)(2.0)[4], rtol=1e-13)
    assert_close(nd.derivatives(nd.derivative(newton_sqrt), 3)(2.0), nd.derivatives(nd.sqrt, 4)(2.0)[1:],
          rtol=1e-13)
    M = np.array([[0.3, 0.1], [0.2, 0.4]])
    g = lambda x: anp.sum(nd.fixed_point(lambda z, a: anp.tanh(M @ z) * a + 1.0, np.zeros(2), x) ** 2)
    assert_close(nd.derivatives(g, 3)(0.7), nested(g, 3)(0.7), rtol=1e-9)


@pytest.mark.parametrize("g", [
    lambda x: nd.stop_gradient(lambda y: y * x)(x),
], ids=["stop_gradient of a function"])
def test_functions_without_a_taylor_rule_are_refused(g):
    with pytest.raises(nd.MissingRuleError, match="Taylor mode") as e:
        nd.derivatives(g, 3)(2.0)
    assert "derivative" in str(e.value) or "stop_gradient to the values" in str(e.value)


def test_bad_arguments():
    with pytest.raises(nd.InvalidInputError, match="same number K"):
        nd.jet(lambda x, y: x * y, (1.0, 2.0), ((1.0,), (1.0, 2.0)))
    with pytest.raises(nd.InvalidInputError, match="one series"):
        nd.jet(nd.sin, (1.0,), ())
    with pytest.raises(nd.InvalidInputError, match="never broadcast"):
        nd.jet(anp.sin, (np.ones(3),), ((np.ones(2),),))
    with pytest.raises(nd.InvalidInputError, match="give a direction"):
        nd.derivatives(anp.sin, 2)(np.ones(3))
    with pytest.raises(nd.InvalidInputError, match="int >= 0"):
        nd.derivatives(nd.sin, -1)
    with pytest.raises(nd.InvalidInputError, match="is a function"):
        nd.derivatives(lambda x: (lambda y: x * y), 2)(1.0)


def test_jets_with_batched_tangents_hessian_and_jacobian_f():
    """jacobian_f and hessian push batched tangents: around and inside a jet."""
    f = lambda x: anp.sum(anp.tanh(A[:, :3] @ x) ** 2) + anp.prod(anp.sin(x))
    x0, v = X0[:3], V1[:3]
    h = nd.hessian(lambda x: nd.jet(f, (x,), ((v, v),))[1][1])(x0)     # f''[v, v] + f'[v]
    ref = nd.hessian(lambda x: nd.derivative(nd.derivative(lambda t: f(x + t * v)))(0.0)
                     + nd.derivative(lambda t: f(x + t * v))(0.0))(x0)
    assert_close(h, ref, rtol=1e-10, atol=1e-12)
    _, s = nd.jet(nd.hessian(f), (x0,), ((v, v),))
    H = nd.hessian(f)
    assert_close(s[0], nd.derivative(lambda t: H(x0 + t * v))(0.0), rtol=1e-12, atol=1e-14)
    assert_close(s[1], nd.derivative(nd.derivative(lambda t: H(x0 + t * v + t * t / 2 * v)))(0.0),
          rtol=1e-11, atol=1e-13)
    J = nd.jacobian_f(lambda x: nd.jet(lambda y: anp.sin(A[:, :3] @ y), (x,), ((v,),))[1][0])(x0)
    assert_close(J, nd.jacobian_f(lambda x: nd.derivative(lambda t: anp.sin(A[:, :3] @ (x + t * v)))(0.0))(x0),
          rtol=1e-13)


def test_a_leaked_jet_is_refused():
    leaked = []
    nd.derivatives(lambda x: leaked.append(x) or x * x, 2)(1.5)
    with pytest.raises(nd.EscapedPerturbationError, match="escaped"):
        nd.sin(leaked[0])
    with pytest.raises(nd.InvalidInputError, match="already returned"):
        nd.derivatives(_inner_jet, 1)(1.0)


def _inner_jet(x):
    """A jet made inside and returned undifferentiated: read out of its finished run."""
    box = []
    nd.jet(lambda y: box.append(y * x) or y, (x,), ((1.0,),))
    return box[0]


def _linear_systems():
    from nestad.scipy import linalg as sla
    rng = np.random.default_rng(7)
    m = rng.normal(size=(3, 3))
    s = m @ m.T + 3.0 * np.eye(3)
    ds = 0.2 * (m + m.T)
    lo = np.linalg.cholesky(s)
    dlo = 0.2 * np.tril(rng.normal(size=(3, 3)))
    b2, db2 = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    b1, db1 = b2[:, 0], db2[:, 0]
    ab = np.array([[0.0, 1.0, -0.5], [4.0, 5.0, 6.0], [0.3, 0.2, 0.0]])
    dab = 0.3 * rng.normal(size=(3, 3))
    ab20 = np.array([[4.0, 5.0, 6.0], [1.0, -0.5, 0.0], [0.3, 0.0, 0.0]])   # diagonal, two below
    stack, dstack = np.stack([s, s + np.eye(3)]), np.stack([ds, -ds])
    return {
        'solve': lambda t: anp.linalg.solve(s + t * ds, b2 + t * db2),
        'solve, a only': lambda t: anp.linalg.solve(s + t * ds, b1),
        'solve, stacks': lambda t: anp.linalg.solve(stack + t * dstack, b2),
        'cho_solve lower': lambda t: sla.cho_solve((lo + t * dlo, True), b2 + t * db2),
        'cho_solve upper, other triangle ignored': lambda t: sla.cho_solve((lo.T + t * (dlo.T + np.tril(ds, -1)), False), b1),
        'cho_solve, b only': lambda t: sla.cho_solve((lo, True), b1 + t * db1),
        'solve_banded': lambda t: sla.solve_banded((1, 1), ab + t * dab, b1 + t * db1),
        'solve_banded (2, 0), matrix rhs': lambda t: sla.solve_banded((2, 0), ab20 + t * dab, b2 + t * db2),
        'solve_banded (0, 2), ab only': lambda t: sla.solve_banded((0, 2), ab20[::-1, ::-1] + t * dab, b2),
        'solve_triangular trans unit': lambda t: sla.solve_triangular(lo + t * dlo, b2 + t * db2, trans=1, lower=True,
                                                                        unit_diagonal=True),
        'solve_triangular upper': lambda t: sla.solve_triangular(lo.T + t * dlo.T, b1, lower=False),
    }


@pytest.mark.parametrize("name", sorted(_linear_systems()))
def test_linear_systems_one_solve_per_order_against_nested_derivative(name):
    # the rules of linear systems (A0 x_k = b_k - sum A_j x_(k-j)) against nested derivative
    # through the first-order rules, orders 0..4 (their mpmath references to order 10 are in
    # test_taylor_primitives.py), and inside an outer derivative (a0 then carries the outer
    # run's perturbation: the primitive's own solves, not the factors)
    f = _linear_systems()[name]
    want = nested(f, 4)(0.0)
    got = nd.derivatives(f, 4)(0.0)
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.allclose(nd.primal_value(g), w, rtol=1e-12, atol=1e-12 * np.max(np.abs(w))), (name, k)
    outer = nd.derivative(lambda s: nd.derivatives(lambda t: f(t + 0.3 * s * s + 0.2 * s), 2)(0.0)[2])(0.0)
    inner = nd.derivative(nd.derivative(nd.derivative(f)))(0.0)
    assert np.allclose(outer, 0.2 * inner, rtol=1e-11, atol=1e-12 * np.max(np.abs(inner))), name


def test_linear_systems_factor_once(monkeypatch):
    import scipy.linalg
    from nestad.scipy import linalg as sla
    calls = {'getrf': 0, 'gbtrf': 0}

    def counted(name, fn):
        def wrapper(*args, **kw):
            calls[name] += 1
            return fn(*args, **kw)
        return wrapper
    monkeypatch.setattr(scipy.linalg, 'lu_factor', counted('getrf', scipy.linalg.lu_factor))
    monkeypatch.setattr(scipy.linalg.lapack, 'dgbtrf', counted('gbtrf', scipy.linalg.lapack.dgbtrf))
    f = _linear_systems()
    nd.derivatives(f['solve'], 8)(0.0)
    nd.derivatives(f['solve_banded'], 8)(0.0)
    assert calls == {'getrf': 1, 'gbtrf': 1}
    # staged, the jet's coefficients are traced: the primitive's solves (a program), equal
    staged = nd.stage(nd.derivatives(f['cho_solve lower'], 4))
    for g, w in zip(staged(0.0), nd.derivatives(f['cho_solve lower'], 4)(0.0)):
        assert np.allclose(g, w, rtol=1e-13, atol=0)


def _orbit(w, steps=None):
    """Euler steps pushed by an inner gradient_r until y would cross 0 (a data-dependent
    trip count, 24 steps), w in the potential (read from the loop's closure) and in
    the starting state.  ``steps``: Python's loop instead (the eager reference)."""
    def potential(p):
        d0, d1 = p[0] - 1.0, p[1] - (3.0 - w)
        return 1.0 / nd.sqrt(d0 * d0 + d1 * d1)
    grad = nd.gradient_r(potential)
    cond = lambda s: s[1] + 0.1 * s[3] > 0.0

    def body(s):
        g = grad([s[0], s[1]])
        return (s[0] + 0.1 * s[2], s[1] + 0.1 * s[3], s[2] - 0.1 * g[0], s[3] - 0.1 * g[1])
    state = (0.0, 2.0 + 0.1 * w, 1.0, 0.0)
    if steps:
        while cond(state):
            state = body(state)
    else:
        state = nd.while_loop(cond, body, state)
    x0, x1, v0, v1 = state
    return (x0 - x1 / v1 * v0) * x0


def test_staged_while_loop_under_jet_is_a_loop():
    # the staged loop's taylor rule: a loop on the state and its coefficients (it was
    # unrolled into the trace, the program growing with the trip count)
    f = lambda t: _orbit(0.3 + t)
    eager = nd.derivatives(lambda t: _orbit(0.3 + t, steps=True), 6)(0.0)
    assert_close(nd.derivatives(f, 6)(0.0), eager, rtol=1e-13)
    assert_close(nested(f, 3)(0.0), eager[:4], rtol=1e-11)
    staged = nd.stage(nd.derivatives(f, 6))
    assert_close(staged(0.0), eager, rtol=1e-12)
    eqns = staged.programs()[0].eqns
    assert sum(e.op.name == 'while' for e in eqns) == 1 and len(eqns) < 200, len(eqns)
    # the loop's state carries jets (w in the starting state), and a closure's jet alone
    g = lambda t: nd.while_loop(lambda s: s[0] < 5.0, lambda s: (s[0] + 1.0, s[1] * nd.sin(t) + 0.5), (0.0, 1.0))[1]
    want = nd.derivatives(lambda t: sum(0.5 * nd.sin(t) ** j for j in range(5)) + nd.sin(t) ** 5, 5)(0.4)
    assert_close(nd.stage(nd.derivatives(g, 5))(0.4), want, rtol=1e-13)
    # jet inside derivative, and gradient_r of a staged jet through the loop
    d = nd.derivative(lambda s: nd.stage(nd.derivatives(f, 2))(s)[2])(0.0)
    assert_close(d, eager[3], rtol=1e-10)
    assert_close(nd.gradient_r(lambda s: nd.derivatives(f, 2)(s)[2])(0.0), eager[3], rtol=1e-10)
