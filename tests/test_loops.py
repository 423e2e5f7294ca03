"""Loops in reverse mode by the adjoint rule (nestad/staging/loops.py), and nd.scan /
nd.fori_loop: against eager nestad, JAX (lax.scan / fori_loop, which can reverse fixed
trip counts) and closed forms, in every mode, nested, eager and staged."""
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.staging import loops

jax = pytest.importorskip("jax", reason="JAX is the independent answer for loop gradients")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

D = {'f': nd.derivative, 'r': nd.gradient_r}
PAIRINGS = ['ff', 'fr', 'rf', 'rr']
STEPS = 50


def ops_of(program):
    """Every op in a program, loop bodies included."""
    out = []
    for e in program.eqns:
        out.append(e.op)
        for sub in ('cond', 'body'):
            if sub in e.params:
                out += ops_of(e.params[sub])
    return out


def uses_adjoint(staged):
    return any(op is loops.STASH for p in staged.programs() for op in ops_of(p))


# ---------------------------------------------------------------- while_loop, adjoint rule

def decay(np_, loop):
    """A STEPS-step loop on an n-vector x, parameters q in the state (an invariant)."""
    def f(p):
        k = 0.1 / p.shape[0]

        def body(s):
            i, x, q = s
            return i + 1, x * 0.99 + np_.sin(x) * 0.05 * q + k * np_.sum(x * q), q
        return np_.sum(loop(body, (0, p * 1.0, p))[1] ** 2)
    return f


def nd_loop(body, s):
    return nd.while_loop(lambda s: s[0] < STEPS, body, s)


def jax_loop(body, s):
    return jax.lax.fori_loop(0, STEPS, lambda i, s: body(s), s)


@pytest.mark.parametrize("n", [1, 4, 8, 10, 100, 1000])
def test_staged_reverse_through_while_loop_equals_eager_and_jax(n):
    p = np.linspace(-1.0, 1.0, n) + 0.3
    f = decay(anp, nd_loop)
    want = jax.grad(decay(jnp, jax_loop))(p)
    staged = nd.stage(nd.gradient_r(f))
    np.testing.assert_allclose(staged(p), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(nd.gradient_r(f)(p), want, rtol=1e-12, atol=1e-14)
    # a second call at another point reuses the program (the trip count is not baked in)
    np.testing.assert_allclose(staged(p * 0.5), jax.grad(decay(jnp, jax_loop))(p * 0.5),
                               rtol=1e-12, atol=1e-14)
    # (x and q both carry the run: 2n input scalars)
    assert uses_adjoint(staged) == (2 * n >= loops.ADJOINT_MIN_DIRECTIONS)


def test_adjoint_rule_for_any_trip_count_one_program():
    def f(p):
        def body(s):
            x, q = s
            return x * 1.5 + q, q
        return anp.sum(nd.while_loop(lambda s: anp.sum(s[0]) < 100.0, body, (p, p))[0])
    staged = nd.stage(nd.gradient_r(f))
    for p in (np.full(5, 0.5), np.full(5, 3.0), np.full(5, 30.0)):   # 6, 3 and 0 trips
        np.testing.assert_allclose(staged(p), nd.gradient_r(f)(p), rtol=1e-13)
    assert uses_adjoint(staged) and len(staged.programs()) == 1


@pytest.fixture
def adjoint_always(monkeypatch):
    monkeypatch.setattr(loops, 'ADJOINT_MIN_DIRECTIONS', 1)


def test_adjoint_rule_on_scalars_ints_float32_and_mixed_shapes(adjoint_always):
    def f(a, m):
        def body(s):
            i, x, y, z, m = s
            return (i + 1, x * anp.cos(y) + 0.1 * anp.sum(z) + anp.sum(m @ (z * y)),
                    y + 0.01 * x * x, z * np.float32(0.9) + anp.sum(z) * np.float32(0.01), m)
        z0 = anp.astype(a * np.ones(3), np.float32)
        out = nd.while_loop(lambda s: s[0] < 20, body, (0, a, a * 0.5, z0, m))
        return out[1] + out[2] + anp.sum(out[3])

    def fj(a, m):
        def body(i, s):
            x, y, z = s
            return (x * jnp.cos(y) + 0.1 * jnp.sum(z) + jnp.sum(m @ (z * y)), y + 0.01 * x * x,
                    z * np.float32(0.9) + jnp.sum(z) * np.float32(0.01))
        out = jax.lax.fori_loop(0, 20, body, (a, a * 0.5, (a * jnp.ones(3)).astype(np.float32)))
        return out[0] + out[1] + jnp.sum(out[2])
    m = np.arange(9.0).reshape(3, 3) / 10
    staged = nd.stage(lambda a, m: nd.gradient_r(lambda am: f(*am))((a, m)))
    got = staged(0.7, m)
    want = jax.grad(fj, argnums=(0, 1))(0.7, m)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    assert uses_adjoint(staged)


def test_adjoint_rule_in_second_derivatives(adjoint_always):
    """Reverse over reverse: the inner run takes the directions rule (the primals carry the
    outer run), whose tangent loop meets the adjoint rule for the outer run.  Reverse over
    forward keeps the directions rule (the body runs under the forward run's own tag,
    older than the adjoint's vjp).  Against JAX's Hessian-vector product."""
    f, fj = decay(anp, nd_loop), decay(jnp, jax_loop)
    p, v = np.linspace(0.2, 1.0, 6), np.linspace(1.0, -1.0, 6)
    want = jax.jvp(jax.grad(fj), (p,), (v,))[1]
    rr = nd.stage(nd.gradient_r(lambda p: anp.sum(nd.gradient_r(f)(p) * v)))
    rf = nd.stage(nd.gradient_r(lambda p: nd.derivative(lambda t: f(p + t * v))(0.0)))
    np.testing.assert_allclose(rr(p), want, rtol=1e-11)
    np.testing.assert_allclose(rf(p), want, rtol=1e-11)
    assert uses_adjoint(rr) and not uses_adjoint(rf)


@pytest.mark.parametrize('modes', PAIRINGS)
def test_second_derivatives_through_a_loop_with_a_vector_state(modes):
    f, fj = decay(anp, nd_loop), decay(jnp, jax_loop)
    base = np.linspace(0.2, 1.0, 5)

    def g(t):
        return f(base * t)
    want = jax.grad(jax.grad(lambda t: fj(base * t)))(0.8)
    op = D[modes[0]](D[modes[1]](g))
    np.testing.assert_allclose(nd.stage(op)(0.8), want, rtol=1e-11)
    np.testing.assert_allclose(op(0.8), want, rtol=1e-11)


def test_a_perturbed_cotangent_differentiates_the_backward_loop(adjoint_always):
    """vjp's pullback differentiated with respect to the cotangent: the backward loop
    itself carries the outer run."""
    def f(x):
        return nd.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, anp.sin(s[1]) * 1.1),
                             (0, x))[1]

    def g(c):
        _, pull = nd.vjp(f, np.array([0.3, 0.5]))
        return anp.sum(pull(c * np.array([1.0, 2.0]))[0] ** 2)
    want = jax.grad(lambda c: jnp.sum(jax.vjp(
        lambda x: jax.lax.fori_loop(0, 10, lambda i, x: jnp.sin(x) * 1.1, x),
        jnp.array([0.3, 0.5]))[1](c * jnp.array([1.0, 2.0]))[0] ** 2))(0.7)
    np.testing.assert_allclose(nd.stage(nd.gradient_r(g))(0.7), want, rtol=1e-12)


