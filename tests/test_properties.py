"""Property-based tests: random straight-line programs, differentiated every way.

A program is a list of instructions over a register file that starts with the
n inputs (n = 1..4).  Each instruction applies an operation to earlier registers
and appends the result; the output is the sum of the last few registers.  Every
operation is smooth where it is used (divisions, hypot and atan2 are rejected
near their singularities, exp only sees bounded arguments), and inputs are drawn
from [-2, 2], so the programs are well conditioned and finite differences are a
trustworthy independent reference.

Every operation has two implementations: one with nestad (used under AD) and one
with ``math`` (used for the finite differences), so the reference never goes
through nestad.
"""
import math
from dataclasses import dataclass
from typing import Callable

from hypothesis import assume, given, settings
from hypothesis import strategies as st

import nestad as nd
import nestad.numpy as anp
from nestad.scipy.special import xlogy

_STAGED = nd.stage(lambda a, b: a * nd.sin(b))

MODES = {'f': nd.derivative, 'r': nd.gradient_r}
PAIRINGS = ['ff', 'fr', 'rf', 'rr']        # outer mode, inner mode

SETTINGS = settings(max_examples=300, deadline=None)

# Tolerances.
# AD against AD (forward vs reverse, different nestings): the same real numbers
# computed in different orders, so they agree to rounding error: rtol 1e-9 plus
# atol 1e-9 times the problem's scale (largest register / derivative magnitude),
# which absorbs cancellation between large intermediate terms.
AD_RTOL, AD_ATOL = 1e-9, 1e-9
# AD against a central difference with step h = 1e-6: truncation ~h^2 |f'''| and
# rounding ~eps |f| / h ~ 1e-10 |f|; registers are kept below 50 in magnitude, so
# rtol 1e-5 plus atol 1e-6 times the scale is loose enough for FD and still
# orders of magnitude tighter than any wrong derivative.
FD_STEP = 1e-6
FD_RTOL, FD_ATOL = 1e-5, 1e-6
MAX_REGISTER = 50.0        # programs whose values exceed this are rejected


# ============================================================== operations

class Rejected(Exception):
    """The program leaves the region where it is smooth and well conditioned."""


@dataclass(frozen=True)
class Op:
    name: str
    arity: int
    ad: Callable           # built from nestad functions and operators
    ref: Callable          # the same function with math only
    ok: Callable = None    # ok(*plain_args): far enough from any singularity?

    def __repr__(self):
        return self.name


def _far_from_branch_cut(a, b):
    # atan2(a, b) jumps along a == 0, b < 0, and is singular at the origin.
    return math.hypot(a, b) > 0.25 and not (b < 0 and abs(a) < 0.25)


OPS = [
    Op('add', 2, lambda a, b: a + b, lambda a, b: a + b),
    Op('sub', 2, lambda a, b: a - b, lambda a, b: a - b),
    Op('mul', 2, lambda a, b: a * b, lambda a, b: a * b),
    Op('div', 2, lambda a, b: a / b, lambda a, b: a / b, lambda a, b: abs(b) > 0.25),
    Op('scale', 1, lambda a: 0.5 * a, lambda a: 0.5 * a),
    Op('shift', 1, lambda a: a + 1, lambda a: a + 1),
    Op('rsub', 1, lambda a: 2 - a, lambda a: 2 - a),
    Op('neg', 1, lambda a: -a, lambda a: -a),
    Op('square', 1, lambda a: a ** 2, lambda a: a ** 2),
    Op('cube', 1, lambda a: a * a * a, lambda a: a * a * a),
    Op('recip', 1, lambda a: 1.0 / (1.0 + a * a), lambda a: 1.0 / (1.0 + a * a)),
    Op('sin', 1, nd.sin, math.sin),
    Op('cos', 1, nd.cos, math.cos),
    Op('tanh', 1, nd.tanh, math.tanh),
    Op('atan', 1, nd.atan, math.atan),
    Op('erf', 1, nd.erf, math.erf),
    Op('exp_tanh', 1, lambda a: nd.exp(nd.tanh(a)), lambda a: math.exp(math.tanh(a))),
    Op('gauss', 1, lambda a: nd.exp(-(a * a)), lambda a: math.exp(-(a * a))),
    Op('log1sq', 1, lambda a: nd.log(1.0 + a * a), lambda a: math.log(1.0 + a * a)),
    Op('sqrt1sq', 1, lambda a: nd.sqrt(1.0 + a * a), lambda a: math.sqrt(1.0 + a * a)),
    Op('asinh', 1, nd.asinh, math.asinh),
    Op('hypot', 2, nd.hypot, math.hypot, lambda a, b: math.hypot(a, b) > 0.25),
    Op('atan2', 2, nd.atan2, math.atan2, _far_from_branch_cut),
    Op('powpos', 2, lambda a, b: (1.0 + a * a) ** nd.tanh(b),
       lambda a, b: (1.0 + a * a) ** math.tanh(b)),
    # The same numbers through other routes (found by fuzzing against JAX): nestad.numpy on
    # scalars, 0-d and one-element arrays (a reduction of a 0-d array over axis 0 crashed),
    # a staged function with perturbed arguments (closures over them were mishandled), a
    # scipy rule with a mixed second derivative (xlogy's was 0 at x = 0) and numpy's divide.
    Op('np_sin', 1, lambda a: anp.sin(a), math.sin),
    Op('0d_sum', 1, lambda a: anp.sum(anp.reshape(a, ()) * 2.0, axis=0), lambda a: 2.0 * a),
    Op('1_elem', 1, lambda a: anp.tanh(anp.array([a]))[0], math.tanh),
    Op('staged', 2, lambda a, b: _STAGED(a, b), lambda a, b: a * math.sin(b)),
    Op('xlogy', 2, lambda a, b: xlogy(a, 1.0 + b * b), lambda a, b: a * math.log(1.0 + b * b)),
    Op('np_divide', 2, lambda a, b: anp.divide(a, b), lambda a, b: a / b, lambda a, b: abs(b) > 0.25),
]


