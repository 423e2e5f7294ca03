"""Loops reversed with bounded memory: ``checkpoints=N`` on while_loop, scan and fori_loop
(nestad/revolve.py's binomial schedule, nestad/staging/loops.py's backward loop).

The schedule against the dynamic program that defines the optimum; the derivatives
against the rule that stores every iterate (staged, bit for bit: the same arithmetic on
the same states; eagerly, bit for bit across N and to rounding against Python's loop's
tape), against JAX, in every mode and pairing to second order, under vmap; the number
of body evaluations; the memory, which grows with N and not with the number of steps."""
import pickle
import tracemalloc
from functools import lru_cache
from math import comb

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import revolve
from nestad.errors import InvalidInputError
from nestad.staging import loops

jax = pytest.importorskip("jax", reason="JAX is the independent answer for loop gradients")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

D = {'f': nd.derivative, 'r': nd.gradient_r}
STEPS = 30


@pytest.fixture
def adjoint_always(monkeypatch):
    """The adjoint rule (which checkpoints apply to) also for states of few scalars."""
    monkeypatch.setattr(loops, 'ADJOINT_MIN_DIRECTIONS', 1)


# ---------------------------------------------------------------- the schedule

@lru_cache(None)
def fewest(l, s):
    """The fewest body steps recomputed to reverse ``l`` steps from a stored state with
    ``s`` more slots: one stores the state after ``m`` steps, or (no slot) advances from
    the start for every step."""
    if l <= 1:
        return 0
    if s == 0:
        return l * (l - 1) // 2
    return min(m + fewest(l - m, s - 1) + fewest(m, s) for m in range(1, l))


def follow(steps, slots, plan, held=None):
    """Run a plan on positions: the steps reversed in order, the steps advanced, and the
    most slots holding a state at once (slot 0: the start)."""
    restore, _, count, final, gap, slot = (a.tolist() for a in plan)
    held = dict(held or {0: 0})
    order, advanced, most, k = [], 0, len(held), 0
    for j in range(steps):
        pos = held[restore[j]]
        for _ in range(count[j]):
            pos += gap[k]
            advanced += gap[k]
            assert 0 <= slot[k] < slots
            held[slot[k]] = pos
            k += 1
        most = max(most, len(held))
        pos += final[j]
        advanced += final[j]
        order.append(pos)
        for s in [s for s, p in held.items() if p >= pos and s]:    # never read again
            del held[s]
    return order, advanced, most


@pytest.mark.parametrize('slots', [1, 2, 3, 4, 6])
def test_the_schedule_reverses_every_step_with_the_fewest_recomputations(slots):
    for steps in range(0, 45):
        order, advanced, most = follow(steps, slots, revolve.plan_arrays(steps, slots))
        assert order == list(range(steps - 1, -1, -1))
        assert most <= slots
        assert advanced == revolve.advances(steps, slots) == fewest(steps, slots - 1)
        r = revolve.repetitions(steps, slots)           # the binomial bound it reaches
        assert steps <= revolve.reversible(slots - 1, r) and (
            r == 0 or steps > revolve.reversible(slots - 1, r - 1))
        # a known trip count: the forward loop stores the first sweep's states
        kept, where, plan = loops.first_sweep(steps, slots)
        held = {0: 0, **{s: p for s, p in zip(where, kept)}}
        order2, advanced2, most2 = follow(steps, slots, plan, held)
        assert order2 == order and most2 <= slots
        assert advanced2 == advanced - (kept[-1] if kept else 0)


def test_the_schedule_of_a_long_loop():
    steps, slots = 10 ** 4, 10
    order, advanced, most = follow(steps, slots, revolve.plan_arrays(steps, slots))
    assert order == list(range(steps - 1, -1, -1)) and most <= slots
    r = revolve.repetitions(steps, slots)       # C(10 + 7, 7) = 19448 >= 10^4 > C(16, 6)
    assert r == 7 and advanced == r * steps - comb(slots + r, slots + 1)


