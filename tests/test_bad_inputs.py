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


# ---------------------------------------------------------------- pickling

def _staged_lambda():
    return nd.stage(lambda x: x * x)


def _staged_local():
    def local_square(x):
        return x * x
    return nd.stage(nd.gradient_r(local_square))


@pytest.mark.parametrize('make, named', [
    (_staged_lambda, r"staged function of [\w.]*test_bad_inputs._staged_lambda.<locals>.<lambda>: "
                     r".*not found by its name \(a lambda, or a function defined inside another\)"),
    (lambda: nd.stage(nd.hessian(lambda x: x ** 3)), r"of [\w.]*test_bad_inputs.<lambda>"),
    (_staged_local, r"of [\w.]*test_bad_inputs._staged_local.<locals>.local_square"),
    (lambda: nd.derivative(nd.gradient_r(lambda x: x ** 3)),
     r"derivative operator's result of [\w.]*test_bad_inputs.<lambda>"),
])
def test_pickling_a_staged_function_of_a_lambda(make, named):
    # pickle's own message spoke of an attribute lookup; a staged function and an
    # operator's result are pickled as the user's function, which must be importable
    import pickle
    from nestad.pickling import UnpicklableFunction
    f = make()
    with pytest.raises(UnpicklableFunction, match=named + r".*Define the function with `def` at "
                       r"the top level of a module") as e:
        pickle.dumps(f)
    assert isinstance(e.value, pickle.PicklingError)       # what pickle's callers expect
    f(2.0)                                                 # and the function still works


def test_pickling_a_program_with_a_primitive_defined_in_a_function():
    import pickle

    @nd.primitive
    def local_cube(x):
        return x ** 3
    local_cube.defpartials(lambda x, out: 3.0 * x * x)
    program = nd.trace(lambda x: local_cube(x) * 2.0, 1.5)
    with pytest.raises(pickle.PicklingError, match=r"primitive '[\w.<>]*local_cube': it is "
                       r"defined inside a function.*Define it with nestad.primitive at the top "
                       r"level of a module"):
        pickle.dumps(program)


def test_unpickling_a_program_whose_primitive_is_not_defined_here():
    from nestad import registry
    with pytest.raises(nd.NestadError, match=r"primitive 'nowhere.cube', which importing nestad "
                       r"does not define: define it at the top level of a module .* import that "
                       r"module before unpickling"):
        registry.named('nowhere.cube', 'nestad')


def test_unpickling_a_structure_this_process_does_not_know():
    from nestad.structures import _treedef

    class Unregistered:
        pass
    with pytest.raises(InvalidInputError, match=r"contain a Unregistered, which this process "
                       r"does not know as a structure: call nestad.register_structure"):
        _treedef(Unregistered, None, [])


def _logged(f):
    import functools

    @functools.wraps(f)
    def logged(*args):
        return f(*args)
    return logged


@_logged
def _cube(x):
    return x ** 3


def test_pickling_a_staged_function_wrapped_by_a_decorator():
    # _logged(_cube) is a closure named after _cube, and that name finds another object
    # (the module's _cube): pickle's message says "it's not the same object"
    import pickle
    from nestad.pickling import UnpicklableFunction
    with pytest.raises(UnpicklableFunction, match=r"test_bad_inputs._cube: .* finds another object "
                       r"\(a closure named after the function it wraps.*Define the function"):
        pickle.dumps(nd.stage(nd.gradient_r(_logged(_cube))))

# ---------------------------------------------------------------- extension API
#
# (found by an outside trial: a defvjp rule returning shape (3,) for a (2,) argument, or
# (2, 1), went into the gradient; a defpartials rule without `out` raised a bare TypeError;
# an unflatten returning the wrong type failed inside the user's function.) Every call of a
# user rule is checked, in every mode, nested and staged; signatures at definition.

X2 = np.array([0.5, 2.0])


def _in_every_mode():
    """mode -> (rules it calls, run(f, x)) for an array function f of one argument."""
    ones = np.ones(2)
    sq = lambda f: lambda v: anp.sum(f(v) ** 2)  # noqa: E731
    return {
        'jvp': ({'jvp'}, lambda f, x: nd.jvp(f, (x,), (ones,))),
        'jacobian_f': ({'jvp'}, lambda f, x: nd.jacobian_f(f)(x)),
        'f-over-f': ({'jvp'}, lambda f, x: nd.derivative(lambda s: nd.jvp(lambda v: f(v) ** 2, (x * s,), (ones,))[1])(1.0)),
        'staged jvp': ({'jvp'}, lambda f, x: nd.stage(lambda v: nd.jvp(f, (v,), (ones,))[1])(x)),
        'program jvp': ({'jvp'}, lambda f, x: nd.trace(f, x).jvp()),
        'gradient_r': ({'vjp'}, lambda f, x: nd.gradient_r(lambda v: anp.sum(f(v)))(x)),
        'vjp': ({'vjp'}, lambda f, x: nd.vjp(f, x)[1](ones)),
        'jacobian_r': ({'vjp'}, lambda f, x: nd.jacobian_r(f)(x)),
        'r-over-r': ({'vjp'}, lambda f, x: nd.gradient_r(lambda s: anp.sum(nd.gradient_r(sq(f))(x * s)))(1.0)),
        'staged gradient_r': ({'vjp'}, lambda f, x: nd.stage(nd.gradient_r(sq(f)))(x)),
        'program vjp': ({'vjp'}, lambda f, x: nd.trace(f, x).vjp()),
        'hessian': ({'jvp', 'vjp'}, lambda f, x: nd.hessian(sq(f))(x)),
        'f-over-r': ({'jvp', 'vjp'}, lambda f, x: nd.derivative(lambda s: anp.sum(nd.gradient_r(sq(f))(x * s)))(1.0)),
        'r-over-f': ({'jvp', 'vjp'}, lambda f, x: nd.gradient_r(lambda s: anp.sum(nd.jvp(lambda v: f(v) ** 2, (x * s,), (ones,))[1]))(1.0)),
        'staged hessian': ({'jvp', 'vjp'}, lambda f, x: nd.stage(nd.hessian(sq(f)))(x)),
    }


