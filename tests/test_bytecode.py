"""Straight-line programs assembled as bytecode (nestad.staging.bytecode) against
``compile()`` of the source the same program spells: the same instructions, constants,
stack size and lines, the same numbers; and what is not assembled is compiled."""
import dis
import math
import random
import sys
import traceback

import numpy as np
import pytest

import nestad as nd
from nestad.staging import bytecode, codegen
from nestad.staging.program import GuardFailure
from nestad.tracer import GUARD
from test_staging_scale import Traced, long_mix

needs_311 = pytest.mark.skipif(not bytecode.AVAILABLE,
                               reason="bytecode is assembled on CPython 3.11 only")


def instructions(code):
    """(name, what its argument means) of each instruction: indices resolved (the order
    of a function's names or constants may differ and mean the same)."""
    out = []
    for ins in dis.get_instructions(code):
        arg = ins.argval
        if ins.opname == 'LOAD_GLOBAL':
            arg = (arg, ins.arg & 1)            # (and whether it pushes a NULL first)
        elif ins.opname == 'LOAD_CONST':
            arg = (type(arg), repr(arg))        # (-0.0 is not 0.0, 1 is not 1.0 nor True)
        out.append((ins.opname, arg))
    return out


def compiled(program):
    """The function compile() makes of the one-function source of ``program``."""
    src, glb = codegen.python_source(program)
    exec(compile(src, "<nestad staged staged>", "exec"), glb)
    return glb["staged"]


def assert_same_function(program, *args_list):
    got = codegen.assemble_python(program)
    assert got is not None, program.source()
    want = compiled(program)
    g, w = got.__code__, want.__code__
    assert instructions(g) == instructions(w)
    assert g.co_stacksize == w.co_stacksize
    assert g.co_varnames == w.co_varnames and g.co_argcount == w.co_argcount
    assert bytecode.line_of_each(g) == bytecode.line_of_each(w)
    for args in args_list:
        a, b = got(*args), want(*args)
        assert repr(a) == repr(b), (a, b)
    return got


@needs_311
def test_the_interpreter_check_passes():
    # (a small function assembled and compiled from its source, compared at import)
    assert bytecode.check()


@needs_311
@pytest.mark.parametrize("f, x", [
    (lambda x: nd.sin(x) * nd.exp(x), 0.5),
    (lambda x: x * x - 1.5 / (x + 2.0) + -0.25 * x, 1.3),
    (lambda x: nd.tanh(x - 3.0) ** 3 + nd.log(x) * nd.sqrt(x), 0.7),
    (lambda x: nd.atan2(x, 1.0 - x) + nd.hypot(x, 2.0) - abs(x - 5.0), 0.3),
    (lambda x: nd.cos(-x) * 1e300 * 1e-300 + x / 3, 2.0),
    (lambda x: (x * 0.0 - x * -0.0) * x + 7 * x, 1.5),
])
def test_scalar_derivatives_assemble_as_compile_does(f, x):
    for g in (f, nd.derivative(f), nd.derivative(nd.derivative(f)),
              nd.gradient_r(nd.derivative(f))):
        program = nd.trace(g, x)
        assert_same_function(program, (x,), (x + 0.125,), (x * 2.5,))


@needs_311
def test_a_long_gradient_assembles_as_compile_does():
    # hundreds of locals and constants: arguments past 255 take EXTENDED_ARG prefixes;
    # 40 results: a tuple of more than 30 is built through a list, as compile() does
    mix, xs = long_mix(700, n=40)
    program = nd.trace(nd.gradient_r(mix), xs)
    fn = assert_same_function(program, (*xs,), tuple(0.3 - 0.02 * i for i in range(40)))
    code = fn.__code__
    assert len(code.co_consts) > 300 and code.co_nlocals > 60
    ops = {ins.opname for ins in dis.get_instructions(code)}
    assert 'EXTENDED_ARG' in ops and 'LIST_TO_TUPLE' in ops


@needs_311
def test_constants_keep_their_type_and_sign():
    def f(x):
        return (x + 1) * 2.0 - x * -0.0 + (x + True) * x * 1e-320 + x * math.inf * 0.0

    program = nd.trace(nd.gradient_r(f), 1.5)
    assert_same_function(program, (1.5,), (-2.0,))
    for g in (f, nd.derivative(f)):
        staged = nd.stage(g)
        for x in (1.5, -2.0, 0.0):
            got = [staged(x), staged(x)]
            want = g(x)
            assert [repr(v) for v in got] == [repr(want)] * 2