@dataclass(frozen=True)
class Program:
    n_inputs: int
    instructions: tuple     # of (Op, register indices)
    n_outputs: int          # output = sum of the last n_outputs registers

    def run(self, inputs, impl):
        """Evaluate with ``impl`` = 'ad' (nestad) or 'ref' (math); returns the registers."""
        regs = list(inputs)
        for op, args in self.instructions:
            regs.append(getattr(op, impl)(*(regs[i] for i in args)))
        return regs

    def output(self, regs):
        total = regs[-1]
        for r in regs[-self.n_outputs:-1]:
            total = total + r
        return total

    def __call__(self, *inputs):
        return self.output(self.run(inputs, 'ad'))

    def reference(self, *inputs):
        return self.output(self.run(inputs, 'ref'))

    def check_domain(self, inputs):
        """Raise Rejected unless every instruction is well inside its smooth domain."""
        regs = [float(x) for x in inputs]
        for op, args in self.instructions:
            vals = [regs[i] for i in args]
            if op.ok is not None and not op.ok(*vals):
                raise Rejected(op.name)
            out = op.ref(*vals)
            if not abs(out) <= MAX_REGISTER:
                raise Rejected(f"{op.name} = {out}")
            regs.append(out)
        return max(abs(r) for r in regs)

    def __repr__(self):
        names = [f"x{i}" for i in range(self.n_inputs)]
        lines = []
        for k, (op, args) in enumerate(self.instructions):
            names.append(f"r{k}")
            lines.append(f"r{k} = {op.name}({', '.join(names[i] for i in args)})")
        out = " + ".join(names[-self.n_outputs:])
        return f"Program({'; '.join(lines)}; out = {out})"


@st.composite
def programs(draw, n_inputs=None):
    n = draw(st.integers(1, 4)) if n_inputs is None else n_inputs
    length = draw(st.integers(1, 8))
    instructions = []
    for k in range(length):
        op = draw(st.sampled_from(OPS))
        args = tuple(draw(st.integers(0, n + k - 1)) for _ in range(op.arity))
        instructions.append((op, args))
    n_outputs = draw(st.integers(1, min(3, length)))
    return Program(n, tuple(instructions), n_outputs)


INPUT = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)


@st.composite
def program_and_point(draw, n_inputs=None):
    program = draw(programs(n_inputs))
    xs = tuple(draw(INPUT) for _ in range(program.n_inputs))
    try:
        scale = program.check_domain(xs)
    except Rejected:
        assume(False)
    return program, xs, scale


# ============================================================== helpers

def assert_close(actual, expected, rtol, atol, what=""):
    ok = abs(actual - expected) <= rtol * max(abs(actual), abs(expected)) + atol
    assert ok, f"{what}: {actual!r} vs {expected!r} (rtol {rtol}, atol {atol})"


def assert_all_close(actual, expected, rtol, atol, what=""):
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, e, rtol, atol, f"{what}[{i}]")


def with_item(xs, i, v):
    ys = list(xs)
    ys[i] = v
    return tuple(ys)


def central_difference(f, x, step=FD_STEP):
    h = step * max(1.0, abs(x))
    return (f(x + h) - f(x - h)) / (2.0 * h)


