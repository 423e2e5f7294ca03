"""Regression tests for what fuzzing found in nestad.numpy's manipulation, statistics,
contraction and linear-algebra functions and in the staging passes
(``benchmarks/fuzz_numpy.py``, ``benchmarks/fuzz_staging.py``; notes/hardening.md)."""
import warnings

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp


def modes(F, x):
    """gradient_r, gradient_f and the four Hessian pairings of a scalar F at x."""
    g = [nd.gradient_r(F)(x), nd.gradient_f(F)(x)]
    h = [o(i(F))(x) for o in (nd.jacobian_f, nd.jacobian_r) for i in (nd.gradient_f, nd.gradient_r)]
    return g, h


# ---------------------------------------------------------------- empty arrays

@pytest.mark.parametrize("shape, axis", [((0,), None), ((2, 0), 0), ((2, 0), -1), ((0, 3), 0),
                                         ((0, 3), None), ((2, 0), (0, 1))])
@pytest.mark.parametrize("fn", [anp.prod, anp.nanprod, anp.cumprod, anp.median, anp.sum])
def test_reductions_of_empty_arrays_differentiate_in_every_mode(shape, axis, fn):
    # prod's and cumprod's rules reshaped with -1 (ambiguous for a size-0 array) and
    # padded the empty scan with a one; median/quantile merged the axes the same way
    if fn is anp.cumprod and isinstance(axis, tuple):
        return
    x = np.ones(shape)
    F = lambda x: anp.sum(fn(x, axis=axis))          # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for g in modes(F, x)[0]:
            assert g.shape == shape
        for h in modes(F, x)[1]:
            assert h.shape == shape + shape


def test_quantile_over_an_axis_beside_an_empty_one():
    x = np.ones((2, 0))
    p, t = nd.jvp(lambda x: anp.quantile(x, 0.3, axis=0, keepdims=True), (x,), (x,))
    assert p.shape == t.shape == np.quantile(x, 0.3, axis=0, keepdims=True).shape == (1, 0)


def test_inner_and_vdot_of_empty_vectors():
    e = np.ones((3, 0))
    assert nd.gradient_r(lambda x: anp.sum(anp.inner(x, np.ones((2, 0)))))(e).shape == (3, 0)
    assert nd.hessian(lambda x: anp.sum(anp.inner(x, x)))(e).shape == (3, 0, 3, 0)
    assert nd.gradient_f(lambda x: anp.vdot(x, x))(np.ones(0)).shape == (0,)


def test_jacobian_r_of_an_empty_output_is_an_empty_block():
    x = np.ones((3, 3))
    for op in (nd.jacobian_f, nd.jacobian_r):
        J = op(lambda x: (anp.tile(x, 0), x[0]))(x)
        assert J[0].shape == (3, 0, 3, 3) and J[1].shape == (3, 3, 3)
    assert nd.jacobian_r(lambda x: anp.tile(x, 0))(x.astype(np.float32)).dtype == np.float32


def test_users_unbatched_jvp_rule_on_an_empty_array():
    # a rule for one tangent is applied to each of a batch: none for an empty argument
    @nd.primitive
    def sq(x):
        return x * x
    sq.defjvp(lambda t, x, out: 2 * x * t)
    sq.defvjp(lambda g, x, out: 2 * x * g)
    assert nd.gradient_f(lambda x: anp.sum(sq(x)))(np.ones(0)).shape == (0,)
    assert nd.jacobian_f(sq)(np.ones((2, 0))).shape == (2, 0, 2, 0)

# ---------------------------------------------------------------- nanvar, nanstd

def _nan_free(name, ddof):
    def F(x):
        v = getattr(anp, name)(x, axis=1, ddof=ddof)
        return anp.sum(anp.where(np.isnan(getattr(np, name)(nd.primal_value(x), axis=1, ddof=ddof)),
                                 0.0, v))
    return F