EVERY_MODE = _in_every_mode()


def _primitive_with(kind, rule):
    """An elementwise 2x with the given bad rule of ``kind`` and correct other rules."""
    @nd.primitive
    def twice(x):
        return 2.0 * x
    if kind == 'partial':
        return twice.defpartials(rule)
    good = (lambda t, x, out: 2.0 * t)
    twice.defjvp(rule if kind == 'jvp' else good)
    return twice.defvjp(rule if kind == 'vjp' else good)


BAD_RESULTS = {   # rule result -> what the message says it returned
    'shape (3,)': (lambda a: anp.ones(3) * anp.sum(a), r"returned shape \(3,\)"),
    'shape (2, 1)': (lambda a: anp.reshape(a, (2, 1)), r"returned shape \(2, 1\)"),
    'shape ()': (lambda a: anp.sum(a), r"returned shape \(\)"),
    'None': (lambda a: None, r"returned None, not a real number or array"),
    'tuple': (lambda a: (a, a), r"returned a tuple of 2 values.*one per argument"),
    'str': (lambda a: "2", r"returned a str \('2'\)"),
    'complex': (lambda a: np.ones(2) * 1j, r"returned an array of dtype complex128"),
    'bool array': (lambda a: a > 0, r"returned an array of dtype bool"),
}
NEED = {'jvp': r"the output's tangent must have the output's shape \(2,\)",
        'vjp': r"the cotangent of x must have its shape \(2,\)",
        'partial': r"a partial must broadcast to the output's shape \(2,\)"}
CALLED_AS = {'jvp': r"twice\.defjvp\(\.\.\.\), called as jvp\(t, x, out, \*\*params\)",
             'vjp': r"twice\.defvjp\(\.\.\.\), called as vjp\(g, x, out, \*\*params\)",
             'partial': r"twice\.defpartials\(\.\.\.\), called as partial\(x, out, \*\*params\)"}
RULE = {'jvp': "JVP rule", 'vjp': "VJP rule", 'partial': "partial"}


@pytest.mark.parametrize('mode, kind', [(mode, kind) for mode, (uses, _) in EVERY_MODE.items()
                                        for kind in ['jvp', 'vjp', 'partial']
                                        if kind in uses or kind == 'partial'])
@pytest.mark.parametrize('bad', BAD_RESULTS)
def test_user_rule_returning_a_wrong_result(mode, kind, bad):
    run = EVERY_MODE[mode][1]
    result, returned = BAD_RESULTS[bad]
    lead = (lambda x, out: result(x)) if kind == 'partial' else (lambda t, x, out: result(t))
    twice = _primitive_with(kind, lead)
    if bad == 'shape ()' and kind == 'partial':   # a scalar partial broadcasts: right
        run(twice, X2)
        return
    if bad.startswith('shape'):
        returned += "; " + NEED[kind]
    with pytest.raises(InvalidInputError, match=rf"primitive \S*twice: the {RULE[kind]} for "
                                                rf"argument 0 \(x\) {returned}.*Fix the rule "
                                                rf"given to {CALLED_AS[kind]}"):
        run(twice, X2)


@pytest.mark.parametrize('mode', ['jacobian_f', 'hessian', 'staged hessian'])
def test_batched_jvp_rule_without_the_batch_axes(mode):
    # batched=True promises t's leading batch axes in the result; this rule drops them
    @nd.primitive
    def twice(x):
        return 2.0 * x
    twice.defjvp(lambda t, x, out: 2.0 * x, batched=True)
    twice.defvjp(lambda g, x, out: 2.0 * g)
    with pytest.raises(InvalidInputError, match=r"JVP rule for argument 0 \(x\) returned shape "
                                                r"\(2,\); the output's tangent must have the "
                                                r"output's shape \(2,\) after the 1 leading "
                                                r"batch axes of t, \(2, 2\)"):
        EVERY_MODE[mode][1](twice, X2)


def _reads_from_closure(kind, a):
    """A primitive whose rule uses ``a`` (a value being differentiated) from its closure."""
    return _primitive_with(kind, (lambda x, out: a * 2.0) if kind == 'partial'
                           else (lambda t, x, out: t * a))


@pytest.mark.parametrize('kind, op', [
    (kind, op) for kind in ['jvp', 'vjp', 'partial']
    for op in ['derivative', 'staged derivative', 'f-over-r', 'r-over-f', 'gradient_r',
               'staged gradient_r']
    # (the modes calling the rule; r-over-f pulls nothing back: the derivative of 2x is 2.0)
    if kind == 'partial' or op in {'jvp': ['derivative', 'staged derivative', 'f-over-r',
                                           'r-over-f'],
                                   'vjp': ['gradient_r', 'staged gradient_r', 'f-over-r']}[kind]])
