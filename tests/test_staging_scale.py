"""Staging at scale: inlined expressions, programs compiled in pieces, the lean recording
path and the memory tracing and compiling take (notes/staging.md)."""
import gc
import math
import tracemalloc

import numpy as np
import pytest

import nestad as nd
from nestad.staging import codegen
from nestad.staging.program import GuardFailure
from nestad.tracer import Var


def bits(x):
    return [float(v).hex() for v in np.ravel(x)]


def staged_twice(f, *args):
    """The staged function's first (traced) and second (compiled) results and itself."""
    s = nd.stage(f)
    return s(*args), s(*args), s


# Groupings that round differently: each is right only if the generated code keeps the
# program's order of operations (a - (b + c) is not (a - b) - c in floating point).
GROUPINGS = [
    lambda a, b, c: a - (b + c),
    lambda a, b, c: (a - b) - c,
    lambda a, b, c: a + (b + c) * 3.0,
    lambda a, b, c: (a + b) + c,
    lambda a, b, c: a / (b / c),
    lambda a, b, c: (a / b) / c,
    lambda a, b, c: a * (b * c),
    lambda a, b, c: -(a * b) - -(c - a),
    lambda a, b, c: a - b * c + (a - c) * -b,
    lambda a, b, c: nd.sin(a - (b - c)) * nd.cos(c * (a * b)),
]


@pytest.mark.parametrize("k", range(len(GROUPINGS)))
def test_inlined_expressions_keep_the_programs_grouping(k):
    f = GROUPINGS[k]
    for a, b, c in [(1e16, 1.0, 1.0), (0.1, 0.2, 0.3), (3.0, 1e-17, 7.0), (-2.5, 1e300, 1e-300)]:
        want = f(a, b, c)
        first, second, _ = staged_twice(f, a, b, c)
        assert bits(first) == bits(want) and bits(second) == bits(want)
        # and the derivatives, whose programs inline the most
        g = nd.gradient_r(lambda v: f(*v))
        want = g([a, b, c])
        first, second, _ = staged_twice(g, [a, b, c])
        assert bits(first) == bits(want) and bits(second) == bits(want)


def test_comparisons_inlined_do_not_chain():
    # (a < b) == (c < a) must not become a < b == c < a (a chain of three comparisons)
    f = lambda a, b, c: nd.where((a < b) == (c < a), a * b, a - b)     # noqa: E731
    for args in [(1.0, 2.0, 0.5), (1.0, 2.0, 3.0), (2.0, 1.0, 3.0)]:
        want = f(*args)
        first, second, _ = staged_twice(f, *args)
        assert first == want and second == want


def test_source_has_fewer_lines_than_equations():
    g = nd.gradient_r(lambda xs: sum(nd.sin(xs[k] * xs[k - 1]) * 0.5 for k in range(1, 40)))
    program = nd.trace(g, [0.1 * k for k in range(40)])
    lines = program.source().count("\n")
    assert lines < 0.5 * len(program.eqns)


def test_math_errors_inside_inlined_expressions_fall_back_to_ieee():
    # log(x * 0.0) is written inside one line; math.log raises there and the call reruns
    # with the IEEE spelling, which gives eager code's -inf (and nan for sqrt(-1)).
    f = lambda x: nd.log(x * 0.0) + 2.0 * nd.sqrt(x - 5.0) + x     # noqa: E731
    want = f(3.0)
    first, second, _ = staged_twice(f, 3.0)
    assert math.isnan(want) and math.isnan(first) and math.isnan(second)
    f = lambda x: nd.log(x * 0.0) * 0.5 + x       # noqa: E731
    first, second, _ = staged_twice(f, 3.0)
    assert first == second == f(3.0) == -math.inf


def long_mix(steps, n=30):
    def mix(xs):
        acc = 0.0
        for k in range(steps):
            acc = acc * 0.999 + nd.sin(xs[k % n] * xs[(7 * k + 3) % n])
        return acc
    return mix, [0.1 + 0.01 * i for i in range(n)]


def test_long_programs_are_compiled_in_pieces_with_the_same_numbers(monkeypatch):
    # (where their source is compiled: on CPython 3.11 this program is assembled as
    # bytecode, one function: tests/test_bytecode.py)
    from nestad.staging import bytecode
    monkeypatch.setattr(bytecode, "AVAILABLE", False)
    mix, xs = long_mix(3000)
    g = nd.gradient_r(mix)
    want = g(xs)
    first, second, s = staged_twice(g, xs)
    assert first == want and second == want
    compiled = s.cache[next(iter(s.cache))][0]
    pieces = compiled.source.count("def staged_")
    assert pieces >= 3
    # each piece is a function of its own, about PIECE_LINES long
    body = [ln for ln in compiled.source.split("\n") if ln.startswith("    ")]
    assert len(body) <= (pieces + 1) * (codegen.PIECE_LINES + 50)
    # other arguments through the same compiled pieces
    xs2 = [0.3 - 0.02 * i for i in range(len(xs))]
    assert s(xs2) == g(xs2)
    # the one-function source (Program.source, export) computes the same
    program = nd.trace(g, xs)
    one = {}
    exec(program.source(), codegen.python_source(program)[1] | one, one)
    assert list(one['staged'](*xs)) == want


