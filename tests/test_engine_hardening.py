"""Issue 7, engine part: values that must never give a silent wrong number.

* perturbed values are unhashable (memoised code would return a plain cached number);
* a value whose derivative call has returned (escaped through a side effect) raises when
  any nestad operation meets it;
* scalar functions give numpy's float64 values at special points (nan, signed zeros,
  infinities);
* tag tables do not grow with the number of calls;
* linear-map partials are split and renamed alike (function-valued derivatives applied
  inside reverse mode over arrays)."""
import functools
import math

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import EscapedPerturbationError, UnhashableValueError

D = {'f': nd.derivative, 'r': nd.gradient_r}
MODES = ['f', 'r', 'ff', 'fr', 'rf', 'rr']


def nest(modes, f):
    for m in reversed(modes):
        f = D[m](f)
    return f


# ---------------------------------------------------------------- hashing

@pytest.mark.parametrize('modes', MODES)
def test_dict_cache_keyed_by_a_perturbed_value_raises_instead_of_returning_zero(modes):
    cache = {2.0: 4.0}              # filled by an earlier plain call

    def square(x):
        if x in cache:
            return cache[x]
        return x * x
    with pytest.raises(UnhashableValueError, match="primal_value"):
        nest(modes, square)(2.0)


@pytest.mark.parametrize('modes', MODES)
def test_lru_cache_raises_instead_of_returning_zero(modes):
    @functools.lru_cache(maxsize=None)
    def cube(x):
        return x * x * x
    assert cube(2.0) == 8.0
    with pytest.raises(UnhashableValueError, match="derivative"):
        nest(modes, cube)(2.0)


def test_arrays_and_sets_unhashable_too_and_the_plain_key_works():
    with pytest.raises(UnhashableValueError):
        nd.gradient_r(lambda x: anp.sum(x) * len({x}))(np.ones(2))
    # keying on the primal value is the documented way when no derivative is needed
    table = {2.0: 10.0}
    assert nd.derivative(lambda x: x * table[nd.primal_value(x)])(2.0) == 10.0
    with pytest.raises(TypeError):          # also a TypeError, as for unhashable types
        nd.derivative(lambda x: hash(x))(1.0)


# ---------------------------------------------------------------- escaped perturbations

def _leak(mode, value=3.0, array=False):
    """A perturbed value of `mode`'s run, leaked through a list after the run returned."""
    leaked = []

    def f(x):
        leaked.append(x)
        return anp.sum(x * x) if array else x * x
    if array:
        op = nd.gradient_r if mode == 'r' else nd.gradient_f
        op(f)(np.array([value, 1.0]))
    else:
        D[mode](f)(value)
    return leaked[0]


USES = {
    'plus a float': lambda v: v + 1.0,
    'times itself': lambda v: v * v,
    'reflected': lambda v: 2.0 - v,
    'negated': lambda v: -v,
    'power': lambda v: v ** 2,
    'nestad.sin': lambda v: nd.sin(v),
    'nestad.atan2': lambda v: nd.atan2(v, 2.0),
    'maximum': lambda v: nd.maximum(v, 0.0),
    'inside a later derivative': lambda v: nd.derivative(lambda z: v + z)(2.0),
    'inside a later gradient_r': lambda v: nd.gradient_r(lambda z: v * z)(2.0),
    'as a later input': lambda v: nd.derivative(lambda z: z * z)(v),
}


@pytest.mark.parametrize('mode', ['f', 'r'])
@pytest.mark.parametrize('use', sorted(USES))
def test_escaped_scalar_raises_whatever_operation_meets_it(mode, use):
    v = _leak(mode)
    with pytest.raises(EscapedPerturbationError, match="escaped"):
        USES[use](v)


@pytest.mark.parametrize('mode', ['f', 'r'])
def test_escaped_array_raises(mode):
    v = _leak(mode, array=True)
    for use in (lambda v: anp.sin(v), lambda v: anp.sum(v), lambda v: v @ np.ones(2),
                lambda v: np.exp(v), lambda v: nd.gradient_r(lambda z: anp.sum(v * z))(np.ones(2))):
        with pytest.raises(EscapedPerturbationError):
            use(v)