@pytest.mark.parametrize('bad', [0, -3, 2.5, True, '4', None])
def test_bad_checkpoints_are_refused_by_name(bad):
    body = lambda s: (s[0] + 1, s[1] * 0.5)          # noqa: E731
    calls = [lambda: nd.while_loop(lambda s: s[0] < 3, body, (0, 1.0), checkpoints=bad),
             lambda: nd.fori_loop(0, 3, lambda i, x: x * 0.5, 1.0, checkpoints=bad),
             lambda: nd.scan(lambda c, x: (c * x, c), 1.0, np.ones(3), checkpoints=bad)]
    for op, call in zip(('while_loop', 'fori_loop', 'scan'), calls):
        if bad is None:
            call()
            continue
        with pytest.raises(InvalidInputError, match=rf"{op}: checkpoints must be an int >= 1 "
                           r"\(the most states .*\) or None \(keep every iterate\), not "):
            call()
    assert nd.while_loop(lambda s: s[0] < 3, body, (0, 1.0), checkpoints=np.int64(2)) == (3, 0.125)


# ---------------------------------------------------------------- derivatives

def decay(np_, loop, steps=STEPS):
    """A loop on an n-vector x with parameters q in the state (an invariant)."""
    def f(p):
        k = 0.1 / p.shape[0]

        def body(s):
            i, x, q = s
            return i + 1, x * 0.99 + np_.sin(x) * 0.05 * q + k * np_.sum(x * q), q
        return np_.sum(loop(body, (0, p * 1.0, p))[1] ** 2)
    return f


def nd_loop(checkpoints, steps=STEPS):
    return lambda body, s: nd.while_loop(lambda s: s[0] < steps, body, s, checkpoints=checkpoints)


def jax_loop(body, s):
    return jax.lax.fori_loop(0, STEPS, lambda i, s: body(s), s)


def ops_of(program):
    out = []
    for e in program.eqns:
        out.append(e)
        for sub in ('cond', 'body'):
            if sub in e.params:
                out += ops_of(e.params[sub])
    return out


def checkpointed(staged):
    """Does a staged function reverse a loop by the schedule (and store no iterate)?"""
    eqns = [e for p in staged.programs() for e in ops_of(p)]
    stashes = [e for e in eqns if e.op is loops.STASH]
    return any(e.op is loops.PLAN for e in eqns) and stashes and \
        all(e.params['vary'] == () for e in stashes)


@pytest.mark.parametrize('n', [1, 10, 1000])
def test_checkpointed_while_loop_equals_storing_every_iterate_bit_for_bit(n, adjoint_always):
    p = np.linspace(-1.0, 1.0, n) + 0.3
    want = jax.grad(decay(jnp, jax_loop))(p)
    stored = nd.stage(nd.gradient_r(decay(anp, nd_loop(None))))(p)
    eager_stored = nd.gradient_r(decay(anp, nd_loop(None)))(p)
    np.testing.assert_allclose(stored, want, rtol=1e-12, atol=1e-14)
    for checkpoints in (1, 2, 5, STEPS + 3):
        f = decay(anp, nd_loop(checkpoints))
        staged = nd.stage(nd.gradient_r(f))
        np.testing.assert_array_equal(staged(p), stored)
        assert checkpointed(staged)
        eager = nd.gradient_r(f)(p)
        np.testing.assert_allclose(eager, eager_stored, rtol=1e-13, atol=1e-15)
        if checkpoints == 1:
            first = eager
        np.testing.assert_array_equal(eager, first)     # the same steps back, any N