def fd_gradient(f, xs):
    return [central_difference(lambda t: f(*with_item(xs, i, t)), xs[i]) for i in range(len(xs))]


def all_args(n):
    return tuple(range(n))


def scale_of(*values):
    """1 + the largest magnitude among the given numbers / nested sequences."""
    flat = []

    def walk(v):
        if isinstance(v, (list, tuple)):
            for w in v:
                walk(w)
        else:
            flat.append(abs(v))
    walk(values)
    return 1.0 + max(flat)


def d(mode, f):
    return MODES[mode](f)


def partial(mode, f, xs, i):
    """d f / d x_i at xs, by the given mode."""
    return d(mode, lambda t: f(*with_item(xs, i, t)))(xs[i])


def second_partial(pairing, f, xs, i, j):
    """d/dx_i d/dx_j f at xs, outer mode first: the inner run sees x_i perturbed by the outer."""
    outer, inner = pairing
    return d(outer, lambda s: partial(inner, f, with_item(xs, i, s), j))(xs[i])


# ============================================================== first derivatives

@SETTINGS
@given(program_and_point())
def test_gradients_agree_with_each_other_and_with_finite_differences(case):
    program, xs, reg_scale = case
    n = program.n_inputs
    g_r = nd.gradient_r(program, argnums=all_args(n))(*xs)
    g_f = nd.gradient_f(program, argnums=all_args(n))(*xs)
    g_fd = fd_gradient(program.reference, xs)
    scale = scale_of(reg_scale, g_r, g_fd)
    assert_all_close(g_r, g_f, AD_RTOL, AD_ATOL * scale, f"{program} gradient_r vs gradient_f")
    assert_all_close(g_r, g_fd, FD_RTOL, FD_ATOL * scale, f"{program} gradient_r vs FD")
    # value_and_gradient_r: the value matches the math-only evaluation.
    value, _ = nd.value_and_gradient_r(program, argnums=all_args(n))(*xs)
    assert_close(value, program.reference(*xs), AD_RTOL, AD_ATOL * scale, f"{program} value")


@SETTINGS
@given(program_and_point(), st.lists(INPUT, min_size=4, max_size=4))
def test_jvp_and_vjp_are_dual(case, direction):
    """<J v, 1> from jvp equals <1, J^T> . v from vjp (and the gradient)."""
    program, xs, reg_scale = case
    v = tuple(direction[:program.n_inputs])
    _, jv = nd.jvp(program, xs, v)
    _, pullback = nd.vjp(program, *xs)
    ct = pullback(1.0)
    vjp_dot = sum(c * vi for c, vi in zip(ct, v))
    fd = central_difference(lambda t: program.reference(*(x + t * vi for x, vi in zip(xs, v))), 0.0)
    scale = scale_of(reg_scale, jv, ct)
    assert_close(jv, vjp_dot, AD_RTOL, AD_ATOL * scale, f"{program} jvp vs vjp")
    assert_close(jv, fd, FD_RTOL, FD_ATOL * scale, f"{program} jvp vs FD")


@SETTINGS
@given(program_and_point(n_inputs=1))
def test_one_input_derivative_equals_gradient(case):
    program, (x,), reg_scale = case
    df = nd.derivative(program)(x)
    dr = nd.gradient_r(program)(x)
    fd = central_difference(program.reference, x)
    scale = scale_of(reg_scale, df, fd)
    assert_close(df, dr, AD_RTOL, AD_ATOL * scale, f"{program} derivative vs gradient_r")
    assert_close(df, fd, FD_RTOL, FD_ATOL * scale, f"{program} derivative vs FD")


# ============================================================== second derivatives

@SETTINGS
@given(program_and_point(n_inputs=1))
def test_one_input_second_derivative_in_all_pairings(case):
    program, (x,), reg_scale = case
    results = {p: d(p[0], d(p[1], program))(x) for p in PAIRINGS}
    # FD of the (reverse-mode) first derivative.
    fd = central_difference(nd.gradient_r(program), x)
    scale = scale_of(reg_scale, list(results.values()), fd)
    for p, value in results.items():
        assert_close(value, results['ff'], AD_RTOL, AD_ATOL * scale, f"{program} {p} vs ff")
        assert_close(value, fd, FD_RTOL, FD_ATOL * scale, f"{program} {p} vs FD of gradient")


def _hessian_rows(h):
    return [list(row) for row in h]


