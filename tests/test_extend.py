"""Custom primitives (nestad.primitive with defpartials / defjvp / defvjp) in every mode,
pairing and depth, batched and staged; check_rules finds wrong rules."""
import copy
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


# ---------------------------------------------------------------- checked rule calls
# Every call of a user rule is checked (tests/test_bad_inputs.py has the refusals); these
# are the results and definitions the checks must let through, with their right numbers.

@nd.primitive
def outer_product(x, y):
    return x * y                       # (3, 1) and (1, 4): a (3, 4) output


outer_product.defpartials(lambda x, y, out: y, lambda x, y, out: x)   # argument-shaped partials


def test_partials_of_the_arguments_shape_broadcast_to_the_output():
    x, y = np.array([[1.0], [2.0], [3.0]]), np.array([[0.5, -1.0, 2.0, 4.0]])
    f = lambda x, y: anp.sum(outer_product(x, y) ** 2)  # noqa: E731
    want_x = np.sum(2 * x * y * y, axis=1, keepdims=True)
    want_y = np.sum(2 * x * y * x, axis=0, keepdims=True)
    for grad in (nd.gradient_r, nd.gradient_f, lambda f, argnums: nd.stage(nd.gradient_r(f, argnums))):
        gx, gy = grad(f, argnums=(0, 1))(x, y)
        assert np.allclose(gx, want_x, rtol=1e-14) and np.allclose(gy, want_y, rtol=1e-14)
    assert np.allclose(nd.jacobian_f(outer_product, 1)(x, y), nd.jacobian_r(outer_product, 1)(x, y))
    nd.extend.check_rules(outer_product, x, y, order=2)


def test_scalar_and_integer_rule_results_are_accepted():
    @nd.primitive
    def shifted(x):
        return x + 3.0
    shifted.defpartials(lambda x, out: 1)                    # an int partial broadcasts
    x = np.array([0.5, 2.0])
    assert np.array_equal(nd.gradient_r(lambda v: anp.sum(shifted(v)))(x), np.ones(2))
    assert np.array_equal(nd.jacobian_f(shifted)(x), np.eye(2))

    @nd.primitive
    def flat(x):
        return 0.0 * x
    flat.defjvp(lambda t, x, out: np.zeros(np.shape(x), dtype=int))   # int zeros: a real array
    flat.defvjp(lambda g, x, out: np.zeros(np.shape(x), dtype=int))
    assert np.array_equal(nd.gradient_r(lambda v: anp.sum(flat(v)))(x), np.zeros(2))
    assert np.array_equal(nd.jvp(flat, (x,), (x,))[1], np.zeros(2))


def test_float32_argument_with_float64_rule_results_keeps_float32():
    @nd.primitive
    def doubled(x):
        return x * np.float32(2.0)
    doubled.defjvp(lambda t, x, out: t * np.full(2, 2.0))         # float64 constants
    doubled.defvjp(lambda g, x, out: g * np.full(2, 2.0))
    x = np.array([0.3, -1.2], dtype=np.float32)
    g = nd.gradient_r(lambda v: anp.sum(doubled(v)))(x)
    assert g.dtype == np.float32 and np.array_equal(g, [2.0, 2.0])
    t = nd.jvp(doubled, (x,), (np.ones(2, np.float32),))[1]
    assert t.dtype == np.float32 and np.array_equal(t, [2.0, 2.0])


def test_batched_jvp_rule_gets_and_returns_the_batch_axes():
    @nd.primitive
    def cumulative(x):
        return np.cumsum(x)
    seen = []

    def jvp(t, x, out):
        seen.append(anp._shape(t))
        return anp.cumsum(t, axis=-1)
    cumulative.defjvp(jvp, batched=True)
    cumulative.defvjp(lambda g, x, out: anp.flip(anp.cumsum(anp.flip(g))))
    x = np.array([0.5, 2.0, -1.0])
    lower = np.tril(np.ones((3, 3)))
    assert np.array_equal(nd.jacobian_f(cumulative)(x), lower) and (3, 3) in seen
    h = nd.hessian(lambda v: anp.sum(cumulative(v) ** 2))(x)
    assert np.allclose(h, 2 * lower.T @ lower, rtol=1e-14)
    assert np.allclose(nd.stage(nd.jacobian_f(cumulative))(x), lower)
    nd.extend.check_rules(cumulative, x, order=2)


def test_rule_signatures_that_take_the_call():
    @nd.primitive
    def scaled(x, scale=1.0):
        return scale * x
    scaled.defjvp(lambda t, x, *, out, scale=1.0: scale * t)      # out keyword-only
    scaled.defvjp(lambda g, x, **kw: kw.get('scale', 1.0) * g)     # out and parameters in **kw
    assert nd.derivative(lambda x: scaled(x, scale=3.0))(1.0) == 3.0
    assert nd.gradient_r(lambda x: scaled(x, scale=3.0))(1.0) == 3.0
    assert nd.gradient_r(scaled)(1.0) == 1.0