_decay = decay(anp, nd_loop)


def decayed(p):
    return _decay(p)


def test_staged_program_with_the_adjoint_pickles(adjoint_always):
    import pickle
    staged = nd.stage(nd.gradient_r(decayed))
    p = np.linspace(0.1, 0.5, 4)
    first = staged(p)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(staged))(p), first)


# ---------------------------------------------------------------- scan

def rnn(np_, scan):
    """The weights w travel in the carry (a body reading a reverse run's value from its
    closure makes the loop unroll: see test_a_body_reading_the_differentiated_value...)."""
    def f(w, xs):
        def step(c, x):
            h, w = c
            h = np_.tanh(h * w + x)
            return (h, w), np_.sum(h * w)
        (h, _), ys = scan(step, (w * 0.5, w), xs)
        return np_.sum(h) + np_.sum(ys ** 2)
    return f


XS = np.random.RandomState(0).randn(7, 3) * 0.5
W = np.array([0.3, -0.6, 0.9])


def test_scan_value_matches_jax_eager_and_staged():
    f, fj = rnn(anp, nd.scan), rnn(jnp, jax.lax.scan)
    want = fj(W, XS)
    assert abs(f(W, XS) - want) < 1e-13
    assert abs(nd.stage(f)(W, XS) - want) < 1e-13


@pytest.mark.parametrize('staged', [False, True])
def test_scan_in_every_mode(staged):
    f, fj = rnn(anp, nd.scan), rnn(jnp, jax.lax.scan)
    S = nd.stage if staged else (lambda g: g)
    np.testing.assert_allclose(S(nd.gradient_r(lambda w: f(w, XS)))(W), jax.grad(fj)(W, XS),
                               rtol=1e-12)
    np.testing.assert_allclose(S(nd.gradient_r(lambda xs: f(W, xs)))(XS),
                               jax.grad(fj, 1)(W, XS), rtol=1e-12)
    np.testing.assert_allclose(S(nd.derivative(lambda t: f(W * t, XS)))(1.3),
                               jax.grad(lambda t: fj(W * t, XS))(1.3), rtol=1e-12)
    v = np.array([1.0, 0.5, -2.0])
    got = S(lambda w: nd.jvp(lambda w: f(w, XS), (w,), (v,)))(W)
    want = jax.jvp(lambda w: fj(w, XS), (W,), (v,))
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    got = S(lambda w: nd.vjp(lambda w: f(w, XS), w)[1](2.0)[0])(W)
    np.testing.assert_allclose(got, 2.0 * jax.grad(fj)(W, XS), rtol=1e-12)
    np.testing.assert_allclose(S(nd.hessian(lambda w: f(w, XS)))(W),
                               jax.hessian(fj)(W, XS), rtol=1e-11)