@pytest.mark.parametrize("name", ["nanvar", "nanstd"])
@pytest.mark.parametrize("ddof", [0, 1, 2, 3])
def test_nanvar_nanstd_without_degrees_of_freedom_are_constants_in_both_modes(name, ddof):
    # dof <= 0 gives numpy's constant nan: forward mode gave derivative nan where reverse
    # gave 0 (a division by dof = 0 and sqrt(nan)); a slice with one entry that is not nan
    # has std 0 whatever it is (derivative 0, as std's of one entry)
    x = np.array([[0.3, 1.2, -0.5], [0.1, np.nan, np.nan], [np.nan] * 3])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        want = getattr(np, name)(x, axis=1, ddof=ddof)
        got = nd.jvp(lambda x: getattr(anp, name)(x, axis=1, ddof=ddof), (x,), (np.ones_like(x),))
        np.testing.assert_array_equal(got[0], want)
        assert not np.any(np.isnan(got[1][np.isnan(want)]))
        F = _nan_free(name, ddof)
        g, h = modes(F, x)
    for a in g + h:
        assert not np.any(np.isnan(a))
    np.testing.assert_allclose(g[0], g[1], rtol=1e-12)
    assert np.all(g[0][1:] == 0.0)             # the nan entries and the constant slices
    for a in h[1:]:
        np.testing.assert_allclose(a, h[0], rtol=1e-10, atol=1e-12)
    # the first row is a regular slice (unless ddof leaves it no degree of freedom)
    d = x[0] - x[0].mean()
    n = 3 - ddof
    want_row = 0 * d if n <= 0 else 2 * d / n if name == 'nanvar' else \
        d / (n * np.sqrt(np.sum(d * d) / n))
    np.testing.assert_allclose(g[0][0], want_row, rtol=1e-12)


# ---------------------------------------------------------------- float32 tangents

F32_CASES = {
    'diag': lambda x: anp.diag(x[0], 1),
    'max': lambda x: anp.max(x, axis=0),
    'ptp': lambda x: anp.ptp(x),
    'norm inf': lambda x: anp.linalg.norm(x, ord=np.inf),
    'eigh': lambda x: anp.linalg.eigh(x + x.T)[1],
    'eigvalsh': lambda x: anp.linalg.eigvalsh(x + x.T),
    'pinv': lambda x: anp.linalg.pinv(x),
    'linspace': lambda x: anp.linspace(x[0, 0], x[1, 1], 2),
    'pad': lambda x: anp.pad(x, 1, constant_values=-0.0),
    'var of one entry': lambda x: anp.var(x[0, 0]),
    'average returned': lambda x: anp.average(x, returned=True)[1],
    'matrix_power 0': lambda x: anp.linalg.matrix_power(x, 0),
}


@pytest.mark.parametrize("name", sorted(F32_CASES))
def test_jvp_tangents_have_the_outputs_dtype(name):
    # rules with float64 constants (masks, identity matrices, zeros) made the tangent of
    # a float32 output float64; an output that does not depend on x got float64 zeros
    x = np.array([[1.5, -0.5], [0.25, 2.0]], np.float32)
    p, t = nd.jvp(F32_CASES[name], (x,), (np.ones_like(x),))
    assert np.asarray(p).dtype == np.float32
    assert np.asarray(nd.primal_value(t)).dtype == np.float32, name
    # a float32 x with a float64 operand: numpy's result is float64, and so is the tangent
    x0 = x[0]
    p, t = nd.jvp(lambda x: anp.fmod(x, np.array([2.0, 3.0])), (x0,), (np.ones_like(x0),))
    assert p.dtype == np.float64 and t.dtype == np.float64


# ---------------------------------------------------------------- staged heaviside

def test_heaviside_stages():
    f = lambda x, y: anp.sum(anp.heaviside(x, y) * x)         # noqa: E731
    x = np.array([0.0, 1.0, -1.0])
    g = nd.stage(nd.gradient_r(f, argnums=(0, 1)))
    for _ in range(2):                       # the trace, then the compiled program
        gx, gy = g(x, 0.5)
        np.testing.assert_array_equal(gx, [0.5, 1.0, 0.0])
        assert gy == 0.0


# ---------------------------------------------------------------- sharing loops

