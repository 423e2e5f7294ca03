"""Programs travel: a ``Program`` (nd.trace), a staged function (nd.stage) and the
derivative operators' results pickle and copy.  A Program keeps its equations (primitives
by registered name, constants by value); a staged function pickles as the function it
stages and traces again where it is unpickled.  In a worker process (multiprocessing,
'spawn': a fresh interpreter) they give the numbers they give here."""
import collections
import copy
import dataclasses
import math
import multiprocessing
import pickle

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad.staging import GuardFailure

Params = collections.namedtuple('Params', 'w b')


@dataclasses.dataclass
class Scale:
    factor: float
    label: str


@nd.primitive
def softplus(x):
    return np.logaddexp(0.0, x)


softplus = softplus.defpartials(lambda x, out: anp.exp(x - out))


def scalar_f(x, y):
    return nd.sin(x) * y ** 3 + nd.exp(x / y) + nd.cbrt(y)


def piecewise(x):
    return x * x if x > 0 else -2.0 * x


def heron(a):
    return nd.while_loop(lambda s: nd.abs(s[0] * s[0] - s[1]) > 1e-13 * s[1],
                         lambda s: (0.5 * (s[0] + s[1] / s[0]), s[1]), (a, a))[0]


def loss(params, x, scale):
    h = anp.tanh(x @ params.w + params.b)
    return scale.factor * anp.sum(softplus(h) ** 2) + anp.sum(anp.cumsum(h))


X = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
P = Params(np.linspace(0.1, 0.6, 6).reshape(3, 2), np.array([0.3, -0.2]))
S = Scale(1.5, "half")


def roundtrip(obj):
    return pickle.loads(pickle.dumps(obj))


def assert_same(a, b):
    for x, y in zip(nd.structures.flatten(a)[0], nd.structures.flatten(b)[0]):
        assert np.array_equal(x, y)
    assert nd.structures.flatten(a)[1].signature() == nd.structures.flatten(b)[1].signature()


# ---------------------------------------------------------------- Programs

def test_a_pickled_program_keeps_its_equations():
    for program, args in [
            (nd.trace(nd.gradient_r(scalar_f, (0, 1)), 0.7, 1.3), (0.2, 2.5)),
            (nd.trace(nd.hessian(lambda x: scalar_f(x[0], x[1])), np.array([0.7, 1.3])),
             (np.array([0.2, 2.5]),)),
            (nd.trace(nd.gradient_r(loss), P, X, S), (P._replace(b=P.b * 2), X, S)),
            (nd.trace(nd.gradient_r(nd.gradient_r(heron)), 4.0), (9.0,)),
            (nd.trace(piecewise, 2.0), (3.0,))]:
        copy_ = roundtrip(program)
        assert str(copy_) == str(program)
        assert copy_.source() == program.source()
        assert_same(copy_(*args), program(*args))
        assert_same(copy_(*args), program(*args))      # compiled loops, second call


def test_a_pickled_program_checks_arguments_and_guards():
    program = roundtrip(nd.trace(piecewise, 2.0))
    assert program(3.0) == 9.0
    with pytest.raises(GuardFailure):
        program(-1.0)
    with pytest.raises(nd.NestadError, match="structure"):
        program(1.0, 2.0)


def test_a_pickled_program_transforms_again():
    program = roundtrip(nd.trace(scalar_f, 0.7, 1.3))
    jvp, vjp = program.jvp(), program.vjp()
    ref = nd.trace(scalar_f, 0.7, 1.3)
    assert str(jvp) == str(ref.jvp()) and str(vjp) == str(ref.vjp())


def test_a_program_using_scipy_pickles():
    special = pytest.importorskip('nestad.scipy.special')
    program = nd.trace(nd.gradient_r(lambda a: special.gammaln(a) * a), 3.5)
    assert roundtrip(program)(2.5) == program(2.5)
    assert math.isclose(program(2.5), special.digamma(2.5) * 2.5 + special.gammaln(2.5))