@pytest.mark.parametrize('modes', PAIRINGS)
def test_scan_nested(modes):
    f, fj = rnn(anp, nd.scan), rnn(jnp, jax.lax.scan)
    op = D[modes[0]](D[modes[1]](lambda t: f(W * t, XS * t)))
    want = jax.grad(jax.grad(lambda t: fj(W * t, XS * t)))(0.9)
    np.testing.assert_allclose(op(0.9), want, rtol=1e-11)
    np.testing.assert_allclose(nd.stage(op)(0.9), want, rtol=1e-11)


def test_scan_reverse_structures_and_no_xs():
    def f(a):
        def step(c, x):
            u, v = c
            return (u * x['s'] + v, v * 0.5 + x['t'][0]), {'p': u * v, 'q': [x['t'] * u]}
        c, ys = nd.scan(step, (a, a * 2), {'s': XS[:, 0], 't': XS[:, 1:]}, reverse=True)
        return c[0] + c[1] + anp.sum(ys['p'] ** 2) + anp.sum(ys['q'][0])

    def fj(a):
        def step(c, x):
            u, v = c
            return (u * x['s'] + v, v * 0.5 + x['t'][0]), {'p': u * v, 'q': [x['t'] * u]}
        c, ys = jax.lax.scan(step, (a, a * 2), {'s': XS[:, 0], 't': XS[:, 1:]}, reverse=True)
        return c[0] + c[1] + jnp.sum(ys['p'] ** 2) + jnp.sum(ys['q'][0])
    for op in (nd.gradient_r(f), nd.stage(nd.gradient_r(f)), nd.stage(nd.derivative(f))):
        np.testing.assert_allclose(op(0.4), jax.grad(fj)(0.4), rtol=1e-12)

    def counter(a):
        c, ys = nd.scan(lambda c, _: (c * a, None), 1.0, None, length=5)
        assert ys is None
        return c
    assert abs(nd.stage(nd.gradient_r(counter))(1.5) - 5 * 1.5 ** 4) < 1e-12
    assert abs(nd.gradient_r(counter)(1.5) - 5 * 1.5 ** 4) < 1e-12


def test_scan_stages_one_loop_not_unrolled():
    f = nd.stage(nd.gradient_r(lambda w: rnn(anp, nd.scan)(w, np.zeros((500, 3)))))
    f(W)
    (prog,) = f.programs()
    assert len(prog.eqns) < 100


# ---------------------------------------------------------------- fori_loop

def osc(np_, fori):
    def f(p):
        def body(i, s):
            x, v = s
            return x + 0.1 * v, v - 0.1 * np_.sin(x) * p * (1.0 + 0.01 * i)
        x, v = fori(2, 30, body, (p * 1.0, p * 0.0))
        return np_.sum(x * x) + np_.sum(v)
    return f


@pytest.mark.parametrize('staged', [False, True])
def test_fori_loop_in_every_mode(staged):
    f, fj = osc(anp, nd.fori_loop), osc(jnp, jax.lax.fori_loop)
    S = nd.stage if staged else (lambda g: g)
    p = np.array([0.5, 1.0, 1.5, 2.0])
    np.testing.assert_allclose(S(nd.gradient_r(f))(p), jax.grad(fj)(p), rtol=1e-12)
    np.testing.assert_allclose(S(nd.derivative(lambda t: f(p * t)))(1.1),
                               jax.grad(lambda t: fj(p * t))(1.1), rtol=1e-12)
    np.testing.assert_allclose(S(nd.hessian(f))(p), jax.hessian(fj)(p), rtol=1e-11)
    got = S(lambda p: nd.vjp(f, p)[1](1.0)[0])(p)
    np.testing.assert_allclose(got, jax.grad(fj)(p), rtol=1e-12)


@pytest.mark.parametrize('modes', PAIRINGS)
def test_fori_loop_nested(modes):
    f, fj = osc(anp, nd.fori_loop), osc(jnp, jax.lax.fori_loop)
    op = D[modes[0]](D[modes[1]](lambda t: f(t * np.array([1.0, 2.0]))))
    want = jax.grad(jax.grad(lambda t: fj(t * np.array([1.0, 2.0]))))(0.7)
    np.testing.assert_allclose(op(0.7), want, rtol=1e-11)
    np.testing.assert_allclose(nd.stage(op)(0.7), want, rtol=1e-11)