def random_program(rng, n_in, n_ops):
    """A random scalar function of ``n_in`` numbers built from nestad's operations."""
    unary = [nd.sin, nd.cos, nd.tanh, nd.exp, lambda v: -v, lambda v: v * v, abs,
             lambda v: nd.log(1.0 + v * v), lambda v: nd.sqrt(2.0 + v * v)]
    binary = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
              lambda a, b: a / (1.5 + b * b), lambda a, b: nd.atan2(a, b + 3.0),
              lambda a, b: nd.hypot(a, b)]
    steps = []
    for k in range(n_ops):
        if rng.random() < 0.4:
            steps.append((rng.randrange(len(unary)), rng.randrange(n_in + k), None,
                          rng.choice([None, 0.5, -1.25, 3])))
        else:
            steps.append((rng.randrange(len(binary)), rng.randrange(n_in + k),
                          rng.randrange(n_in + k), None))

    def f(xs):
        vals = list(xs)
        for op, i, j, c in steps:
            if j is None:
                v = unary[op](vals[i])
                vals.append(v if c is None else v * c)
            else:
                vals.append(binary[op](vals[i], vals[j]))
        return vals[-1] + 0.5 * vals[-2] - vals[n_in]
    return f


@needs_311
@pytest.mark.parametrize("seed", range(12))
def test_random_programs_and_their_derivatives_assemble_as_compile_does(seed):
    rng = random.Random(seed)
    n_in = rng.randrange(1, 5)
    f = random_program(rng, n_in, rng.randrange(3, 40))
    xs = [rng.uniform(-2, 2) for _ in range(n_in)]
    other = [x + rng.uniform(-0.5, 0.5) for x in xs]
    for g in (f, nd.gradient_r(f), nd.gradient_r(lambda v: nd.gradient_r(f)(v)[0])):
        program = nd.trace(g, xs)
        assert_same_function(program, tuple(xs), tuple(other))
        staged = nd.stage(g)
        assert staged(xs) == g(xs) and staged(xs) == g(xs) and staged(other) == g(other)


@needs_311
def test_what_bytecode_does_not_spell_is_compiled():
    # loops and calls with parameters (a reduction's axis) are compiled from their
    # source; guards and elementwise array calls are assembled: the same numbers
    def guarded(x):
        return x * 2.0 if x > 0 else x - 1.0

    def looped(x):
        return nd.while_loop(lambda s: s[0] < 5.0, lambda s: (s[0] + 1.0, s[1] * x),
                             (0.0, 1.0))[1]

    def reduced(x):
        return nd.numpy.sum(nd.numpy.sin(x) * x)

    def elementwise(x):
        return nd.numpy.sin(x) * nd.numpy.exp(-x) + x

    array = np.linspace(0.1, 1.0, 5)
    for f, x, assembled in ((nd.gradient_r(guarded), 1.5, True),
                            (nd.gradient_r(looped), 1.1, False),
                            (reduced, array, False), (nd.gradient_r(reduced), array, True),
                            (elementwise, array, True)):
        program = nd.trace(f, x)
        fn = codegen.assemble_python(program)
        assert (fn is not None) == assembled, program.source()
        if not assembled:
            fn, source = codegen.compile_python(program)
            assert source is not None
        staged = nd.stage(f)
        want = f(x)
        for got in (staged(x), staged(x)):
            assert np.array_equal(got, want)


@needs_311
def test_guards_assemble_as_compile_does_and_still_fail():
    def f(x, y):
        a = x * y
        if a > 1.0:                     # expects True at the example
            a = a - nd.sin(x)
        if y < -3.0:                    # expects False
            a = a * 2.0
        return a * a

    for g in (f, nd.gradient_r(f, argnums=(0, 1))):
        program = nd.trace(g, 2.0, 1.5)
        assert sum(e.op is GUARD for e in program.eqns) == 2
        fn = assert_same_function(program, (2.0, 1.5), (3.0, 0.75))
        for bad in ((0.5, 0.5), (2.0, -4.0)):
            with pytest.raises(GuardFailure) as assembled:
                fn(*bad)
            with pytest.raises(GuardFailure) as compiled_:
                compiled(program)(*bad)
            assert assembled.value.args == compiled_.value.args
        staged = nd.stage(g)
        for args in ((2.0, 1.5), (2.0, 1.5), (0.5, 0.5), (0.5, 0.5), (2.0, -4.0), (3.0, 1.0)):
            assert staged(*args) == g(*args)
        assert staged.trace_count == 3


@needs_311
def test_an_assembled_function_reports_its_source_line():
    # math raises at the line of its call: the traceback names that line of the source
    # the staged function shows (and the staged call then answers with IEEE's value)
    def f(x):
        a = nd.sin(x) * 3.0
        return a + nd.log(x - 2.0) * a      # log of a negative number at x = 1

    program = nd.trace(f, 3.0)
    fn = codegen.assemble_python(program)
    assert fn is not None
    with pytest.raises(ValueError) as caught:
        fn(1.0)
    line = traceback.extract_tb(caught.value.__traceback__)[-1].lineno
    source = codegen.python_source(program)[0].split("\n")
    assert "math.log" in source[line - 1]
    staged = nd.stage(f)
    staged(3.0)
    assert math.isnan(staged(1.0))
    assert "math.log" in staged.cache[next(iter(staged.cache))][0].source