def test_user_rule_reading_a_perturbed_value_from_its_closure(kind, op):
    # gradient_r returned a TapeCell, derivative a Bundle: the rule's result carried the run
    # being differentiated, which its inputs (peeled of that run) do not carry
    def f(a):
        return _reads_from_closure(kind, a)(a)
    run = {'derivative': lambda: nd.derivative(f)(3.0),
           'gradient_r': lambda: nd.gradient_r(f)(3.0),
           'staged derivative': lambda: nd.stage(nd.derivative(f))(3.0),
           'staged gradient_r': lambda: nd.stage(nd.gradient_r(f))(3.0),
           # the inner run's value read by a rule of the inner run, under an outer run
           'f-over-r': lambda: nd.derivative(lambda s: nd.gradient_r(f)(3.0 * s))(1.0),
           'r-over-f': lambda: nd.gradient_r(lambda s: nd.derivative(f)(3.0 * s))(1.0)}[op]
    with pytest.raises(InvalidInputError, match=rf"the {RULE[kind]} for argument 0 \(x\) "
                                                r"returned a value carrying a perturbation "
                                                r"that none of its inputs carries.*closure.*"
                                                r"pass that value to the primitive as an argument"):
        run()


@pytest.mark.parametrize('define, rule, called_as, give', [
    ('defpartials', lambda x: 2.0, r"partial\(x, y, out, \*\*params\)", r"\(x, y, out\)"),
    ('defpartials', lambda x, y: 2.0, r"partial\(x, y, out, \*\*params\)", r"\(x, y, out\)"),
    ('defjvp', lambda t, x, y: t, r"jvp\(t, x, y, out, \*\*params\)", r"\(t, x, y, out\)"),
    ('defjvp', lambda t, x, out: t, r"jvp\(t, x, y, out, \*\*params\)", r"\(t, x, y, out\)"),
    ('defvjp', lambda g, out: g, r"vjp\(g, x, y, out, \*\*params\)", r"\(g, x, y, out\)"),
    ('defvjp', lambda g, x, y, o: g, r"vjp\(g, x, y, out, \*\*params\)", r"\(g, x, y, out\)"),
])
def test_user_rule_with_the_wrong_signature_is_refused_at_definition(define, rule, called_as,
                                                                     give):
    # a partial without `out` raised a bare TypeError from the user's lambda when first
    # differentiated; now the definition says which rule and what signature it needs
    @nd.primitive
    def product(x, y):
        return x * y
    ok = {'defpartials': lambda x, y, out: y, 'defjvp': lambda t, x, y, out: t * y,
          'defvjp': lambda g, x, y, out: g * y}[define]
    with pytest.raises(InvalidInputError, match=rf"product\.{define}: the \w+( rule)? for "
                                                rf"argument 1 \(y\), <lambda>\(.*\), cannot be "
                                                rf"called as {called_as}.*Give it the "
                                                rf"parameters {give}"):
        getattr(product, define)(ok, rule)


def test_user_rule_not_taking_the_keyword_parameters_it_is_called_with():
    @nd.primitive
    def scaled(x, scale=1.0):
        return scale * x
    scaled.defpartials(lambda x, out: 2.0)            # forgets the parameter
    for run in (lambda: nd.derivative(lambda x: scaled(x, scale=2.0))(1.0),
                lambda: nd.gradient_r(lambda x: scaled(x, scale=2.0))(1.0),
                lambda: nd.stage(nd.gradient_r(lambda x: scaled(x, scale=2.0)))(1.0)):
        with pytest.raises(InvalidInputError, match=r"the partial for argument 0 \(x\) "
                                                    r"<lambda>\(x, out\) cannot take 2 "
                                                    r"positional arguments and the keyword "
                                                    r"parameters scale\. Fix the rule given "
                                                    r"to scaled\.defpartials"):
            run()


POSITIONAL_OPS = {'derivative': nd.derivative, 'gradient_f': nd.gradient_f,
                  'gradient_r': nd.gradient_r, 'staged derivative': lambda f: nd.stage(nd.derivative(f)),
                  'staged gradient_r': lambda f: nd.stage(nd.gradient_r(f)),
                  'r-over-f': lambda f: nd.gradient_r(nd.derivative(f)),
                  'f-over-r': lambda f: nd.derivative(nd.gradient_r(f))}


@pytest.mark.parametrize('op', POSITIONAL_OPS)
@pytest.mark.parametrize('kind', ['partials', 'JVP and VJP rules'])
def test_parameter_passed_positionally_to_a_user_primitive(kind, op):
    # scaled_hypot(x, 4.0, 2.0): the partials got (x, y, 2.0, out) as (x, y, out, scale)
    # and the derivative was 150.0 (right: 1.2); the JVP rule got `out` twice
    @nd.primitive
    def scaled_hypot(x, y, scale=1.0):
        return scale * np.hypot(x, y)
    rules = [lambda d, x, y, out, scale=1.0: d * scale * scale * x / out,
             lambda d, x, y, out, scale=1.0: d * scale * scale * y / out]
    if kind == 'partials':
        scaled_hypot.defpartials(*[lambda x, y, out, scale=1.0, r=r: r(1.0, x, y, out, scale)
                                   for r in rules])
    else:
        scaled_hypot.defjvp(*rules)
        scaled_hypot.defvjp(*rules)
    with pytest.raises(InvalidInputError, match=r"primitive \S*scaled_hypot was called with 3 "
                                                r"positional arguments, but its rules are for "
                                                r"2 \(x, y\): pass the others by keyword"):
        POSITIONAL_OPS[op](lambda x: scaled_hypot(x, 4.0, 2.0))(3.0)
    by_keyword = POSITIONAL_OPS[op](lambda x: scaled_hypot(x, 4.0, scale=2.0))(3.0)
    assert by_keyword == pytest.approx(1.2 if '-over-' not in op else 2 * 16 / 125)