def test_a_loop_equal_to_one_that_another_loop_subsumed():
    # B's loop is the first slot of A's: B is shared with A.  C equals B and was pointed
    # at B's results, which no equation computed any more: a KeyError when compiling.
    def f(x):
        cond = lambda s: s[0] < 3.0                            # noqa: E731
        A = nd.while_loop(cond, lambda s: (s[0] + 1.0, s[1] * 0.5 + x), (0.0, x))
        B = nd.while_loop(cond, lambda s: (s[0] + 1.0,), (0.0,))
        C = nd.while_loop(cond, lambda s: (s[0] + 1.0,), (0.0,))
        return A[1] + B[0] + C[0]
    staged = nd.stage(f)
    for x in (0.3, 0.3, -1.25):
        assert staged(x) == f(x)
    assert sum(e.op.name == 'while' for e in staged.programs()[0].eqns) == 1
    G = nd.stage(nd.gradient_r(f))
    assert G(0.3) == G(0.3) == nd.gradient_r(f)(0.3)


# ---------------------------------------------------------------- constants that promote

PROMOTING = {
    'x * float64 scalar': lambda x: x * np.float64(2.0),
    'x * 2.0 and x * float64 scalar': lambda x: (x * 2.0, x * np.float64(2.0)),
    'x * int64 scalar': lambda x: x * np.int64(3),
    'x * 0-d float64 array': lambda x: anp.multiply(x, np.array(2.0)),
    'x * float64 ones': lambda x: x * np.ones(2),
    'x * float64 constant array': lambda x: x * np.full(2, 3.0),
    'x ** float64 2': lambda x: x ** np.float64(2.0),
    'x ** float64 0': lambda x: x ** np.float64(0.0),
    '-(x * float64 scalar)': lambda x: -(x * np.float64(3.0)),
    'x / float64 scalar': lambda x: x / np.float64(3.0),
    'x - float32 scalar': lambda x: x - np.float32(1.5),
}


@pytest.mark.parametrize("name", sorted(PROMOTING))
def test_staged_float32_code_promotes_as_numpy_does(name):
    # the tracer's identities turned a float64 constant into a Python float (float32 * 2.0
    # stays float32), CSE took np.float64(2.0) for 2.0, and generated code wrote numpy
    # scalars as Python literals: staged float32 code computed in float32 where eager code
    # (numpy) promotes to float64
    f = PROMOTING[name]
    x = np.array([1.1, 2.3], np.float32)
    want = f(x)
    staged = nd.stage(f)
    for _ in range(2):                       # the trace, then the compiled program
        got = staged(x)
        for a, b in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- float32 and staged loops

def _f32_loop(x):
    state = nd.while_loop(lambda s: s[0] < 3.0,
                          lambda s: (s[0] + 1.0, anp.sin(s[1]) * np.float32(0.9)), (0.0, x))
    return anp.sum(state[1])


def test_float32_loop_state_differentiates_staged():
    # the tangents a loop carries are in their leaf's dtype: the reverse rule's identity
    # seeds (float64) met float32 tangents from the body ("the body turns state leaf 2
    # from float64[3, 3] into float32[3, 3]"), and a float64 tangent given by the user
    # for a float32 leaf too
    x = np.array([0.3, -0.2, 0.5], np.float32)
    want = nd.gradient_r(_f32_loop)(x)
    for g in (nd.stage(nd.gradient_r(_f32_loop)), nd.gradient_r(nd.stage(_f32_loop)),
              nd.gradient_f(nd.stage(_f32_loop))):
        for _ in range(2):
            got = g(x)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-5)
    p, t = nd.jvp(nd.stage(_f32_loop), (x,), (np.ones(3),))
    np.testing.assert_allclose(t, np.sum(want), rtol=1e-5)


def test_staged_gradient_cast_to_a_float32_argument():
    # a float64 constant promotes the computation; the gradient is cast back to the
    # argument's float32, which on a traced gradient called numpy.asarray (StagingError)
    f = lambda x: anp.sum(nd.where(x > 0.5, np.float64(0.5) * x, x))    # noqa: E731
    x = np.array([0.17, 1.44, -0.99], np.float32)
    g = nd.stage(nd.gradient_r(f))
    for _ in range(2):
        got = g(x)
        assert got.dtype == np.float32 and got.tolist() == [1.0, 0.5, 1.0]


