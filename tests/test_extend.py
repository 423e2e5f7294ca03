"""Custom primitives (nestad.primitive with defpartials / defjvp / defvjp) in every mode,
pairing and depth, batched and staged; check_rules finds wrong rules."""
import math

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp

D = {'f': nd.derivative, 'r': nd.gradient_r}


@nd.primitive
def softplus(x):
    return np.logaddexp(0.0, x)


softplus.defpartials(lambda x, out: anp.exp(x - out))     # the logistic function, nestable


def logistic(x):
    return 1 / (1 + math.exp(-x))


@nd.primitive
def matvec(a, x):
    return a @ x


matvec.defjvp(lambda t, a, x, out: t @ x, lambda t, a, x, out: a @ t)
matvec.defvjp(lambda g, a, x, out: anp.outer(g, x), lambda g, a, x, out: anp.transpose(a) @ g)


@nd.primitive
def scaled_hypot(x, y, scale=1.0):
    return scale * np.hypot(x, y)


scaled_hypot.defpartials(lambda x, y, out, scale=1.0: scale * scale * x / out,
                         lambda x, y, out, scale=1.0: scale * scale * y / out)


@pytest.mark.parametrize('modes', ['f', 'r', 'ff', 'fr', 'rf', 'rr', 'frf', 'rfr', 'rrr'])
def test_custom_scalar_primitive_every_pairing_and_depth_three(modes):
    f = softplus
    for m in reversed(modes):
        f = D[m](f)
    s = logistic(0.3)
    want = {1: s, 2: s * (1 - s), 3: s * (1 - s) * (1 - 2 * s)}[len(modes)]
    assert math.isclose(f(0.3), want, rel_tol=1e-13)
    assert math.isclose(nd.stage(f)(0.3), want, rel_tol=1e-13)


def test_custom_primitives_pass_check_rules():
    nd.extend.check_rules(softplus, 0.3, order=3)
    nd.extend.check_rules(softplus, np.array([0.3, -1.2, 2.0]), order=2)
    a = np.arange(6.0).reshape(2, 3) / 4
    nd.extend.check_rules(matvec, a, np.array([0.2, -0.5, 1.0]), order=3)
    nd.extend.check_rules(scaled_hypot, 0.3, -0.4, scale=2.0, order=2)
    nd.extend.check_rules(scaled_hypot, np.array([0.3, 1.0]), np.array([-0.4, 0.5]), order=2)


def test_parameters_are_passed_and_not_differentiated():
    assert scaled_hypot(3.0, 4.0, scale=2.0) == 10.0
    assert nd.gradient_r(lambda x: scaled_hypot(x, 4.0, scale=2.0))(3.0) == pytest.approx(4 * 3 / 10)


def test_jvp_for_one_tangent_is_batched_for_jacobians():
    a = np.arange(6.0).reshape(2, 3) / 4
    x = np.array([0.2, -0.5, 1.0])
    assert np.allclose(nd.jacobian_f(matvec, 1)(a, x), a)
    assert np.allclose(nd.jacobian_f(matvec, 0)(a, x), nd.jacobian_r(matvec, 0)(a, x))
    h = nd.hessian(lambda v: anp.sum(matvec(a, v) ** 3))(x)
    assert np.allclose(h, nd.jacobian_r(nd.gradient_r(lambda v: anp.sum(matvec(a, v) ** 3)))(x))


def test_custom_primitive_is_recorded_in_programs():
    p = nd.trace(nd.gradient_r(lambda x: softplus(x) * 2.0), 0.5)
    assert any('softplus' in e.op.name for e in p.eqns)
    assert p(0.5) == nd.gradient_r(lambda x: softplus(x) * 2.0)(0.5)


def test_check_rules_finds_a_wrong_partial_and_a_wrong_vjp():
    @nd.primitive
    def square(x):
        return x * x
    square.defpartials(lambda x, out: 3 * x)
    with pytest.raises(AssertionError, match="central differences"):
        nd.extend.check_rules(square, 0.7)

    @nd.primitive
    def double(x):
        return 2 * x
    double.defjvp(lambda t, x, out: 2 * t)
    double.defvjp(lambda g, x, out: g)            # wrong: forward and reverse disagree
    with pytest.raises(AssertionError, match="gradient_r vs"):
        nd.extend.check_rules(double, np.array([1.0, 2.0]))


def test_missing_rules_and_bad_definitions_are_clear_errors():
    @nd.primitive
    def only_forward(x):
        return 2 * x
    only_forward.defjvp(lambda t, x, out: 2 * t)
    assert nd.derivative(only_forward)(1.0) == 2.0
    with pytest.raises(nd.MissingRuleError, match="no reverse .*defvjp"):
        nd.gradient_r(only_forward)(1.0)
    with pytest.raises(nd.InvalidInputError, match="2 rules given for 1 arguments"):
        only_forward.defpartials(lambda x, out: 2.0, lambda x, out: 1.0)


