"""The one dispatch (nestad.interpret): every hand-written fast path of the forward and
reverse interpretations gives what the generic rule gives through ``bind``."""
import operator

import numpy as np
import pytest

import nestad as nd
from nestad import perturbation, primitives as P
from nestad.interpret import FORWARD, REVERSE, bind, outermost
from nestad.lifting import lift1
from nestad.values import Bundle, TapeCell, next_id

rng = np.random.default_rng(3)

# operator, its primitive, and how the generic rule is called (reflected: other op self)
BINARY = [(operator.add, P.ADD, False), (operator.sub, P.SUB, False), (operator.mul, P.MUL, False),
          (operator.truediv, P.DIV, False), (operator.pow, P.POW, False),
          (lambda x, c: c + x, P.ADD, True), (lambda x, c: c - x, P.SUB, True),
          (lambda x, c: c * x, P.MUL, True), (lambda x, c: c / x, P.DIV, True)]


def _run(make):
    tag = perturbation.fresh()
    try:
        return make(tag)
    finally:
        perturbation.retire(tag)


def _parts(v):
    """(primal, tangent) of a Bundle; (primal, [(input id, partial)]) of a TapeCell."""
    if isinstance(v, Bundle):
        return v.primal, v.tangent
    return v.primal, sorted((c.id, float(d)) for c, d in v.partials)


@pytest.mark.parametrize('kind', ['forward', 'reverse'])
@pytest.mark.parametrize('k', range(len(BINARY)))
def test_binary_fast_paths_equal_the_generic_rule(kind, k):
    op, prim, reflected = BINARY[k]
    for _ in range(20):
        a, b = rng.uniform(0.2, 3.0, size=2)
        c = float(rng.choice([2.0, 0.5, -1.5, 3.0]))

        def make(tag):
            if kind == 'forward':
                x, y = Bundle(tag, a, rng.normal()), Bundle(tag, b, rng.normal())
            else:
                x, y = TapeCell(tag, next_id(), a, ()), TapeCell(tag, next_id(), b, ())
            cases = [(op(x, c), (c, x) if reflected else (x, c))]          # a float operand
            if not reflected:
                cases.append((op(x, y), (x, y)))                          # the same tag
            return [(_parts(fast), _parts(bind(prim, args))) for fast, args in cases]
        for fast, generic in _run(make):
            np.testing.assert_allclose(fast[0], generic[0], rtol=1e-15)
            if kind == 'forward':
                np.testing.assert_allclose(fast[1], generic[1], rtol=1e-14)
            else:
                assert [i for i, _ in fast[1]] == [i for i, _ in generic[1]]
                np.testing.assert_allclose([d for _, d in fast[1]], [d for _, d in generic[1]],
                                           rtol=1e-14)


@pytest.mark.parametrize('name', ['sin', 'exp', 'log', 'sqrt', 'tanh', 'atan', 'neg'])
def test_one_argument_fast_paths_equal_the_generic_rule(name):
    prim = P.NEG if name == 'neg' else getattr(P, name.upper())
    fast_fn = operator.neg if name == 'neg' else (lambda x: lift1(prim, x))
    for a in rng.uniform(0.1, 2.0, size=10):
        def make(tag):
            out = []
            for x in (Bundle(tag, a, 1.7), TapeCell(tag, next_id(), a, ())):
                interp = FORWARD if isinstance(x, Bundle) else REVERSE
                generic = interp.process(prim, tag, (x,), (True,), (x.primal,), {})
                out.append((_parts(fast_fn(x)), _parts(generic)))
            return out
        for fast, generic in _run(make):
            np.testing.assert_allclose(fast[0], generic[0], rtol=1e-15)
            second = [d for _, d in fast[1]] if isinstance(fast[1], list) else fast[1]
            second_g = [d for _, d in generic[1]] if isinstance(generic[1], list) else generic[1]
            np.testing.assert_allclose(second, second_g, rtol=1e-14)


def test_outermost_follows_the_tag_order_across_interpretations():
    def make(tags):
        t1, t2, t3 = tags
        x = Bundle(t1, 1.0, 1.0)
        y = TapeCell(t2, next_id(), 2.0, ())
        z = nd.batching.Batched(t3, np.ones(3))
        assert outermost([x, 1.0, y]) == (t2, REVERSE)
        assert outermost([y, x]) == (t2, REVERSE)
        assert outermost([x, z, y]) == (t3, nd.batching.BATCH)
        assert outermost([1.0, np.ones(2)]) == (-1, None)
    tags = [perturbation.fresh() for _ in range(3)]
    try:
        make(tags)
    finally:
        for t in tags:
            perturbation.retire(t)