def test_a_type_error_inside_a_rule_is_the_rules_own():
    @nd.primitive
    def twice(x):
        return 2.0 * x
    twice.defpartials(lambda x, out: len(x))                   # a bug inside the rule
    with pytest.raises(TypeError, match="has no len") as info:
        nd.derivative(twice)(1.0)
    assert not isinstance(info.value, nd.NestadError)


def test_primitive_of_any_number_of_arguments():
    # *args: nestad cannot count its arguments; each call's rules get all of them
    @nd.primitive
    def total(*xs):
        return sum(xs)
    total.defpartials(*[lambda *xs_out: 1.0] * 3)
    assert nd.gradient_r(lambda x, y, z: total(x, y, z) * x, argnums=(0, 1, 2))(1.0, 2.0, 3.0) \
        == (7.0, 1.0, 1.0)


def test_rule_results_carrying_the_runs_of_their_inputs():
    # A rule's result may carry any run its inputs carry: the primals' older runs (nested),
    # or a later run of the cotangent (a pullback differentiated after its vjp returned).
    @nd.primitive
    def cube(x):
        return x ** 3
    cube.defjvp(lambda t, x, out: 3.0 * x * x * t)
    cube.defvjp(lambda g, x, out: 3.0 * x * x * g)
    for outer in D.values():
        for inner in D.values():
            assert outer(inner(cube))(2.0) == 12.0
    _, pull = nd.vjp(cube, 2.0)
    assert nd.derivative(lambda s: pull(s * s)[0])(3.0) == 72.0
    assert nd.gradient_r(lambda s: pull(s * s)[0])(3.0) == 72.0


def test_primitive_results_that_are_one_number_or_array():
    @nd.primitive
    def count_positive(x):
        return np.sum(x > 0)                 # a numpy int: a number, no derivative needed
    assert count_positive(np.array([1.0, -1.0, 2.0])) == 2

    @nd.primitive
    def is_big(x):
        return x > 1.0                       # a Python bool
    assert is_big(2.0) is True


def test_check_rules_reports_a_rule_of_the_wrong_shape():
    @nd.primitive
    def doubled(x):
        return 2.0 * x
    doubled.defjvp(lambda t, x, out: 2.0 * t)
    doubled.defvjp(lambda g, x, out: 2.0 * anp.reshape(g, (-1, 1)))   # (2, 1) for (2,)
    with pytest.raises(nd.InvalidInputError, match=r"doubled: the VJP rule for argument 0 \(x\) "
                                                   r"returned shape \(2, 1\)"):
        nd.extend.check_rules(doubled, np.array([1.0, 2.0]))


# ---------------------------------------------------------------- registered structures

class Layers:
    def __init__(self, weights, scale):
        self.weights, self.scale = list(weights), scale


# flatten makes a new list each time: the round-trip check compares the numbers inside
nd.register_structure(Layers, lambda l: ([list(l.weights), l.scale], None),
                      lambda aux, children: Layers(*children))


class Reading:
    def __init__(self, value):
        self.value = value


# flatten converts (it cannot take a perturbed value apart): nothing to compare, no error
nd.register_structure(Reading, lambda r: ([float(r.value)], None),
                      lambda aux, children: Reading(children[0]))


def test_registered_structures_that_rebuild_correctly():
    f = lambda l: (l.weights[0] * l.weights[1] + l.weights[1]) * l.scale  # noqa: E731
    layers = Layers([2.0, 3.0], 0.5)
    for grad in (nd.gradient_r, nd.gradient_f, lambda f: nd.stage(nd.gradient_r(f))):
        g = grad(f)(layers)
        assert type(g) is Layers and g.weights == [1.5, 1.5] and g.scale == 9.0
    shared = 2.0                             # one object in two places
    assert nd.gradient_r(lambda l: l.weights[0] * l.weights[1])(Layers([shared, shared], 1.0)).weights \
        == [2.0, 2.0]
    out = nd.derivative(lambda x: Layers([x, x * x], 3.0))(2.0)    # a structure as output
    assert out.weights == [1.0, 4.0] and out.scale == 0.0
    assert nd.derivative(lambda x: Reading(2.0 * x).value)(1.0) == 2.0
    assert nd.gradient_r(lambda r: r.value * r.value)(Reading(3.0)).value == 6.0


class Copied:
    def __init__(self, w, b):
        self.w, self.b = w, b


def _fill_copy(template, children):
    obj = copy.copy(template)
    obj.w, obj.b = children
    return obj


# aux is the object itself, copied and filled by unflatten: its fields are not looked into
nd.register_structure(Copied, lambda c: ([c.w, c.b], c), _fill_copy)


def test_registered_structure_whose_aux_is_the_object_itself():
    g = nd.gradient_r(lambda c: c.w * c.b)(Copied(2.0, 3.0))
    assert (type(g), g.w, g.b) == (Copied, 3.0, 2.0)
    out = nd.derivative(lambda x: Copied(x, x * x))(2.0)
    assert (out.w, out.b) == (1.0, 4.0)
    assert nd.stage(nd.gradient_r(lambda c: c.w * c.b))(Copied(2.0, 3.0)).b == 2.0