@pytest.mark.parametrize('op', [nd.derivative, nd.gradient_r, lambda f: nd.stage(nd.gradient_r(f)),
                                lambda f: f, lambda f: nd.stage(f)])
def test_user_primitive_returning_several_outputs(op):
    # derivative raised "'Bundle' object is not subscriptable", staging "Cannot interpret
    # '2.0' as a data type"
    @nd.primitive
    def two(x):
        return 2.0 * x, 3.0 * x
    two.defpartials(lambda x, out: 2.0)
    with pytest.raises(InvalidInputError, match=r"primitive \S*two: its function returned a "
                                                r"tuple of 2 values; a primitive returns one "
                                                r"real number or array.*one primitive per output"):
        op(lambda x: two(x)[0])(1.0)


class _Pair:
    def __init__(self, w, b):
        self.w, self.b = w, b


class _NotRebuilt(_Pair):
    pass


class _Swapped(_Pair):
    pass


class _Dropped(_Pair):
    pass


nd.register_structure(_NotRebuilt, lambda p: ([p.w, p.b], None), lambda aux, ch: list(ch))
nd.register_structure(_Swapped, lambda p: ([p.w, p.b], None), lambda aux, ch: _Swapped(ch[1], ch[0]))
nd.register_structure(_Dropped, lambda p: ([p.w, p.b], None), lambda aux, ch: _Dropped(ch[0], 0.0))

STRUCTURE_OPS = {
    'gradient_r': lambda f, p: nd.gradient_r(f)(p),
    'gradient_f': lambda f, p: nd.gradient_f(f)(p),
    'jvp': lambda f, p: nd.jvp(f, (p,), (p,)),
    'vjp': lambda f, p: nd.vjp(f, p)[1](1.0),
    'hessian': lambda f, p: nd.hessian(f)(p),
    'staged gradient_r': lambda f, p: nd.stage(nd.gradient_r(f))(p),
}


@pytest.mark.parametrize('op', STRUCTURE_OPS)
@pytest.mark.parametrize('cls, message', ids=['type', 'swapped', 'dropped'], argvalues=[
    (_NotRebuilt, r"register_structure\(_NotRebuilt\): unflatten\(aux, children\) returned a "
                  r"list, not a _NotRebuilt"),
    (_Swapped, r"register_structure\(_Swapped\): unflatten\(aux, children\) built a _Swapped "
               r"that flatten does not take apart into the children it was given: the number "
               r"at position 0 among the children's numbers comes back at position 1"),
    (_Dropped, r"register_structure\(_Dropped\): unflatten\(aux, children\) built a _Dropped "
               r"that flatten does not take apart into the children it was given: the number "
               r"at position 1 among the children's numbers is lost"),
])
def test_register_structure_unflatten_that_does_not_rebuild(op, cls, message):
    # _NotRebuilt: an AttributeError ('list' object has no attribute 'w') inside f;
    # _Swapped: the gradients of w and b exchanged; _Dropped: b's gradient 0.0, silently
    f = lambda p: p.w * p.w * 2.0 + p.b * 5.0  # noqa: E731
    with pytest.raises(InvalidInputError, match=message + r"\. Fix the unflatten given to "
                                                          r"nestad\.register_structure\("):
        STRUCTURE_OPS[op](f, cls(1.0, 2.0))


def test_register_structure_unflatten_returning_the_wrong_type_for_an_output():
    with pytest.raises(InvalidInputError, match=r"unflatten\(aux, children\) returned a list, "
                                                r"not a _NotRebuilt"):
        nd.derivative(lambda x: _NotRebuilt(x, x * x))(1.0)


class _NumberInAux:
    def __init__(self, w, b):
        self.w, self.b = w, b


# b in aux (not differentiated): a b computed from the input left the call perturbed
nd.register_structure(_NumberInAux, lambda p: ([p.w], p.b), lambda b, ch: _NumberInAux(ch[0], b))


@pytest.mark.parametrize('op', [
    lambda f: nd.derivative(f)(2.0), lambda f: nd.jvp(f, (2.0,), (1.0,)),
    lambda f: nd.jacobian_f(f)(2.0), lambda f: nd.vjp(f, 2.0), lambda f: nd.stage(f)(2.0),
    lambda f: nd.gradient_r(lambda x: nd.gradient_r(lambda p: p.w * p.b)(f(x)).w)(2.0),
], ids=['derivative', 'jvp', 'jacobian_f', 'vjp', 'stage', 'input of an inner gradient'])
def test_register_structure_flatten_putting_a_variable_in_aux(op):
    # derivative returned _NumberInAux(1.0, Bundle(1, 4.0, 4.0)), stage a Tracer
    with pytest.raises(InvalidInputError, match=r"register_structure\(_NumberInAux\): flatten\(obj\) "
                                                r"put a value being differentiated or staged in "
                                                r"aux.*Put every number that may depend on the "
                                                r"inputs among the children"):
        op(lambda x: _NumberInAux(x, x * x))


@pytest.mark.parametrize('op', [nd.derivative, nd.gradient_r, nd.gradient_f,
                                lambda f: nd.derivative(nd.gradient_r(f))])