def test_fori_loop_with_array_bounds_stages_a_loop():
    def f(p, hi):
        return nd.fori_loop(0, hi, lambda i, s: (s[0] * s[1] + i, s[1]), (1.0, p))[0]
    g = nd.stage(nd.gradient_r(f))
    for hi in (0, 3, 7):
        eager = nd.gradient_r(lambda p: _py_fori(p, hi))(1.3)
        assert abs(g(1.3, np.array(hi)) - eager) < 1e-12 * max(1.0, abs(eager))
    # (integer arguments are static for nd.stage: one program per bound, each one loop)
    assert all(len(p.eqns) == 1 for p in g.programs())


def _py_fori(p, hi):
    c = 1.0
    for i in range(hi):
        c = c * p + i
    return c


def test_a_body_reading_the_differentiated_value_from_its_closure_stays_one_loop():
    """Closure conversion: w, read from the body's closure, becomes loop state."""
    def f(w, n):
        return nd.fori_loop(0, n, lambda i, c: anp.sin(c) * w + 0.1, w)
    g = nd.stage(nd.gradient_r(f))
    for n in (3, 5):
        want = jax.grad(lambda w: jax.lax.fori_loop(0, n, lambda i, c: jnp.sin(c) * w + 0.1,
                                                     w))(0.7)
        assert abs(g(0.7, np.array(n)) - want) < 1e-13
    assert all(len(p.eqns) <= 3 for p in g.programs())


def rnn_closure(np_, scan):
    """JAX's usual spelling: the weights read from the step's closure."""
    def f(w, xs):
        def step(h, x):
            h = np_.tanh(h * w + x)
            return h, np_.sum(h * w)
        h, ys = scan(step, w * 0.5, xs)
        return np_.sum(h) + np_.sum(ys ** 2)
    return f


@pytest.mark.parametrize('adjoint', [False, True])
def test_scan_reading_weights_from_its_closure_in_every_mode(adjoint, monkeypatch):
    if adjoint:
        monkeypatch.setattr(loops, 'ADJOINT_MIN_DIRECTIONS', 1)
    f, fj = rnn_closure(anp, nd.scan), rnn_closure(jnp, jax.lax.scan)
    xs = np.random.RandomState(1).randn(60, 3) * 0.5
    g = nd.stage(nd.gradient_r(lambda w: f(w, xs)))
    np.testing.assert_allclose(g(W), jax.grad(fj)(W, xs), rtol=1e-12)
    (prog,) = g.programs()
    assert len(prog.eqns) < 40                       # one loop, not 60 steps unrolled
    np.testing.assert_allclose(nd.stage(nd.hessian(lambda w: f(w, xs)))(W),
                               jax.hessian(fj)(W, xs), rtol=1e-11)
    for modes in PAIRINGS:
        op = D[modes[0]](D[modes[1]](lambda t: f(W * t, xs)))
        want = jax.grad(jax.grad(lambda t: fj(W * t, xs)))(0.9)
        np.testing.assert_allclose(nd.stage(op)(0.9), want, rtol=1e-11)


def test_closure_conversion_through_helpers_and_containers():
    """The value sits in a dict inside a helper function's closure."""
    def f(p):
        params = {'scale': p[0], 'shift': [p[1]]}

        def helper(c):
            return anp.sin(c) * params['scale'] + params['shift'][0]
        return nd.while_loop(lambda s: s[0] < 8, lambda s: (s[0] + 1, helper(s[1])),
                             (0, 0.3))[1]

    def fj(p):
        return jax.lax.fori_loop(0, 8, lambda i, c: jnp.sin(c) * p[0] + p[1], 0.3)
    g = nd.stage(nd.gradient_r(f))
    p = np.array([0.8, 0.1])
    np.testing.assert_allclose(g(p), jax.grad(fj)(p), rtol=1e-13)
    np.testing.assert_allclose(g(p * 1.1), jax.grad(fj)(p * 1.1), rtol=1e-13)
    assert g.trace_count == 1


_GLOBAL = []


def test_a_value_reached_only_through_a_global_still_unrolls_correctly():
    def body(s):
        return s[0] + 1, anp.sin(s[1]) * _GLOBAL[0]

    def f(w):
        _GLOBAL[:] = [w]
        try:
            return nd.while_loop(lambda s: s[0] < 4, body, (0, 0.5))[1]
        finally:
            _GLOBAL.clear()
    g = nd.stage(nd.gradient_r(f))
    want = jax.grad(lambda w: jax.lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) * w, 0.5))(0.9)
    assert abs(g(0.9) - want) < 1e-14
