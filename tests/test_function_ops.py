"""Operators with rules of their own (checkpoint, fixed_point, stop_gradient of a function,
a staged function, a staged while_loop, the solvers) go through the one dispatch: each is
a ``FunctionOp`` whose rule for an interpretation is the entry of its table, and ``bind``
alone finds the outermost run.  Each entry is checked to run, and to give what the same
transform gives on the same function written without the operator."""
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import perturbation
from nestad.control import CHECKPOINT, FIXED_POINT, STOPPED
from nestad.errors import MissingRuleError
from nestad.interpret import FunctionOp, bind
from nestad.solvers import IMPLICIT, ODEINT
from nestad.staging.control import LOOP
from nestad.staging.differentiate import STAGED
from nestad.values import Bundle


def _cube_loop(y):
    return nd.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * y), (0, 1.0))[1]


# name: (operator, f written with it, the same function without it)
CASES = {
    'checkpoint': (CHECKPOINT, lambda x: nd.checkpoint(lambda y: anp.sin(y) * y)(x),
                   lambda x: anp.sin(x) * x),
    'fixed_point': (FIXED_POINT, lambda x: nd.fixed_point(lambda z, a: (z + a / z) / 2, 1.0, x),
                    anp.sqrt),
    'stop_gradient(f)': (STOPPED, lambda x: nd.stop_gradient(lambda y: anp.sin(y) * y)(x),
                         lambda x: anp.sin(x) * x),
    'stage': (STAGED, nd.stage(lambda x: anp.sin(x) * x), lambda x: anp.sin(x) * x),
    'root': (IMPLICIT, lambda x: nd.root(lambda y, a: y * y - a, 1.0, x), anp.sqrt),
    'odeint': (ODEINT, lambda x: nd.odeint(lambda y, t, a: -a * y, 1.0, np.array([0.0, 1.0]),
                                           x)[-1], lambda x: anp.exp(-x)),
    'while_loop': (LOOP, _cube_loop, lambda x: x ** 3),
}

# interpretation: the transform whose newest (outermost) run is of that interpretation
# (the older one then meets the operator's rule on the primals)
TRANSFORMS = {
    'forward': lambda g: nd.gradient_r(nd.derivative(g)),
    'reverse': lambda g: nd.derivative(nd.gradient_r(g)),
    'batch': lambda g: nd.gradient_r(lambda x: anp.sum(nd.vmap(g)(x * np.array([1.0, 1.5])))),
    'taylor': lambda g: nd.derivatives(g, 3),
}


def _transformed(name, interp, g):
    t = TRANSFORMS[interp](g)
    return nd.stage(t) if name == 'while_loop' else t    # (a while_loop is an operator staged)


@pytest.mark.parametrize('interp', list(TRANSFORMS))
@pytest.mark.parametrize('name', list(CASES))
def test_each_rule_table_entry_runs_and_agrees_with_the_function_without_the_operator(
        name, interp, monkeypatch):
    op, with_op, without = CASES[name]
    x = 1.3
    rule = op.rules.get(interp)
    if rule is None:                      # a missing entry: refused, naming what to do
        with pytest.raises(MissingRuleError, match="Taylor mode") as e:
            _transformed(name, interp, with_op)(x)
        assert "derivative" in str(e.value) or "stop_gradient to the values" in str(e.value)
        return
    calls = []
    monkeypatch.setitem(op.rules, interp, lambda *a: calls.append(a[0]) or rule(*a))
    got = _transformed(name, interp, with_op)(x)
    assert calls, f"{name}'s {interp} rule did not run"
    monkeypatch.setitem(op.rules, interp, rule)
    want = _transformed(name, interp, without)(x)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)


def test_a_missing_rule_names_the_operator_and_the_interpretation():
    op = FunctionOp('my_op', lambda leaves, p: leaves[0] * 2.0, {})
    assert bind(op, (3.0,), {}) == 6.0                          # no run: evaluated
    for transform, mode in ((nd.derivative, 'forward'), (nd.gradient_r, 'reverse'),
                            (nd.vmap, 'batch'), (lambda f: nd.derivatives(f, 2), 'taylor')):
        with pytest.raises(MissingRuleError, match=f"my_op has no rule for the {mode} "
                                                   "interpretation"):
            transform(lambda x: bind(op, (x,), {}))(np.ones(2) if mode == 'batch' else 2.0)


