"""Traps of staging (issue: no silent wrong numbers): a Program called at other shapes,
staged code that must raise where eager code raises, ints traced as values, the cache's
bound and the warnings for retracing, unrolled loops and frozen random numbers, and
fresh random numbers from a Generator argument.  Errors are in test_bad_inputs.py."""
import gc
import importlib.util
import os
import random
import sys
import time
import tracemalloc
import warnings

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import StagingError, StagingWarning

D = {'f': nd.derivative, 'r': nd.gradient_r}
BACKENDS = ['python'] + (['numba'] if importlib.util.find_spec('numba') else [])


def staging_warnings(fn):
    """(fn's result, the StagingWarnings it gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        out = fn()
    return out, [w for w in caught if issubclass(w.category, StagingWarning)]


def outcome(fn, *args):
    """What a call gives: its value, or the type of what it raised."""
    try:
        return fn(*args)
    except Exception as e:          # noqa: BLE001 (the type is the answer)
        return type(e)


# ---------------------------------------------------------------- a Program's shapes

def test_program_checks_shapes_and_dtypes_of_its_arguments():
    f = lambda v: len(v) * anp.sum(v)                    # noqa: E731
    p = nd.trace(f, np.ones(2))
    assert p(np.array([1.0, 2.0])) == 6.0
    for other in (np.ones(3), np.ones(2, np.float32), np.ones((2, 1)), 2.0):
        with pytest.raises(nd.InvalidInputError, match="traced with"):
            p(other)
    # the derivative programs check too, and nd.stage retraces: right numbers at each shape
    for q in (p.jvp(), p.vjp()):
        with pytest.raises(nd.InvalidInputError, match="shape"):
            q(np.ones(3), np.ones(3))
    s = nd.stage(f)
    assert s(np.ones(2)) == 4.0 and s(np.ones(3)) == 9.0
    for m in 'fr':
        g = nd.stage(nd.gradient_r(f) if m == 'r' else nd.gradient_f(f))
        assert np.array_equal(g(np.ones(2)), [2.0, 2.0])
        assert np.array_equal(g(np.ones(3)), [3.0, 3.0, 3.0])
    # a scalar traced as a float refuses an int (int arithmetic differs) and a 0-d array
    p = nd.trace(lambda x, n: x / n, 1.0, 2)
    assert p(3.0, 2) == 1.5
    with pytest.raises(nd.InvalidInputError, match="int64 scalar"):
        p(3.0, 2.0)
    with pytest.raises(nd.InvalidInputError, match="0-d|shape \\(\\)"):
        nd.trace(lambda x: x * 2.0, 1.0)(np.array(1.0))


# ---------------------------------------------------------------- raise where eager raises

RAISING = {
    'div': lambda x, y: x / (y // 1.0) + x,
    'mod': lambda x, y: x % (y // 1.0) + x,
    'floordiv': lambda x, y: x * (x // (y // 1.0)) + x,
    'divmod': lambda x, y: divmod(x, y // 1.0)[1] + x,
    'pow_zero': lambda x, y: (y // 1.0) ** -1.0 + x,
    'pow_overflow': lambda x, y: y ** 400.0 + x,
}
MODES = {
    'plain': lambda f: f,
    'r': nd.gradient_r,
    'f': lambda f: lambda x, y: nd.derivative(lambda x: f(x, y))(x),
    'fr': lambda f: lambda x, y: nd.derivative(nd.gradient_r(lambda x: f(x, y)))(x),
    'rf': lambda f: lambda x, y: nd.gradient_r(nd.derivative(lambda x: f(x, y)))(x),
    'ff': lambda f: lambda x, y: nd.derivative(nd.derivative(lambda x: f(x, y)))(x),
    'rr': lambda f: lambda x, y: nd.gradient_r(nd.gradient_r(lambda x: f(x, y)))(x),
}


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('mode', sorted(MODES))
@pytest.mark.parametrize('name', sorted(RAISING))
def test_staged_code_raises_where_eager_code_raises(name, mode, backend):
    g = MODES[mode](RAISING[name])
    good, bad = (2.0, 2.5), (2.0, 10.0 if name == 'pow_overflow' else 0.5)
    want = outcome(g, *bad)
    assert isinstance(want, type) and issubclass(want, ArithmeticError)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        compiled = nd.stage(g, backend=backend)
        assert compiled(*good) == g(*good)
        compiled(*good)                              # compiled now
        assert outcome(compiled, *bad) is want       # the compiled call raises
        assert outcome(nd.stage(g, backend=backend), *bad) is want    # so does a tracing one
        assert compiled(*good) == g(*good)


def test_the_issue_example_raises_and_unused_divisions_stay_checks():
    S = nd.stage(nd.gradient_r(lambda x, y: x / (y // 1.0) + x))
    assert S(2.0, 2.5) == 1.5
    with pytest.raises(ZeroDivisionError):
        S(2.0, 0.5)
    # the primal division is unused by the gradient: it is kept as a check of the divisor only
    src = S.programs()[0].source()
    assert "1.0 / " in src and "x /" not in src
    # an unused division by a constant, or of arrays (numpy's semantics), is dropped
    assert len(nd.trace(nd.gradient_r(lambda x: x / 2.0 + x), 1.0).eqns) == 0
    p = nd.trace(nd.gradient_r(lambda v, w: anp.sum(v / w + v)), np.ones(2), np.ones(2))
    assert all(e.op.name != 'div' for e in p.eqns)


def _loops(program):
    """The number of while equations in a program, its loops' bodies included."""
    n = 0
    for e in program.eqns:
        n += getattr(e.op, 'name', '') == 'while'
        n += sum(_loops(v) for v in e.params.values() if isinstance(v, nd.Program))
    return n


