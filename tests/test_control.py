"""stop_gradient, checkpoint, checkpoint_loop and fixed_point: values against closed forms
and finite differences, in every mode and pairing, eager and staged."""
import math
import random
import tracemalloc

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp

D = {'f': nd.derivative, 'r': nd.gradient_r}
PAIRINGS = ['ff', 'fr', 'rf', 'rr']


def nest(modes, f):
    for m in reversed(modes):
        f = D[m](f)
    return f


# ---------------------------------------------------------------- stop_gradient

@pytest.mark.parametrize('modes', ['f', 'r'] + PAIRINGS)
def test_stop_gradient_blocks_every_run(modes):
    # d/dx [stop(x) * x] = stop(x); its derivative is 0 (no run sees through stop)
    f = lambda x: nd.stop_gradient(x) * x           # noqa: E731
    want = {1: 1.5, 2: 0.0}[len(modes)]
    assert nest(modes, f)(1.5) == want
    assert nd.stage(nest(modes, f))(1.5) == want


def test_stop_gradient_on_structures_and_arrays():
    g = nd.gradient_r(lambda p: anp.sum(p['w'] * nd.stop_gradient(p)['w']) + p['b'])(
        {'w': np.array([1.0, 2.0]), 'b': 3.0})
    assert np.all(g['w'] == [1.0, 2.0]) and g['b'] == 1.0
    # an inner run's value held constant inside an outer derivative
    h = nd.derivative(lambda a: nd.derivative(lambda x: nd.stop_gradient(a * x) * x)(2.0))(3.0)
    assert h == 0.0


# stop_gradient of a function: the runs going on when it is called are cut from what the
# function closes over; its arguments keep their derivatives (the function is x -> f(x)
# with its captured values held constant).

@pytest.mark.parametrize('m', ['f', 'r'])
def test_stop_gradient_of_a_function_cuts_its_closure(m):
    # issue 14: derivative(lambda x: stop_gradient(lambda y: x * y)(2.0))(3.0) gave 2.0
    assert D[m](lambda x: nd.stop_gradient(lambda y: x * y)(2.0))(3.0) == 0.0
    # the argument's derivative stays: d/dx [x0 * x] = x0
    assert D[m](lambda x: nd.stop_gradient(lambda y: x * y)(x))(3.0) == 3.0
    assert nd.stage(D[m](lambda x: nd.stop_gradient(lambda y: x * y)(x)))(3.0) == 3.0
    assert nd.stage(D[m](lambda x: nd.stop_gradient(lambda y: x * y)(2.0)))(3.0) == 0.0


@pytest.mark.parametrize('pair', PAIRINGS)
def test_stop_gradient_of_a_function_in_nested_runs(pair):
    """The outer run a, the inner run b, both cut from f's closure; the argument a * b
    keeps both.  f(y) = a b y frozen at (a0, b0) = (2, 3): d/db = a0 b0 a, d/da = a0 b0."""
    inner = lambda a: D[pair[1]](lambda b: nd.stop_gradient(lambda y: a * b * y)(a * b))(3.0)  # noqa: E731
    assert D[pair[0]](inner)(2.0) == 6.0
    assert nd.stage(D[pair[0]](inner))(2.0) == 6.0
    # only the outer run reaches the argument: d/db [b f(a)] = a0 b0 a, d/da = a0 b0
    only_outer = lambda a: D[pair[1]](lambda b: b * nd.stop_gradient(lambda y: a * b * y)(a))(3.0)  # noqa: E731
    assert D[pair[0]](only_outer)(2.0) == 6.0
    assert nd.stage(D[pair[0]](only_outer))(2.0) == 6.0
    # a stopped function made in the outer run and applied in the inner one: the inner
    # run (started later) is not cut
    made_outside = lambda a: (lambda g: D[pair[1]](lambda b: g(b) * b)(3.0))(  # noqa: E731
        nd.stop_gradient(lambda y: a * y * y))
    # d/db [a0 b^3] = 3 a0 b^2 with a frozen: the outer derivative is 0
    assert D[pair[0]](made_outside)(2.0) == 0.0
    assert made_outside(2.0) == 3 * 2.0 * 9.0