def test_one_program_for_every_trip_count(adjoint_always):
    def f(p, checkpoints):
        def body(s):
            x, q = s
            return x * 1.5 + q, q
        return anp.sum(nd.while_loop(lambda s: anp.sum(s[0]) < 100.0, body, (p, p),
                                     checkpoints=checkpoints)[0])
    stored = nd.stage(nd.gradient_r(lambda p: f(p, None)))
    staged = nd.stage(nd.gradient_r(lambda p: f(p, 3)))
    for p in (np.full(5, 30.0), np.full(5, 0.5), np.full(5, 3.0), np.full(5, 0.01)):
        np.testing.assert_array_equal(staged(p), stored(p))      # 0 (traced), 6, 3 and 13 trips
        np.testing.assert_array_equal(nd.gradient_r(lambda p: f(p, 3))(p), stored(p))
    assert len(staged.programs()) == 1


def rnn(np_, scan):
    def f(w, xs):
        def step(c, x):
            h, w = c
            h = np_.tanh(h * w + x)
            return (h, w), np_.sum(h * w)
        (h, _), ys = scan(step, (w * 0.5, w), xs)
        return np_.sum(h) + np_.sum(ys ** 2)
    return f


@pytest.mark.parametrize('n', [1, 8, 1000])
def test_checkpointed_scan_and_fori_loop_against_jax(n, adjoint_always):
    xs = np.random.RandomState(n).randn(17, n) * 0.5
    w = np.linspace(-0.9, 0.9, n)
    want = jax.grad(rnn(jnp, jax.lax.scan))(w, xs)
    stored = nd.stage(nd.gradient_r(rnn(anp, nd.scan)))(w, xs)
    np.testing.assert_allclose(stored, want, rtol=1e-12, atol=1e-14)
    for checkpoints in (1, 3, 17):
        f = rnn(anp, lambda step, c, xs: nd.scan(step, c, xs, checkpoints=checkpoints))
        np.testing.assert_array_equal(nd.stage(nd.gradient_r(f))(w, xs), stored)
        np.testing.assert_allclose(nd.gradient_r(f)(w, xs), want, rtol=1e-12, atol=1e-14)

    def g(np_, fori):
        return lambda w: np_.sum(fori(0, 17, lambda i, h: np_.tanh(h * w + 0.01 * i), w) ** 2)
    want = jax.grad(g(jnp, jax.lax.fori_loop))(w)
    for checkpoints in (None, 2, 5):
        f = g(anp, lambda *a: nd.fori_loop(*a, checkpoints=checkpoints))
        got = nd.stage(nd.gradient_r(f))(w)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        if checkpoints is None:
            stored = got
        np.testing.assert_array_equal(got, stored)


def fori(checkpoints):
    def loop(body, s):                        # decay's body with the counter fori_loop's
        return None, nd.fori_loop(0, STEPS, lambda i, v: body((i,) + v)[1:], tuple(s[1:]),
                                  checkpoints=checkpoints)[0]
    return loop


def scan(checkpoints):
    def loop(body, s):
        carry, _ = nd.scan(lambda c, x: (body((0,) + c)[1:], None), tuple(s[1:]),
                           length=STEPS, checkpoints=checkpoints)
        return None, carry[0]
    return loop


LOOPS = {'while_loop': nd_loop, 'fori_loop': fori, 'scan': scan}


@pytest.mark.parametrize('loop', list(LOOPS))
@pytest.mark.parametrize('modes', ['ff', 'fr', 'rf', 'rr'])
def test_second_derivatives_in_every_pairing(loop, modes, adjoint_always):
    """Staged, the schedule reverses the outer run (rr, rf's... where the adjoint rule
    applies); eagerly a loop nested in another run keeps Python's loop (its tape is
    shared by both runs), so the numbers are the same bit for bit everywhere."""
    base = np.linspace(0.2, 1.0, 5)
    want = jax.grad(jax.grad(lambda t: decay(jnp, jax_loop)(base * t)))(0.8)
    got = {}
    for ck in (None, 2, 4):
        f = decay(anp, LOOPS[loop](ck))
        op = D[modes[0]](D[modes[1]](lambda t: f(base * t)))
        got[ck] = (nd.stage(op)(0.8), op(0.8))
        np.testing.assert_allclose(got[ck], [want, want], rtol=1e-11)
        np.testing.assert_array_equal(got[ck], got[None])