@settings(max_examples=200, deadline=None)
@given(program_and_point())
def test_hessian_every_way(case):
    program, xs, reg_scale = case
    n = program.n_inputs
    args = all_args(n)
    reference = _hessian_rows(nd.hessian(program, argnums=args)(*xs))
    others = {
        'jacobian_f(gradient_f)': nd.jacobian_f(nd.gradient_f(program, argnums=args), argnums=args),
        'jacobian_r(gradient_r)': nd.jacobian_r(nd.gradient_r(program, argnums=args), argnums=args),
        'jacobian_r(gradient_f)': nd.jacobian_r(nd.gradient_f(program, argnums=args), argnums=args),
        'jacobian_f(gradient_r)': nd.jacobian_f(nd.gradient_r(program, argnums=args), argnums=args),
    }
    grad = nd.gradient_r(program, argnums=args)
    fd = [[central_difference(lambda t: grad(*with_item(xs, j, t))[i], xs[j]) for j in range(n)]
          for i in range(n)]
    scale = scale_of(reg_scale, reference, fd)
    atol = AD_ATOL * scale
    assert len(reference) == n and all(len(row) == n for row in reference)
    for name, op in others.items():
        h = _hessian_rows(op(*xs))
        for i in range(n):
            assert_all_close(h[i], reference[i], AD_RTOL, atol, f"{program} {name} row {i}")
    for i in range(n):
        assert_all_close(reference[i], fd[i], FD_RTOL, FD_ATOL * scale, f"{program} hessian vs FD row {i}")
        for j in range(n):
            # Symmetry, and each entry by nested single-variable derivatives in all pairings.
            assert_close(reference[i][j], reference[j][i], AD_RTOL, atol, f"{program} symmetry {i},{j}")
            for p in PAIRINGS:
                entry = second_partial(p, program, xs, i, j)
                assert_close(entry, reference[i][j], AD_RTOL, atol, f"{program} {p} entry {i},{j}")


@SETTINGS
@given(program_and_point(), st.lists(INPUT, min_size=4, max_size=4))
def test_hvp_matches_hessian(case, direction):
    program, xs, reg_scale = case
    n = program.n_inputs
    v = tuple(direction[:n])
    f = lambda p: program(*p)          # noqa: E731  (hvp takes a single structured argument)
    hv = nd.hvp(f, xs, v)
    h = _hessian_rows(nd.hessian(f)(xs))
    expected = [sum(h[i][j] * v[j] for j in range(n)) for i in range(n)]
    scale = scale_of(reg_scale, h)
    assert_all_close(list(hv), expected, AD_RTOL, AD_ATOL * scale * n, f"{program} hvp")


# ============================================================== perturbation confusion

@SETTINGS
@given(program_and_point(n_inputs=2))
def test_nested_runs_with_different_tags_do_not_confuse(case):
    """d/dx [x * d/dy p(x, y)] at y = y0, in all four pairings, equals p_y + x p_xy."""
    program, (x0, y0), reg_scale = case

    def outer_fn(inner_mode):
        return lambda x: x * d(inner_mode, lambda y: program(x, y))(y0)

    results = {p: d(p[0], outer_fn(p[1]))(x0) for p in PAIRINGS}
    # Independent route: first and second partials from gradient_f / jacobian_f.
    p_y = nd.gradient_f(program, argnums=(0, 1))(x0, y0)[1]
    p_xy = nd.jacobian_f(nd.gradient_f(program, argnums=(0, 1)), argnums=(0, 1))(x0, y0)[1][0]
    expected = p_y + x0 * p_xy
    # And finite differences of x * FD_y p (math-only evaluation, nested FD, so looser).
    fd = central_difference(
        lambda x: x * central_difference(lambda y: program.reference(x, y), y0, 1e-4), x0, 1e-4)
    scale = scale_of(reg_scale, list(results.values()), expected)
    for p, value in results.items():
        assert_close(value, expected, AD_RTOL, AD_ATOL * scale, f"{program} pairing {p}")
        assert_close(value, fd, 1e-4, 1e-4 * scale, f"{program} pairing {p} vs nested FD")


@SETTINGS
@given(program_and_point(n_inputs=2))
def test_inner_derivative_evaluated_at_outer_variable(case):
    """d/dx [ (d/dy p(x, y))(y = x) ] = p_xy(x, x) + p_yy(x, x): the inner run's
    point carries the outer perturbation, the classic confusion trap."""
    program, (x0, _), reg_scale = case
    try:
        reg_scale = program.check_domain((x0, x0))
    except Rejected:
        assume(False)
    results = {p: d(p[0], lambda x: d(p[1], lambda y: program(x, y))(x))(x0) for p in PAIRINGS}
    h = nd.hessian(program, argnums=(0, 1))(x0, x0)
    expected = h[0][1] + h[1][1]
    scale = scale_of(reg_scale, list(results.values()), expected)
    for p, value in results.items():
        assert_close(value, expected, AD_RTOL, AD_ATOL * scale, f"{program} pairing {p}")