def test_rules_receive_the_outermost_run_split_off():
    seen = []

    def forward(top, leaves, carried, primals, params):
        seen.append((top, carried, primals))
        return Bundle(top, op.lifted(*primals), 2.0 * leaves[0].tangent)
    op = FunctionOp('double', lambda leaves, p: 2.0 * leaves[0], {'forward': forward})
    d2 = nd.derivative(nd.derivative(lambda x: bind(op, (x, 5.0), {}) * x))(1.5)
    assert d2 == pytest.approx(4.0)
    tops = [top for top, _, _ in seen]
    assert tops[0] > tops[1] and all(c == (True, False) for _, c, _ in seen)
    assert not perturbation.live_tags()


# ---------------------------------------------------------------- vmap of the operators

A = np.array([0.5, 2.0, 3.0])


@pytest.mark.parametrize('f', [
    lambda a: nd.root(lambda y, p: y ** 3 - p, 1.0, a),
    lambda a: nd.linear_solve(lambda x, p: p * x + 0.5 * x, 1.0, a),
    lambda a: nd.minimize(lambda y, p: (y - p) ** 2 + y ** 4, 0.0, a),
    lambda a: nd.odeint(lambda y, t, p: -p * y + anp.sin(t), 1.0, np.array([0.0, 0.5, 1.0]), a),
    lambda a: nd.fixed_point(lambda z, p: anp.cos(z) / (1.0 + p), 0.0, a),
    lambda a: nd.stop_gradient(lambda y: anp.sin(y) * y)(a),
    lambda a: nd.checkpoint(lambda y: anp.tanh(y) * y)(a),
], ids=['root', 'linear_solve', 'minimize', 'odeint', 'fixed_point', 'stop_gradient(f)',
        'checkpoint'])
def test_vmap_of_an_operator_equals_a_python_loop_and_so_do_its_gradients(f):
    np.testing.assert_allclose(nd.vmap(f)(A), np.stack([f(a) for a in A]), rtol=1e-9)
    g = lambda a: anp.sum(f(a))                       # noqa: E731
    per_example = nd.vmap(nd.gradient_r(g))(A)
    loop = np.array([nd.gradient_r(g)(a) for a in A])
    np.testing.assert_allclose(per_example, loop, rtol=1e-7)
    np.testing.assert_allclose(nd.vmap(nd.derivative(g))(A), loop, rtol=1e-7)
    fd = np.array([(g(a + 1e-6) - g(a - 1e-6)) / 2e-6 for a in A])
    np.testing.assert_allclose(loop, fd, rtol=1e-5)


def test_vmap_of_stop_gradient_inside_a_gradient_cuts_only_the_closure():
    # the function closes over x (a gradient_r's run): cut; its argument keeps its derivative
    def g(x):
        return nd.stop_gradient(lambda y: y * x)(x)
    want = np.array([nd.gradient_r(g)(a) for a in A])
    np.testing.assert_allclose(want, A)
    np.testing.assert_allclose(nd.vmap(nd.gradient_r(g))(A), want)


def test_a_function_run_member_by_member_may_not_read_a_mapped_value_from_its_closure():
    with pytest.raises(nd.InvalidInputError, match="reads a value .* from its closure"):
        nd.vmap(lambda a: nd.fixed_point(lambda z, p: anp.tanh(z) / 2 + p + a, 0.0, a))(A)
    with pytest.raises(nd.InvalidInputError, match="reads a value .* from its closure"):
        nd.vmap(lambda a: nd.root(lambda y, p: y - p - a, 1.0, a))(A)
    # stop_gradient(f) of a reverse run's values under vmap runs member by member
    g = lambda w: anp.sum(nd.vmap(lambda a: nd.stop_gradient(lambda y: y * a)(a * w))(A))  # noqa
    with pytest.raises(nd.InvalidInputError, match="closure a value of a run newer"):
        nd.gradient_r(g)(2.0)
    g = lambda w: anp.sum(nd.vmap(lambda a: nd.stop_gradient(lambda y: y * w)(a * w))(A))  # noqa
    np.testing.assert_allclose(nd.gradient_r(g)(2.0), np.sum(A) * 2.0)   # (d/dw of a w c)


def test_a_member_result_batched_by_its_own_vmap_is_refused():
    # the check of the member-by-member fallback itself (the operators check first)
    from nestad.batching import call_per_member
    from nestad.structures import flatten

    def f(a):
        return call_per_member(lambda s: s[0] * a, [a], flatten([a])[1], a.tag, 'my_op')
    with pytest.raises(nd.InvalidInputError, match="my_op runs member by member"):
        nd.vmap(f)(A)
    np.testing.assert_allclose(nd.vmap(lambda a: call_per_member(
        lambda s: s[0] * 2.0, [a], flatten([a])[1], a.tag, 'my_op'))(A), 2 * A)