def test_without_the_assembler_the_source_is_compiled(monkeypatch):
    # (any interpreter other than CPython 3.11 takes this path)
    monkeypatch.setattr(bytecode, "AVAILABLE", False)
    f = nd.gradient_r(lambda xs: nd.sin(xs[0] * xs[1]) + xs[0] / xs[1])
    program = nd.trace(f, [0.5, 2.0])
    assert codegen.assemble_python(program) is None
    fn, source = codegen.compile_python(program)
    assert "def staged(" in source
    assert list(fn(0.5, 2.0)) == f([0.5, 2.0])


@needs_311
def test_templates_outside_the_instruction_set_are_refused():
    assert bytecode.template('(lambda: {0})()') is None            # (a nested function)
    assert bytecode.template('[v for v in {0}]') is None           # (a loop)
    assert bytecode.template('{0} +') is None                      # (not an expression)
    assert bytecode.template('y = {0}', True) is None              # (a store of its own)
    t = bytecode.template('math.cos({0}) * {1}')
    assert [m for _, _, m in t.steps if m and m[0] == 'slot'] == [('slot', 0), ('slot', 1)]
    # a conditional expression's jumps are sized to the code put in its slots, up to one
    # byte of argument (a longer one is compiled)
    asm = bytecode.Assembler(['c', 'a'])
    short = asm.apply('{0} * {1}', [asm.load('a'), asm.load('a')])
    code, depth = asm.apply('({1} if {0} else {2})', [asm.load('c'), short, asm.load('a')])
    assert depth == 2 and len(code) == 2 * (1 + 1 + 4 + 1 + 1)
    with pytest.raises(bytecode.Unsupported):
        asm.apply('({1} if {0} else {2})', [asm.load('c'), (b'\x09\x00' * 300, 1),
                                             asm.load('a')])


@needs_311
def test_assembled_staging_takes_less_memory_than_compile():
    # compile() of the source needs about 2 KB per line (tokens, the parser's memo, the
    # syntax tree); assembling needs the bytes of the code
    mix, xs = long_mix(400)
    program = nd.trace(nd.gradient_r(mix), xs)
    codegen.assemble_python(program)        # (templates compiled once per process)

    def peak(make):
        with Traced() as t:
            make()
            return t.peak()

    assembled = min(peak(lambda: codegen.assemble_python(program)) for _ in range(2))
    compiled_ = peak(lambda: compiled(program))
    assert assembled < compiled_ / 3, (assembled, compiled_)
    assert assembled / len(program.eqns) < 300


@needs_311
def test_a_long_staged_gradient_is_one_assembled_function():
    # no pieces (they were compile()'s, whose memory grows with the source's length):
    # one function, whose source is spelled when asked
    mix, xs = long_mix(3000)
    g = nd.gradient_r(mix)
    want = g(xs)
    staged = nd.stage(g)
    assert staged(xs) == want and staged(xs) == want
    compiled_ = staged.cache[next(iter(staged.cache))][0]
    assert compiled_.fn.__code__.co_filename == "<nestad staged staged>"
    assert compiled_.source.count("def ") == 1
    xs2 = [0.3 - 0.02 * i for i in range(len(xs))]
    assert staged(xs2) == g(xs2)


@needs_311
def test_plain_calls_with_bound_constants_assemble_as_compile_does():
    # a primitive without a template is called through its plain implementation, and a
    # constant without a literal (an array) is a global of the function: bound in the
    # order the source binds them
    exponent = np.array([2.0, 3.0])

    def power(v):
        return nd.numpy.sum(nd.numpy.power(v, exponent))

    def contraction(v):
        return nd.numpy.sum(nd.numpy.einsum('ik,jk->ij', np.ones((2, 2)) * 0.5, v))

    for f, x in ((power, np.array([1.5, 2.0])), (contraction, np.ones((2, 2)))):
        program = nd.trace(nd.gradient_r(f), x)
        assert_same_function(program, (x,), (x * 0.5,))


@needs_311
def test_the_template_cache_stays_bounded(monkeypatch):
    # (plain calls' spellings name their globals and parameters: a long-lived process
    # staging many programs must not keep every one)
    monkeypatch.setattr(bytecode, "_TEMPLATES_MAX", 8)
    for j in range(20):
        assert bytecode.template(f'{{0}} * {float(j)!r}') is not None
        assert len(bytecode._TEMPLATES) <= 8
