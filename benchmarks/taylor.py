"""Taylor mode: the k-th derivative of a 14-operation scalar function, k = 1..12.

For each k: ``nd.derivatives(f, k)`` eagerly (one Taylor pass, O(k^2) per operation), the
same staged (``nd.stage``: first call with its trace, then per call), nested
``nd.derivative`` k times (3^k growth; up to k = 10), and JAX's ``jet`` (eager, and
``jax.jit`` of it: per call in steady state and the first call with its compile), all as
ratios to one plain-float call of f.  Every answer is checked against the eager jet
before it is timed.  The growth of the eager jet's cost is fitted as c k^p over
k = 4..12 (targets: p <= 2, at least 20x faster than nesting at k = 8 and 100x at k = 10).

    PYTHONPATH=$PWD python benchmarks/taylor.py [--quick]
"""
import math
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import nestad as nd  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _report import fmt_time, max_rel_diff, print_table  # noqa: E402

QUICK = "--quick" in sys.argv
X = 0.7
KS = range(1, 13)
NESTED_MAX = 8 if QUICK else 10


def f(x, m=nd):
    """14 operations: sin exp * x*x 1+ log +2 / + tanh sqrt * - /."""
    e = 1.0 + x * x
    return (m.sin(x) * m.exp(x) + m.log(e) / (x + 2.0) - m.tanh(x) * m.sqrt(e)) / e


def per_call(fn, budget=0.3, least=3):
    """Median seconds of one call of ``fn`` (calls repeated up to ``budget`` seconds)."""
    times = []
    end = time.perf_counter() + budget
    while len(times) < least or time.perf_counter() < end:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= 2000:
            break
    return statistics.median(times)


def once(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def nested(k):
    g = f
    for _ in range(k):
        g = nd.derivative(g)
    return g


def fit_exponent(ks, ts):
    p, _ = np.polyfit(np.log(ks), np.log(ts), 1)
    return p


def main():
    plain = per_call(lambda: f(X, math), budget=0.5, least=1000)
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        from jax.experimental.jet import jet as jjet
        jnp = jax.numpy
    except ImportError:
        jax = None
    rows, jet_times = [], []
    for k in KS:
        ours = nd.derivatives(f, k)(X)
        t_jet = per_call(lambda: nd.derivatives(f, k)(X))
        jet_times.append(t_jet)
        staged = nd.stage(nd.derivatives(f, k))
        t_first, first = once(lambda: staged(X))
        assert max_rel_diff(first, ours) < 1e-12
        t_staged = per_call(lambda: staged(X))
        row = [k, f"{t_jet / plain:.0f}", fmt_time(t_jet), fmt_time(t_first), f"{t_staged / plain:.0f}"]
        if k <= NESTED_MAX:
            g = nested(k)
            t_nest = per_call(lambda: g(X), budget=0.3, least=3) if k <= 8 else once(lambda: g(X))[0]
            assert max_rel_diff([g(X)], [ours[k]]) < 1e-9
            row += [f"{t_nest / plain:.0f}", f"{t_nest / t_jet:.1f}x"]
        else:
            row += ["-", "-"]
        if jax is not None:
            series = ((1.0,) + (0.0,) * (k - 1),)
            fj = lambda x: f(x, jnp)
            run = lambda: jjet(fj, (X,), series)
            _, js = run()
            assert max_rel_diff([float(v) for v in js], ours[1:]) < 1e-10
            t_jax = per_call(run, budget=0.5, least=3)
            jitted = jax.jit(lambda x: jjet(fj, (x,), series))
            t_compile, _ = once(lambda: jax.block_until_ready(jitted(X)))
            t_jit = per_call(lambda: jax.block_until_ready(jitted(X)))
            row += [f"{t_jax / t_jet:.1f}x", f"{t_jit / t_jet:.2f}x", f"{t_jit / t_staged:.1f}x",
                    fmt_time(t_compile)]
        rows.append(row)
    header = ["k", "jet/plain", "jet", "staged 1st call", "staged/plain", "nested/plain",
              "nested/jet", "JAX jet/jet", "JAX jit/jet", "JAX jit/staged", "JAX jit 1st call"]
    print(f"plain f: {fmt_time(plain)} per call; ratios are per call (median)")
    print_table(header[:len(rows[0])], rows)
    ks = [k for k in KS if k >= 4]
    p = fit_exponent(ks, jet_times[3:])
    print(f"\neager jet cost ~ k^{p:.2f} over k = 4..12 (fit of log time on log k)")


if __name__ == "__main__":
    main()