@pytest.mark.parametrize('mode', ['ff', 'fr', 'rf', 'rr'])
def test_checks_keep_loops_pruned_and_shared(mode):
    # Checks of unused divisions inside loops, or resurrecting loops, made GradBench's staged
    # particle programs 7 loops instead of 3; they stay as they were before checks.
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'benchmarks'))
    try:
        import staging as bench
    finally:
        sys.path.pop(0)
    for name, loops in (('saddle', 4), ('particle', 3)):
        s = bench.staged_solve(name, mode)
        assert bench.solve_error(name, s(bench.WORKLOADS[name][1]))[1]     # exact answers
        assert _loops(s.programs()[0]) == loops


@pytest.mark.parametrize('backend', BACKENDS)
def test_power_on_traced_numbers_is_pythons(backend):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        s = nd.stage(lambda x, n: x ** n + n ** -1, backend=backend)
        for x, n in ((2.0, 3), (1.5, 2), (3.0, 5), (2.0, 60)):
            assert s(x, n) == x ** n + n ** -1       # n ** -1 is 0.5 for n = 2, not 0
        p = nd.stage(lambda x, y: x ** y, backend=backend)
        for x, y in ((2.0, 0.5), (9.0, 0.5), (-8.0, 3.0), (0.0, 2.0)):
            assert p(x, y) == x ** y
        with pytest.raises(nd.InvalidInputError, match="complex"):
            p(-8.0, 1.0 / 3.0)              # Python: a complex number, eager nestad refuses it
        # under a perturbation it is nestad.pow, as in eager code (IEEE: 0.0 ** -1 is inf)
        d = nd.stage(nd.derivative(lambda x: x ** -1.0 + x), backend=backend)
        assert d(2.0) == nd.derivative(lambda x: x ** -1.0 + x)(2.0)


# ---------------------------------------------------------------- ints, static arguments

def test_ints_are_traced_as_values_and_static_ones_by_value():
    calls = []

    def f(x, n):
        calls.append(n)
        return x * n + n // 2
    s = nd.stage(f)
    assert [s(1.5, n) for n in range(40)] == [f(1.5, n) for n in range(40)]
    assert s.trace_count == 1 and len(calls) == 41
    assert nd.stage(nd.gradient_r(f))(1.5, 7) == 7.0

    def loop(x, n):
        for _ in range(n):
            x = nd.sin(x)
        return x
    with pytest.raises(StagingError, match="static_argnums"):
        nd.stage(loop)(0.5, 3)
    for static in (dict(static_argnums=1), dict(static_argnames='n'), dict(static_argnums=(1,))):
        t = nd.stage(loop, **static)
        assert t(0.5, 3) == loop(0.5, 3) and t(0.5, n=3) == loop(0.5, 3)
        assert t(0.5, 4) == loop(0.5, 4) and t.trace_count == 3   # (by name: another key)
        # derivatives of a staged function keep its static arguments static
        for m in 'fr':
            assert D[m](lambda x: t(x, 3))(0.5) == D[m](lambda x: loop(x, 3))(0.5)
    # bools stay static (flags); numpy ints are traced like Python's
    b = nd.stage(lambda x, flag: x * 2.0 if flag else x)
    assert (b(1.0, True), b(1.0, False)) == (2.0, 1.0)
    i = nd.stage(lambda x, n: x * n)
    assert i(1.0, np.int64(3)) == 3.0 and i(1.0, np.int64(4)) == 4.0 and i.trace_count == 1