def test_program_transforms_of_a_loop_choosing_with_where():
    # the transforms evaluate a recorded select on Bundles of tracers: it chose with a
    # Python if (a guard, refused inside a loop body) instead of nestad.where
    def f(x):
        def body(s):
            return (s[0] + 1.0, 0.6 * s[1] + 0.3 * nd.where(s[1] > 0.1, s[1] * 2.0, nd.sin(s[1])))
        return nd.while_loop(lambda s: s[0] < 3.0, body, (0.0, x))[1]
    program = nd.trace(f, 0.3)
    for x in (0.3, -0.4):
        value, tangent = nd.jvp(f, (x,), (1.0,))
        assert program.jvp()(x, 1.0) == (value, tangent)
        assert program.vjp()(x, 1.0) == (value, nd.gradient_r(f)(x))


# ---------------------------------------------------------------- numpy's values

def test_float_power_has_numpys_values():
    # it was power of float64 operands, whose loop rounds differently from float_power's
    # in the last bit for one pair in twenty
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.5, 2.5, 200), rng.uniform(-2, 2, 200)
    want = np.float_power(x, y)
    assert np.sum(np.power(x, y) != want) > 0          # (the case is exercised)
    p, t = nd.jvp(anp.float_power, (x, y), (np.ones(200), np.zeros(200)))
    assert p.tobytes() == want.tobytes()
    np.testing.assert_allclose(t, y * x ** (y - 1), rtol=1e-14)
    assert nd.vjp(anp.float_power, x, y)[0].tobytes() == want.tobytes()


# ---------------------------------------------------------------- constants of no degree of freedom

NO_DOF = {
    'var ddof > n': (lambda x: anp.var(x, axis=0, ddof=5), lambda x: np.var(x, axis=0, ddof=5)),
    'std ddof = n': (lambda x: anp.std(x, axis=(0, 1), ddof=3), lambda x: np.std(x, axis=(0, 1), ddof=3)),
    'cov ddof = n': (lambda x: anp.cov(x.T, ddof=3), lambda x: np.cov(x.T, ddof=3)),
    'nanmean all-nan slice': (lambda x: anp.nanmean(x, axis=0), lambda x: np.nanmean(x, axis=0)),
}


@pytest.mark.parametrize("name", sorted(NO_DOF))
def test_statistics_without_degrees_of_freedom_are_constants_in_every_mode(name):
    # numpy's inf or nan there (a division by 0): forward and reverse mode gave different
    # inf and nan derivatives; they are constants, derivative 0 (as JAX gives)
    f, npf = NO_DOF[name]
    x = np.array([[1.97, np.nan], [1.45, np.nan], [-0.61, np.nan]])
    if not name.startswith('nanmean'):
        x = x[:, :1]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        want = npf(x)
        p = nd.jvp(f, (x,), (np.ones_like(x),))[0]
        assert np.asarray(p).tobytes() == np.asarray(want).tobytes()     # nan's sign bit too
        F = lambda x: anp.sum(f(x))                 # noqa: E731  (inf or nan itself)
        g, h = modes(F, x)
    bad = ~np.isfinite(want)
    for a in g:
        assert a.shape == x.shape and not np.any(np.isnan(a))
        if name.startswith('nanmean'):
            np.testing.assert_array_equal(a[:, 1], 0.0)             # the all-nan slice
        else:
            assert bad.all() and np.all(a == 0.0)
    for a in h:
        assert not np.any(np.isnan(a))


def test_nestad_numpy_on_traced_scalars_takes_the_scalar_rules():
    # anp.divide of perturbed Python floats takes the scalar rules eagerly; traced, its
    # scalar tracers took the array rules, which round differently: the staged second
    # derivative was 1.1e-16 where eager code gives 0.0 (test_staging's property test)
    def f(x):
        r = anp.divide(x, x)
        return (r + 1.0) + nd.sin(r)
    for outer in (nd.derivative, nd.gradient_r):
        for inner in (nd.derivative, nd.gradient_r):
            op = outer(inner(f))
            staged = nd.stage(op)
            assert staged(1.375) == staged(1.375) == op(1.375) == 0.0