def test_stop_gradient_of_a_function_of_arrays_in_every_mode():
    W = np.array([[1.0, 2.0], [0.5, -1.0]])
    x0 = np.array([0.3, -0.7])

    def loss(x):
        return anp.sum(anp.tanh(nd.stop_gradient(lambda y: (W @ x) * anp.sin(y))(x)))
    c = W @ x0                                   # the closure's value, held constant
    ref = lambda x: anp.sum(anp.tanh(c * anp.sin(x)))     # noqa: E731
    want = nd.gradient_r(ref)(x0)
    assert np.allclose(want, (1 - np.tanh(c * np.sin(x0)) ** 2) * c * np.cos(x0), rtol=1e-14)
    for op in (nd.gradient_r, nd.gradient_f, nd.jacobian_r, nd.jacobian_f):
        assert np.allclose(op(loss)(x0), want, rtol=1e-14, atol=0)
        assert np.allclose(nd.stage(op(loss))(x0), want, rtol=1e-14, atol=0)
    assert np.allclose(nd.vjp(loss, x0)[1](1.0)[0], want, rtol=1e-14, atol=0)
    H = nd.hessian(ref)(x0)
    for hess in (nd.hessian(loss), nd.jacobian_r(nd.gradient_r(loss)),
                 nd.jacobian_f(nd.gradient_f(loss)), nd.stage(nd.hessian(loss))):
        assert np.allclose(hess(x0), H, rtol=1e-13, atol=0)


def test_stop_gradient_of_a_function_that_returns_a_function():
    curried = lambda x: nd.stop_gradient(lambda y: lambda z: x * y * z)   # noqa: E731
    # x frozen at x0 = 3 in the closure; the arguments keep their derivatives
    assert nd.derivative(lambda x: curried(x)(x)(2.0))(3.0) == 6.0
    assert nd.derivative(lambda x: curried(x)(2.0)(x))(3.0) == 6.0
    assert nd.derivative(lambda x: curried(x)(2.0)(3.0))(3.0) == 0.0
    assert nd.gradient_r(lambda x: curried(x)(2.0)(x))(3.0) == 6.0
    # the derivative of a function-valued result that is a stopped function is zero
    dg = nd.derivative(lambda x: nd.stop_gradient(lambda y: x * y))(3.0)
    assert dg(5.0) == 0.0 and nd.derivative(dg)(5.0) == 0.0
    # and a structure holding numbers and functions is stopped leaf by leaf
    d = nd.derivative(lambda x: nd.stop_gradient({'v': x * x, 'f': lambda y: x * y})['f'](x))(3.0)
    assert d == 3.0


@pytest.mark.parametrize('pair', ['ff', 'rf', 'rr'])
def test_stop_gradient_of_a_function_returning_a_function_in_nested_runs(pair):
    # stop(y -> z -> a b y z)(2)(a b) = 2 a0 b0 a b: d/db = 2 a0 b0 a, d/da = 2 a0 b0 = 12
    inner = lambda a: D[pair[1]](lambda b: nd.stop_gradient(   # noqa: E731
        lambda y: lambda z: a * b * y * z)(2.0)(a * b))(3.0)
    assert D[pair[0]](inner)(2.0) == 12.0
    assert nd.stage(D[pair[0]](inner))(2.0) == 12.0


def test_stop_gradient_of_a_function_drawing_random_numbers_in_reverse_mode():
    # the reverse rule reruns the function in its pullback: with the same draws
    rng, twin = np.random.default_rng(0), np.random.default_rng(0)
    g = nd.gradient_r(lambda x: nd.stop_gradient(lambda y: x * y * rng.uniform(1, 2))(x))(1.5)
    assert g == 1.5 * twin.uniform(1, 2)
    assert rng.uniform() == twin.uniform()