@pytest.mark.parametrize('call', ['argument by keyword', 'parameter'])
def test_user_primitive_given_a_value_being_differentiated_by_keyword(op, call):
    # the message blamed a closure; keyword arguments are parameters, never differentiated
    @nd.primitive
    def scaled(x, scale=1.0):
        return scale * x
    scaled.defpartials(lambda x, out, scale=1.0: scale)
    f = (lambda s: scaled(x=s)) if call == 'argument by keyword' else (lambda s: scaled(2.0, scale=s))
    with pytest.raises(InvalidInputError, match=r"primitive \S*scaled was given a value being "
                                                r"differentiated as the keyword argument "
                                                r"(x|scale): keyword arguments of a primitive "
                                                r"are parameters.*Pass it positionally"):
        op(f)(3.0)

# ---------------------------------------------------------------- solvers

def test_root_without_a_root_says_so():
    # x^2 + 1 has no real root: Newton's line search stalls at |f| = 1
    with pytest.raises(nd.NestadError, match=r"root: the line search found no decrease .*"
                                             r"\(max \|f\(x\)\| = 1\).*not a root.*start elsewhere"):
        nd.root(lambda x, a: x * x + a, 0.5, 1.0)


def test_root_that_needs_more_iterations_names_them_and_the_residual():
    with pytest.raises(nd.NestadError, match=r"did not converge in 3 iterations.*max \|f\(x\)\| "
                                             r"= .*raise maxiter"):
        nd.root(lambda x, a: x * x - a, 1.0, 1e6, maxiter=3)


def test_root_given_solver_that_does_not_converge():
    with pytest.raises(nd.NestadError, match=r"the given solver returned an x where max \|f\(x\)\| "
                                             r"= 1.75.*not a root"):
        nd.root(lambda x, a: x * x - a, 1.0, 4.0, solver=lambda fun, x0: 1.5)


def test_root_needs_as_many_equations_as_unknowns():
    with pytest.raises(InvalidInputError, match=r"f\(x\) has 2 entries for an x of 1.*minimize"):
        nd.root(lambda x, a: np.array([1.0, 2.0]) * x - a, 1.0, 1.0)


def test_solver_reading_a_perturbed_closure_is_refused():
    with pytest.raises(InvalidInputError, match=r"reads a value being differentiated from its "
                                                r"closure.*Pass that value as one of the solver's params"):
        nd.derivative(lambda a: nd.root(lambda x: x * x - a, 1.0))(4.0)
    with pytest.raises(InvalidInputError, match=r"closure"):
        nd.gradient_r(lambda a: nd.linear_solve(lambda x: a * x, 1.0, method='direct'))(4.0)