# ---------------------------------------------------------------- the cache and retracing

def test_the_whole_cache_stays_bounded_over_10000_new_static_values():
    s = nd.stage(lambda x, k: x * 2.0, static_argnums=1)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', StagingWarning)
        for k in range(1000):
            s(1.0, k)
        tracemalloc.start()
        try:
            for k in range(1000, 1200):
                s(1.0, k)
            gc.collect()                       # (traces are cycles: count only live memory)
            before = tracemalloc.get_traced_memory()[0]
            for k in range(1200, 2200):
                s(1.0, k)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        for k in range(2200, 10_000):
            assert s(1.0, k) == 2.0
    assert s.trace_count == 10_000
    assert len(s.cache) <= s.cache_size and s.size == len(s.programs()) <= s.cache_size == 64
    assert grown < 20_000                      # over 1,000 new traces: not 2.9 KB per call
    # the least recently used go: the programs kept are those of the last values
    assert s(1.0, 9_999) == 2.0 and s.trace_count == 10_000
    # and a key used again stays while new ones come
    t = nd.stage(lambda x, k: x * k, static_argnums=1, cache_size=3)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', StagingWarning)
        for k in range(10):
            t(1.0, 0)
            t(1.0, k + 1)
    assert t(1.0, 0) == 0.0 and t.trace_count == 11 and t.size == 3


def test_a_trace_that_raises_leaves_no_key_behind():
    def f(x, k):
        if k % 3 == 0:
            raise ValueError("no")
        return x * k
    s = nd.stage(f, static_argnums=1, cache_size=4)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', StagingWarning)
        for k in range(30):
            assert outcome(s, 1.0, k) == (ValueError if k % 3 == 0 else k)
    assert len(s.cache) == s.size == 4


def test_retracing_warning_fires_for_new_static_values_not_for_new_floats():
    s = nd.stage(lambda x, n: x * n, static_argnums=1)
    _, caught = staging_warnings(lambda: [s(1.0, n) for n in range(50)])
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "argument n is static" in text and "static_argnums" in text and "50" not in text[:20]
    # new floats (and ints, traced as values) are not new traces
    for make in (lambda k: float(k) + 0.5, lambda k: k):
        f = nd.stage(lambda x, n: x * n)
        _, caught = staging_warnings(lambda: [f(make(k), make(k)) for k in range(50)])
        assert caught == [] and f.trace_count == 1
    # a few shapes over many calls are no storm either
    a = nd.stage(lambda v: anp.sum(v * v))
    _, caught = staging_warnings(lambda: [a(np.ones(1 + k % 4)) for k in range(50)])
    assert caught == [] and a.trace_count == 4
    # nor are many traces far apart, while the program's user does work of its own
    def spaced():
        for k in range(12):
            s(1.0, 100 + k)
            time.sleep(0.05)
    s = nd.stage(lambda x, n: x * n, static_argnums=1)
    _, caught = staging_warnings(spaced)
    assert caught == [] and s.trace_count == 12


def test_retracing_warning_names_the_guard_and_the_loop_alternative():
    def newton(a):                 # a Python while loop: a program per trip count
        x = a
        while abs(x * x - a) > 1e-12 * a:
            x = 0.5 * (x + a / x)
        return x
    s = nd.stage(newton)
    _, caught = staging_warnings(lambda: [s(4.0 ** k) for k in range(-20, 20)])
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "guard at test_staging_traps.py:" in text and "in newton" in text
    assert "nestad.while_loop" in text and "nestad.where" in text