def test_stop_gradient_of_a_function_with_keyword_arguments():
    f = lambda x: nd.stop_gradient(lambda y, *, s: x * y * s)(x, s=x)   # noqa: E731
    # x0 * x * x with x0 frozen: d/dx = 2 x0 x = 18
    assert nd.derivative(f)(3.0) == 18.0 and nd.gradient_r(f)(3.0) == 18.0


# ---------------------------------------------------------------- checkpoint

def _segment(s, x):
    for _ in range(50):
        s = s + 0.01 * nd.sin(s * x)
    return s


@pytest.mark.parametrize('modes', ['f', 'r'] + PAIRINGS)
def test_checkpoint_gives_the_same_derivatives(modes):
    plain = lambda x: _segment(_segment(x, x), x)                            # noqa: E731
    ck = nd.checkpoint(_segment)
    checked = lambda x: ck(ck(x, x), x)                                      # noqa: E731
    assert math.isclose(nest(modes, checked)(0.7), nest(modes, plain)(0.7), rel_tol=1e-12)


def test_checkpoint_with_several_outputs_and_arrays():
    f = nd.checkpoint(lambda a, b: (anp.sum(anp.sin(a) * b), anp.cos(a) * b))
    g = lambda a, b: (anp.sum(anp.sin(a) * b), anp.cos(a) * b)               # noqa: E731
    loss = lambda h: lambda a, b: h(a, b)[0] + anp.sum(h(a, b)[1] ** 2)      # noqa: E731
    a, b = np.array([0.3, -0.4, 1.1]), np.array([2.0, 0.5, -1.0])
    for got, want in zip(nd.gradient_r(loss(f), (0, 1))(a, b), nd.gradient_r(loss(g), (0, 1))(a, b)):
        assert np.allclose(got, want, rtol=1e-13)
    assert np.allclose(nd.hessian(loss(f))(a, b), nd.hessian(loss(g))(a, b), rtol=1e-12)


def test_checkpoint_of_a_closure_over_the_differentiated_value_warns_and_is_correct():
    x0 = 0.7
    with pytest.warns(UserWarning, match="closure"):
        got = nd.gradient_r(lambda x: nd.checkpoint(lambda s: _segment(s, x))(x))(x0)
    assert math.isclose(got, nd.gradient_r(lambda x: _segment(x, x))(x0), rel_tol=1e-13)


@pytest.mark.parametrize('pullback', [lambda f: nd.jacobian_r(f)(0.3),
                                      lambda f: nd.vjp(f, 0.3)[1](1.0)])
def test_checkpoint_rerun_after_its_run_returned_names_the_closure(pullback):
    # The closure's value does not reach the output (no warning, no tape kept); a vjp
    # pullback reruns f after the run returned, and the dead value was reported as an
    # escape through a side effect.
    f = lambda a: a * nd.checkpoint(nd.derivative(lambda u: nd.tanh(a)))(a * 2.0)   # noqa: E731
    with pytest.raises(nd.InvalidInputError, match="checkpoint: .*closure.*as an argument"):
        pullback(f)
    assert nd.gradient_r(f)(0.3) == 0.0


# A checkpointed function's rerun must compute what its first run did (issue 14: value 1.637,
# gradient 1.270 for x * rng.uniform(1, 2), the gradient of another draw).

class _Model:
    def __init__(self):
        self.rng = np.random.RandomState(3)

    def scale(self, x):
        return x * self.rng.rand()


_GLOBAL_RNG = None


def _draws_from_a_global(x):
    return x * _GLOBAL_RNG.normal() + nd.sin(x)


def _closure_generator():
    rng = np.random.default_rng(0)
    return lambda x: x * rng.uniform(1, 2)


def _module_global():
    global _GLOBAL_RNG
    _GLOBAL_RNG = np.random.default_rng(11)
    return _draws_from_a_global


def _seeded(make):
    """A maker of the function, its generators freshly seeded (the global ones too)."""
    def fresh():
        np.random.seed(7)
        random.seed(7)
        return make()
    return fresh


DRAWS = {   # f(x) = x * u (+ sin x), u drawn inside f
    'closure Generator': _seeded(_closure_generator),
    'numpy global': _seeded(lambda: lambda x: x * np.random.uniform(1, 2)),
    'python random': _seeded(lambda: lambda x: x * random.uniform(1, 2)),
    'bound method of an object': _seeded(lambda: _Model().scale),
    'module global': _seeded(_module_global),
}