@pytest.mark.parametrize('call, match', [
    (lambda: nd.root(3.0, 1.0), r"root\(f, x0, \*params\): f must be a function"),
    (lambda: nd.root(lambda x: x, 1.0, tol=-1.0), r"root: tol must be a positive number"),
    (lambda: nd.root(lambda x: x, 1.0, maxiter=0), r"root: maxiter must be an int >= 1"),
    (lambda: nd.root(lambda x: x, 1.0, solver=3), r"root: solver must be a function solver\(fun, x0\)"),
    (lambda: nd.minimize(lambda x: x * x, 1.0, method='cg'), r"minimize: method must be one of "
                                                             r"newton, bfgs, l-bfgs, 'scipy:NAME'.* "
                                                             r"or a function method"),
    (lambda: nd.linear_solve(lambda x: x, 1.0, method='lu'), r"method must be one of cg, gmres, direct"),
    (lambda: nd.linear_solve(np.eye(2), np.ones(2)), r"matvec must be a function v -> A v"),
    (lambda: nd.linear_solve(lambda x: x, 1.0, method='cg', symmetric=False),
     r"method='cg' needs a symmetric positive definite operator.*use method='gmres'"),
])
def test_solver_arguments_are_checked(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()


def test_linear_solve_failures_name_method_iterations_and_residual():
    indefinite = np.diag([1.0, -1.0, 2.0])
    with pytest.raises(nd.NestadError, match=r"linear_solve \(cg\): the operator is not positive "
                                             r"definite.*use method='gmres'"):
        nd.linear_solve(lambda x: indefinite @ x, np.ones(3), method='cg')
    with pytest.raises(nd.NestadError, match=r"linear_solve \(direct\): the 2x2 operator is singular"):
        nd.linear_solve(lambda x: np.ones((2, 2)) @ x, np.ones(2), method='direct')
    hard = np.diag(np.logspace(0, 8, 50))
    with pytest.raises(nd.NestadError, match=r"linear_solve \(gmres\) did not converge in \d+ "
                                             r"iterations: the residual \|A x - b\| is .*raise maxiter"):
        nd.linear_solve(lambda x: hard @ x, np.ones(50), method='gmres', maxiter=5)


def test_minimize_that_does_not_converge_names_iterations_and_gradient():
    rosen = lambda x, a: (a - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2   # noqa: E731
    with pytest.raises(nd.NestadError, match=r"minimize \(bfgs\) did not converge in 5 iterations "
                                             r"\(max \|grad f\| = .*raise maxiter"):
        nd.minimize(rosen, np.array([-1.2, 1.0]), 1.0, maxiter=5)
    assert np.allclose(nd.minimize(rosen, np.array([-1.2, 1.0]), 1.0), [1.0, 1.0], atol=1e-9)


@pytest.mark.parametrize('call, match', [
    (lambda: nd.odeint(3.0, 1.0, [0.0, 1.0]), r"odeint\(f, y0, t, \*params\): f must be a function"),
    (lambda: nd.odeint(lambda y, t: -y, 1.0, [[0.0, 1.0]]), r"t must be a 1-d array"),
    (lambda: nd.odeint(lambda y, t: -y, 1.0, [0.0, 1.0, 0.5]), r"strictly increasing \(or strictly "
                                                              r"decreasing\)"),
    (lambda: nd.odeint(lambda y, t: -y, 1.0, [0.0, 1.0], rtol=0), r"rtol must be a positive number"),
    (lambda: nd.odeint(lambda y, t: np.ones(3), np.ones(2), [0.0, 1.0]),
     r"f\(y, t, \*params\) returned 3 numbers for a y of 2; it must return dy/dt, shaped like y"),
    (lambda: nd.derivative(lambda s: nd.odeint(lambda y, t: -y, 1.0, anp.stack([0.0, s])))(1.0),
     r"the times t carry a derivative.*Pass the times as plain numbers"),
    (lambda: nd.gradient_r(lambda k: nd.odeint(lambda y, t: -k * y, 1.0, [0.0, 1.0])[1])(1.0),
     r"closure.*Pass that value as one of the solver's params"),
])
def test_odeint_arguments_are_checked(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()


def test_odeint_that_cannot_finish_names_where_and_what_to_do():
    # a stiff equation at tight tolerance: more steps than mxstep allows
    with pytest.raises(nd.NestadError, match=r"odeint: more than mxstep=50 steps between t = 0 and "
                                             r"10 \(reached t = .*loosen rtol/atol or raise mxstep"):
        nd.odeint(lambda y, t, k: -k * (y - nd.cos(t)), 0.0, [0.0, 10.0], 1e4, mxstep=50)
    # y' = y^2 from 1 blows up at t = 1
    with pytest.raises(nd.NestadError, match=r"odeint: (the step size fell below .* at t = (0.99|1)|f is "
                                             r"not finite near t = (0.99|1))"):
        nd.odeint(lambda y, t: y * y, 1.0, [0.0, 2.0])


def test_minimize_given_method_that_does_not_converge():
    with pytest.raises(nd.NestadError, match=r"minimize: the given method returned an x where "
                                             r"max \|grad f\| = 2, not a minimum"):
        nd.minimize(lambda x, a: (x - a) ** 2, 0.0, 1.0, method=lambda vg, x0: x0)

# ---------------------------------------------------------------- control operators
# (issue 14: leaked perturbations returned untouched, control operators' arguments, and
# the function-valued results of stop_gradient that reverse mode cannot hold)

LEAK_READS = {       # a derivative operator of a function returning the leaked value
    'derivative': lambda f: nd.derivative(f)(2.0),
    'jvp': lambda f: nd.jvp(f, (2.0,), (1.0,)),
    'directional_derivative': lambda f: nd.directional_derivative(f, 2.0, 1.0),
    'gradient_r': lambda f: nd.gradient_r(f)(2.0),
    'value_and_gradient_r': lambda f: nd.value_and_gradient_r(f)(2.0),
    'gradient_f': lambda f: nd.gradient_f(f)(2.0),
    'vjp': lambda f: nd.vjp(f, 2.0),
    'jacobian_f': lambda f: nd.jacobian_f(f)(2.0),
    'jacobian_r': lambda f: nd.jacobian_r(f)(2.0),
    'hessian': lambda f: nd.hessian(f)(2.0),
    'hvp': lambda f: nd.hvp(f, 2.0, 1.0),
    'staged derivative': lambda f: nd.stage(nd.derivative(f))(2.0),
    'staged gradient_r': lambda f: nd.stage(nd.gradient_r(f))(2.0),
    'staged function': lambda f: nd.stage(f)(2.0),
    'function-valued result': lambda f: nd.derivative(lambda z: lambda y: f(z))(2.0)(1.0),
}


SCALAR_READS = {'gradient_r', 'value_and_gradient_r', 'gradient_f', 'hessian', 'hvp',
                'staged gradient_r'}


def _leak(mode, entries):
    leaked = []

    def f(x):
        leaked.append(x * (np.arange(2.0, 2.0 + entries) if entries else 2.0))
        return anp.sum(x * x)
    MODES[mode](f)
    return leaked[0]


@pytest.mark.parametrize('leak_mode', ['derivative', 'gradient_r', 'vjp', 'f-over-r'])
@pytest.mark.parametrize('read, shape', [
    (read, shape) for read in LEAK_READS for shape in ('scalar', 'array', 'in a tuple')
    if not (shape == 'in a tuple' and read in SCALAR_READS)])   # (a tuple is no scalar)
def test_leaked_perturbation_returned_untouched(leak_mode, read, shape):
    # derivative(lambda z: leaked[0])(2.0) returned 0.0: the leaked value was a constant
    # (a one-element array is a scalar output)
    leaked = _leak(leak_mode, (1 if read in SCALAR_READS else 2) if shape == 'array' else 0)
    if shape == 'in a tuple':
        f = lambda z: (leaked, z * z)                                           # noqa: E731
    else:
        f = lambda z: leaked                                                    # noqa: E731
    with pytest.raises(nd.EscapedPerturbationError,
                       match="escaped through a side effect.*Return such values"):
        LEAK_READS[read](f)


@pytest.mark.parametrize('call, message', [
    (lambda: nd.checkpoint_loop(lambda s: s * 0.5, 1.0, 4, every=-1),
     r"checkpoint_loop: every must be an int >= 1 \(or None: about sqrt\(steps\)\), not -1"),
    (lambda: nd.checkpoint_loop(lambda s: s * 0.5, 1.0, 4, every=0), "every must be an int >= 1"),
    (lambda: nd.checkpoint_loop(lambda s: s * 0.5, 1.0, 4, every=2.0), "every must be an int"),
    (lambda: nd.checkpoint_loop(lambda s: s * 0.5, 1.0, 4.0), "steps must be an int >= 0, not 4.0"),
    (lambda: nd.checkpoint_loop(lambda s: s * 0.5, 1.0, True), "steps must be an int >= 0, not True"),
    (lambda: nd.checkpoint_loop(lambda s: s * 0.5, 1.0, -3), "steps must be an int >= 0, not -3"),
    (lambda: nd.checkpoint_loop(None, 1.0, 3),
     r"checkpoint_loop\(body, state, steps\): body must be a function, not NoneType"),
    (lambda: nd.checkpoint(3.0), r"checkpoint\(f\): f must be a function, not float"),
    (lambda: nd.fixed_point(1.0, 1.0), r"fixed_point\(f, x0, \*params\): f must be a function"),
    (lambda: nd.fixed_point(lambda x: x / 2, 1.0, tol=-1.0), "tol must be a finite real number >= 0"),
    (lambda: nd.fixed_point(lambda x: x / 2, 1.0, tol=math.nan), "tol must be a finite real number"),
    (lambda: nd.fixed_point(lambda x: x / 2, 1.0, tol="1e-9"), "tol must be a finite real number"),
    (lambda: nd.fixed_point(lambda x: x / 2, 1.0, max_iter=0), "max_iter must be an int >= 1, not 0"),
    (lambda: nd.fixed_point(lambda x: x / 2, 1.0, max_iter=10.0), "max_iter must be an int >= 1"),
    (lambda: nd.while_loop(lambda s: s < 1.0, None, 0.0),
     r"while_loop\(cond, body, state\): body must be a function of the state, not NoneType"),
    (lambda: nd.while_loop(True, lambda s: s, 0.0), "cond must be a function of the state, not bool"),
])
def test_control_operator_arguments(call, message):
    with pytest.raises(InvalidInputError, match=message):
        call()


def test_control_operator_arguments_that_are_fine():
    assert nd.checkpoint_loop(lambda s: s * 0.5, 1.0, 4, every=np.int64(3)) == 0.0625
    assert nd.fixed_point(lambda x: x / 2, 1.0, tol=0, max_iter=np.int64(2000)) == 0.0


@pytest.mark.parametrize('call, message', [
    (lambda: nd.fixed_point(lambda x, a: 2 * x + a, 1.0, 1.0),
     r"fixed_point diverged: iterate \d+ is not finite \(inf or nan\); the iteration runs away "
     r"from the fixed point: start nearer to it, or use a map that is a contraction"),
    (lambda: nd.derivative(lambda a: nd.fixed_point(lambda x, a: 2 * x - a, 3.0, a))(3.0),
     r"fixed_point's tangent equation diverged: iterate \d+ is not finite.*Rewrite the map"),
    (lambda: nd.gradient_r(lambda a: nd.fixed_point(lambda x, a: 2 * x - a, 3.0, a))(3.0),
     r"fixed_point's adjoint equation diverged: iterate \d+ is not finite.*Rewrite the map"),
    (lambda: nd.derivative(lambda a: nd.fixed_point(lambda x, a: a - x, 0.0, a, max_iter=5000))(1.0),
     r"fixed_point did not converge in 5000 iterations.*contraction.*raise max_iter"),
])
def test_fixed_point_divergence_is_named(call, message):
    with pytest.raises(nd.NestadError, match=message):
        call()


def test_stop_gradient_function_result_under_reverse_mode():
    # a function returned by a stopped function whose arguments carry a gradient_r run:
    # reverse mode cannot hold it, and says what to do instead
    with pytest.raises(InvalidInputError, match=r"stop_gradient\(f\)\(...\): f returned a function "
                                                r"while its arguments carry a reverse-mode.*derivative"):
        nd.gradient_r(lambda x: nd.stop_gradient(lambda y: lambda z: x * y * z)(x)(2.0))(3.0)


@pytest.mark.parametrize('through', [
    lambda v: nd.stage(lambda y: y * 2.0)(v), lambda v: nd.checkpoint(lambda y: y)(v),
    lambda v: nd.fixed_point(lambda x, a: x / 2 + a, 0.0, v), lambda v: nd.stop_gradient(lambda y: y)(v),
    lambda v: nd.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1]), (0, v))[1],
])
@pytest.mark.parametrize('read', ['derivative', 'gradient_r'])
def test_leaked_perturbation_through_a_control_operator(through, read):
    leaked = _leak('gradient_r', 0)
    with pytest.raises(nd.EscapedPerturbationError, match="escaped through a side effect"):
        LEAK_READS[read](lambda z: through(leaked))