def test_guards_in_later_pieces_still_retrace():
    def f(xs):
        acc = 0.0
        for k in range(1200):
            acc = acc * 0.999 + nd.sin(xs[k % 20] * xs[(3 * k + 1) % 20])
        if acc > 0.5:                  # a guard near the end of a long program
            return acc * 2.0
        return acc - 1.0
    g = nd.gradient_r(f)
    s = nd.stage(g)
    xs = [0.5 + 0.01 * i for i in range(20)]
    ys = [0.001 + 0.0001 * i for i in range(20)]
    assert s(xs) == g(xs) and s(xs) == g(xs)
    assert s(ys) == g(ys) and s(ys) == g(ys)
    assert s.trace_count == 2
    program = nd.trace(g, xs)
    with pytest.raises(GuardFailure):
        program(ys)


class Traced:
    """``with Traced() as t:`` tracemalloc over the block: ``t.peak()``, bytes at the peak
    since the start or the last ``peak()`` above what the start held; ``t.now()``, bytes
    held above it (tracemalloc is left on if another test left it on)."""

    def __enter__(self):
        gc.collect()
        self.tracing = tracemalloc.is_tracing()
        tracemalloc.start()
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        return self

    def peak(self):
        top = tracemalloc.get_traced_memory()[1] - self.base
        tracemalloc.reset_peak()
        return top

    def now(self):
        return tracemalloc.get_traced_memory()[0] - self.base

    def __exit__(self, *exc):
        if not self.tracing:
            tracemalloc.stop()


def staging_peaks(g, xs):
    """(equations, the first call's peak, the second's, what is left once the staged
    function is gone) of staging ``g`` at ``xs``, in bytes under tracemalloc."""
    g(xs)
    with Traced() as t:
        s = nd.stage(g)
        s(xs)
        n = len(s.programs()[0].eqns)
        first = t.peak()
        s(xs)
        second = t.peak()
        del s
        gc.collect()
        left = t.now()
    return n, first, second, left


def test_staging_memory_is_linear_and_released():
    # A 20,000-equation reverse gradient: peak memory per equation of tracing and of
    # compiling (3.5 KB before the lean recording path and compiling in pieces; 0.85 KB
    # before compact recording and pieces cut by characters; 0.6 and 0.46 KB before a
    # float64 scalar's Var had no fields of its own (0.594 KB); 0.56 and 0.45 KB before
    # the tape was freed during the sweep and straight-line code assembled as bytecode;
    # about 0.45 and 0.33 KB now), and nothing left once the staged function is gone.
    from nestad.staging import bytecode
    mix, xs = long_mix(4000)
    n, first, second, left = staging_peaks(nd.gradient_r(mix), xs)
    assert n > 15_000
    assert first / n < 500, first / n
    assert second / n < (400 if bytecode.AVAILABLE else 600), second / n   # (compiled: 0.45 KB)
    assert left < 50_000


def test_staging_a_thousand_equations_takes_under_600_bytes_each():
    # issue 19's bound, at its smallest size (the part-8 gradient of benchmarks/staging.py,
    # 1,099 equations): tracing peaked at 605 bytes per equation with the whole tape alive
    # (its cells now let go of their partials as the sweep goes), and the second call at
    # 1.9 KB, compile()'s parser (the program is now assembled as bytecode)
    from nestad.staging import bytecode
    if not bytecode.AVAILABLE:
        pytest.skip("compile() of the source: about 2 KB per line")
    mix, xs = long_mix(200, n=100)
    n, first, second, _ = staging_peaks(nd.gradient_r(mix), xs)
    assert 1000 < n < 1200
    assert first / n < 600 and second / n < 600, (first / n, second / n)