@pytest.mark.parametrize('source', list(DRAWS))
@pytest.mark.parametrize('mode', ['value_and_gradient_r', 'vjp', 'jacobian_r', 'rr', 'staged'])
def test_checkpoint_reruns_with_the_same_random_numbers(source, mode):
    v0, g0 = nd.value_and_gradient_r(DRAWS[source]())(1.5)    # the same draws, no checkpoint
    ck = nd.checkpoint(DRAWS[source]())
    if mode == 'value_and_gradient_r':
        assert nd.value_and_gradient_r(ck)(1.5) == (v0, g0)
    elif mode == 'vjp':
        v, pb = nd.vjp(ck, 1.5)
        assert v == v0 and pb(1.0) == (g0,) and pb(1.0) == (g0,)   # every pullback reruns the same
    elif mode == 'jacobian_r':
        assert nd.jacobian_r(ck)(1.5) == g0
    elif mode == 'rr':
        # the second derivative of x * u (+ sin x) is 0 (- sin x)
        h = nd.gradient_r(nd.gradient_r(ck))(1.5)
        assert math.isclose(h, -math.sin(1.5) if source == 'module global' else 0.0, abs_tol=1e-15)
        assert nd.gradient_r(nd.checkpoint(DRAWS[source]()))(1.5) == g0
    else:
        assert nd.stage(nd.gradient_r(ck))(1.5) == g0


def test_checkpoint_leaves_the_random_stream_where_one_run_leaves_it():
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    v, g = nd.value_and_gradient_r(nd.checkpoint(lambda x: x * a.uniform(1, 2)))(1.0)
    assert v == g == b.uniform(1, 2)
    assert a.uniform() == b.uniform()                # one draw taken, not two, not none


def test_checkpoint_with_a_generator_passed_as_an_argument():
    ck = nd.checkpoint(lambda x, rng: x * rng.normal())
    v, g = nd.value_and_gradient_r(ck)(2.0, np.random.default_rng(1))
    assert g == np.random.default_rng(1).normal() and v == 2.0 * g


def test_checkpoint_of_a_function_that_computes_something_else_again_raises():
    calls = [0]

    def counter(x):
        calls[0] += 1
        return x * calls[0]
    with pytest.raises(nd.NestadError, match="checkpoint: .*counter computed another value when "
                                             "the reverse phase ran it again.*pass them in"):
        nd.gradient_r(nd.checkpoint(counter))(1.0)


def _loop_step(s):
    return (s[0] + 0.001 * nd.sin(s[0] * s[1]), s[1])


def test_checkpoint_loop_saves_memory_and_keeps_the_gradient():
    """The reverse gradient of a 100,000-step scalar loop, checkpointed every sqrt(n)
    steps, with a peak of traced memory at most 1/20 of the unchecked run's."""
    n = 100_000

    def unchecked(x):
        s = (x, x)
        for _ in range(n):
            s = _loop_step(s)
        return s[0]

    def checked(x):
        return nd.checkpoint_loop(_loop_step, (x, x), n)[0]

    peaks, grads = [], []
    for f in (unchecked, checked):
        tracemalloc.start()
        grads.append(nd.gradient_r(f)(0.7))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert math.isclose(grads[0], grads[1], rel_tol=1e-12)
    assert peaks[1] <= peaks[0] / 20, f"peaks: unchecked {peaks[0]}, checkpointed {peaks[1]}"


@pytest.mark.parametrize('modes', ['f', 'r', 'rr', 'fr'])
def test_checkpoint_loop_in_other_modes_and_segment_sizes(modes):
    f = lambda x: nd.checkpoint_loop(_loop_step, (x, x), 200, every=7)[0]   # noqa: E731

    def g(x):
        s = (x, x)
        for _ in range(200):
            s = _loop_step(s)
        return s[0]
    assert math.isclose(nest(modes, f)(0.7), nest(modes, g)(0.7), rel_tol=1e-12)


