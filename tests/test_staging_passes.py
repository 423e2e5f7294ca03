"""Rewrites that make staged code faster: each keeps the program's results bit for bit
(signed zeros included) and is checked at the program level (the rewritten program has
fewer equations, or fewer loop slots) and against eager nestad."""
import importlib.util

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.numpy._indexing import _scatter
from nestad.staging.accumulate import SCATTER_SUM, accumulate_scatters


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def ops(program):
    return [e.op.name for e in program.eqns]


def rosen(x):
    return anp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


# ---------------------------------------------------------------- sums of scatters

def test_rosenbrock_hvp_scatters_accumulate_in_one_buffer():
    rng = np.random.default_rng(0)
    x, v = rng.standard_normal(50), rng.standard_normal(50)
    hvp = lambda x, v: nd.hvp(rosen, x, v)          # noqa: E731
    program = nd.trace(hvp, x, v)
    assert ops(program).count('scatter_add') == 2
    fused = accumulate_scatters(program)
    assert len(fused.eqns) == len(program.eqns) - 2
    assert 'scatter_add' not in ops(fused) and ops(fused).count('scatter_sum') == 1
    src = program.source()
    assert "_scatter" not in src and "[:-1] = " in src and "[1:] += " in src
    staged = nd.stage(hvp)
    staged(x, v)
    want = program(x, v)                             # the traced program, evaluated as recorded
    assert same_bits(staged(x, v), want) and same_bits(fused(x, v), want)
    np.testing.assert_allclose(staged(x, v), hvp(x, v), rtol=1e-12)


def _scatter_sum_cases():
    s = slice
    yield (6,), [s(None, -1), s(1, None)]
    yield (6,), [s(1, None), s(None, -1)]
    yield (6,), [s(0, 2), s(4, 6)]                 # disjoint: every entry of the first fixed up
    yield (6,), [s(None), s(2, 4)]                 # fix-up region in two pieces: a mask
    yield (6,), [s(None, None, 2), s(1, None, 2), s(2, 5)]
    yield (4, 5), [(s(None), s(None, -1)), (s(None), s(1, None)), (0,)]
    yield (4, 5), [(Ellipsis, 2), (s(1, 3), Ellipsis), (None, s(None, 2))]
    yield (3,), [0, 2, 1, 0]


@pytest.mark.parametrize("shape, indices", list(_scatter_sum_cases()))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scatter_sums_keep_every_bit_signed_zeros_included(shape, indices, dtype):
    zero = np.zeros(shape)
    parts = [np.asarray(zero[i]) for i in indices]

    def f(*gs):
        total = None
        for g, i in zip(gs, indices):
            s = _scatter(g, index=i, shape=shape)
            total = s if total is None else total + s
        return total
    rng = np.random.default_rng(1)
    # every term mixes -0.0, 0.0 and other values, so each rule about zeros is exercised
    choices = np.array([-0.0, 0.0, -0.0, 1.5, -2.25])
    args = [rng.choice(choices, size=p.shape).astype(dtype) for p in parts]
    program = nd.trace(f, *args)
    fused = accumulate_scatters(program)
    assert ops(fused) == ['scatter_sum'] and len(program.eqns) == 2 * len(indices) - 1
    for _ in range(20):
        args = [rng.choice(choices, size=p.shape).astype(dtype) for p in parts]
        want = program(*args)
        assert same_bits(fused(*args), want)
        staged = nd.stage(f)
        staged(*args)
        assert same_bits(staged(*args), want)


