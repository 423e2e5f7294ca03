"""Scale: a million-operation tape, tape lifetime, and threads."""
import gc
import math
import threading

import pytest

import nestad as nd
from nestad.values import TapeCell


def test_gradient_of_million_operation_chain():
    # x_{k+1} = x_k * a + b (a 1,000,000-cell tape, 1,000,000 deep): no RecursionError,
    # and the exact answer a^n.
    n, a = 500_000, 1.0000001

    def chain(x):
        for _ in range(n):
            x = x * a + 1e-9
        return x
    g = nd.gradient_r(chain)(1.0)
    assert g == pytest.approx(a ** n, rel=1e-9)


def _live_cells():
    # type(), not isinstance(): isinstance dereferences a weak proxy, and a dead one (numba
    # leaves some on the heap once it has compiled) raises ReferenceError
    return sum(issubclass(type(o), TapeCell) for o in gc.get_objects())


def test_tape_does_not_outlive_the_call():
    gc.collect()
    before = _live_cells()
    nd.gradient_r(lambda v: sum(nd.sin(a * b) for a in v for b in v))([0.1 * k for k in range(30)])
    nd.hessian(lambda v: v[0] * v[1] ** 3)([1.0, 2.0])
    gc.collect()
    after = _live_cells()
    assert after == before


def test_unreachable_cells_are_never_visited():
    from nestad import reverse
    visited = []
    original = reverse._count_consumers

    def spy(roots, tag, skip=None):
        pending, ready = original(roots, tag, skip)
        visited.append(len(pending))
        return pending, ready
    reverse._count_consumers = spy
    try:
        def f(x):
            junk = x
            for _ in range(1000):
                junk = junk * 1.5     # a long computation that does not reach the output
            return x * 2.0
        assert nd.gradient_r(f)(1.0) == 2.0
    finally:
        reverse._count_consumers = original
    assert visited == [2]        # the input cell and the output cell only


def test_threads_differentiate_different_functions():
    funcs = [
        (lambda x: nd.sin(x) * x, lambda x: math.cos(x) * x + math.sin(x)),
        (lambda x: nd.exp(2 * x), lambda x: 2 * math.exp(2 * x)),
        (lambda x: x ** 3, lambda x: 3 * x * x),
        (lambda x: nd.log(1 + x * x), lambda x: 2 * x / (1 + x * x)),
    ]
    errors, results = [], {}

    def worker(k):
        f, df = funcs[k % len(funcs)]
        D = nd.gradient_r if k % 2 else nd.derivative
        try:
            for i in range(300):
                x = 0.1 + 0.01 * i + k
                got = D(f)(x)
                # a nested call too, to mix tags of this thread's runs
                got2 = nd.derivative(lambda y: nd.gradient_r(f)(y))(x)
                fd = (df(x + 1e-6) - df(x - 1e-6)) / 2e-6
                if not (math.isclose(got, df(x), rel_tol=1e-12)
                        and math.isclose(got2, fd, rel_tol=1e-5, abs_tol=1e-6)):
                    errors.append((k, x, got, df(x), got2, fd))
            results[k] = True
        except Exception as e:           # pragma: no cover - reported below
            errors.append((k, repr(e)))
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 8
