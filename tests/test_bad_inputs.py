"""Bad inputs: each raises a nestad exception of the documented type whose message names
the cause (a path, a shape, a type, an argnums) and, where there is one, what to do instead.

Never a silently wrong number, never an internal crash."""
import collections
import dataclasses
import math
import statistics

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import InvalidInputError, PerturbedConversionError


def f2(x, y):
    return x * y * y


# ---------------------------------------------------------------- argnums

ARGNUMS_OPS = [nd.gradient_r, nd.value_and_gradient_r, nd.gradient_f, nd.jacobian_f,
               nd.jacobian_r, nd.hessian]


@pytest.mark.parametrize('op', ARGNUMS_OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize('argnums', [(0, 0), (1, 1, 0), (0, -2), [1, -1]])
def test_repeated_argnums(op, argnums):
    # gradient_r(f, argnums=(0, 0)) used to return (0.0, 2.0): a wrong number.
    with pytest.raises(InvalidInputError, match=r"more than once") as e:
        op(f2, argnums=argnums)(2.0, 3.0)
    assert op.__name__ in str(e.value) and "argnums" in str(e.value)


@pytest.mark.parametrize('op', ARGNUMS_OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize('argnums', [2, -3, (0, 2)])
def test_out_of_range_argnums(op, argnums):
    with pytest.raises(InvalidInputError, match=r"does not name an argument of a call with 2 "):
        op(f2, argnums=argnums)(2.0, 3.0)


@pytest.mark.parametrize('op', ARGNUMS_OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize('argnums', [True, 0.0, "x", (0, None)])
def test_argnums_that_are_not_positions(op, argnums):
    # Refused when the operator is made, before any call.
    with pytest.raises(InvalidInputError, match=r"is not a position"):
        op(f2, argnums=argnums)


def test_argnums_numpy_int_and_negative_are_positions():
    assert nd.gradient_r(f2, argnums=np.int64(1))(2.0, 3.0) == 12.0
    assert nd.gradient_r(f2, argnums=(-1, 0))(2.0, 3.0) == (12.0, 9.0)
    assert nd.jacobian_r(f2, argnums=[-2])(2.0, 3.0) == (9.0,)


# ---------------------------------------------------------------- function-valued outputs

def curried(x):
    return lambda y: x * y


@pytest.mark.parametrize('call, path', [
    (lambda: nd.vjp(curried, 2.0), r"output is a function"),
    (lambda: nd.vjp(lambda x: (x, curried(x)), 2.0), r"output\[1\] is a function"),
    (lambda: nd.vjp(lambda x: {'f': curried(x)}, np.ones(2)), r"output\['f'\] is a function"),
    (lambda: nd.jacobian_r(curried)(2.0), r"jacobian_r: output is a function"),
    (lambda: nd.jacobian_r(lambda x, y: [x, curried(y)], argnums=1)(1.0, 2.0), r"output\[1\]"),
    # inside another derivative: the error, not zeros
    (lambda: nd.derivative(lambda s: nd.jacobian_r(lambda x: curried(x * s))(2.0))(1.0),
     r"jacobian_r: output is a function"),
    (lambda: nd.gradient_r(lambda s: nd.vjp(lambda x: curried(x * s), 2.0)[0](1.0))(1.0),
     r"vjp: output is a function"),
])
def test_function_valued_output_in_reverse_mode(call, path):
    # jacobian_r and vjp used to return zeros for the function's part.
    with pytest.raises(InvalidInputError, match=path) as e:
        call()
    assert "forward mode" in str(e.value) and "derivative" in str(e.value)


@pytest.mark.parametrize('op', [nd.gradient_r, nd.value_and_gradient_r, nd.gradient_f])
def test_function_valued_output_of_a_gradient(op):
    with pytest.raises(nd.NonScalarOutputError, match="returned a function.*forward mode"):
        op(curried)(2.0)


def test_function_valued_output_in_forward_mode_is_supported():
    # The alternative the messages name works.
    assert nd.derivative(curried)(2.0)(5.0) == 5.0
    assert nd.jvp(curried, (2.0,), (3.0,))[1](5.0) == 15.0
    assert nd.jacobian_f(curried)(2.0)(5.0) == 5.0


# ---------------------------------------------------------------- cotangents and tangents

def _pullback(f, *primals):
    return nd.vjp(f, *primals)[1]


@pytest.mark.parametrize('f, x, ct, msg', [
    (lambda x: 2.0 * x, np.ones(2), np.ones((2, 2)),
     r"cotangent has shape \(2, 2\) but output has shape \(2,\)"),
    (lambda x: x * x, 1.0, np.ones(3), r"cotangent has shape \(3,\) but output has shape \(\)"),
    (lambda x: 2.0 * x, np.ones(2), 1.0, r"cotangent has shape \(\) but output has shape \(2,\)"),
    (lambda x: 2.0 * x, np.ones(2), np.ones(1), r"shape \(1,\) but output has shape \(2,\)"),
    (lambda x: 2.0 * x, np.ones((2, 3)), np.ones((3, 2)), r"shape \(3, 2\) but output has shape \(2, 3\)"),
    (lambda x: {'a': x * 2.0, 'b': anp.sum(x)}, np.ones(2), {'a': np.ones(3), 'b': 1.0},
     r"cotangent\['a'\] has shape \(3,\) but output\['a'\] has shape \(2,\)"),
    (lambda x: {'a': x * 2.0, 'b': anp.sum(x)}, np.ones(2), {'a': np.ones(2), 'b': np.ones(2)},
     r"cotangent\['b'\] has shape \(2,\) but output\['b'\] has shape \(\)"),
])
def test_cotangent_of_wrong_shape(f, x, ct, msg):
    # These were broadcast silently (or crashed inside numpy's reshape).
    with pytest.raises(InvalidInputError, match=msg):
        _pullback(f, x)(ct)


@pytest.mark.parametrize('ct, msg', [
    (1j, r"cotangent is a complex"), (np.ones(2) * 1j, r"cotangent is an ndarray of dtype complex128"),
    ("1.0", r"cotangent is a str"), (np.array(['a', 'b']), r"cotangent is an ndarray of dtype <U1"),
    (None, r"cotangent is a NoneType"), (np.array([1.0, None]), r"dtype object"),
])
def test_cotangent_that_is_not_real(ct, msg):
    with pytest.raises(InvalidInputError, match=msg):
        _pullback(lambda x: 2.0 * x, np.ones(2) if np.ndim(ct) else 1.0)(ct)


@pytest.mark.parametrize('out, ct, msg', [
    (lambda x: [x, x], (1.0, 1.0), r"structure of f's output, \[\*, \*\], but it is \(\*, \*\)"),
    (lambda x: [x, x], [1.0], r"\[\*, \*\], but it is \[\*\]"),
    (lambda x: [x, (x, x)], [1.0, [1.0, 1.0]], r"\[\*, \(\*, \*\)\], but it is \[\*, \[\*, \*\]\]"),
    (lambda x: {'a': x, 'b': x}, {'a': 1.0, 'c': 1.0}, r"\{'a': \*, 'b': \*\}, but it is \{'a': \*, 'c': \*\}"),
    (lambda x: x, [1.0], r"output, \*, but it is \[\*\]"),
])
def test_cotangent_of_wrong_structure(out, ct, msg):
    with pytest.raises(InvalidInputError, match=msg):
        _pullback(out, 1.0)(ct)


def test_cotangents_of_the_right_shape_work_in_every_mode():
    pull = _pullback(lambda x: {'a': x * 2.0, 'b': anp.sum(x)}, np.ones(2))
    assert pull({'a': np.array([1, 2]), 'b': np.float32(3.0)})[0].tolist() == [5.0, 7.0]
    # A perturbed cotangent of the right shape, from an enclosing run of either mode.
    d = nd.derivative(lambda s: pull({'a': s * np.ones(2), 'b': s})[0])(1.0)
    assert d.tolist() == [3.0, 3.0]
    g = nd.gradient_r(lambda s: anp.sum(pull({'a': s * np.ones(2), 'b': s})[0]))(1.0)
    assert g == 6.0
    # ... and of the wrong shape: still refused inside an enclosing run.
    with pytest.raises(InvalidInputError, match=r"cotangent\['a'\] has shape \(3,\)"):
        nd.derivative(lambda s: pull({'a': s * np.ones(3), 'b': s}))(1.0)


@pytest.mark.parametrize('primals, tangents, msg', [
    ((np.ones(2),), (np.ones(3),), r"tangents\[0\] has shape \(3,\) but primals\[0\] has shape \(2,\)"),
    ((1.0,), (np.ones(2),), r"tangents\[0\] has shape \(2,\) but primals\[0\] has shape \(\)"),
    (({'a': np.ones(2)},), ({'a': 1.0},), r"tangents\[0\]\['a'\] has shape \(\)"),
    (([1.0, 2.0],), ([1.0],), r"same structure as primals, \(\[\*, \*\],\), but they are \(\[\*\],\)"),
    ((1.0,), (1j,), r"tangents\[0\] is a complex"),
    ((1.0,), ("1",), r"tangents\[0\] is a str"),
])
def test_jvp_tangent_mismatch(primals, tangents, msg):
    with pytest.raises(InvalidInputError, match=msg):
        nd.jvp(lambda x: x, primals, tangents)


# ---------------------------------------------------------------- keyword arguments

@pytest.mark.parametrize('call', [lambda d: d(), lambda d: d(1.0, 2.0), lambda d: d(x=1.0)])
def test_derivative_takes_one_positional_argument(call):
    with pytest.raises(InvalidInputError, match="takes one positional argument.*keyword arguments "
                                                "are passed to f undifferentiated"):
        call(nd.derivative(lambda x, y=0.0: x * y))


@pytest.mark.parametrize('op', ARGNUMS_OPS, ids=lambda o: o.__name__)
def test_differentiated_argument_passed_by_keyword(op):
    # Keyword arguments are not differentiated; the message says so.
    with pytest.raises(InvalidInputError, match="with 0 positional argument.*pass the arguments to "
                                                "differentiate positionally"):
        op(f2)(x=1.0, y=2.0)
    with pytest.raises(InvalidInputError, match=r"argnums=1 does not name an argument of a call "
                                                r"with 1 positional.*positionally"):
        op(f2, argnums=1)(1.0, y=2.0)


# ---------------------------------------------------------------- conversions of perturbed values

# Every mode in which a perturbed value reaches user code.
MODES = {
    'derivative': lambda f: nd.derivative(f)(1.5),
    'gradient_r': lambda f: nd.gradient_r(f)(1.5),
    'gradient_f': lambda f: nd.gradient_f(f)(1.5),
    'jvp': lambda f: nd.jvp(f, (1.5,), (1.0,)),
    'vjp': lambda f: nd.vjp(f, 1.5),
    'jacobian_r': lambda f: nd.jacobian_r(f)(1.5),
    'hessian': lambda f: nd.hessian(f)(1.5),
    'f-over-r': lambda f: nd.derivative(lambda s: nd.gradient_r(lambda x: f(x * s))(1.5))(1.0),
    'r-over-f': lambda f: nd.gradient_r(lambda s: nd.derivative(lambda x: f(x * s))(1.5))(1.0),
}


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('convert, what', [
    (float, r"float\(\)"), (int, r"int\(\)"), (round, r"round\(\)"), (lambda x: round(x, 2), r"round\(\)"),
    (math.sin, r"float\(\)"), (math.exp, r"float\(\)"), (math.floor, r"math.floor\(\) \(use nestad.floor\)"),
    (math.ceil, r"nestad.ceil"), (math.trunc, r"math.trunc"), (complex, r"complex\(\)"),
    (lambda x: [1.0, 2.0][x], r"index"), (lambda x: range(x), r"index"),
])
def test_perturbed_value_forced_to_a_plain_number(mode, convert, what):
    with pytest.raises(PerturbedConversionError, match=what + ".*would drop its derivative") as e:
        MODES[mode](lambda x: convert(x * x))
    assert "nestad.primal_value" in str(e.value)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('test', [math.isnan, math.isfinite, math.isinf])
def test_math_value_tests_name_nestads(mode, test):
    # math.isnan(x) calls float(x); the message names the nestad functions to use.
    with pytest.raises(PerturbedConversionError, match=r"nestad.isnan / isfinite / isinf instead of "
                                                       r"math.isnan / isfinite / isinf"):
        MODES[mode](lambda x: x if test(x) else x)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('stat', [statistics.mean, statistics.variance, statistics.harmonic_mean])
def test_statistics_module(mode, stat):
    with pytest.raises(PerturbedConversionError, match=r"exact rational arithmetic \(the statistics "
                                                       r"module.*sum\(xs\) / len\(xs\).*nestad.numpy.mean"):
        MODES[mode](lambda x: stat([x, 2.0 * x, 3.0]))


@pytest.mark.parametrize('mode', MODES)
def test_modular_pow(mode):
    with pytest.raises(PerturbedConversionError, match=r"pow\(x, y, mod\).*integer arithmetic.*"
                                                       r"\(x \*\* y\) % mod"):
        MODES[mode](lambda x: pow(x, 2, 5))
    with pytest.raises(PerturbedConversionError, match=r"pow\(x, y, mod\)"):
        MODES[mode](lambda x: pow(x * np.ones(2), 2, 5))
    # The alternative the message names differentiates.
    assert nd.derivative(lambda x: (x ** 2) % 5)(3.0) == 6.0


# ---------------------------------------------------------------- structures

def _cyclic_list():
    a = [1.0]
    a.append(a)
    return a


def _cyclic_dict():
    d = {'a': 1.0}
    d['self'] = [2.0, d]
    return d


@dataclasses.dataclass
class Node:
    value: float
    rest: object


def _cyclic_node():
    n = Node(1.0, None)
    n.rest = [n]
    return n


@pytest.mark.parametrize('call, msg', [
    (lambda: nd.gradient_r(lambda a: a[0])(_cyclic_list()), r"gradient_r: argument\[0\]\[1\] is argument\[0\] itself"),
    (lambda: nd.gradient_f(lambda a: a['a'])(_cyclic_dict()), r"gradient_f: argument\[0\]\['self'\]\[1\] is argument\[0\] itself"),
    (lambda: nd.jacobian_r(lambda n: n.value)(_cyclic_node()), r"argument\[0\].rest\[0\] is argument\[0\] itself"),
    (lambda: nd.hessian(lambda x, a: x * a[0], argnums=1)(1.0, _cyclic_list()), r"hessian: argument\[0\]\[1\] is argument\[0\] itself"),
    (lambda: nd.jvp(lambda a: a[0], (_cyclic_list(),), ([1.0, [1.0]],)), r"jvp: primals\[0\]\[1\] is primals\[0\] itself"),
    (lambda: nd.jvp(lambda a: a, ([1.0, [1.0]],), (_cyclic_list(),)), r"jvp: tangents\[0\]\[1\] is tangents\[0\] itself"),
    (lambda: nd.vjp(lambda x, a: x, 1.0, _cyclic_list()), r"vjp: primals\[1\]\[1\] is primals\[1\] itself"),
    (lambda: nd.derivative(lambda x: [x, _cyclic_dict()])(1.0), r"derivative: output\[1\]\['self'\]\[1\] is output\[1\] itself"),
    (lambda: nd.vjp(lambda x: _cyclic_list(), 1.0), r"vjp: output\[1\] is output itself"),
    (lambda: nd.jacobian_f(lambda x: _cyclic_list())(1.0), r"output\[1\] is output itself"),
])
def test_cyclic_structure(call, msg):
    # A self-referential input used to end in RecursionError.
    with pytest.raises(InvalidInputError, match=msg + r": the structure contains itself.*cycle"):
        call()


def test_shared_substructure_is_not_a_cycle():
    shared = [1.0, 2.0]
    assert nd.gradient_r(lambda p: p[0][0] * p[1][1])([shared, shared]) == [[2.0, 0.0], [0.0, 1.0]]


def test_structure_nested_beyond_the_recursion_limit():
    deep = 1.0
    for _ in range(3000):
        deep = [deep]
    with pytest.raises(InvalidInputError, match=r"gradient_r: argument is nested too deeply for "
                                                r"Python's recursion limit.*sys.setrecursionlimit"):
        nd.gradient_r(lambda d: 1.0)(deep)


class Box:
    def __init__(self, value, label):
        self.value, self.label = value, label


@pytest.mark.parametrize('flatten, returned', [
    (lambda b: b.value, r"it returned float 2.0"),                       # no pair at all
    (lambda b: [b.value], r"it returned list \[2.0\]"),                   # children without aux
    (lambda b: (b.value, b.label), r"it returned tuple \(2.0, 'w'\)"),    # children not a list
    (lambda b: ([b.value], b.label, None), r"it returned tuple"),          # three things
])
def test_register_structure_with_a_flatten_of_the_wrong_shape(flatten, returned):
    # Used to fail with "cannot unpack non-iterable float object".
    nd.register_structure(Box, flatten, lambda label, ch: Box(ch[0], label))
    for D in (nd.gradient_r, nd.gradient_f, lambda f: lambda b: nd.vjp(f, b)):
        with pytest.raises(InvalidInputError, match=r"register_structure\(Box\): flatten\(obj\) must "
                                                    r"return a pair \(children, aux\).*" + returned):
            D(lambda b: b.value * b.value)(Box(2.0, 'w'))


@pytest.mark.parametrize('args, msg', [
    ((Box(1.0, 'w'), lambda b: ([b.value], 0), lambda a, c: c), r"cls must be a class"),
    ((Box, None, lambda a, c: c), r"register_structure\(Box\): flatten must be a function callable as flatten\(obj\)"),
    ((Box, lambda: ([], 0), lambda a, c: c), r"flatten must be a function callable as flatten\(obj\)"),
    ((Box, lambda b: ([b.value], 0), lambda children: children),
     r"unflatten must be a function callable as unflatten\(aux, children\)"),
    ((Box, lambda b: ([b.value], 0), "Box"), r"unflatten must be a function"),
])
def test_register_structure_arguments_checked(args, msg):
    with pytest.raises(InvalidInputError, match=msg):
        nd.register_structure(*args)


class MyList(list):
    pass


class MyDict(dict):
    pass


class MyTuple(tuple):
    pass


class MyOrderedDict(collections.OrderedDict):
    pass


class SubBox(Box):
    pass


@pytest.mark.parametrize('value, base', [
    (MyList([1.0, 2.0]), 'list'), (MyDict(a=1.0), 'dict'), (MyTuple((1.0,)), 'tuple'),
    (MyOrderedDict(a=1.0), 'OrderedDict'), (SubBox(1.0, 'w'), 'Box'),
])
@pytest.mark.parametrize('op', [nd.gradient_r, nd.gradient_f, nd.jacobian_r, nd.jacobian_f])
def test_unregistered_subclass_of_a_container(value, base, op):
    # A subclass may change construction or semantics: refused with a clear error, never
    # rebuilt as its base class (nor silently treated as a leaf).
    nd.register_structure(Box, lambda b: ([b.value], b.label), lambda label, ch: Box(ch[0], label))
    name = type(value).__name__
    with pytest.raises(InvalidInputError, match=rf"argument\[1\]\[0\] is an? {name} .*{name} is a "
                                                rf"subclass of {base}.*register it"):
        op(lambda x, v: x, argnums=(0, 1))(1.0, [value])


def test_unregistered_subclass_as_an_output():
    with pytest.raises(InvalidInputError, match=r"derivative: output\[0\] is a MyDict"):
        nd.derivative(lambda x: [MyDict(a=x)])(1.0)
    with pytest.raises(InvalidInputError, match=r"vjp: output is a MyList"):
        nd.vjp(lambda x: MyList([x]), 1.0)


# ---------------------------------------------------------------- outputs that are not scalars

@pytest.mark.parametrize('op', ['gradient_r', 'value_and_gradient_r', 'gradient_f', 'hessian'])
@pytest.mark.parametrize('out, described', [
    (lambda x: [x, x], r"returned a list"), (lambda x: (x,), r"returned a tuple"),
    (lambda x: x * np.ones(2), r"returned an array of shape \(2,\)"),      # (not ArrayTapeCell)
    (lambda x: np.ones((2, 2)), r"returned an array of shape \(2, 2\)"),
    (lambda x: "x", r"returned a str"), (lambda x: None, r"returned a NoneType"),
    (lambda x: {'loss': x}, r"returned a dict"),
])
def test_non_scalar_output(op, out, described):
    with pytest.raises(nd.NonScalarOutputError, match=rf"{op} needs a function that returns a real "
                                                      rf"scalar, but it {described}.*(sum|jacobian_r)"):
        getattr(nd, op)(out)(1.0)


def test_non_scalar_output_nested():
    with pytest.raises(nd.NonScalarOutputError, match="gradient_r.*returned a list"):
        nd.derivative(lambda y: nd.gradient_r(lambda x: [x * y, x])(1.0))(2.0)
    with pytest.raises(nd.NonScalarOutputError, match="hvp.*returned a tuple"):
        nd.hvp(lambda x: (x, x), 1.0, 1.0)


# ---------------------------------------------------------------- non-numbers as inputs

BAD_VALUES = [("abc", "str"), (None, "NoneType"), (1 + 2j, "complex"), (object(), "object"),
              (np.array(["a"]), "ndarray of dtype <U1"), (np.array([1j]), "ndarray of dtype complex128"),
              # a bool is no number to differentiate at (it was taken for 1.0 and 0.0)
              (True, "bool"), (np.bool_(False), "bool"), (np.array([True, False]), "ndarray of dtype bool")]

# (call with one argument, the path the message names)
ARGUMENT_CALLS = {
    'derivative': (lambda a: nd.derivative(lambda x: x)(a), "the argument"),
    'gradient_r': (lambda a: nd.gradient_r(lambda x: x)(a), r"argument\[0\]"),
    'value_and_gradient_r': (lambda a: nd.value_and_gradient_r(lambda x: x)(a), r"argument\[0\]"),
    'gradient_f': (lambda a: nd.gradient_f(lambda x: x)(a), r"argument\[0\]"),
    'jacobian_f': (lambda a: nd.jacobian_f(lambda x: x)(a), r"argument\[0\]"),
    'jacobian_r': (lambda a: nd.jacobian_r(lambda x: x)(a), r"argument\[0\]"),
    'hessian': (lambda a: nd.hessian(lambda x: x)(a), r"argument\[0\]"),
    'jvp': (lambda a: nd.jvp(lambda x: x, (a,), (1.0,)), r"primals\[0\]"),
    'jvp tangent': (lambda a: nd.jvp(lambda x: x, (1.0,), (a,)), r"tangents\[0\]"),
    'vjp': (lambda a: nd.vjp(lambda x: x, a), r"primals\[0\]"),
    'hvp': (lambda a: nd.hvp(lambda x: x, a, 1.0), r"primals\[0\]"),
    'directional_derivative': (lambda a: nd.directional_derivative(lambda x: x, 1.0, a), r"tangents\[0\]"),
}


@pytest.mark.parametrize('op', ARGUMENT_CALLS)
@pytest.mark.parametrize('bad, kind', BAD_VALUES, ids=[k for _, k in BAD_VALUES])
def test_non_number_argument(op, bad, kind):
    call, path = ARGUMENT_CALLS[op]
    with pytest.raises(InvalidInputError, match=rf"{op.split()[0]}: {path} is an? {kind}"):
        call(bad)


@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f', 'jacobian_f', 'jacobian_r', 'hessian'])
def test_non_number_inside_a_structure(op):
    params = {'w': [1.0, np.ones(2)], 'b': (2.0, {'scale': "big"})}
    with pytest.raises(InvalidInputError, match=rf"{op}: argument\[0\]\['b'\]\[1\]\['scale'\] is a str"):
        getattr(nd, op)(lambda p: p['w'][0])(params)
    with pytest.raises(InvalidInputError, match=rf"{op}: argument\[1\]\[0\] is a NoneType"):
        getattr(nd, op)(lambda x, y: x, argnums=(0, 1))(1.0, [None])


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('compute, name', [
    (lambda x: x + "s", r"the \+ operator"), (lambda x: "s" + x, r"the \+ operator"),
    (lambda x: x * "s", r"the \* operator"), (lambda x: x / None, "the / operator"),
    (lambda x: x ** "2", r"the \*\* operator"), (lambda x: nd.sin("s") * x, "nestad.sin"),
    (lambda x: nd.atan2(x, "s"), "nestad.atan2"), (lambda x: nd.maximum([1.0], x), "nestad.maximum"),
])
def test_non_number_inside_the_computation(mode, compute, name):
    with pytest.raises(InvalidInputError, match=rf"{name} got \w+ .*not a real number"):
        MODES[mode](compute)


@pytest.mark.parametrize('op', ['derivative', 'jvp', 'jacobian_f', 'jacobian_r', 'vjp'])
def test_non_number_output_leaf(op):
    f = lambda x: {'value': x, 'unit': "m"}   # noqa: E731
    call = {'derivative': lambda: nd.derivative(f)(1.0), 'jvp': lambda: nd.jvp(f, (1.0,), (1.0,)),
            'jacobian_f': lambda: nd.jacobian_f(f)(1.0), 'jacobian_r': lambda: nd.jacobian_r(f)(1.0),
            'vjp': lambda: nd.vjp(f, 1.0)}[op]
    with pytest.raises(InvalidInputError, match=rf"{op}: output\['unit'\] is a str"):
        call()


def test_derivative_of_an_array_argument():
    with pytest.raises(InvalidInputError, match="takes a real number; for an array x use jvp"):
        nd.derivative(lambda x: x)(np.ones(2))
    with pytest.raises(InvalidInputError, match=r"primals and tangents must be tuples.*jvp\(f, \(x,\), \(v,\)\)"):
        nd.jvp(lambda x: x, 1.0, 1.0)


# ---------------------------------------------------------------- escaped perturbations

@pytest.mark.parametrize('leak_mode', ['derivative', 'gradient_r', 'gradient_f', 'vjp'])
@pytest.mark.parametrize('use', ['derivative', 'gradient_r', 'gradient_f', 'float'])
def test_escaped_perturbation(leak_mode, use):
    leaked = []

    def f(x):
        leaked.append(x * 2.0)
        return x * x
    MODES[leak_mode](f)
    if use == 'float':
        with pytest.raises(nd.EscapedPerturbationError, match="escaped through a side effect"):
            float(leaked[0])
        return
    with pytest.raises(nd.EscapedPerturbationError, match="escaped through a side effect.*Return"):
        getattr(nd, use)(lambda y: y * leaked[0])(2.0)


# ---------------------------------------------------------------- operands of array functions

# (found by an outside trial: a complex constant next to a perturbed array made complex
# values and a complex gradient, silently; None, strings or objects made object arrays)
OPERAND_CALLS = {
    'multiply': lambda x, b: anp.multiply(x, b), 'operator *': lambda x, b: x * b,
    'reflected +': lambda x, b: b + x, 'divide': lambda x, b: anp.divide(x, b),
    'power': lambda x, b: x ** b, 'dot': lambda x, b: anp.dot(x, b),
    'matmul': lambda x, b: x @ anp.reshape(b, (2,)) if np.ndim(b) else x @ b,
    'where': lambda x, b: anp.where(np.array([True, False]), x, b),
    'at.set': lambda x, b: x.at[0].set(b), 'concatenate': lambda x, b: anp.concatenate([x, b]),
}


@pytest.mark.parametrize('mode', ['gradient_r', 'gradient_f', 'jvp', 'vjp', 'f-over-r'])
@pytest.mark.parametrize('call', OPERAND_CALLS)
@pytest.mark.parametrize('bad, described', [
    (1 + 2j, r"(a complex \(\(1\+2j\)\)|an ndarray of dtype complex128).*complex numbers are not "
             r"supported"),
    (np.array([1j, 2.0]), r"an ndarray of dtype complex128.*complex numbers are not supported"),
    (np.complex64(1j), r"(a numpy complex64 \(np.complex64\(1j\)\)|an ndarray of dtype complex64)"),
    (np.array([None, 1.0]), r"an ndarray of dtype object.*pass real numbers"),
    (np.array(['a', 'b']), r"an ndarray of dtype <U1"),
])
def test_array_operand_that_is_not_real(mode, call, bad, described):
    x = np.array([1.5, 2.5])
    f = lambda x: anp.sum(OPERAND_CALLS[call](x, bad))   # noqa: E731
    run = {'gradient_r': lambda: nd.gradient_r(f)(x), 'gradient_f': lambda: nd.gradient_f(f)(x),
           'jvp': lambda: nd.jvp(f, (x,), (np.ones(2),)), 'vjp': lambda: nd.vjp(f, x),
           'f-over-r': lambda: nd.derivative(lambda s: nd.gradient_r(f)(x * s))(1.0)}[mode]
    with pytest.raises(InvalidInputError, match=r"nestad.numpy.[\w.]+: operand \d is " + described):
        run()


def test_complex_values_without_perturbations_are_numpys():
    # Plain values keep numpy's semantics, complex included.
    assert anp.multiply(np.ones(2), 1j).tolist() == [1j, 1j]
    assert (np.ones(2) * 1j).dtype == anp.add(np.ones(2), np.array([1j, 0])).dtype


@pytest.mark.parametrize('fn', ['erf', 'erfc'])
def test_scalar_erf_of_an_array_is_scipys(fn):
    # nestad.erf(array) used to say "use nestad.numpy", which has no erf.
    special = pytest.importorskip('nestad.scipy.special')
    x = np.array([-0.5, 0.25, 1.5])
    assert np.array_equal(getattr(nd, fn)(x), getattr(special, fn)(x))
    g = nd.gradient_r(lambda x: anp.sum(getattr(nd, fn)(x)))(x)
    sign = 1.0 if fn == 'erf' else -1.0
    assert np.allclose(g, sign * 2.0 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-14, atol=0)


# ---------------------------------------------------------------- staging traps
# A Program at other shapes, static_argnums/static_argnames, traced ints where a concrete
# int is needed, draws that cannot be program inputs, ** leaving the reals.

from nestad import StagingError  # noqa: E402


def test_program_called_at_another_shape_or_dtype():
    p = nd.trace(lambda d: len(d['v']) * anp.sum(d['v']), {'v': np.ones(2)})
    with pytest.raises(InvalidInputError,
                       match=r"argument d\['v'\] is an array of shape \(3,\) and dtype float64, but "
                             r"the program was traced with an array of shape \(2,\).*Trace it "
                             r"again.*nestad.stage"):
        p({'v': np.ones(3)})
    with pytest.raises(InvalidInputError, match=r"argument x is a float32 scalar.*float64 scalar"):
        nd.trace(lambda x: x * 2.0, 1.0)(np.float32(1.0))


@pytest.mark.parametrize('op', [nd.stage, lambda f, **kw: nd.trace(f, 1.0, 2, **kw)])
@pytest.mark.parametrize('kwargs, message', [
    (dict(static_argnums=5), r"static_argnums=5, but f takes 2 positional argument\(s\) \(x, n\)"),
    (dict(static_argnums=-1), r"static_argnums=-1: each must be the position.*counted from 0"),
    (dict(static_argnums=(1, 1)), r"an argument is named twice"),
    (dict(static_argnums=1.0), r"static_argnums must be an int or a tuple of ints"),
    (dict(static_argnums=True), r"static_argnums=True: each must be the position"),
    (dict(static_argnums=(0, '1')), r"each must be the position of a positional parameter"),
    (dict(static_argnames='m'), r"static_argnames='m', but f has no parameter 'm'.*x, n"),
    (dict(static_argnames=(1,)), r"static_argnames=\(1,\): each must be the name"),
    (dict(static_argnames=('n', 'n')), r"an argument is named twice"),
])
def test_static_arguments_are_checked(op, kwargs, message):
    def f(x, n):
        return x * n
    with pytest.raises(InvalidInputError, match=message):
        op(f, **kwargs)


def test_traced_int_where_a_concrete_int_is_needed():
    def f(x, steps):
        return [x] * steps
    for use in (lambda x, steps: sum(x for _ in range(steps)), f,
                lambda x, steps: np.ones((steps, 2)) + x, lambda x, steps: [x, x, x][steps]):
        with pytest.raises(StagingError, match=r"traced int \(2 here\).*traced int arguments: "
                                               r"steps.*static_argnums \(or static_argnames\)"):
            nd.stage(use)(1.0, 2)
    for concrete in (round, lambda n: round(n, 1), __import__('math').trunc):
        with pytest.raises(StagingError, match=r"traced int.*static_argnums"):
            nd.stage(lambda x, steps: x * concrete(steps))(1.0, 2)
    with pytest.raises(StagingError, match=r"round\(\) \(use nestad.numpy.round\) of a traced value"):
        nd.stage(lambda x: round(x))(1.5)
    # numpy turns the error of a lone shape into its own TypeError, which shows the tracer
    with pytest.raises(TypeError, match=r"traced int; to use it as a shape.*static_argnums"):
        nd.stage(lambda x, steps: np.zeros(steps) + x)(1.0, 2)


def test_draws_that_cannot_be_program_inputs():
    rng = np.random.default_rng(0)
    in_loop = lambda x, r: nd.while_loop(lambda s: s < 3.0,                  # noqa: E731
                                         lambda s: s + r.uniform(), x)
    with pytest.raises(StagingError, match=r"inside the body of a while_loop.*before it"):
        nd.stage(in_loop)(0.0, rng)
    with pytest.raises(StagingError, match=r"rng.normal\(...\) got a traced.*standard_normal"):
        nd.stage(lambda x, r: r.normal(x))(0.0, rng)
    with pytest.raises(StagingError, match=r"rng.spawn is not a draw"):
        nd.stage(lambda x, r: r.spawn(1) and x)(0.0, rng)
    p = nd.trace(lambda x, r: x * r.normal(), 1.0, rng)
    with pytest.raises(InvalidInputError, match=r"argument r is None.*numpy.random.Generator"):
        p(1.0, None)


def test_power_of_traced_numbers_leaving_the_reals():
    with pytest.raises(InvalidInputError, match=r"-8.0 \*\* 0.5 is a complex number.*nestad.pow"):
        nd.stage(lambda x: x ** 0.5)(-8.0)
