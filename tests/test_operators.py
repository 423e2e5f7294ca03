"""The operator API: argnums, structures, jvp/vjp, Jacobians, aliases."""
import dataclasses
import math
from collections import namedtuple

import numpy as np
import pytest

import nestad as nd


def f3(x, y, z):
    return x * y * y + nd.sin(z) * x


def test_argnums_int_and_tuple():
    x, y, z = 1.5, -2.0, 0.3
    assert nd.gradient_r(f3)(x, y, z) == pytest.approx(y * y + math.sin(z))
    assert nd.gradient_r(f3, argnums=1)(x, y, z) == pytest.approx(2 * x * y)
    assert nd.gradient_r(f3, argnums=-1)(x, y, z) == pytest.approx(math.cos(z) * x)
    gx, gz = nd.gradient_r(f3, argnums=(0, 2))(x, y, z)
    assert (gx, gz) == pytest.approx((y * y + math.sin(z), math.cos(z) * x))
    assert nd.gradient_f(f3, argnums=(0, 2))(x, y, z) == pytest.approx((gx, gz))


def test_value_and_gradient():
    v, g = nd.value_and_gradient_r(f3, argnums=(0, 1))(1.5, -2.0, 0.3)
    assert v == pytest.approx(f3(1.5, -2.0, 0.3))
    assert g == pytest.approx((4.0 + math.sin(0.3), -6.0))
    assert nd.value_and_grad is nd.value_and_gradient_r and nd.grad is nd.gradient_r
    assert nd.jacfwd is nd.jacobian_f and nd.jacrev is nd.jacobian_r


Point = namedtuple('Point', 'x y')


@dataclasses.dataclass
class Params:
    w: list
    b: float
    label: str = dataclasses.field(default="p", compare=False)


def test_structures_in_and_out():
    def loss(p):
        return p['a'][0] * p['a'][1] + p['b'].x ** 2 * p['b'].y
    g = nd.gradient_r(loss)({'a': (2.0, 3.0), 'b': Point(1.5, 4.0)})
    assert g == {'a': (3.0, 2.0), 'b': Point(12.0, 2.25)}
    assert isinstance(g['a'], tuple) and isinstance(g['b'], Point)
    assert nd.gradient_f(loss)({'a': (2.0, 3.0), 'b': Point(1.5, 4.0)}) == g


def test_dataclass_gradient_and_register_structure():
    # A dataclass whose non-numeric field must be excluded: register it explicitly.
    nd.register_structure(Params, lambda p: ([p.w, p.b], p.label),
                          lambda label, ch: Params(ch[0], ch[1], label))
    g = nd.gradient_r(lambda p: p.w[0] * p.b + p.w[1])(Params([2.0, 5.0], 3.0, "layer"))
    assert g == Params([3.0, 1.0], 2.0, "layer") and g.label == "layer"


def test_plain_dataclass_of_numbers():
    @dataclasses.dataclass(frozen=True)
    class State:
        pos: float
        vel: float
    g = nd.gradient_r(lambda s: s.pos * s.vel ** 2)(State(2.0, 3.0))
    assert g == State(9.0, 12.0)


def test_derivative_structured_output():
    out = nd.derivative(lambda t: {'p': [t * t, 3.0], 'q': (nd.exp(t), 7)})(1.0)
    assert out == {'p': [2.0, 0.0], 'q': (math.e, 0.0)}


def test_integer_inputs():
    assert nd.derivative(lambda x: x * x)(3) == 6.0
    assert nd.gradient_r(lambda x: x * x * x)(2) == 12.0
    assert nd.gradient_r(lambda v: v[0] * v[1])([2, 5]) == [5, 2]


def test_numpy_scalars_as_inputs():
    assert nd.derivative(lambda x: x * x)(np.float64(3.0)) == 6.0
    assert nd.gradient_r(lambda x: nd.sin(x))(np.float32(0.5)) == pytest.approx(math.cos(0.5), rel=1e-7)


def test_jvp_and_directional_derivative():
    f = lambda a, b: (a * b, nd.sin(a) + b)
    val, tan = nd.jvp(f, (2.0, 3.0), (1.0, -1.0))
    assert val == (6.0, math.sin(2.0) + 3.0)
    assert tan == pytest.approx((3.0 - 2.0, math.cos(2.0) - 1.0))
    dd = nd.directional_derivative(lambda v: v[0] ** 2 + v[1] * v[0], [1.0, 2.0], [0.5, 2.0])
    assert dd == pytest.approx((2 * 1.0 + 2.0) * 0.5 + 1.0 * 2.0)