def test_values_of_a_running_call_and_of_derivative_valued_functions_still_work():
    # A function returned by derivative keeps working after the call returned: applying
    # it revives its run.
    fh = nd.derivative(lambda x: lambda g: lambda y: g(x + y))(3.0)
    assert math.isclose(fh(fh(nd.exp))(1.0), math.exp(7.0))
    # Values of the current run (not escaped) are fine anywhere inside it.
    assert nd.derivative(lambda x: nd.derivative(lambda y: x * y)(2.0) * x)(3.0) == 6.0


# ---------------------------------------------------------------- numpy's float64 values

import itertools                # noqa: E402
import warnings                 # noqa: E402

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, math.inf, -math.inf, math.nan,
           1e308, -1e308, 5e-324, 1e-300, 710.0, -710.0, 0.9999999999999999, 1.0000000000000002]
UNARY = {'exp': np.exp, 'expm1': np.expm1, 'log': np.log, 'log1p': np.log1p, 'log2': np.log2,
         'log10': np.log10, 'sqrt': np.sqrt, 'cbrt': np.cbrt, 'sin': np.sin, 'cos': np.cos,
         'tan': np.tan, 'asin': np.arcsin, 'acos': np.arccos, 'atan': np.arctan,
         'sinh': np.sinh, 'cosh': np.cosh, 'tanh': np.tanh, 'asinh': np.arcsinh,
         'acosh': np.arccosh, 'atanh': np.arctanh, 'abs': np.abs, 'floor': np.floor,
         'ceil': np.ceil}
BINARY = {'pow': np.power, 'atan2': np.arctan2, 'hypot': np.hypot, 'minimum': np.minimum,
          'maximum': np.maximum}


def _same(got, want):
    """Equal as float64, signed zeros and nan included; one libm may differ from another
    by an ulp or two on finite results of transcendental functions."""
    got, want = float(got), float(want)
    if math.isnan(want) or math.isinf(want) or want == 0:
        return (math.isnan(got) and math.isnan(want)) or (
            got == want and math.copysign(1, got) == math.copysign(1, want))
    return abs(got - want) <= 4.5e-16 * abs(want)


