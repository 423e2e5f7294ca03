"""Array jets on a stacked order axis (nestad/taylor_stack.py): the stacked rules against
the coefficient-wise ones (``taylor.RULES``, the path with the stacked table emptied) and
nested ``derivative``, at orders up to 8, under every nesting; the staged jet's size not
growing with the order; non-finite coefficients kept where the coefficient-wise path has
them."""
import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import taylor

A0 = np.linspace(0.4, 1.6, 6)
V = np.cos(np.arange(6.0))
M = np.sin(np.arange(12.0)).reshape(3, 4) + 1.5
I_LOW = np.array([[0, 1, 2], [2, 1, 0]])


def program(t):
    """Every stacked rule: linear and shape functions, products of a jet and a constant
    and of two jets (elementwise with broadcasting, matmul, dot), division by a constant,
    squares, exp and log, where, and indexing (basic and advanced)."""
    x = A0 + t * V                                   # (6,)
    y = anp.exp(0.3 * x) - x[::-1] / 3.0             # exp, getitem, divide by a constant
    z = anp.concatenate([x[:1], y[1:] * x[:-1]])     # two jets' product, concatenate
    w = anp.reshape(z, (2, 3)).T                     # (3, 2)
    u = w @ anp.reshape(x[:4], (2, 2))               # matmul of two jets, (3, 2)
    v = anp.where(np.array([[True, False]] * 3), u, -u) + anp.log(1.0 + x[:3, None] ** 2)
    s = anp.sum(v * w, axis=0) + anp.cumsum(x)[I_LOW].sum(axis=1)
    return anp.dot(s, x[2:4]) + anp.sum((M @ x[:4]) * z[:3])


def coefficientwise(monkeypatch):
    monkeypatch.setattr(taylor, 'STACKED_RULES', {})


def test_stacked_rules_equal_the_coefficientwise_ones_to_order_8(monkeypatch):
    stacked = nd.derivatives(program, 8)(0.1)
    coefficientwise(monkeypatch)
    each = nd.derivatives(program, 8)(0.1)
    np.testing.assert_allclose(stacked, each, rtol=1e-12, atol=1e-12 * max(abs(v) for v in each))


def test_stacked_rules_against_nested_derivative():
    ours = nd.derivatives(program, 4)(0.1)
    g = program
    for k in range(1, 5):
        g = nd.derivative(g)
        assert abs(ours[k] - g(0.1)) <= 1e-12 * max(1.0, abs(ours[k])), k


def test_the_stacked_rules_are_the_ones_applied(monkeypatch):
    """A jet of arrays through linear functions and products stays stacked: no
    coefficient is read out one by one (the tuple of higher coefficients is never made)."""
    made = []
    series = taylor.ArrayJet.series

    def spy(self):
        made.append(self)
        return series.fget(self)
    monkeypatch.setattr(taylor.ArrayJet, 'series', property(spy))

    def f(t):
        x = A0 + t * V
        return anp.concatenate([x[:1], x[1:] * x[:-1]]) @ anp.concatenate([M.T @ x[:3], x[:2]]) / 2.0
    nd.derivatives(f, 6)(0.1)
    assert made == []


@pytest.mark.parametrize("k", [2, 8])
def test_staged_jet_does_not_grow_with_the_order(k):
    """Linear functions, products and where take as many equations at every order."""
    def f(t):
        x = A0 + t * V
        y = x
        for _ in range(3):
            y = anp.concatenate([x[:1], x[1:] * y[:-1]]) * 0.5 + y
        return anp.sum(anp.where(x > 1.0, y, -y))
    counts = {}
    for order in (1, k):
        s = nd.stage(nd.derivatives(f, order))
        assert np.allclose(s(0.2), nd.derivatives(f, order)(0.2), rtol=1e-13)
        counts[order] = len(s.programs()[0].eqns)
    # (the output's K + 1 coefficients read out of the stack: one equation each)
    assert counts[k] - counts[1] <= 2 * (k - 1), counts