def test_take_with_boolean_indices_takes_entries_0_and_1():
    # numpy.take reads bools as the indices 0 and 1; the gather used them as a mask
    a = np.array([10.0, 20.0, 30.0])
    i = np.array([True, False, True])
    p, t = nd.jvp(lambda a: anp.take(a, i), (a,), (np.array([1.0, 2.0, 3.0]),))
    np.testing.assert_array_equal(p, np.take(a, i))
    np.testing.assert_array_equal(t, [2.0, 1.0, 2.0])
    np.testing.assert_array_equal(nd.gradient_r(lambda a: anp.sum(anp.take(a, i)))(a), [1.0, 2.0, 0.0])
    with pytest.raises(TypeError):
        nd.gradient_r(lambda a: anp.sum(anp.take(a, np.array([1.0, 2.0]))))(a)


@pytest.mark.parametrize("axis, wshape", [((1, 2), (3, 2)), ((2, 1), (2, 3)), ((2,), (2,)),
                                          (-1, (2,)), (0, (2,))])
def test_average_weights_along_several_axes(axis, wshape):
    # numpy broadcasts weights along a tuple of axes; nestad refused them (TypeError)
    a = np.arange(12.0).reshape(2, 3, 2)
    w = np.arange(1.0, 1.0 + np.prod(wshape)).reshape(wshape)
    for returned in (False, True):
        want = np.average(a, axis=axis, weights=w, returned=returned)
        got = nd.jvp(lambda a, w: anp.average(a, axis=axis, weights=w, returned=returned),
                     (a, w), (a, w))[0]
        for g, x in zip(got if returned else (got,), want if returned else (want,)):
            assert np.asarray(g).tobytes() == np.asarray(x).tobytes()
    g = nd.gradient_r(lambda w: anp.sum(anp.average(a, axis=axis, weights=w)))(w)
    h = 1e-6
    for idx in np.ndindex(*wshape):
        e = np.zeros(wshape)
        e[idx] = h
        fd = (np.sum(np.average(a, axis=axis, weights=w + e)) -
              np.sum(np.average(a, axis=axis, weights=w - e))) / (2 * h)
        assert abs(g[idx] - fd) < 1e-6


def test_average_of_integers_with_narrow_weights_is_float64():
    a = np.array([1, 2, 3], np.int8)
    w = np.array([1.0, 2.0, 3.0], np.float16)
    got = nd.jvp(lambda w: anp.average(a, weights=w), (w,), (w,))[0]
    assert got.dtype == np.average(a, weights=w).dtype == np.float64


def test_nanstd_without_degrees_of_freedom_stages():
    # its masks are traced in staged code: `~` on them raised TypeError
    x = np.array([[-0.15], [-0.11], [-1.84]])
    for ddof in (0, 5):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            want = np.nanstd(x, axis=-1, ddof=ddof)
            staged = nd.stage(lambda x: anp.nanstd(x, axis=-1, ddof=ddof))
            for _ in range(2):
                assert staged(x).tobytes() == want.tobytes()
            g = nd.stage(nd.gradient_r(lambda x: anp.sum(anp.nanstd(x, axis=-1, ddof=ddof))))
            np.testing.assert_array_equal(g(x), 0.0)


# ---------------------------------------------------------------- pinv with a cut-off

def _fd_grad(F, x, h=1e-6):
    g = np.zeros(x.size)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        e = e.reshape(x.shape)
        g[k] = (F(x + e) - F(x - e)) / (2 * h)
    return g.reshape(x.shape)


