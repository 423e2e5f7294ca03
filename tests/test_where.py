"""``where``'s untaken branch and the double-where recipe (README, "Choosing with where").

Reverse mode sends a zero cotangent into the branch ``where`` does not take; if that branch's
derivative is infinite there (sqrt at -1 is nan, its derivative nan; log at 0), 0 * inf or
0 * nan is nan, as in JAX, autograd and PyTorch.  The recipe: give the branch a safe argument
where it is not taken, so that nothing infinite is computed; the result is the same and every
derivative is the taken branch's, in every mode."""
import math

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp


def naive(x):
    return nd.where(x > 0, nd.sqrt(x), 0.0)


def safe(x):
    return nd.where(x > 0, nd.sqrt(nd.where(x > 0, x, 1.0)), 0.0)


def safe_log(x):            # the same recipe for log at 0: log(x) where x > 0, else 0
    return nd.where(x > 0, nd.log(nd.where(x > 0, x, 1.0)), 0.0)


D, G = nd.derivative, nd.gradient_r
MODES = {
    'derivative': lambda f: D(f), 'gradient_r': lambda f: G(f),
    'gradient_f': lambda f: nd.gradient_f(f),
    'jvp': lambda f: (lambda x: nd.jvp(f, (x,), (1.0,))[1]),
    'vjp': lambda f: (lambda x: nd.vjp(f, x)[1](1.0)[0]),
    'ff': lambda f: D(D(f)), 'fr': lambda f: D(G(f)), 'rf': lambda f: G(D(f)),
    'rr': lambda f: G(G(f)),
    'staged gradient_r': lambda f: nd.stage(G(f)), 'staged rf': lambda f: nd.stage(G(D(f))),
    'gradient_r of staged': lambda f: G(nd.stage(f)),
}
SECOND = {'ff', 'fr', 'rf', 'rr', 'staged rf'}


def test_the_untaken_branch_makes_reverse_mode_nan():
    # the pitfall itself (so the recipe below is not a test that cannot fail)
    assert math.isnan(G(naive)(-1.0))
    assert D(naive)(-1.0) == 0.0          # forward mode selects the tangent: 0


@pytest.mark.parametrize('mode', sorted(MODES))
@pytest.mark.parametrize('f, x, first, second', [
    (safe, -1.0, 0.0, 0.0), (safe, 4.0, 0.25, -1.0 / 32.0),
    (safe_log, 0.0, 0.0, 0.0), (safe_log, -2.0, 0.0, 0.0), (safe_log, 2.0, 0.5, -0.25),
])
def test_the_double_where_gives_the_taken_branchs_derivative(mode, f, x, first, second):
    d = MODES[mode](f)
    for _ in range(2):                    # a staged function: the trace, then the program
        got = d(x)
        want = second if mode in SECOND else first
        assert got == want, (mode, x, got, want)
        if mode.startswith('staged') and f is safe and x < 0:   # traced at x < 0, run at x > 0
            assert d(4.0) == (-1.0 / 32.0 if mode in SECOND else 0.25)


@pytest.mark.parametrize('grad', [nd.gradient_r, nd.gradient_f, lambda f: nd.stage(nd.gradient_r(f))],
                         ids=['gradient_r', 'gradient_f', 'staged gradient_r'])
def test_the_double_where_on_arrays(grad):
    def f(x):
        ok = x > 0
        return anp.sum(anp.where(ok, anp.sqrt(anp.where(ok, x, 1.0)), 0.0))
    assert np.asarray(grad(f)(np.array([-1.0, 0.0, 4.0]))).tolist() == [0.0, 0.0, 0.25]
    naive_g = np.asarray(grad(lambda x: anp.sum(anp.where(x > 0, anp.sqrt(x), 0.0)))(
        np.array([-1.0, 4.0])))
    assert naive_g[1] == 0.25 and (naive_g[0] == 0.0 if grad is nd.gradient_f
                                   else np.isnan(naive_g[0]))     # forward mode selects