def test_the_outer_run_of_reverse_over_reverse_is_checkpointed(adjoint_always):
    """Reverse over reverse: the inner run takes the directions rule, whose tangent loop
    the outer run reverses by the schedule; so does the pullback's backward loop when
    the cotangent is differentiated."""
    f = decay(anp, nd_loop(3))
    v = np.linspace(1.0, -1.0, 6)
    rr = nd.stage(nd.gradient_r(lambda p: anp.sum(nd.gradient_r(f)(p) * v)))
    p = np.linspace(0.2, 1.0, 6)
    want = jax.jvp(jax.grad(decay(jnp, jax_loop)), (p,), (v,))[1]
    np.testing.assert_allclose(rr(p), want, rtol=1e-11)
    assert checkpointed(rr)

    def g(c):
        _, pull = nd.vjp(lambda x: nd.while_loop(lambda s: s[0] < 10, lambda s: (
            s[0] + 1, anp.sin(s[1]) * 1.1), (0, x), checkpoints=2)[1], np.array([0.3, 0.5]))
        return anp.sum(pull(c * np.array([1.0, 2.0]))[0] ** 2)
    want = jax.grad(lambda c: jnp.sum(jax.vjp(
        lambda x: jax.lax.fori_loop(0, 10, lambda i, x: jnp.sin(x) * 1.1, x),
        jnp.array([0.3, 0.5]))[1](c * jnp.array([1.0, 2.0]))[0] ** 2))(0.7)
    np.testing.assert_allclose(nd.stage(nd.gradient_r(g))(0.7), want, rtol=1e-12)
    np.testing.assert_allclose(nd.gradient_r(g)(0.7), want, rtol=1e-12)


def test_under_vmap_both_ways(adjoint_always):
    f, f0 = decay(anp, nd_loop(3)), decay(anp, nd_loop(None))
    P = np.linspace(0.1, 1.0, 12).reshape(3, 4)
    want = np.stack([jax.grad(decay(jnp, jax_loop))(p) for p in P])
    for op in (lambda f: nd.vmap(nd.gradient_r(f)),
               lambda f: nd.gradient_r(lambda P: anp.sum(nd.vmap(f)(P)))):
        stored = nd.stage(op(f0))(P)
        np.testing.assert_allclose(stored, want, rtol=1e-12)
        np.testing.assert_array_equal(nd.stage(op(f))(P), stored)
        np.testing.assert_allclose(op(f)(P), want, rtol=1e-12)


def test_a_body_reading_the_differentiated_value_from_its_closure(adjoint_always):
    def f(w, checkpoints):
        return anp.sum(nd.fori_loop(0, 12, lambda i, h: anp.tanh(h * w + 0.1),
                                    w * 0.0 + 0.5, checkpoints=checkpoints))
    w = np.linspace(-1.0, 1.0, 9)
    stored = nd.stage(nd.gradient_r(lambda w: f(w, None)))(w)
    np.testing.assert_array_equal(nd.stage(nd.gradient_r(lambda w: f(w, 3)))(w), stored)
    with pytest.warns(UserWarning, match="keeps its tape"):       # eagerly: the tape is kept
        np.testing.assert_allclose(nd.gradient_r(lambda w: f(w, 3))(w), stored, rtol=1e-13)


# ---------------------------------------------------------------- counts and memory

COUNT = [0]


@nd.primitive
def tick(x):
    """x, counting its evaluations."""
    COUNT[0] += 1
    return x


tick.defpartials(lambda x, out: np.ones_like(x))