@pytest.mark.parametrize("case", ["rcond", "rtol", "hermitian", "stack"])
def test_pinv_that_drops_a_singular_value_differentiates_its_truncation(case):
    # pinv(a, rcond) with a cut-off above a nonzero singular value is the pseudo-inverse of
    # the truncation A_k = U S_k V^T: the Golub-Pereyra rule applied to a itself gave a
    # derivative 60% off (JAX gives the same wrong numbers)
    w = np.array([[1.0, -2.0], [0.5, 3.0]])
    x = np.array([[0.488, 0.790], [-1.931, 1.941]])          # singular values 2.75, 0.90
    kw = {'rcond': 0.572}
    if case == 'rtol':
        kw = {'rtol': 0.572}
    elif case == 'hermitian':
        x = np.array([[2.0, 0.3, 0.1], [0.3, -1.0, 0.2], [0.1, 0.2, 0.05]])
        w = np.arange(9.0).reshape(3, 3)
        kw = {'rcond': 0.1, 'hermitian': True}
    elif case == 'stack':                                    # ranks 1 and 2
        x = np.stack([x, np.array([[1.0, 0.2], [0.1, 1.5]])])
    F = lambda a: anp.sum(anp.linalg.pinv(a, **kw) * w)       # noqa: E731
    fd = _fd_grad(lambda a: np.sum(np.linalg.pinv(a, **kw) * w), x)
    g, h = modes(F, x)
    for a in g + [nd.stage(nd.gradient_r(F))(x)]:
        np.testing.assert_allclose(a, fd, rtol=1e-6, atol=1e-8)
    for a in h[1:]:
        np.testing.assert_allclose(a, h[0], rtol=1e-8, atol=1e-10)
    fdh = np.moveaxis(np.array([(nd.gradient_r(F)(x + 1e-5 * e) - nd.gradient_r(F)(x - 1e-5 * e)) / 2e-5
                                for e in np.eye(x.size).reshape((x.size,) + x.shape)]), 0, -1)
    np.testing.assert_allclose(h[0], fdh.reshape(h[0].shape), rtol=1e-5, atol=1e-7)


def test_zero_dimensional_pad_and_median():
    # numpy pads a 0-d array along none of its axes (nestad's frame failed: ValueError),
    # and median of a 0-d array over axis 0 is numpy's AxisError (nestad returned the value)
    x = np.array(1.5)
    for kw in ({}, {'mode': 'edge'}, {'constant_values': 2.0}):
        p, t = nd.jvp(lambda x: anp.pad(x, 1, **kw), (x,), (np.array(1.0),))
        assert np.asarray(p).tobytes() == np.pad(x, 1, **kw).tobytes() and t == 1.0
    for axis in (0, -1, (0,)):
        with pytest.raises(np.exceptions.AxisError if hasattr(np, 'exceptions') else IndexError):
            nd.gradient_r(lambda x: anp.median(x, axis=axis))(x)
    assert nd.gradient_r(anp.median)(x) == 1.0


# ---------------------------------------------------------------- generated code of array primitives

BINARY_UFUNCS = ['maximum', 'minimum', 'hypot', 'arctan2', 'logaddexp', 'mod', 'add', 'subtract',
                 'multiply', 'divide']


@pytest.mark.parametrize("name", BINARY_UFUNCS)
def test_staged_binary_ufuncs_of_arrays(name):
    # their generated code passed numpy's function its first operand only (TypeError from
    # the second call on, when the compiled program runs)
    fn = getattr(anp, name)
    f = lambda x, y: anp.sum(fn(x, y) * x)                      # noqa: E731
    x, y = np.array([0.5, -1.5, 2.0]), np.array([1.25, 0.75, -0.5])
    staged = nd.stage(f)
    grad = nd.stage(nd.gradient_r(f, argnums=(0, 1)))
    for _ in range(3):
        assert staged(x, y) == f(x, y)
        for a, b in zip(grad(x, y), nd.gradient_r(f, argnums=(0, 1))(x, y)):
            np.testing.assert_allclose(a, b, rtol=1e-15)


WEAK_AND_STRONG = {
    # numpy.multiply of Python floats is a float64 scalar (numpy promotes a float32 array
    # with it); the generated code wrote an operator, whose Python float it does not
    'x * anp.multiply(s, 2.0)': lambda x, s: x * anp.multiply(s, 2.0),
    'x * anp.maximum(s, 0.1)': lambda x, s: x * anp.maximum(s, 0.1),
    'x + anp.divide(s, 4.0)': lambda x, s: x + anp.divide(s, 4.0),
    # a float32 scalar times a Python float stays float32; the tracer's identity took the
    # Python float for float64 and turned the float32 constant into a Python float
    'anp.sum(x) * s tangent': lambda x, s: nd.jvp(lambda x, s: anp.sum(x) * s * np.ones(3), (x, s),
                                                   (np.array([0.1, 0.2, -0.3]), 0.6))[1],
}


