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