@pytest.mark.parametrize('name', sorted(UNARY))
def test_unary_functions_give_numpys_values_at_special_points(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for x in SPECIAL:
            got, want = getattr(nd, name)(x), UNARY[name](np.float64(x))
            assert _same(got, want), f"nestad.{name}({x!r}) = {got!r}, numpy: {want!r}"
            assert _same(nd.stage(getattr(nd, name))(x), want), f"staged {name}({x!r})"


@pytest.mark.parametrize('name', sorted(BINARY))
def test_binary_functions_give_numpys_values_at_special_points(name):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        staged = nd.stage(getattr(nd, name))
        for x, y in itertools.product(SPECIAL, repeat=2):
            got, want = getattr(nd, name)(x, y), BINARY[name](np.float64(x), np.float64(y))
            assert _same(got, want), f"nestad.{name}({x!r}, {y!r}) = {got!r}, numpy: {want!r}"
            assert _same(staged(x, y), want), f"staged {name}({x!r}, {y!r})"


def test_the_issue_cases_and_the_power_operator():
    assert math.isnan(nd.minimum(math.nan, 1.0)) and math.isnan(nd.minimum(1.0, math.nan))
    assert math.isnan(nd.maximum(math.nan, 1.0)) and math.isnan(nd.maximum(1.0, math.nan))
    assert nd.pow(-0.0, -1.0) == -math.inf
    # the ** operator on a nestad value: (-0.0) ** -3 is -inf, and its derivative +inf
    assert nd.jvp(lambda x: ((x - 1.0) * -1.0) ** -3.0, (1.0,), (1.0,)) == (-math.inf, math.inf)
    assert math.isnan(nd.derivative(lambda x: (x - 9.0) ** 0.5)(1.0))          # no complex numbers


# ---------------------------------------------------------------- tag tables do not grow

def test_tag_tables_do_not_grow_with_calls():
    from nestad import perturbation
    fh = nd.derivative(lambda x: lambda g: lambda y: g(x + y))(3.0)
    fh(fh(nd.exp))(1.0)
    before = len(perturbation._live)
    for _ in range(300):
        nd.derivative(lambda x: lambda g: lambda y: g(x + y))(3.0)(nd.exp)(1.0)
        nd.gradient_r(lambda w: fh(lambda z: nd.exp(z * w))(1.0))(0.5)
        nd.derivative(nd.sin)(1.0)
    assert len(perturbation._live) <= before
    assert not hasattr(perturbation._adjacent, '__len__')      # one counter, no table


# ---------------------------------------------------------------- linear maps of split tapes

def _amazing(w, apply_twice=True):
    fh = nd.derivative(lambda x: lambda g: lambda y: g(x + y))(3.0)
    g = lambda z: anp.sum(anp.exp(z * w))                      # noqa: E731
    return (fh(fh(g)) if apply_twice else fh(g))(1.0)


@pytest.mark.parametrize('outer', ['gradient_r', 'gradient_f'])
def test_function_valued_derivative_applied_to_itself_inside_reverse_mode_over_arrays(outer):
    """fh(fh(g))(1) = g''(7) with g(z) = sum(exp(z w)): the issue's reproducer, which
    raised EscapedPerturbationError because renaming did not reach split linear maps."""
    w = np.array([0.5, 0.2])
    got = getattr(nd, outer)(_amazing)(w)
    assert np.allclose(got, 2 * w * np.exp(7 * w) + 7 * w ** 2 * np.exp(7 * w), rtol=1e-13)


def test_depth_three_and_scalar_variants_agree_with_finite_differences():
    fh = nd.derivative(lambda x: lambda g: lambda y: g(x + y))(3.0)
    # three applications: g'''(10) for g(z) = exp(z w)
    f3 = lambda w: fh(fh(fh(lambda z: nd.exp(z * w))))(1.0)      # noqa: E731
    for op in (nd.gradient_r, nd.derivative):
        w = 0.3
        assert math.isclose(op(f3)(w), 3 * w ** 2 * math.exp(10 * w) + 10 * w ** 3 * math.exp(10 * w),
                            rel_tol=1e-12)
    wa = np.array([0.3, -0.2])
    f3a = lambda w: fh(fh(fh(lambda z: anp.sum(anp.exp(z * w)))))(1.0)   # noqa: E731
    h = 1e-6
    fd = np.array([(f3a(wa + h * e) - f3a(wa - h * e)) / (2 * h) for e in np.eye(2)])
    assert np.allclose(nd.gradient_r(f3a)(wa), fd, rtol=1e-6)
    # second order through it: reverse over reverse, forward over reverse
    hess = nd.hessian(lambda w: _amazing(w))(wa)
    assert np.allclose(hess, nd.jacobian_r(nd.gradient_r(_amazing))(wa), rtol=1e-10)


# ---------------------------------------------------------------- garbage collection

class _Cycle:
    def __init__(self):
        self.me = self
        self.data = [float(i) for i in range(1000)]      # about 32 kB


def test_cyclic_garbage_made_inside_gradient_r_is_collected_while_the_tape_lives():
    import gc
    import tracemalloc

    def f(x):
        acc = 0.0
        for _ in range(3000):               # about 100 MB of cycles in all
            _Cycle()
            acc = acc * 0.999 + nd.sin(x * 1.01)
        return acc
    threshold = gc.get_threshold()
    tracemalloc.start()
    g = nd.gradient_r(f)(0.3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert math.isfinite(g)
    assert peak < 40e6, f"peak {peak / 1e6:.1f} MB: cyclic garbage kept while the tape lived"
    assert gc.get_threshold() == threshold and gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    import gc
    gc.disable()
    try:
        nd.gradient_r(lambda x: x * x)(1.0)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize('f, x, want', [
    (lambda x: nd.minimum(math.nan, x), 1.0, math.nan), (lambda x: nd.minimum(x, math.nan), 1.0, math.nan),
    (lambda x: nd.maximum(math.nan, x), 1.0, math.nan), (lambda x: nd.maximum(x, math.nan), 1.0, math.nan),
    (lambda x: nd.pow(x, -1.0), -0.0, -math.inf), (lambda x: x ** -1.0, -0.0, -math.inf),
    (lambda x: anp.dot(np.array([-0.0]) * x, np.array([1.0])), 1.0, -0.0),
])
def test_issue_values_are_the_primals_of_every_mode(f, x, want):
    # item 9 of issue 7 checked plain values; the value a derivative run computes is the same
    for got in (nd.jvp(f, (x,), (1.0,))[0], nd.vjp(f, x)[0], nd.value_and_gradient_r(f)(x)[0],
                nd.jvp(lambda s: nd.value_and_gradient_r(f)(x - 0.0 * s)[0], (1.0,), (1.0,))[0]):
        got = float(got)
        assert (math.isnan(got) and math.isnan(want)) or (got == want and
                                                          math.copysign(1, got) == math.copysign(1, want))
