"""Taylor mode: a Taylor-series ODE integrator, and the Laplacian of a small network.

(1) The logistic equation y' = y (1 - y), y(0) = 0.1, has the solution
    y(t) = 1 / (1 + 9 exp(-t)).  A Taylor-series method of order K takes, at each step, the
    solution's Taylor coefficients from the equation itself: if y(t0 + s) = sum_j c_j s^j,
    then c_{k+1} = [F(y)]_k / (k + 1), and ``nd.jet`` of F along the polynomial known so far
    gives [F(y)]_k.  The error at t = 4 falls at least as fast as h^K (checked: the fitted
    slope of log error on log h is above K - 1.5 for K = 4, 10, 16; at these large steps it
    is steeper still); the figure shows the error against the step size.

(2) The Laplacian (sum of the second derivatives) of a small tanh network f: R^4 -> R, by
    jet along each basis vector (one pass per direction, second order), equals the trace
    of ``nd.hessian``; ``nd.vmap`` of the jet gives all directions in one batched pass.
"""
import math
import os
from pathlib import Path

import numpy as np

import nestad as nd
import nestad.numpy as anp

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))


def F(y):
    return y * (1.0 - y)


def exact(t):
    return 1.0 / (1.0 + 9.0 * math.exp(-t))


def taylor_step(y0, h, K):
    """One step of the order-K Taylor method: the coefficients c_0..c_K, then the sum."""
    c = [y0, F(y0)]
    for k in range(1, K):
        series = [c[j] * math.factorial(j) for j in range(1, k + 1)]   # derivative-scaled
        _, fs = nd.jet(F, (y0,), (series,))
        c.append(fs[k - 1] / math.factorial(k) / (k + 1))               # [F(y)]_k / (k + 1)
    return sum(cj * h ** j for j, cj in reversed(list(enumerate(c))))


def integrate(T, n, K):
    y, h = 0.1, T / n
    for _ in range(n):
        y = taylor_step(y, h, K)
    return y


def laplacian_check():
    rng = np.random.default_rng(1)
    W1, b1, w2 = rng.normal(size=(8, 4)), rng.normal(size=8), rng.normal(size=8)
    f = lambda x: anp.dot(w2, anp.tanh(W1 @ x + b1))
    x = rng.normal(size=4)
    zero = np.zeros(4)
    by_jet = sum(nd.jet(f, (x,), ((e, zero),))[1][1] for e in np.eye(4))
    by_vmap = float(np.sum(nd.vmap(lambda e: nd.jet(f, (x,), ((e, zero),))[1][1])(np.eye(4))))
    by_hessian = float(np.trace(nd.hessian(f)(x)))
    # closed form: sum_i w2_i tanh''(z_i) |W1_i|^2, tanh'' = -2 tanh (1 - tanh^2)
    t = np.tanh(W1 @ x + b1)
    closed = float(np.sum(w2 * (-2 * t * (1 - t * t)) * np.sum(W1 ** 2, axis=1)))
    for v in (by_jet, by_vmap, by_hessian):
        assert abs(v - closed) <= 1e-12 * max(1.0, abs(closed)), (v, closed)
    print(f"Laplacian: jet {by_jet:.15f}  vmap(jet) {by_vmap:.15f}  trace(hessian) "
          f"{by_hessian:.15f}  closed form {closed:.15f}")


def main():
    T = 4.0
    results = {}
    for K in (4, 10, 16):
        ns = (2, 3, 4, 6, 8) if K > 4 else (8, 16, 32, 64)
        errs = [abs(integrate(T, n, K) - exact(T)) for n in ns]
        hs = [T / n for n in ns]
        results[K] = (hs, errs)
        usable = [(h, e) for h, e in zip(hs, errs) if e > 1e-14]
        slope = np.polyfit(np.log([h for h, _ in usable]), np.log([e for _, e in usable]), 1)[0]
        print(f"order {K:2d}: step sizes {['%.3g' % h for h in hs]} errors "
              f"{['%.1e' % e for e in errs]}  fitted slope {slope:.1f}")
        assert slope > K - 1.5, (K, slope)
    assert results[16][1][-1] < 1e-13
    laplacian_check()
    try:
        import matplotlib
        matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(5, 4))
    for K, (hs, errs) in results.items():
        ax.loglog(hs, np.maximum(errs, 1e-17), "o-", label=f"order {K}")
    ax.set_xlabel("step size h")
    ax.set_ylabel("|y(4) - exact|")
    ax.set_title("Taylor-series method on y' = y(1 - y)")
    ax.legend()
    FIGURES.mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(FIGURES / "taylor_ode.png")


if __name__ == "__main__":
    main()
