"""stage(f, backend="numba"): the generated code compiled by numba gives the Python
backend's numbers (scalar programs, loops, guards, IEEE fallbacks); a program numba
cannot compile runs as Python with a warning.  numba is in the test extra; without it the
backend says what to install."""
import math
import warnings

import numpy as np
import pytest

import nestad as nd
from nestad.staging.codegen import python_source
from nestad.staging.numba_backend import NumbaFallbackWarning

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
    # (numba has no np.einsum, which einsum's plain implementation calls)
    g = nd.stage(lambda x: nd.numpy.einsum('i,i->', x, x * x), backend="numba")
    x = np.array([1.0, -2.0, 3.0])
    g(x)
    with pytest.warns(UserWarning, match="numba could not compile"):
        assert g(x) == 20.0


def assert_no_fallback(f, args_list):
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
        assert_no_fallback(f, xs)
    pairs = [(float(x), float(y)) for x, y in rng.uniform(-3, 3, (20, 2))] + \
        [(0.0, -1.0), (-0.0, -3.0), (-8.0, 1 / 3), (2.0, 2000.0), (-2.0, 3.0), (math.nan, 0.0)]
    assert_no_fallback(lambda x, y: x ** y, pairs)
    # and their derivatives, in both modes and nested
    for g in (nd.derivative(nd.derivative(lambda x: x ** 3.5)),
              nd.gradient_r(nd.derivative(lambda x: x ** 2.5 + 3.0 ** x)),
              lambda x: nd.gradient_r(lambda a: a ** x)(1.7)):
        assert_no_fallback(g, [(1.3,), (0.4,)])


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
    assert_no_fallback(lambda x: nd.cbrt(x) * x, [(0.3,), (-27.0,), (-0.0,), (1e-300,)])
    assert_no_fallback(nd.derivative(nd.derivative(nd.cbrt)), [(0.3,), (-2.0,)])


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


# ---------------------------------------------------------------- array programs

anp = nd.numpy