def test_pieces_are_cut_by_characters_too():
    # compile() needs about 100 bytes per character of source: a piece stops after
    # PIECE_CHARS characters, or two and a half per equation in a longer program, up to
    # PIECE_CHARS_MAX (and the caller passes each piece's results on as a tuple)
    lines, chars = codegen.PIECE_LINES, codegen.PIECE_CHARS
    assert codegen.piece_limits(lines, 1_000) == (lines, chars)
    assert codegen.piece_limits(lines, 32_000) == (4 * lines, 4 * chars)
    assert codegen.piece_limits(lines, 10 ** 7)[1] == codegen.PIECE_CHARS_MAX
    mix, xs = long_mix(3000)
    g = nd.gradient_r(mix)
    program = nd.trace(g, xs)
    limit = codegen.piece_limits(lines, len(program.eqns))[1]
    assert limit > chars
    sources, _ = codegen.python_sources(program, piece=codegen.PIECE_LINES)
    *pieces, caller = sources
    assert len(pieces) >= 3
    for src in pieces[:-1]:
        body = src.split("\n")[1:-1]
        longest = max(len(ln) for ln in body)
        assert sum(len(ln) for ln in body[:-1]) < limit + longest
    assert max(len(ln) for ln in caller.split("\n")[2:]) < 40     # (after the first call)
    fn, _ = codegen.compile_python(program, piece=codegen.PIECE_LINES)
    assert list(fn(*xs)) == g(xs)


def test_code_generation_forgets_each_variable_after_its_last_reader():
    # code generation keeps per-variable state in dicts; holding every variable of a long
    # program made each lookup a cache miss (superlinear time), so a name or an inlined
    # expression leaves once its last reader is written: what is left is what is kept
    mix, xs = long_mix(1000)
    program = nd.trace(nd.gradient_r(mix), xs)
    em = codegen._Emitter()
    for k, v in enumerate(program.inputs):
        em.names[id(v)] = f"x{k}"
    keep = [o for o in program.outputs if isinstance(o, Var)]
    em.emit_eqns(program.eqns, 4, keep=keep)
    assert len(program.eqns) > 5000
    assert set(em.names) == {id(v) for v in keep} and not em.inlined
    fn = compile("def f(" + ", ".join(f"x{k}" for k in range(len(xs))) + "):\n" +
                 "\n".join(em.lines) + "\n    return " + ", ".join(em.arg(o) for o in keep),
                 "<test>", "exec")
    space = dict(em.globals)
    exec(fn, space)
    assert list(space["f"](*xs)) == nd.gradient_r(mix)(xs)


def test_a_list_of_floats_is_keyed_without_flattening():
    # one list (or tuple) of floats, a gradient's usual argument: keyed on its class and
    # length; another length, a tuple or an int among the floats trace anew, correctly
    f = lambda xs: sum(x * x for x in xs) * xs[0]         # noqa: E731
    g = nd.gradient_r(f)
    s = nd.stage(g)
    for xs in ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0], (1.0, 2.0, 3.0), [1.0, 2.0], [1.0, 2, 3.0]):
        want = g(xs)
        assert s(xs) == want and s(xs) == want
        assert type(s(xs)) is type(want)
    assert s.trace_count == 4


def test_a_trace_is_freed_without_the_cyclic_collector():
    # Half the records of a gradient are unused (dead code); they stayed in the trace's
    # list as tracers of the trace, a cycle that kept them until a full collection.
    import weakref
    from nestad.tracer import Trace
    traces = []
    made = Trace.__init__

    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        traces.append(weakref.ref(self))
    mix, xs = long_mix(200)
    g = nd.gradient_r(mix)
    s = nd.stage(g)
    Trace.__init__ = init
    gc.disable()
    try:
        s(xs)
        alive = [t() is not None for t in traces]     # (before any collection)
    finally:
        gc.enable()
        Trace.__init__ = made
    assert traces and not any(alive)
    assert s(xs) == g(xs)


def test_a_float_variable_is_the_small_var_and_others_hold_their_shape():
    # Tracing makes a variable per equation: a float64 scalar's is a Var with no fields
    # (24 bytes less than three slots); arrays, ints and bools get a ShapedVar.  Both are
    # Vars, compare by identity, and pickle with their shape and dtype.
    import pickle
    import sys
    from nestad.tracer import ShapedVar
    p = nd.trace(lambda x, a, k: (x * 2.0, a * x, k + 1), 1.5, np.ones(3), 2)
    xv, av, kv = p.inputs
    assert xv.__class__ is Var and av.__class__ is ShapedVar and kv.__class__ is ShapedVar
    assert sys.getsizeof(xv) < sys.getsizeof(av)
    assert (xv.shape, xv.dtype, xv.scalar) == ((), np.dtype(float), True)
    assert (av.shape, av.dtype, av.scalar) == ((3,), np.dtype(float), False)
    assert kv.dtype.kind == 'i' and kv.scalar
    assert Var((), np.dtype(float), True).__class__ is Var and Var((), None, True).__class__ is ShapedVar
    assert Var() is not Var() and Var() != Var()
    q = pickle.loads(pickle.dumps(p))
    assert [v.__class__ for v in q.inputs] == [Var, ShapedVar, ShapedVar]
    assert [(v.shape, v.dtype) for v in q.inputs] == [(v.shape, v.dtype) for v in p.inputs]
    out = q(1.5, np.ones(3), 2)
    assert out[0] == 3.0 and np.array_equal(out[1], np.full(3, 1.5)) and out[2] == 3