# ---------------------------------------------------------------- loops (scan, fori_loop)

@pytest.mark.parametrize('call, match', [
    (lambda: nd.scan(lambda c, x: (c, x), 0.0, {'a': np.zeros(3), 'b': np.zeros(4)}),
     r"scan: the leaves of xs have different leading lengths \[3, 4\]; give them all the same"),
    (lambda: nd.scan(lambda c, x: (c, x), 0.0, np.zeros(3), length=5),
     r"scan: length=5 but xs has 3 rows; drop length or make them agree"),
    (lambda: nd.scan(lambda c, x: (c, x), 0.0, None),
     r"scan: xs is None .*so give length=, the number of steps"),
    (lambda: nd.scan(lambda c, x: (c, x), 0.0, 1.5),
     r"scan: every leaf of xs needs a leading axis to scan over; a scalar has none"),
    (lambda: nd.scan(lambda c, x: (c, x), 0.0, np.zeros((0, 2))),
     r"scan: zero steps .*the shape of ys is unknown; give at least one step"),
    (lambda: nd.scan(lambda c, x: c + x, 0.0, np.zeros(3)),
     r"scan: f must return a pair \(carry, y\), not float64; return \(new_carry, None\)"),
    (lambda: nd.stage(lambda a: nd.scan(lambda c, x: c * x, a, np.ones(3)))(1.0),
     r"scan: f must return a pair \(carry, y\).*return \(new_carry, None\)"),
    (lambda: nd.scan(lambda c, x: (c, x), 0.0, None, length=2.0),
     r"scan: length must be a non-negative int, not 2.0"),
    (lambda: nd.fori_loop(0, 3.0, lambda i, c: c, 1.0),
     r"fori_loop: upper must be an integer, not float 3.0; pass the loop bounds as ints"),
    (lambda: nd.fori_loop(True, 3, lambda i, c: c, 1.0),
     r"fori_loop: lower must be an integer, not bool True"),
])
def test_loops_refuse_bad_arguments(call, match):
    with pytest.raises(nd.InvalidInputError, match=match):
        call()