@pytest.mark.parametrize("name", sorted(WEAK_AND_STRONG))
def test_staged_scalars_promote_as_eager_ones(name):
    f = WEAK_AND_STRONG[name]
    x, s = np.array([-0.035, 0.699, -1.408], np.float32), 0.55
    want = f(x, s)
    staged = nd.stage(f)
    for _ in range(3):
        got = staged(x, s)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_staged_numpy_divide_of_python_floats_by_zero_is_ieee():
    f = lambda s: anp.divide(s, 0.0) + anp.divide(1.0, s)        # noqa: E731
    staged = nd.stage(f)
    with np.errstate(divide='ignore'):
        for s in (0.5, 0.5, -0.5):
            assert staged(s) == f(s)


# ---------------------------------------------------------------- norm's values

def test_default_norm_of_strided_arrays_is_numpys():
    # numpy's 2-norm of all of x sums in x's memory order (ravel(order='K')); nestad raveled
    # in C order: for a transposed or strided x one result in five differed in the last bit
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 5))
    for v in (a, np.asfortranarray(a), a.transpose(1, 0, 2), a[::-1], a[:, ::2],
              a.transpose(2, 0, 1)[::-1, :, ::-1]):
        staged = nd.stage(anp.linalg.norm)
        for got in (nd.jvp(anp.linalg.norm, (v,), (np.ones_like(v),))[0], staged(v), staged(v)):
            assert got == np.linalg.norm(v)
    x = rng.standard_normal((2, 3))
    n = np.linalg.norm(x)
    np.testing.assert_allclose(nd.gradient_r(anp.linalg.norm)(x), x / n, rtol=1e-15)
    H = (np.eye(6) / n - np.outer(x.ravel(), x.ravel()) / n ** 3).reshape(2, 3, 2, 3)
    np.testing.assert_allclose(nd.hessian(anp.linalg.norm)(x), H, rtol=1e-13)


@pytest.mark.parametrize("ord_", [1.5, 3, -1, -2, 0.5])
def test_p_norms_take_numpys_scalar_power(ord_):
    # numpy raises the reduced sum (a numpy scalar) to 1/p with its scalar power, which can
    # differ in the last bit from the power ufunc that staged code called
    x = np.array([-1.8891342738022927, 1.0462466610441186, -1.3642185611535873])
    for v in (x, x.astype(np.float32)):
        want = np.linalg.norm(v, ord=ord_)
        staged = nd.stage(lambda v: anp.linalg.norm(v, ord=ord_))
        for got in (nd.jvp(lambda v: anp.linalg.norm(v, ord=ord_), (v,), (v,))[0], staged(v), staged(v)):
            assert np.asarray(got).dtype == want.dtype and got == want