@pytest.mark.skipif(importlib.util.find_spec('numba') is None, reason="needs numba")
def test_numba_keeps_the_signed_zeros_of_a_masked_fixup(dtype=np.float64):
    """A fix-up that no slice spells is a mask (``np.add(r, 0.0, out=r, where=mask)``, which
    numba's ufuncs do not take): numba's code adds a constant of 0.0 and -0.0 instead,
    the same bits (it fell back to Python, e.g. on a staged gradient of a jet; float32
    programs run as Python under numba's backend anyway)."""
    import warnings
    from nestad.staging.numba_backend import NumbaFallbackWarning
    shape, indices = (6,), [slice(None, None, 2), slice(1, None, 2), slice(2, 5)]

    def f(a, b, c):
        return _scatter(a, index=indices[0], shape=shape) + _scatter(b, index=indices[1], shape=shape) \
            + _scatter(c, index=indices[2], shape=shape)
    rng = np.random.default_rng(3)
    choices = np.array([-0.0, 0.0, -0.0, 1.5, -2.25])
    draw = lambda: [rng.choice(choices, size=n).astype(dtype) for n in (3, 3, 3)]  # noqa: E731
    program = nd.trace(f, *draw())
    assert "where=" in accumulate_scatters(program).source()
    staged = nd.stage(f, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter('error', NumbaFallbackWarning)
        staged(*draw())
        for _ in range(10):
            args = draw()
            assert same_bits(staged(*args), program(*args))


def test_scatters_read_elsewhere_or_by_fancy_indices_are_left_alone():
    x = np.arange(5.0)

    def reused(g):
        s = _scatter(g, index=slice(1, None), shape=(5,))
        return s + _scatter(g, index=slice(None, -1), shape=(5,)), s

    def fancy(g):
        return _scatter(g, index=np.array([0, 0, 1, 2]), shape=(5,)) + \
            _scatter(g, index=slice(1, None), shape=(5,))
    fused = accumulate_scatters(nd.trace(reused, x[:4]))
    assert ops(fused) == ['scatter_sum', 'scatter_sum', 'add']     # the lone ones inline
    fused = accumulate_scatters(nd.trace(fancy, x[:4]))
    assert ops(fused) == ['scatter_add', 'scatter_sum', 'add']
    for f, arg in ((reused, x[:4]), (fancy, x[:4])):
        staged = nd.stage(f)
        staged(arg)
        for a, b in zip(np.atleast_1d(staged(arg + 1)), np.atleast_1d(f(arg + 1))):
            assert same_bits(a, b)


def test_scatter_sum_in_a_loop_body_and_gradients_of_indexing():
    def f(x):
        return anp.sum(x[1:] * x[:-1]) + anp.sum(anp.sin(x[::2]))
    x = np.linspace(0.1, 2.0, 9)
    g = nd.stage(nd.gradient_r(f))
    g(x)
    assert SCATTER_SUM.name in [e.op.name for e in accumulate_scatters(g.programs()[0]).eqns]
    assert same_bits(g(x), nd.trace(nd.gradient_r(f), x)(x))
    np.testing.assert_allclose(g(x), nd.gradient_r(f)(x), rtol=1e-12)


# ---------------------------------------------------------------- calling staged functions

def test_array_arguments_take_the_fast_path_with_the_same_cache_rules():
    calls = []

    def f(x, y):
        calls.append(1)
        return anp.sum(x * y)
    s = nd.stage(f)
    a, b = np.arange(3.0), np.ones(3)
    assert s(a, b) == 3.0 and s(a, b) == 3.0 and s(a, 2.0) == 6.0
    assert s.trace_count == 2
    s(a.astype(np.float32), b)                     # another dtype: another program
    s(np.arange(4.0), np.ones(4))                  # another shape: another program
    assert s.trace_count == 4
    s(np.arange(3), b)                             # an int array is static: the general path
    s(np.float64(2.0), b)
    assert s.trace_count == 6 and len(calls) == 6
    assert s(a, b) == 3.0 and s(a, 2.0) == 6.0 and s.trace_count == 6


# ---------------------------------------------------------------- loops

def test_a_loop_compiles_its_ieee_safe_variant_only_when_math_raises():
    from nestad.staging.control import WHILE

    def f(x):          # log(0) = -inf on the way: math.log raises, nestad's gives -inf
        s = nd.while_loop(lambda s: s[1] < 3.0,
                          lambda s: (s[0] + nd.log(s[1] * x), s[1] + 1.0), (0.0, 0.0))
        return s[0]
    s = nd.stage(f)
    assert s(2.0) == f(2.0) and s(2.0) == f(2.0)
    (loop,) = [e for e in s.programs()[0].eqns if e.op is WHILE]
    compiled = loop.params['body']._compiled
    assert 'loop' in compiled and 'safe' in compiled      # the first iteration: log(0)
    g = nd.stage(lambda x: nd.while_loop(lambda s: s < 10.0, lambda s: s * x, 1.0))
    assert g(3.0) == 27.0 and g(3.0) == 27.0
    (loop,) = [e for e in g.programs()[0].eqns if e.op is WHILE]
    assert 'safe' not in loop.params['body']._compiled


def loops(program):
    from nestad.staging.control import WHILE
    return [e for e in program.eqns if e.op is WHILE]


@pytest.fixture
def unsimplified(monkeypatch):
    """Trace with the loop passes off (no pruning, so no sharing either): the program
    as recorded, to compare the simplified one with bit for bit."""
    from nestad.staging.control import WhileLoop

    def trace(fn, *args):
        with monkeypatch.context() as m:
            m.delattr(WhileLoop, 'prune')
            m.delattr(WhileLoop, 'restrict')
            return nd.trace(fn, *args)
    return trace


def halving(p):
    """The loop of a solver whose answer q does not depend on p, though its state
    carries p and a value computed from it (as GradBench's inner argmax does)."""
    def body(s):
        q, fq, p = s
        q = q * 0.5
        return (q, q * p, p)
    q, fq, _ = nd.while_loop(lambda s: s[0] > 1e-3, body, (1.0, p, p))
    return q


def objective(p):
    return p * p * halving(p)     # its derivative reads q (from the derivative's own loop)


def check_staged(fn, reference, points):
    """Staged ``fn`` gives the unsimplified program's bits, and eager's values."""
    staged = nd.stage(fn)
    for x in points:
        staged(x)
        got = np.array(staged(x), dtype=float)
        assert same_bits(got, np.array(reference(x), dtype=float))
        np.testing.assert_allclose(got, np.array(fn(x), dtype=float), rtol=1e-12)


@pytest.mark.parametrize("op", [nd.derivative, nd.gradient_r])
def test_dead_loop_slots_are_dropped_and_equal_loops_shared(op, unsimplified):
    def both(p):
        return objective(p), op(objective)(p)
    assert len(loops(unsimplified(both, 0.7))) == 2
    program = nd.trace(both, 0.7)
    (loop,) = loops(program)               # the derivative's loop is the primal one
    assert loop.params['n'] == 1 and len(loop.outs) == 1
    check_staged(both, unsimplified(both, 0.7), (0.7, -1.3))


def test_pruning_keeps_what_the_condition_and_live_slots_read(unsimplified):
    def f(x):
        def body(s):
            a, b, c, d, e, k = s
            # a needs b, b needs c, the condition needs k; d and e are read by nothing live
            return (a + b, b * c, c + 1.0, d + a, e * x, k + 1.0)
        a, b, c, d, e, k = nd.while_loop(lambda s: s[5] < 4.0, body,
                                         (x, 2.0 * x, 0.5, 0.0, 1.0, 0.0))
        return a
    program = nd.trace(f, 0.3)
    (loop,) = loops(program)
    assert loop.params['n'] == 4                    # a, b, c, k
    assert len(loop.args) == 4                      # x, read only by e's update, is gone
    body = loop.params['body']
    assert len(body.inputs) == 4 and len(body.outputs) == 4
    assert loops(unsimplified(f, 0.3))[0].params['n'] == 6
    check_staged(f, unsimplified(f, 0.3), (0.3, 2.5))
    for pairing in ('ff', 'fr', 'rf', 'rr'):
        outer, inner = ({'f': nd.derivative, 'r': nd.gradient_r}[m] for m in pairing)
        d2 = outer(inner(f))
        check_staged(d2, unsimplified(d2, 0.3), (0.3, 2.5))


def test_structurally_equal_loops_are_shared_and_what_reads_them_too(unsimplified):
    def step(s):
        return (s[0] * 0.5 + 1.0, s[1] + 1.0)

    def f(x):
        u = nd.while_loop(lambda s: s[1] < 5.0, step, (x, 0.0))[0]
        v = nd.while_loop(lambda s: s[1] < 5.0, step, (x, 0.0))[0]   # traced anew
        w = nd.while_loop(lambda s: s[1] < 6.0, step, (x, 0.0))[0]   # another condition
        return nd.sin(u) + nd.sin(v) + w
    program = nd.trace(f, 0.25)
    assert len(loops(program)) == 2
    assert [e.op.name for e in program.eqns].count('sin') == 1
    assert len(loops(unsimplified(f, 0.25))) == 3
    check_staged(f, unsimplified(f, 0.25), (0.25, -3.0))


def euler(x):
    """A loop whose state all depends on x (its tangent is live, unlike halving's)."""
    def body(s):
        y, t = s
        return (y + 0.1 * nd.sin(y), t + 1.0)
    return nd.while_loop(lambda s: s[1] < 8.0, body, (x, 0.0))[0]


@pytest.mark.parametrize("order", ["value first", "derivative first"])
@pytest.mark.parametrize("op", [nd.derivative, nd.gradient_r])
def test_a_tangent_loop_computes_the_primal_loop_too(op, order, unsimplified):
    def both(x):
        if order == "value first":
            v = euler(x)
            return v, op(euler)(x)
        d = op(euler)(x)
        return euler(x), d
    assert len(loops(unsimplified(both, 0.4))) == 2
    program = nd.trace(both, 0.4)
    (loop,) = loops(program)                       # the primal loop is the tangent loop's part
    assert loop.params['n'] > 2
    check_staged(both, unsimplified(both, 0.4), (0.4, -2.0))


def test_a_loop_is_not_moved_above_what_its_arguments_need_nor_above_a_guard(unsimplified):
    def step(s):
        return (s[0] * 0.5 + 1.0, s[1] + 1.0)

    def wider(s):                                  # the same first slots, and one more
        a, k = step(s[:2])
        return (a, k, s[2] + s[0])

    def f(x):
        a = nd.while_loop(lambda s: s[1] < 5.0, step, (x, 0.0))[0]
        b = nd.while_loop(lambda s: s[1] < 5.0, wider, (x, 0.0, a))  # needs a: stays after
        return a + b[2]

    def g(x):
        a = nd.while_loop(lambda s: s[1] < 5.0, step, (x, 0.0))[0]
        c = 1.0 if a > 0 else -1.0                                   # a guard
        b = nd.while_loop(lambda s: s[1] < 5.0, wider, (x, 0.0, 3.0))
        return a * c + b[2]

    def h(x):                                      # no guard: the wider loop takes a's place
        a = nd.while_loop(lambda s: s[1] < 5.0, step, (x, 0.0))[0]
        b = nd.while_loop(lambda s: s[1] < 5.0, wider, (x, 0.0, 3.0))
        return a + b[0] + b[2]
    assert len(loops(nd.trace(f, 0.3))) == 2
    assert len(loops(nd.trace(g, 0.3))) == 2
    (loop,) = loops(nd.trace(h, 0.3))
    assert loop.params['n'] == 3
    for fn in (f, g, h):
        check_staged(fn, unsimplified(fn, 0.3), (0.3, 7.0))