def test_scan_refuses_ys_that_change_structure():
    def step(c, x):
        return c + x, (x if x > 1 else [x, x])
    with pytest.raises(nd.InvalidInputError,
                       match="scan: f returned ys of different structures in two steps"):
        nd.scan(step, 0.0, np.arange(3.0))


def test_staged_scan_body_must_keep_the_carry_dtype():
    with pytest.raises(nd.StagingError, match=r"keeps its shapes and dtypes \(start a float as "
                                              r"0.0, not 0\)"):
        nd.stage(lambda xs: nd.scan(lambda c, x: (c + x, x), 0, xs))(np.ones(3))

# ---------------------------------------------------------------- rules and messages
# scipy on nestad values: a scipy.special ufunc reaching nestad before nestad.scipy is imported
# said "numpy.gammaln is not differentiable ... use nestad.numpy"; scipy functions nestad has
# no version of blamed the numpy function scipy called inside (numpy.result_type).

_BEFORE_NESTAD_SCIPY = r'''
import sys, numpy as np, scipy.special, nestad as nd
assert 'nestad.scipy' not in sys.modules
for x in (2.5, np.array([2.5, 3.0])):
    for call in (lambda x: scipy.special.gammaln(x), lambda x: scipy.special.zeta(x, 1.0)):
        try:
            nd.gradient_r(lambda x: np.sum(call(x)))(x)
        except TypeError as e:
            print(e)
        else:
            print("no error")
'''


def test_scipy_ufunc_before_importing_nestad_scipy_says_to_import_it():
    import subprocess
    import sys
    pytest.importorskip('scipy')
    run = subprocess.run([sys.executable, '-c', _BEFORE_NESTAD_SCIPY], capture_output=True,
                         text=True, timeout=120)
    lines = run.stdout.splitlines()
    assert run.returncode == 0 and len(lines) == 4, run.stdout + run.stderr
    for line in lines[0::2]:
        assert line.startswith("scipy.special.gammaln on a nestad value: import nestad.scipy "
                               "first"), line
    for line in lines[1::2]:
        assert line.startswith("scipy.special.zeta (through the ufunc _zeta) on a nestad value: "
                               "import nestad.scipy first"), line
    assert all("nestad.primitive(f).defpartials" in line for line in lines)


@pytest.mark.parametrize('call, error, named', [
    (lambda x: __import__('scipy.special').special.zeta(x, 1.0), TypeError,
     r"scipy.special.zeta \(through the ufunc _zeta\) is not differentiable by nestad"),
    (lambda x: __import__('scipy.special').special.loggamma(x), TypeError,
     r"scipy.special.loggamma is not differentiable by nestad"),
    (lambda x: __import__('scipy.special').special.logsumexp(x), (TypeError, PerturbedConversionError),
     r"scipy.special.logsumexp is not differentiable by nestad: it (passes|converts) its nestad "
     r"argument"),
    (lambda x: __import__('scipy.stats').stats.norm.logpdf(x), PerturbedConversionError,
     r"scipy.stats.rv_continuous.logpdf is not differentiable by nestad: it converts its nestad "
     r"argument to a plain numpy array"),
])
@pytest.mark.parametrize('x', [2.5, np.array([2.5, 3.0])], ids=['scalar', 'array'])
def test_scipy_function_nestad_does_not_have_is_named_with_what_to_do(call, error, named, x):
    pytest.importorskip('nestad.scipy')
    for grad in (nd.gradient_r, nd.gradient_f):
        with pytest.raises(error, match=named) as info:
            grad(lambda x: anp.sum(call(x)))(x)
        assert "nestad.scipy.special and nestad.scipy.stats" in str(info.value)
        assert "nestad.primitive(f).defpartials" in str(info.value)

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

# ---------------------------------------------------------------- odeint's checkpoints

@pytest.mark.parametrize('checkpoints', [1, 0, 2.0, True, "4"])
def test_odeint_checkpoints_must_be_an_int_of_at_least_two(checkpoints):
    with pytest.raises(InvalidInputError, match=r"odeint: checkpoints must be an int >= 2 \(the "
                                                r"most forward steps kept at a time in reverse "
                                                r"mode\) or None \(keep every step\), not"):
        nd.odeint(lambda y, t: -y, 1.0, [0.0, 1.0], checkpoints=checkpoints)