def counted(loop, checkpoints, steps):
    def step(c, x):
        return tick(c * 0.9 + anp.sin(c) * x)
    if loop == 'while_loop':
        return lambda p: anp.sum(nd.while_loop(
            lambda s: s[0] < steps, lambda s: (s[0] + 1, step(s[1], 0.1 * s[0])), (0, p),
            checkpoints=checkpoints)[1])
    if loop == 'fori_loop':
        return lambda p: anp.sum(nd.fori_loop(0, steps, lambda i, c: step(c, 0.1 * i), p,
                                              checkpoints=checkpoints))
    return lambda p: anp.sum(nd.scan(lambda c, x: (step(c, x), None), p,
                                     np.linspace(0.0, 1.0, steps), checkpoints=checkpoints)[0])


def evaluations(fn, *args):
    COUNT[0] = 0
    fn(*args)
    return COUNT[0]


@pytest.mark.parametrize('loop', ['while_loop', 'fori_loop', 'scan'])
def test_body_evaluations_are_the_binomial_count(loop, adjoint_always):
    """Staged, over the rule that stores every iterate: a while_loop recomputes exactly
    the binomial count (its forward loop only counts the trips); scan and fori_loop,
    whose trip count is known, store the first sweep's states as their forward loop
    passes them, and recompute that much less.  Eagerly, the forward loop, the
    recomputations, and one body evaluation per step back."""
    steps, p = 37, np.linspace(-1.0, 1.0, 10)
    stored = nd.stage(nd.gradient_r(counted(loop, None, steps)))
    stored(p)
    base = evaluations(stored, p)
    assert base == steps                        # (the steps back need no value of tick)
    for slots in (1, 2, 3, 5, steps, steps + 3):
        want = revolve.advances(steps, slots)
        if loop != 'while_loop':
            kept = loops.first_sweep(steps, slots)[0]
            want -= kept[-1] if kept else 0
        staged = nd.stage(nd.gradient_r(counted(loop, slots, steps)))
        staged(p)
        assert evaluations(staged, p) - base == want
        eager = nd.gradient_r(counted(loop, slots, steps))
        assert evaluations(eager, p) == 2 * steps + want + (loop == 'scan')   # (scan: + ys' probe)
    assert revolve.advances(steps, steps) == steps - 1     # every state stored: one sweep


def peak_states(fn, p):
    fn(p)
    tracemalloc.start()
    try:
        fn(p)
        return tracemalloc.get_traced_memory()[1] / p.nbytes
    finally:
        tracemalloc.stop()


def test_memory_grows_with_checkpoints_not_with_steps():
    """Peak memory of a staged gradient through a loop on a 20000-vector, in states:
    storing every iterate grows with the steps; checkpointed, with N only (the buffer of
    N states, copied by a store, and the working states), the same at 40 and 160 steps."""
    p = np.linspace(0.1, 1.0, 20000)

    def grad(steps, checkpoints):
        def f(p):
            def body(s):
                i, x, q = s
                return i + 1, x * 0.99 + anp.sin(x) * 0.01 * q, q
            return anp.sum(nd.while_loop(lambda s: s[0] < steps, body, (0, p * 1.0, p),
                                         checkpoints=checkpoints)[1])
        return nd.stage(nd.gradient_r(f))
    stored = peak_states(grad(160, None), p)
    assert stored > 160
    peaks = {(steps, n): peak_states(grad(steps, n), p) for steps in (40, 160) for n in (4, 16)}
    for n in (4, 16):
        assert abs(peaks[160, n] - peaks[40, n]) < 2
        assert peaks[160, n] < 5 * n + 12
    assert 12 <= peaks[160, 16] - peaks[160, 4] <= 5 * 12


_decay3 = decay(anp, nd_loop(3))


def decayed(p):
    return _decay3(p)


def test_a_checkpointed_program_pickles(adjoint_always):
    staged = nd.stage(nd.gradient_r(decayed))
    p = np.linspace(0.1, 0.5, 4)
    first = staged(p)
    assert checkpointed(staged)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(staged))(p), first)