# ---------------------------------------------------------------- fixed_point

def sqrt_again(a):
    """DVL's sqrt-again: sqrt as the fixed point of Heron's iteration."""
    return nd.fixed_point(lambda x, a: (x + a / x) / 2, 1.0, a)


@pytest.mark.parametrize('a', [4.0, 9.0, 16.0])
def test_dvl_heron_first_and_second_derivatives(a):
    assert sqrt_again(a) == math.sqrt(a)
    for m in 'fr':
        assert D[m](sqrt_again)(a) == 0.5 / math.sqrt(a)
        assert nd.stage(D[m](sqrt_again))(a) == 0.5 / math.sqrt(a)
    for p in PAIRINGS:
        assert math.isclose(nest(p, sqrt_again)(a), -0.25 * a ** -1.5, rel_tol=1e-14)
        assert math.isclose(nd.stage(nest(p, sqrt_again))(a), -0.25 * a ** -1.5, rel_tol=1e-14)


def _contraction(p):
    """x* = cos(x*)/2 + p: a contraction, so the iterations converge linearly."""
    return nd.fixed_point(lambda x, p: 0.5 * nd.cos(x) + p, 0.0, p)


def test_implicit_derivatives_of_a_linear_contraction():
    p = 0.3
    x = _contraction(p)
    assert abs(x - (0.5 * math.cos(x) + p)) < 1e-11     # the default tol is 1e-12 per step
    d1 = 1 / (1 + 0.5 * math.sin(x))                 # implicit function theorem
    d2 = -0.5 * math.cos(x) * d1 ** 3                 # its derivative along x(p)
    for m in 'fr':
        assert math.isclose(D[m](_contraction)(p), d1, rel_tol=1e-11)
    for pr in PAIRINGS:
        assert math.isclose(nest(pr, _contraction)(p), d2, rel_tol=1e-10)
    h = 1e-4
    d3 = (nest('ff', _contraction)(p + h) - nest('ff', _contraction)(p - h)) / (2 * h)
    for modes in ('fff', 'frf', 'rfr', 'rrr'):
        assert math.isclose(nest(modes, _contraction)(p), d3, rel_tol=1e-6)


def test_fixed_point_of_vectors_with_several_parameters():
    # x = A x / 2 + b (a contraction for |A| < 2): x* = (I - A/2)^-1 b
    A = np.array([[0.5, 0.2], [0.1, 0.3]])
    b = np.array([1.0, -0.5])
    solve = lambda A, b: nd.fixed_point(lambda x, A, b: A @ x / 2 + b, np.zeros(2), A, b)   # noqa: E731
    want = np.linalg.solve(np.eye(2) - A / 2, b)
    assert np.allclose(solve(A, b), want, rtol=1e-12)
    exact = lambda A, b: anp.linalg.solve(np.eye(2) - A / 2, b)              # noqa: E731
    loss = lambda s: lambda A, b: anp.sum(s(A, b) ** 2)                      # noqa: E731
    for got, ref in zip(nd.gradient_r(loss(solve), (0, 1))(A, b), nd.gradient_r(loss(exact), (0, 1))(A, b)):
        assert np.allclose(got, ref, rtol=1e-10)
    assert np.allclose(nd.hessian(loss(solve), 1)(A, b), nd.hessian(loss(exact), 1)(A, b), rtol=1e-9)
    assert np.allclose(nd.stage(nd.gradient_r(loss(solve), 1))(A, b),
                       nd.gradient_r(loss(exact), 1)(A, b), rtol=1e-10)


def test_fixed_point_does_not_differentiate_the_iterations():
    # Starting from a perturbed guess changes nothing: x0 carries no derivative.
    f = lambda a: nd.fixed_point(lambda x, a: (x + a / x) / 2, a, a)          # noqa: E731
    assert nd.derivative(f)(9.0) == 1 / 6


# A run-off to inf was read as convergence (issue 14): inf <= tol * inf.

def _runs_off(a):
    return nd.fixed_point(lambda x, a: 2 * x + a, 1.0, a)


