"""stage(f, backend="numba"): the generated code compiled by numba gives the Python
backend's numbers (scalar programs, loops, guards, IEEE fallbacks); a program numba
cannot compile runs as Python with a warning.  numba is in the test extra; without it the
backend says what to install."""
import math
import warnings

import numpy as np
import pytest

import nestad as nd

numba = pytest.importorskip("numba", reason="the numba backend needs numba (pip install nestad[numba])")


def chain(x):
    for _ in range(20):
        x = nd.sin(x) * 1.0001 + 0.1 * x
    return x


def heron(a):
    return nd.while_loop(lambda s: nd.abs(s[0] * s[0] - s[1]) > 1e-13 * s[1],
                         lambda s: (0.5 * (s[0] + s[1] / s[0]), s[1]), (a, a))[0]


def test_numba_equals_python_on_derivatives_loops_and_guards():
    piecewise = lambda x: x * x if x > 0 else -2.0 * x          # noqa: E731
    cases = [(nd.derivative(nd.gradient_r(chain)), [0.3, -1.1]),
             (nd.gradient_r(nd.gradient_r(heron)), [4.0, 9.0]),
             (piecewise, [2.0, -3.0])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # no fallback to Python for these
        for f, xs in cases:
            fast, ref = nd.stage(f, backend="numba"), nd.stage(f)
            for x in xs * 2:                      # second round: compiled code
                assert fast(x) == ref(x)
                # (staged loops differentiate by forward directions: eager's reverse
                # tape rounds differently, in the last bits)
                assert math.isclose(fast(x), f(x), rel_tol=1e-13)


def test_numba_ieee_values_where_math_raises():
    f = nd.stage(lambda x: nd.log(x) + nd.sqrt(x), backend="numba")
    assert f(4.0) == math.log(4.0) + 2.0
    f(4.0)
    assert f(0.0) == -math.inf and math.isnan(f(-1.0))


def test_numba_falls_back_to_python_with_a_warning():
    g = nd.stage(lambda x: nd.numpy.sum(nd.numpy.where(x > 0, x, 0.0) ** 2), backend="numba")
    x = np.array([1.0, -2.0, 3.0])
    g(x)
    with pytest.warns(UserWarning, match="numba could not compile"):
        assert g(x) == 10.0


def _no_fallback(f, args_list):
    """f staged with numba (no fallback warning) and with Python: the same numbers."""
    fast, ref = nd.stage(f, backend="numba"), nd.stage(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for args in args_list * 2:                # second round: compiled code
            try:
                b = ref(*args)
            except (ArithmeticError, nd.InvalidInputError) as e:    # where Python raises or
                # leaves the reals, the numba program raises too
                with pytest.raises(type(e)):
                    fast(*args)
                continue
            a = fast(*args)
            assert a == b or (a != a and b != b), (args, a, b)
            assert a != a or math.copysign(1, a) == math.copysign(1, b), (args, a, b)


def test_numba_compiles_powers_with_python_numbers():
    # pow has no numba spelling of its own: it used to fall back to Python for any x ** 3
    rng = np.random.default_rng(4)
    xs = [(float(x),) for x in rng.uniform(-3, 3, 20)] + [(0.0,), (-0.0,), (1e300,), (-math.inf,)]
    for f in (lambda x: x ** 3, lambda x: x ** 2, lambda x: x ** -1, lambda x: x ** 2.5,
              lambda x: 2.0 ** x, lambda x: nd.pow(x, 0.5)):
        _no_fallback(f, xs)
    pairs = [(float(x), float(y)) for x, y in rng.uniform(-3, 3, (20, 2))] + \
        [(0.0, -1.0), (-0.0, -3.0), (-8.0, 1 / 3), (2.0, 2000.0), (-2.0, 3.0), (math.nan, 0.0)]
    _no_fallback(lambda x, y: x ** y, pairs)
    # and their derivatives, in both modes and nested
    for g in (nd.derivative(nd.derivative(lambda x: x ** 3.5)),
              nd.gradient_r(nd.derivative(lambda x: x ** 2.5 + 3.0 ** x)),
              lambda x: nd.gradient_r(lambda a: a ** x)(1.7)):
        _no_fallback(g, [(1.3,), (0.4,)])


def test_numba_gradient_of_a_power_of_two_variables():
    g = nd.gradient_r(lambda x, y: x ** y * y ** 3, (0, 1))
    fast, ref = nd.stage(g, backend="numba"), nd.stage(g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for args in [(1.3, 0.7), (2.5, -1.5)] * 2:
            assert fast(*args) == ref(*args)
    x, y = 1.3, 0.7
    assert np.allclose(fast(x, y), (y * x ** (y - 1) * y ** 3,
                                    math.log(x) * x ** y * y ** 3 + 3 * y ** 2 * x ** y))


def test_numba_compiles_cbrt():
    _no_fallback(lambda x: nd.cbrt(x) * x, [(0.3,), (-27.0,), (-0.0,), (1e-300,)])
    _no_fallback(nd.derivative(nd.derivative(nd.cbrt)), [(0.3,), (-2.0,)])


def test_numba_integer_powers_are_exact():
    # Python's int ** int is exact; numba's wraps at 64 bits: the compiled power raises
    # there, and the call reruns as Python, with Python's numbers (no fallback warning)
    f = nd.stage(lambda x: nd.where(x > 0, 2, 3) ** 3 * x, backend="numba")
    g = nd.stage(lambda n: n ** 40, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(1.0) == 8.0 and f(-1.0) == -27.0 and f(-1.0) == -27.0
        assert g(2) == 2 ** 40 and g(2) == 2 ** 40
        assert g(3) == 3 ** 40 and g(-3) == 3 ** 40      # beyond 2**63: Python's answer