def test_nesting_with_every_operator(monkeypatch):
    """Jets whose stacks hold other runs' values: derivative of a jet output, gradient_r of
    one, jet inside derivative, vmap of jet, jet of vmap, jet of jet; each against the
    coefficient-wise path."""
    def jet_out(a, k=5):
        return nd.derivatives(lambda t: program(t * a + 0.05), k)(0.1)

    def cases():
        return [nd.derivative(lambda a: jet_out(a)[5])(1.3),
                nd.gradient_r(lambda a: jet_out(a, 3)[3])(1.3),
                nd.derivative(lambda a: nd.jet(lambda x: anp.sum(anp.exp(x * a) * x[::-1]),
                                               (A0,), ((V, V, 0 * V),))[1][2])(0.7),
                nd.vmap(lambda a: jet_out(a, 4)[4])(np.array([0.9, 1.1])),
                nd.derivatives(lambda t: anp.sum(nd.vmap(lambda r: anp.log(r + t * V) * r)(M[:, :2].T @ np.ones((3, 6)))), 5)(0.2),
                nd.derivatives(lambda s: nd.derivatives(lambda t: anp.sum(anp.exp((A0 + s * V) * t) * (A0 + t * V)), 3)(0.3)[3], 3)(0.4)]
    stacked = cases()
    coefficientwise(monkeypatch)
    each = cases()
    for a, b in zip(stacked, each):
        np.testing.assert_allclose(np.ravel(a), np.ravel(b), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_products_keep_non_finite_coefficients_where_they_are(monkeypatch, k):
    """A product of two jets whose last coefficients are inf: the lower coefficients stay
    finite, the last are what the coefficient-wise product gives (no padding of the
    stacked product is ever multiplied: a 0-1 contraction would make every coefficient
    nan through 0 * inf)."""
    def f(a):
        return a * anp.exp(0.1 * a) @ np.ones((2, 2))
    series = [np.array([1.0, -1.0])] * (k - 1) + [np.array([np.inf, 1.0])]
    args = ((np.array([0.5, 2.0]),), (series,))
    with np.errstate(all='ignore'):
        y, out = nd.jet(f, *args)
        coefficientwise(monkeypatch)
        y_each, out_each = nd.jet(f, *args)
    assert np.all(np.isfinite(y)) and all(np.all(np.isfinite(d)) for d in out[:-1])
    assert not np.any(np.isfinite(out[-1]))
    for a, b in zip([y, *out], [y_each, *out_each]):
        np.testing.assert_allclose(a, b, rtol=1e-13)            # (nan equals nan)


def test_scalar_jets_keep_their_lists():
    """Jets of numbers never meet the stacked rules (their list of coefficients is the fast path)."""
    out = nd.derivatives(lambda t: nd.sin(t) * nd.exp(t), 6)(0.3)
    assert all(isinstance(v, float) for v in out)


def test_float32_stays_float32():
    x = np.linspace(0.5, 1.0, 3, dtype=np.float32)
    for f in (lambda a: anp.exp(a) * a + 1.0, lambda a: anp.log(a) * 2 - np.float32(1),
              lambda a: anp.where(a > 0.7, a, 0.0) ** 2 / 3.0):
        y, s = nd.jet(f, (x,), ((x, x, x),))
        assert y.dtype == np.float32 and all(t.dtype == np.float32 for t in s)


def test_products_past_the_pairs_limit_are_left_to_the_coefficientwise_rule(monkeypatch):
    """The Cauchy product holds all its pairs at once: past ``PAIRS_LIMIT`` numbers a
    product of two jets declines to the coefficient-wise rule (O(K) memory), with the
    same answer."""
    from nestad import taylor_stack
    stacked = nd.derivatives(program, 6)(0.1)
    calls = []
    cauchy = taylor_stack.cauchy
    monkeypatch.setattr(taylor_stack, 'cauchy', lambda *a: calls.append(a) or cauchy(*a))
    monkeypatch.setattr(taylor_stack, 'PAIRS_LIMIT', 27)
    small = nd.derivatives(program, 6)(0.1)
    assert calls == []
    np.testing.assert_allclose(small, stacked, rtol=1e-12, atol=1e-12 * max(abs(v) for v in stacked))


def test_matrix_products_of_stacks_have_at_most_three_axes(monkeypatch):
    """A matrix product on the stacks folds the leading axes into one (numba's ``@`` takes
    2-d and 3-d arrays: the batch rule's 4-d stacks made the staged jets of GradBench's
    gmm fall back to Python), with the coefficient-wise answer."""
    X0, V3 = np.sin(np.arange(60.0)).reshape(4, 5, 3), np.cos(np.arange(60.0)).reshape(4, 5, 3)
    Q0, W = np.sin(np.arange(36.0) + 1).reshape(4, 3, 3), np.cos(np.arange(36.0) + 1).reshape(4, 3, 3)
    C2 = M[:, :3]

    def f(t):
        x, q = X0 + t * V3, Q0 + t * W
        return (anp.sum(x @ q) + anp.sum(x @ C2) + anp.sum(x @ Q0) + anp.sum(C2 @ q)
                + anp.sum(X0 @ q) + anp.sum((x @ q) @ anp.swapaxes(q, 1, 2)))
    for k in (1, 3):
        s = nd.stage(nd.derivatives(f, k))
        got = s(0.2)
        for e in s.programs()[0].eqns:
            if getattr(e.op, 'qualname', None) == 'numpy.matmul':
                assert all(len(getattr(a, 'shape', ())) <= 3 for a in e.args), [a for a in e.args]
        stacked = nd.derivatives(f, k)(0.2)
        np.testing.assert_allclose(got, stacked, rtol=1e-13)
    with monkeypatch.context() as m:
        coefficientwise(m)
        each = nd.derivatives(f, 3)(0.2)
    np.testing.assert_allclose(stacked, each, rtol=1e-12)


X2, V2 = np.array([0.7, 1.3]), np.array([0.4, -0.9])


def recurrences(t):
    """Every recurrence on the stacks (exp, log, sin, cos, sinh, cosh, division by a jet,
    its divisor and dividend broadcast against each other and against a constant) and a
    traced constant shifting a jet (logsumexp's maximum)."""
    x = X2 + t * V2
    s = anp.sum(x)
    y = anp.exp(0.4 * x) * anp.sin(x) + anp.cos(x[::-1]) / (1.5 + anp.sinh(0.5 * x)) \
        + anp.log(x) * anp.cosh(0.3 * x)
    return anp.sum(y / s) + anp.sum(np.ones((2, 2)) / (x + s)) + anp.sum(s / x[:, None]) \
        + anp.logsumexp(y * x)


def lean(t):
    """Each recurrence once (nested ``derivative`` 8 deep costs 3^8 per operation)."""
    x = X2 + t * V2
    return anp.sum(anp.exp(0.4 * x) * anp.sin(x) + anp.cos(x) / anp.sinh(0.5 * x + 1.0)
                   + anp.log(x) / anp.cosh(0.3 * x))


def test_recurrences_on_the_stack_against_the_coefficientwise_rules_and_nested_derivative(monkeypatch):
    stacked = {k: nd.derivatives(recurrences, k)(0.1) for k in (1, 2, 3, 8)}
    staged = nd.stage(nd.derivatives(recurrences, 8))(0.1)
    np.testing.assert_allclose(staged, stacked[8], rtol=1e-13)
    g = lean
    for _ in range(8):
        g = nd.derivative(g)
    ours = nd.derivatives(lean, 8)(0.1)[8]
    assert abs(ours - g(0.1)) <= 1e-12 * abs(ours)
    coefficientwise(monkeypatch)
    for k, got in stacked.items():
        each = nd.derivatives(recurrences, k)(0.1)
        np.testing.assert_allclose(got, each, rtol=1e-12, atol=1e-12 * max(abs(v) for v in each))


def test_recurrences_stay_stacked(monkeypatch):
    """The recurrences run on the stacks: no jet of arrays is unstacked into its terms."""
    made = []
    series = taylor.ArrayJet.series

    def spy(self):
        if self.shape:
            made.append(self)
        return series.fget(self)
    monkeypatch.setattr(taylor.ArrayJet, 'series', property(spy))
    nd.derivatives(recurrences, 5)(0.1)
    assert made == []


def test_recurrences_are_one_equation_at_every_order():
    """Traced, each recurrence of float64 stacks is one equation past order 1 (a
    ``series`` primitive); spelled out (float32) it adds two array calls per order (a
    product and a sum on the stack: slices are views, not counted), past the fixed ones."""
    def f(t, dtype):
        x = (X2 + t * V2).astype(dtype)
        return anp.sum(anp.exp(x) + anp.log(x) + 1.0 / x + anp.sin(x))

    def calls(k, dtype=np.float64):
        program = nd.trace(nd.derivatives(lambda t: f(t, dtype), k), 0.1)
        return sum(1 for e in program.eqns
                   if getattr(e.op, 'qualname', None) not in ('numpy.getitem', 'mul'))
    assert calls(8) == calls(4) == calls(2)
    # exp, log and the division 2 per order, sin with its cos 4 (the output's scalings:
    # scalar 'mul', not counted)
    assert 0 < calls(8, np.float32) - calls(4, np.float32) <= 4 * (2 + 2 + 2 + 4)


@pytest.mark.parametrize("k", [1, 3])
def test_recurrences_keep_non_finite_coefficients_where_they_are(monkeypatch, k):
    """At a singular point (log and division at 0) and with an inf input coefficient, each
    stacked coefficient is finite exactly where the coefficient-wise one is (never a finite
    number for a nan or inf), and equal to it there."""
    def f(a):
        return anp.concatenate([anp.log(a), 1.0 / a, a / a[::-1], anp.exp(a) * anp.sin(a),
                                anp.cosh(a)])
    series = [np.array([1.0, -1.0])] * (k - 1) + [np.array([np.inf, 1.0])]
    with np.errstate(all='ignore'):
        for x in (np.array([0.0, 2.0]), np.array([0.5, 2.0])):
            args = ((x,), (series,))
            y, out = nd.jet(f, *args)
            with monkeypatch.context() as m:
                coefficientwise(m)
                y_each, out_each = nd.jet(f, *args)
            for a, b in zip([y, *out], [y_each, *out_each]):
                assert np.array_equal(np.isfinite(a), np.isfinite(b)), (x, a, b)
                np.testing.assert_allclose(a[np.isfinite(b)], b[np.isfinite(b)], rtol=1e-13)


def test_recurrences_past_the_pairs_limit_take_their_terms_order_by_order(monkeypatch):
    """Past ``PAIRS_LIMIT`` a recurrence makes its weighted terms per order instead of one
    (K - 1) x (K - 1) grid, with the same answer; float32 stays float32."""
    from nestad import taylor_stack
    stacked = nd.derivatives(recurrences, 6)(0.1)
    monkeypatch.setattr(taylor_stack, 'PAIRS_LIMIT', 3)
    small = nd.derivatives(recurrences, 6)(0.1)
    np.testing.assert_allclose(small, stacked, rtol=1e-13, atol=1e-13 * max(abs(v) for v in stacked))
    x = np.linspace(0.5, 1.0, 3, dtype=np.float32)
    for f in (lambda a: anp.exp(a) + anp.log(a), lambda a: anp.sin(a) / a + anp.cosh(a)):
        y, s = nd.jet(f, (x,), ((x, x, x),))
        assert y.dtype == np.float32 and all(t.dtype == np.float32 for t in s)


def test_sums_over_a_short_last_axis_are_slices_added_with_the_same_bits(monkeypatch):
    """A sum over a short last axis of a stack (``SHORT_SUM``) is its slices added (numpy's
    reduction of a short contiguous axis costs per output): the same bits as the
    coefficient-wise sums, keepdims and negative axes too; other sums keep the reduction."""
    rng = np.random.default_rng(1)
    X0, V3 = rng.normal(size=(4, 20, 3)), rng.normal(size=(4, 20, 3))

    def f(t):
        x = (X0 + t * V3) * (X0 - t)
        return [anp.sum(x * x, axis=2), anp.sum(x, axis=-1, keepdims=True), anp.sum(x, axis=1),
                anp.sum(x[:1, :2], axis=2)]
    stacked = nd.derivatives(f, 4)(0.3)
    s = nd.stage(nd.derivatives(f, 4))
    staged = s(0.3)
    reductions = [e.params['axis'] for e in s.programs()[0].eqns
                  if getattr(e.op, 'qualname', None) == 'numpy.sum']
    # (the stack's last axis is 3: only the sum into 2 x 5 numbers is still a reduction)
    assert [a for a in reductions if a in (3, -1, (3,), (-1,))] == [3], reductions
    coefficientwise(monkeypatch)
    each = nd.derivatives(f, 4)(0.3)
    for a, b, c in zip(stacked, each, staged):
        for u, v, w in zip(a, b, c):
            np.testing.assert_array_equal(u, v)
            np.testing.assert_array_equal(w, v)