@pytest.mark.parametrize("name", ["nanmax", "nanmin"])
def test_nanmax_nanmin_keep_numpys_signed_zeros(name):
    # numpy's value is fmax.reduce (fmin), which keeps another of 0.0 and -0.0 than max
    x = np.array([[0.0, -0.0, np.nan], [-0.0, 0.0, 1.0], [np.nan, np.nan, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for axis in (None, 0, 1, -1):
            want = getattr(np, name)(x, axis=axis)
            f = lambda x: getattr(anp, name)(x, axis=axis)              # noqa: E731
            staged = nd.stage(f)
            for got in (nd.jvp(f, (x,), (np.ones_like(x),))[0], staged(x), staged(x)):
                assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
        g = [op(lambda x: anp.sum(getattr(anp, name)(x[:2], axis=1)))(x) for op in
             (nd.gradient_r, nd.gradient_f)]
    np.testing.assert_array_equal(g[0], g[1])
    np.testing.assert_array_equal(g[0][:2].sum(axis=1), [1.0, 1.0])    # the tie split, kept


def test_fmod_of_python_floats_by_zero():
    # its rule divided the primals with Python's /, which raised ZeroDivisionError at y = 0
    with np.errstate(invalid='ignore'):
        value, tangent = nd.jvp(anp.fmod, (1.5, 0.0), (1.0, 1.0))
        assert np.isnan(value) and np.isnan(np.fmod(1.5, 0.0))
        gx, gy = nd.gradient_r(anp.fmod, argnums=(0, 1))(1.5, 0.0)
    assert gx == 1.0 and gy == -np.inf
    assert nd.gradient_r(anp.fmod, argnums=(0, 1))(1.5, 0.4) == (1.0, -3.0)


def test_loop_state_integer_carrying_a_derivative_is_refused_by_name():
    # where(c, 1, x) is the integer 1 carrying x's run: the loop's rules crashed with
    # StopIteration or "NoneType + list"; now a clear error.  Eagerly too (issue 14: the
    # eager loop checks the body keeps the state's dtypes, as the staged one does), and
    # the state started as a float gives the answer.
    def g(x, one=1):
        state = nd.while_loop(lambda s: s[0] < 3.0,
                              lambda s: (s[0] + 1.0, 0.6 * s[1] + 0.3 * s[2], s[2]),
                              (0.0, nd.where(x > 0, one, x), x))
        return state[1] * x
    with pytest.raises(nd.InvalidInputError, match="from int64.* into float64.*start a float"):
        nd.gradient_r(g)(0.5)
    assert nd.gradient_r(lambda x: g(x, 1.0))(0.5) == pytest.approx(0.804)
    for op in (lambda: nd.stage(nd.gradient_r(g))(0.5), lambda: nd.gradient_f(nd.stage(g))(0.5),
               lambda: nd.stage(lambda x: nd.jvp(g, (x,), (1.0,)))(0.5)):
        with pytest.raises(nd.InvalidInputError, match="integer that carries a derivative"):
            op()


ZERO_D = ['squeeze(x, 0)', 'squeeze(x, -1)', 'take(x, 0, axis=0)', 'take(x, [0, 0], axis=-1)',
          'repeat(x, 2, axis=0)', 'cumprod(x, axis=-1)', 'nancumprod(x, axis=0)', 'var(x, axis=0)',
          'std(x, axis=0)', 'linalg.norm(x, axis=0)', 'linalg.vector_norm(x, axis=0)', 'rot90(x)',
          'partition(x, 0)']


@pytest.mark.parametrize("expr", ZERO_D)
def test_zero_dimensional_arrays_with_an_axis_as_numpy(expr):
    # numpy takes a 0-d array as 1-d in take, repeat, cumprod and squeeze over axis 0 or -1,
    # and raises AxisError (ValueError) in var, std, norm, rot90 and partition: nestad
    # raised, computed a value, or failed with 'integer modulo by zero'
    x = np.array(1.5)
    try:
        want = eval('np.' + expr)
    except Exception as e:               # noqa: BLE001
        with pytest.raises(type(e)):
            nd.jvp(lambda x: eval('anp.' + expr), (x,), (np.array(1.0),))
        return
    got, tangent = nd.jvp(lambda x: eval('anp.' + expr), (x,), (np.array(1.0),))
    assert np.shape(got) == np.shape(want) and np.array_equal(got, want)
    assert np.shape(tangent) == np.shape(want)


def test_numba_backend_runs_float32_programs_as_python():
    # numba types float32 times a Python float as float64 (numpy keeps float32): its
    # numbers differed from the Python backend's in the 8th digit
    pytest.importorskip('numba')
    f = lambda x: (0.25 * x[1]) / (1.0 + 0.25 * 0.25)            # noqa: E731
    x = np.array([-0.38560754, -0.2233524, 0.34208003], np.float32)
    staged = nd.stage(f, backend='numba')
    from nestad.staging.numba_backend import NumbaFallbackWarning
    with pytest.warns(NumbaFallbackWarning, match='float32'):
        staged(x)
        got = staged(x)
    assert got.dtype == f(x).dtype and got == f(x)