def _repelling(a):
    """x = 2 x - a has the fixed point a, repelling: the primal starts on it (x0 = 3 = a)
    and stops at once, but the linearised iteration dx = 2 dx - da runs off to -inf."""
    return nd.fixed_point(lambda x, a: 2 * x - a, 3.0, a)


@pytest.mark.parametrize('modes', ['', 'f', 'r'] + PAIRINGS)
@pytest.mark.parametrize('staged', [False, True])
def test_fixed_point_that_runs_off_to_infinity_raises(modes, staged):
    f = nest(modes, _runs_off)
    with pytest.raises(nd.NestadError, match=r"fixed_point diverged: iterate 10\d\d is not "
                                             r"finite.*contraction"):
        (nd.stage(f) if staged else f)(1.0)


@pytest.mark.parametrize('modes', ['f', 'r'] + PAIRINGS)
@pytest.mark.parametrize('staged', [False, True])
def test_fixed_point_whose_linearised_iteration_diverges_raises(modes, staged):
    assert _repelling(3.0) == 3.0
    f = nest(modes, _repelling)
    with pytest.raises(nd.NestadError, match=r"fixed_point's (tangent|adjoint) equation diverged: "
                                             r"iterate \d+ is not finite.*spectral radius < 1"):
        (nd.stage(f) if staged else f)(3.0)


def test_fixed_point_with_a_nan_iterate_raises():
    with pytest.raises(nd.NestadError, match="fixed_point diverged: iterate 1 is not finite"):
        nd.fixed_point(lambda x, a: x + nd.log(x - a), 1.0, 5.0)


def test_staged_fixed_point_converging_then_diverging_raises():
    # x = p x + 1 converges for |p| < 1 (x* = 1 / (1 - p)) and runs off for p > 1: the
    # staged function must not take the program traced at p = 0.5 for p = 2.
    solve = lambda p: nd.fixed_point(lambda x, p: p * x + 1.0, 0.0, p)     # noqa: E731
    for op in (lambda f: f, nd.derivative, nd.gradient_r):
        S = nd.stage(op(solve))
        assert math.isclose(S(0.5), op(lambda p: 1 / (1 - p))(0.5), rel_tol=1e-10)
        with pytest.raises(nd.NestadError, match="diverged"):
            S(2.0)


def test_fixed_point_errors():
    with pytest.raises(nd.NestadError, match="did not converge"):
        nd.fixed_point(lambda x, p: 2.0 * x + p, 1.0, 1.0, max_iter=50)
    with pytest.raises(nd.InvalidInputError, match="closure"):
        nd.derivative(lambda b: nd.fixed_point(lambda x, a: (x + a / x) / 2 + 0.0 * b, 1.0, 4.0))(1.0)


# ---------------------------------------------------------------- while_loop's state

@pytest.mark.parametrize('staged', [False, True])
@pytest.mark.parametrize('body, message', [
    (lambda s: (s[0] + 1, s[1], 2.0), r"same structure as it was given, \(\*, \*\), but it returned "
                                       r"\(\*, \*, \*\)"),
    (lambda s: (s[0] + 1, [s[1]]), r"but it returned \(\*, \[\*\]\)"),
    (lambda s: (s[0] + 0.5, s[1]), r"turns state leaf 0 from int64\[\] into float64\[\].*start a "
                                    r"float as 0.0, not 0"),
    (lambda s: (s[0] + 1, anp.stack([s[1], s[1]])), r"turns state leaf 1 from float64\[\] into "
                                                      r"float64\[2\]"),
])
def test_while_loop_body_must_keep_the_state_eager_and_staged(staged, body, message):
    f = lambda x: nd.while_loop(lambda s: s[0] < 3, body, (0, x))          # noqa: E731
    with pytest.raises(nd.NestadError, match=message):
        (nd.stage(f) if staged else f)(1.0)
    with pytest.raises(nd.NestadError, match=message):
        nd.derivative(f)(1.0) if not staged else nd.stage(nd.gradient_r(lambda x: f(x)[1]))(1.0)