def assert_same_arrays(fast, ref, args, exact=True):
    """fast(*args) (numba, no fallback warning) equals ref(*args): bit for bit, or where
    numba's elementwise exp/tanh/... (the C library's, up to 3 ulp from numpy's own) are
    used, to 1e-14 of the largest entry (a gradient's sums cancel)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):                                  # second round: compiled code
            a, b = fast(*args), ref(*args)
            for x, y in zip(*(v if isinstance(v, tuple) else (v,) for v in (a, b))):
                if exact:
                    assert np.array_equal(x, y, equal_nan=True) and \
                        np.array_equal(np.signbit(x), np.signbit(y))
                else:
                    assert np.allclose(x, y, rtol=0, atol=1e-14 * np.max(np.abs(y)))


def test_numba_reductions_add_in_numpys_order():
    # numpy sums a contiguous run pairwise (by blocks of 8, halves past 128) and other
    # axes row after row; numba's own np.sum adds in one loop (and takes no keepdims)
    rng = np.random.default_rng(3)

    def reductions(x, y, z):
        out = [anp.sum(x), anp.max(x), anp.min(y), anp.mean(y), anp.sum(z), anp.max(z, axis=1),
               anp.sum(z, axis=(1, 2)), anp.sum(z, axis=(0, 1), keepdims=True),
               anp.mean(z, axis=(-1, -2)), anp.max(z, axis=(0, 1))]
        for a in (x, y, z):
            for axis in range(-1, a.ndim):
                for keep in (False, True):
                    out += [anp.sum(a, axis=axis, keepdims=keep),
                            anp.max(a, axis=axis, keepdims=keep),
                            anp.min(a, axis=axis, keepdims=keep),
                            anp.mean(a, axis=axis, keepdims=keep)]
        return tuple(out)

    scale = lambda *s: rng.standard_normal(s) * 10.0 ** rng.integers(-6, 6, s)   # noqa: E731
    x, y, z = scale(1000, 131), scale(7, 300), scale(3, 37, 129)
    y[1, 5], y[2, 7], z[0, 3, 3], z[1, 2, 7:9] = math.nan, -0.0, math.inf, (0.0, -0.0)
    assert_same_arrays(nd.stage(reductions, backend="numba"), nd.stage(reductions), (x, y, z))
    x = np.full(10, -0.0)                       # numpy's sum starts at +0.0
    assert_same_arrays(nd.stage(lambda x: (anp.sum(x), anp.sum(x[:3])), backend="numba"),
                 lambda x: (np.sum(x), np.sum(x[:3])), (x,))


def test_numba_stacked_matmul_is_numpys():
    # numba's '@' takes 2-d arrays; a stack is one BLAS call per matrix, as numpy's
    rng = np.random.default_rng(6)
    a, b, c, v = (rng.standard_normal(s) for s in ((6, 5), (4, 5, 3), (4, 1, 6), (4, 5, 1)))
    f = lambda a, b, c, v: (a @ b, c @ a, a @ v, c @ (a @ b), b.swapaxes(1, 2) @ v)  # noqa: E731
    assert_same_arrays(nd.stage(f, backend="numba"), nd.stage(f), (a, b, c, v))


def test_numba_compiles_the_benchmarks_array_programs():
    # benchmarks/arrays.py's MLP gradient, Rosenbrock HVP and Hessian (smaller) used to
    # fall back
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((32, 20)), rng.integers(0, 4, 32)

    def mlp_loss(params):
        W1, b1, W2, b2 = params
        h = anp.tanh(X @ W1 + b1)
        z = h @ W2 + b2
        return anp.mean(anp.logsumexp(z, axis=1) - z[np.arange(32), Y])

    def rosen(x):
        return anp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    params = (rng.standard_normal((20, 16)) * 0.3, rng.standard_normal(16),
              rng.standard_normal((16, 4)) * 0.3, np.zeros(4))
    g = nd.gradient_r(mlp_loss)
    assert_same_arrays(nd.stage(g, backend="numba"), nd.stage(g), (params,), exact=False)
    hvp = lambda x, v: nd.hvp(rosen, x, v)                  # noqa: E731
    x, v = rng.standard_normal(300), rng.standard_normal(300)
    assert_same_arrays(nd.stage(hvp, backend="numba"), nd.stage(hvp), (x, v))
    # a Hessian: batched tangents meet '@' of a matrix and a stack of them
    A = rng.standard_normal((10, 10)) / 3
    h = nd.hessian(lambda x: anp.sum(anp.log1p(anp.exp(A @ x))) + anp.sum(x ** 4) / 4)
    assert_same_arrays(nd.stage(h, backend="numba"), nd.stage(h), (rng.standard_normal(10),),
                 exact=False)
    # the gradient of a broadcast sum (sum_to) and reciprocal
    f = nd.gradient_r(lambda b, c: anp.sum(anp.reciprocal(X + b) * c), (0, 1))
    assert_same_arrays(nd.stage(f, backend="numba"), nd.stage(f),
                 (rng.standard_normal(20) + 5.0, rng.standard_normal((32, 1))))


def test_numba_compiles_joins_and_2d_integer_indexing():
    # GradBench's gmm used to fall back: concatenate's plain implementation takes
    # ``*xs, axis`` (numba binds no keyword after *args), and the adjoint of indexing by a
    # 2-d integer array (repeated entries: their sensitivities add) had no numba spelling
    rng = np.random.default_rng(7)
    idx = np.array([[0, 2, 2], [1, 0, 3], [3, 3, 0]])
    l, c, w = rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), rng.standard_normal((2, 3, 3))

    def f(l, c):
        picked = lambda l: anp.concatenate([np.zeros((2, 1)), l], axis=1)[:, idx]  # noqa: E731
        return (picked(l), anp.stack([l, c], axis=1), anp.stack([l, c], axis=-1),
                anp.hstack([l, c, l]), nd.gradient_r(lambda l: anp.sum(picked(l) * w))(l))

    fast = nd.stage(f, backend="numba")
    assert_same_arrays(fast, nd.stage(f), (l, c))
    z = np.concatenate([np.zeros((2, 1)), l], axis=1)
    g = np.zeros((2, 4))
    np.add.at(g, (slice(None), idx), w)                     # numpy's own scatter, in order
    expected = (z[:, idx], np.stack([l, c], axis=1), np.stack([l, c], axis=-1),
                np.hstack([l, c, l]), g[:, 1:])
    for a, b in zip(fast(l, c), expected):
        assert np.array_equal(a, b)


def test_numba_compiles_array_powers():
    # power's plain implementation sets np.errstate, which numba cannot compile; numpy's
    # loop takes a scalar exponent 0.5 as a square root (-0.0 at -0.0, nan at -inf)
    x = np.array([-0.0, -np.inf, 2.0, 1e-300, 3.3, -2.0, 0.0, np.inf, np.nan])
    y = np.array([0.5, 0.5, -1.5, 0.5, 3.0, 3.0, -1.0, -0.5, 2.0])
    f = lambda x, y: (anp.power(x, 0.5), anp.power(x, y), anp.power(2.0, y))   # noqa: E731
    fast = nd.stage(f, backend="numba")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("error", NumbaFallbackWarning)
        fast(x, y)
        half, xy, two = fast(x, y)                          # compiled
        expected = np.power(x, 0.5), np.power(x, y), np.power(2.0, y)
    assert np.array_equal(half, expected[0], equal_nan=True) and \
        np.array_equal(np.signbit(half), np.signbit(expected[0]))
    for a, b in zip((xy, two), expected[1:]):               # the C library's pow: 1 ulp
        np.testing.assert_allclose(a, b, rtol=4e-16)


_CACHE_PROBE = """
import sys
import numpy as np, nestad as nd
from nestad.staging import numba_backend
inner = lambda x: nd.numpy.sum(nd.numpy.tanh(x) * x[::-1])
f = nd.stage(lambda x, v: nd.hvp(inner, x, v) * inner(x) if sys.argv[1] == "a" else  # (a sum)
             v * nd.numpy.sum(x * x), backend="numba")