def test_unrolled_python_loop_warns_once_naming_while_loop():
    def long_loop(x):
        for _ in range(25_000):
            x = x * 0.5 + 1.0
        return x
    s = nd.stage(long_loop)
    _, caught = staging_warnings(lambda: (s(1.0), s(2.0)))
    assert len(caught) == 1 and "nestad.while_loop" in str(caught[0].message)
    assert s(1.0) == long_loop(1.0)
    _, caught = staging_warnings(lambda: nd.stage(lambda x: x * 2.0)(1.0))
    assert caught == []


# ---------------------------------------------------------------- random numbers

def elbo(mu, rng):
    """A stochastic objective (reparameterised): fresh noise on every call."""
    eps = rng.standard_normal(mu.shape)
    z = mu + 0.5 * eps
    return anp.sum(z * z * z) + rng.uniform() * anp.sum(mu)


MU = np.array([0.1, -0.2, 0.3])


@pytest.mark.parametrize('kind', ['plain', 'stage(grad)', 'grad(stage)', 'stage(jacfwd)',
                                  'derivative(stage)', 'hessian(stage)', 'trace'])
def test_a_generator_argument_draws_fresh_numbers_equal_to_eager(kind):
    staged = nd.stage(elbo)
    eager, ops = {
        'plain': (elbo, staged),
        'stage(grad)': (nd.gradient_r(elbo), nd.stage(nd.gradient_r(elbo))),
        'grad(stage)': (nd.gradient_r(elbo), nd.gradient_r(staged)),
        'stage(jacfwd)': (nd.gradient_f(elbo), nd.stage(nd.gradient_f(elbo))),
        'derivative(stage)': (lambda m, r: nd.derivative(lambda s: elbo(MU * s, r))(m[0]),
                              lambda m, r: nd.derivative(lambda s: staged(MU * s, r))(m[0])),
        'hessian(stage)': (nd.hessian(elbo), nd.hessian(staged)),
        'trace': (elbo, nd.trace(elbo, MU, np.random.default_rng(7))),
    }[kind]
    r_eager, r_staged = np.random.default_rng(0), np.random.default_rng(0)
    _, caught = staging_warnings(lambda: [ops(MU, r_staged) for _ in range(3)])
    assert caught == []
    r_staged = np.random.default_rng(0)
    got = [ops(MU, r_staged) for _ in range(4)]
    want = [eager(MU, r_eager) for _ in range(4)]
    assert np.array_equal(np.array(got), np.array(want))       # the same numbers, bit for bit
    assert not np.array_equal(got[0], got[1])                   # and fresh on every call
    assert r_eager.random() == r_staged.random()                # the generator advanced alike


def test_draws_and_guards_keep_eagers_sequence():
    def f(x, rng):
        if x > 0:
            return x * rng.normal()
        return x + rng.uniform(size=2).sum()
    s = nd.stage(f)
    r1, r2 = np.random.default_rng(3), np.random.default_rng(3)
    xs = [1.0, -1.0, 2.0, -3.0, 0.5, -0.5]
    assert [s(x, r1) for x in xs] == [f(x, r2) for x in xs]
    assert r1.random() == r2.random()


def test_frozen_random_numbers_warn_at_trace_time():
    rng = np.random.default_rng(1)
    frozen = {
        "numpy's global generator": lambda x: x * np.random.normal(),
        "Python's random module": lambda x: x * random.random(),
        "closure or globals": lambda x: x * rng.normal(),
    }
    for name, f in frozen.items():
        s = nd.stage(f)
        _, caught = staging_warnings(lambda: s(1.0))
        assert len(caught) == 1 and name in str(caught[0].message)
        assert "as an argument" in str(caught[0].message)
        _, caught = staging_warnings(lambda: s(2.0))      # a compiled call: nothing drawn
        assert caught == []
    # a generator made static is a constant too
    s = nd.stage(lambda x, r: x * r.normal(), static_argnums=1)
    _, caught = staging_warnings(lambda: s(1.0, rng))
    assert len(caught) == 1 and "static generator argument" in str(caught[0].message)
    # no draw, no warning (a generator seeded inside f is deterministic, as eagerly)
    _, caught = staging_warnings(lambda: nd.stage(
        lambda x: x * np.random.default_rng(5).normal())(1.0))
    assert caught == []