def test_a_missing_rule_is_a_missing_rule_error_in_every_mode():
    # A NestadError that is also a NotImplementedError (what autograd raises), naming the
    # primitive and what defines the missing rule.
    @nd.primitive
    def twice(x):
        return 2.0 * x

    @nd.primitive
    def half_defined(x, y):
        return x * y
    half_defined.defjvp(lambda t, x, y, out: t * y, None)
    half_defined.defvjp(None, lambda g, x, y, out: g * x)
    forward = (r"primitive \S*twice has no forward \(JVP\) rule for argument 0.*"
               r"twice\.defjvp\(\.\.\.\) or twice\.defpartials")
    reverse = (r"primitive \S*twice has no reverse \(VJP\) rule for argument 0.*"
               r"twice\.defvjp\(\.\.\.\) or twice\.defpartials")
    for op, message in [(nd.derivative, forward), (nd.gradient_f, forward),
                        (nd.gradient_r, reverse), (nd.jacobian_r, reverse),
                        (nd.hessian, forward), (lambda f: nd.stage(nd.gradient_r(f)), reverse),
                        (lambda f: nd.stage(nd.derivative(f)), forward)]:
        with pytest.raises(nd.MissingRuleError, match=message) as info:
            op(twice)(1.0)
        assert isinstance(info.value, NotImplementedError)
        assert isinstance(info.value, nd.NestadError)
    x = np.array([1.0, 2.0])
    with pytest.raises(nd.MissingRuleError, match="forward"):
        nd.jacobian_f(twice)(x)                               # batched tangents
    with pytest.raises(nd.MissingRuleError, match="reverse"):
        nd.trace(twice, 1.0).vjp()                            # program transforms
    with pytest.raises(nd.MissingRuleError, match="forward"):
        nd.trace(twice, 1.0).jvp()
    # The argument given a rule differentiates; the other one is named.
    assert nd.derivative(lambda x: half_defined(x, 3.0))(1.0) == 3.0
    assert nd.gradient_r(lambda y: half_defined(2.0, y))(1.0) == 2.0
    with pytest.raises(nd.MissingRuleError, match="no forward .*argument 1"):
        nd.derivative(lambda y: half_defined(2.0, y))(1.0)
    with pytest.raises(nd.MissingRuleError, match="no reverse .*argument 0"):
        nd.gradient_r(lambda x: half_defined(x, 3.0))(1.0)


def test_a_primitive_defined_inside_a_function_stages():
    # Its name ('...<locals>.process') was pasted into the generated code as is, which
    # did not compile. Staged, the primitive is called on each replay (where it reads a
    # traced value), and recorded at trace time only where its arguments are constants.
    calls = []

    def make():
        @nd.primitive
        def process(x, label):
            calls.append(label)
            return 3.0 * x
        return process.defpartials(lambda x, label, out: 3.0, None)

    process = make()
    assert '<locals>' in process.primitive.name
    staged = nd.stage(lambda y: process(1.0, "const") + process(y, "y") ** 2)
    assert staged(2.0) == 3.0 + 36.0 and calls == ["const", "y"]
    assert staged(1.0) == 3.0 + 9.0 and calls == ["const", "y", "y"]
    assert nd.stage(nd.gradient_r(lambda y: process(y, "g") ** 2))(2.0) == 36.0
    assert nd.stage(nd.derivative(lambda y: process(y, "g") ** 2))(2.0) == 36.0
def _curried_product(a):
    """A primitive defined in a function body, its function closing over ``a``."""
    @nd.primitive
    def times_a(x):
        return x * a
    return times_a.defpartials(lambda x, out: a)


@pytest.mark.parametrize('op', [nd.derivative, nd.gradient_r, nd.gradient_f,
                                lambda f: lambda x: nd.jvp(f, (x,), (1.0,))[1]])
def test_primitive_whose_function_reads_a_differentiated_value_from_its_closure(op):
    # derivative returned Bundle(1, 3.0, 1.0), a perturbed value instead of a number: the
    # function's result carried the run that lifting had just peeled off
    with pytest.raises(nd.InvalidInputError, match="closure.*as an argument"):
        op(lambda a: _curried_product(a)(a))(3.0)


def test_primitive_defined_again_in_a_function_body():
    # the second definition raised "a primitive named ... is already registered"
    def make():
        @nd.primitive
        def twice(x):
            return 2.0 * x
        return twice.defpartials(lambda x, out: 2.0)
    assert nd.derivative(make())(1.0) == 2.0 and nd.gradient_r(make())(1.0) == 2.0