x = np.linspace(-1.0, 1.0, 50)
f(x, x)                                      # traces
print(f(x, x)[7])                            # compiles (or loads) and runs
c = next(iter(f.cache.values()))[0].fn
stats = getattr(c, 'dispatcher', c).stats
print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
helpers = [d.stats for d in numba_backend._HELPERS]  # (the reductions' pairwise sums...)
print(sum(sum(s.cache_hits.values()) for s in helpers), sum(sum(s.cache_misses.values()) for s in helpers))
"""


def test_numba_code_is_cached_on_disk(tmp_path):
    import os
    import subprocess
    import sys
    env = dict(os.environ, NESTAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    runs = [subprocess.run([sys.executable, "-c", _CACHE_PROBE, which], env=env, capture_output=True,
                           text=True, check=True).stdout.split("\n") for which in "aab"]
    assert runs[0][0] == runs[1][0]                         # the same numbers
    assert runs[0][1] == "0 1"                              # compiled, stored
    assert runs[1][1] == "1 0"                              # loaded, not compiled
    assert any(p.name.endswith(".nbi") for p in tmp_path.rglob("*"))
    # the helpers the first program compiled (its sum's) are stored apart: a new program
    # in a new process compiles itself and loads them
    hits, misses = map(int, runs[0][2].split())
    assert hits == 0 and misses > 0
    assert runs[2][1] == "0 1"
    hits, misses = map(int, runs[2][2].split())
    assert hits > 0 and misses == 0
    assert any(p.name.endswith(".nbi") for p in (tmp_path / "numba" / "helpers").rglob("*"))


def test_numba_optimises_at_its_level_and_restores_numbas(monkeypatch):
    # LLVM runs at OPT_LEVEL while a staged program compiles (its callees included), and
    # numba's own level is back afterwards, also where numba fails and the call falls back
    from numba.core import config
    from numba.core.codegen import CPUCodegen

    from nestad.staging import numba_backend
    levels, builder = [], CPUCodegen._pass_builder

    def recording(self, **kwargs):
        levels.append(kwargs.get('opt', config.OPT))
        return builder(self, **kwargs)
    monkeypatch.setattr(CPUCodegen, '_pass_builder', recording)
    before = config.OPT
    monkeypatch.setattr(numba_backend, 'OPT_LEVEL', 1 if before != 1 else 2)
    g = nd.stage(lambda x: nd.exp(x) * 0.25 + x, backend="numba")
    g(0.5)
    assert g(0.5) == math.exp(0.5) * 0.25 + 0.5
    assert levels and all(level in (0, numba_backend.OPT_LEVEL) for level in levels)
    assert numba_backend.OPT_LEVEL in levels           # (0: numba's cheap pre-pass)
    assert config.OPT is before
    h = nd.stage(lambda x: nd.numpy.einsum('i,i->', x, x), backend="numba")
    h(X)
    with pytest.warns(UserWarning, match="numba could not compile"):
        h(X)
    assert config.OPT is before


def test_numba_vectorizes_loops_of_large_arrays_only(monkeypatch):
    # LLVM's loop vectorizer is off while a program of small arrays compiles (a third of
    # a staged jet's compile, no faster calls) and on for one with an array of at least
    # VECTORIZE_FROM elements; numba's setting is back afterwards; the numbers are numpy's
    from numba.core import config
    from numba.core.codegen import CPUCodegen

    from nestad.staging import numba_backend
    seen, builder = [], CPUCodegen._pass_builder

    def recording(self, **kwargs):
        if kwargs.get('opt', config.OPT) != 0:      # (not numba's cheap pre-pass, never vectorized)
            seen.append(kwargs.get('loop_vectorize', config.LOOP_VECTORIZE))
        return builder(self, **kwargs)
    monkeypatch.setattr(CPUCodegen, '_pass_builder', recording)
    monkeypatch.setattr(numba_backend, 'VECTORIZE_FROM', 6)
    before = config.LOOP_VECTORIZE
    f = lambda x: x * x * 3.0 + 1.0                         # noqa: E731
    for n, vectorized in ((5, False), (6, True)):
        seen.clear()
        x = np.linspace(-1.0, 2.0, n)
        g = nd.stage(f, backend="numba")
        g(x)
        np.testing.assert_array_equal(g(x), f(x))
        assert seen and all(bool(v) == vectorized for v in seen), (n, seen)
        assert config.LOOP_VECTORIZE == before


X = np.array([0.3, -0.7, 1.1])


def test_numba_compiles_a_long_program_in_pieces(monkeypatch):
    # pieces of 4 lines: each a numba function taking the live variables and the
    # constant arrays; the numbers are the Python backend's
    from nestad.staging import numba_backend
    monkeypatch.setattr(numba_backend, 'PIECE_LINES', 4)
    c = np.array([0.5, -1.5, 2.0])

    def f(x):
        for _ in range(4):
            x = nd.numpy.sin(x * c) + x[::-1] * 0.5
        return x
    g = nd.stage(f, backend="numba")
    g(X)
    assert_same_arrays(g, nd.stage(f), (X,))
    fn = next(iter(g.cache.values()))[0].fn
    source = open(getattr(fn, 'dispatcher', fn).py_func.__code__.co_filename).read()
    assert "staged_2(*(_s + (" in source


def test_numba_spells_with_its_lowering_table():
    # numba's table (nestad.staging.lowering) overrides the Python spelling of two array
    # primitives with numba implementations of their own
    f = nd.stage(lambda x: nd.numpy.reciprocal(nd.numpy.sum_to(nd.numpy.broadcast_to(x, (4, 3)), (1, 3))),
                 backend="numba")
    np.testing.assert_array_equal(f(X), np.reciprocal(4.0 * X)[None])   # (traced)
    with warnings.catch_warnings():
        warnings.simplefilter('error', NumbaFallbackWarning)
        np.testing.assert_array_equal(f(X), np.reciprocal(4.0 * X)[None])   # (compiled)
    program = nd.trace(lambda x: nd.numpy.reciprocal(x), X)
    src, glb = python_source(program, backend='numba')
    assert "_nb_reciprocal(" in src and callable(glb['_nb_reciprocal'])