def test_copies_of_a_program_run():
    # (a deep copy used to make a new mark of traced leaves and then blame the argument)
    program = nd.trace(nd.gradient_r(loss), P, X, S)
    want = program(P, X, S)
    for c in (copy.copy(program), copy.deepcopy(program)):
        assert_same(c(P, X, S), want)
    deep = copy.deepcopy(nd.trace(piecewise, 2.0))
    assert deep(5.0) == 25.0
    with pytest.raises(GuardFailure):
        deep(-5.0)


# ---------------------------------------------------------------- staged functions and operators

def test_a_pickled_staged_function_traces_again():
    staged = nd.stage(nd.gradient_r(loss), static_argnums=(2,))
    want = staged(P, X, S)
    staged(P, X, S)
    copy_ = roundtrip(staged)
    assert copy_.trace_count == 0 and copy_.static_argnums == {2}
    assert roundtrip(nd.stage(loss, backend="numba", max_traces=3)).backend == "numba"
    assert roundtrip(nd.stage(loss, max_traces=3)).max_traces == 3
    assert_same(copy_(P, X, S), want)
    assert_same(copy_(P, X, S), want)              # compiled
    assert copy_.trace_count == 1
    for c in (copy.copy(staged), copy.deepcopy(staged)):
        assert_same(c(P, X, S), want)


def test_operators_results_pickle_nested_and_staged():
    ops = [(nd.derivative(nd.derivative(nd.sin)), (0.3,)),
           (nd.derivative(nd.gradient_r(heron)), (4.0,)),
           (nd.gradient_r(scalar_f, (0, 1)), (0.7, 1.3)),
           (nd.value_and_gradient_r(scalar_f, 1), (0.7, 1.3)),
           (nd.gradient_f(scalar_f), (0.7, 1.3)),
           (nd.jacobian_f(scalar_f, (0, 1)), (0.7, 1.3)),
           (nd.jacobian_r(scalar_f, (0, 1)), (0.7, 1.3)),
           (nd.hessian(scalar_f, (0, 1)), (0.7, 1.3)),
           (nd.stage(nd.hessian(scalar_f, (0, 1))), (0.7, 1.3)),
           (nd.gradient_r(nd.stage(scalar_f)), (0.7, 1.3))]
    for op, args in ops:
        copy_ = roundtrip(op)
        assert copy_.__name__ == op.__name__
        assert_same(copy_(*args), op(*args))


def test_operators_results_are_still_methods_and_copies():
    class Model:
        grad = nd.gradient_r(lambda self, x: self.k * x * x, 1)
        k = 3.0
    assert Model().grad(2.0) == 12.0
    g = nd.gradient_r(scalar_f)
    assert copy.deepcopy(g) is g and copy.copy(g) is g


def test_cloudpickle_stores_staged_lambdas_by_value():
    cloudpickle = pytest.importorskip('cloudpickle')
    staged = nd.stage(nd.gradient_r(lambda x: x * nd.exp(x)))
    copy_ = cloudpickle.loads(cloudpickle.dumps(staged))
    assert copy_(0.5) == staged(0.5) == 1.5 * math.exp(0.5)


# ---------------------------------------------------------------- in another process

def run_in_worker(payload):
    """What a worker does: call each unpickled function on its arguments, twice (a
    staged function traces, then compiles and runs the compiled code)."""
    return [(fn(*args), fn(*args)) for fn, args in payload]


def test_pickled_staged_gradient_and_program_in_a_spawned_worker():
    staged_grad = nd.stage(nd.gradient_r(loss))
    staged_hess = nd.stage(nd.hessian(scalar_f, (0, 1)))
    program = nd.trace(nd.gradient_r(nd.gradient_r(heron)), 4.0)
    loop_grad = nd.stage(nd.gradient_r(heron))
    payload = [(staged_grad, (P, X, S)), (staged_hess, (0.7, 1.3)), (program, (9.0,)),
               (loop_grad, (2.0,)),
               (nd.jacobian_f(nd.gradient_r(scalar_f, (0, 1)), (0, 1)), (0.4, 1.1))]
    want = run_in_worker(payload)
    with multiprocessing.get_context('spawn').Pool(1) as pool:
        got = pool.apply(run_in_worker, (payload,))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert_same(a, b)
    assert math.isclose(got[2][1], -1 / (4 * 27))     # d2 sqrt(a) / da2 at 9