def test_vjp_pullback_reusable():
    f = lambda a, b: [a * b, a + nd.exp(b)]
    value, pull = nd.vjp(f, 2.0, 0.5)
    assert value == [1.0, 2.0 + math.exp(0.5)]
    first = pull([1.0, 0.0])
    assert first == (0.5, 2.0)
    assert pull([0.0, 1.0]) == pytest.approx((1.0, math.exp(0.5)))
    assert pull([1.0, 0.0]) == first          # calling again gives the same answer
    assert pull([2.0, 3.0]) == pytest.approx((2 * 0.5 + 3, 2 * 2.0 + 3 * math.exp(0.5)))


def test_vjp_pullback_inside_another_derivative():
    # The pullback's arithmetic is lifted: an enclosing derivative sees through it.
    _, pull = nd.vjp(lambda a: nd.sin(a), 0.3)
    d = nd.derivative(lambda c: pull(c * c)[0])(2.0)
    assert d == pytest.approx(2 * 2.0 * math.cos(0.3))


def test_jacobians_agree_and_shape():
    def f(v):
        x, y, z = v
        return [x * y, nd.exp(z) * x, y / z, x]
    pt = [1.0, 2.0, 0.5]
    Jf, Jr = nd.jacobian_f(f)(pt), nd.jacobian_r(f)(pt)
    want = [[2.0, 1.0, 0.0], [math.exp(0.5), 0.0, math.exp(0.5)], [0.0, 2.0, -8.0], [1.0, 0.0, 0.0]]
    for J in (Jf, Jr):
        assert len(J) == 4 and all(len(r) == 3 for r in J)
        for r, w in zip(J, want):
            assert r == pytest.approx(w)


def test_jacobian_with_argnums_tuple():
    f = lambda a, b: [a * b, a - b]
    J = nd.jacobian_r(f, argnums=(0, 1))(2.0, 3.0)
    assert J == [(3.0, 2.0), (1.0, -1.0)]
    assert nd.jacobian_f(f, argnums=(0, 1))(2.0, 3.0) == J


def test_hvp_matches_hessian():
    f = lambda v: v[0] ** 3 * v[1] + nd.cos(v[0] * v[1])
    x, v = [0.7, -0.4], [1.0, 2.0]
    H = nd.hessian(f)(x)
    want = [H[0][0] * v[0] + H[0][1] * v[1], H[1][0] * v[0] + H[1][1] * v[1]]
    assert nd.hvp(f, x, v) == pytest.approx(want, rel=1e-12)


def test_gradient_of_function_not_depending_on_input():
    assert nd.gradient_r(lambda x, y: y * 2.0, argnums=0)(1.0, 3.0) == 0.0
    assert nd.derivative(lambda x: 5.0)(1.0) == 0.0
    assert nd.gradient_r(lambda v: v[0])([1.0, 2.0]) == [1.0, 0.0]


def test_shared_subexpressions_counted_once_each():
    # y is used by many consumers; the reverse phase must sum all of them.
    def f(x):
        y = x * x
        return y * y + y + nd.sin(y)
    x = 0.9
    want = (4 * x ** 3 + 2 * x + math.cos(x * x) * 2 * x)
    assert nd.gradient_r(f)(x) == pytest.approx(want, rel=1e-13)


def test_exponential_sharing_is_linear():
    # 60 levels of y = y + y would be 2^60 paths; shared nodes are visited once.
    def f(x):
        y = x
        for _ in range(60):
            y = y * 0.5 + y * 0.5
        return y
    assert nd.gradient_r(f)(3.0) == 1.0


def test_comparisons_and_control_flow():
    def relu_ish(x):
        return x * x if x > 0 else -x
    assert nd.derivative(relu_ish)(2.0) == 4.0
    assert nd.gradient_r(relu_ish)(-2.0) == -1.0
    seen = []
    nd.derivative(lambda x: seen.append((x < 1, x == 0.5, x != 0.5, x >= 0.5)) or x)(0.5)
    assert seen == [(True, True, False, True)] and type(seen[0][0]) is bool
