"""Implicit differentiation through ``nd.fixed_point``.

``nd.fixed_point(f, x0, *params)`` iterates x <- f(x, *params) to its fixed point x*.  Its
derivative is not that of the iterations but the implicit one: from x* = f(x*, p),

    dx*/dp = (I - df/dx)^-1 df/dp,

which nestad solves by iterating the tangent (forward) or adjoint (reverse) equation at x*.
The result is an ordinary differentiable function: it nests, to any order and pairing.

* DVL's example, sqrt by Heron's iteration x <- (x + a/x) / 2: sqrt'(a) = 1 / (2 sqrt a),
  sqrt''(a) = -1 / (4 a^(3/2)) (in all four pairings of derivative and gradient_r),
  sqrt'''(a) = 3 / (8 a^(5/2)), at a = 4, 9, 16; also staged (``nd.stage``), where the
  iterations become one compiled ``while_loop`` for every a.
* Kepler's equation E = M + e sin E: dE/dM = 1 / (1 - e cos E), dE/de = sin E / (1 - e cos E),
  d2E/dM2 = -e sin E / (1 - e cos E)^3.
* An equilibrium ("deep equilibrium") layer x* = tanh(W x* + U p): its Jacobian by
  ``jacobian_f`` and ``jacobian_r`` against (I - D W)^-1 D U, D = diag(1 - x*^2).

All checked against these closed forms to 1e-12 relative (the iterations stop when a step
changes x by at most 1e-12 relative, Kepler's 1e-15: it converges slowly for e near 1).
The figure plots the derivatives of Heron's sqrt.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
D, G = nd.derivative, nd.gradient_r


def heron_sqrt(a):
    return nd.fixed_point(lambda x, a: 0.5 * (x + a / x), 1.0, a)


def kepler_E(M, e):
    """The eccentric anomaly E for mean anomaly M and eccentricity e < 1."""
    # The iteration contracts by e |cos E| per step, slowly for e near 1: a tighter
    # tolerance on the change than the default 1e-12 keeps the error below 1e-12.
    return nd.fixed_point(lambda E, M, e: M + e * nd.sin(E), M, M, e, tol=1e-15)


rng = np.random.default_rng(0)
W = 0.4 * rng.normal(size=(3, 3)) / np.sqrt(3)       # small: x -> tanh(W x + c) contracts
U = rng.normal(size=(3, 2))


def equilibrium(p):
    return nd.fixed_point(lambda x, p: np.tanh(W @ x + U @ p), np.zeros(3), p)


def main():
    bad = 0

    def check(label, got, want, tol=1e-12):
        nonlocal bad
        got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        ok = err <= tol
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: {np.round(got, 12).tolist()} "
              f"(rel err {err:.1e})")

    staged = nd.stage(G(heron_sqrt))
    for a in (4.0, 9.0, 16.0):
        r = math.sqrt(a)
        check(f"sqrt({a:g})", heron_sqrt(a), r)
        check(f"sqrt'({a:g}) by derivative, gradient_r, staged gradient_r",
              [D(heron_sqrt)(a), G(heron_sqrt)(a), staged(a)], [1 / (2 * r)] * 3)
        check(f"sqrt''({a:g}) by ff, fr, rf, rr",
              [D(D(heron_sqrt))(a), D(G(heron_sqrt))(a), G(D(heron_sqrt))(a),
               G(G(heron_sqrt))(a)], [-1 / (4 * a * r)] * 4)
        check(f"sqrt'''({a:g}) by fff", D(D(D(heron_sqrt)))(a), 3 / (8 * a * a * r))

    for M, e in ((1.0, 0.3), (2.5, 0.8)):
        E = kepler_E(M, e)
        den = 1 - e * math.cos(E)
        check(f"Kepler M = {M}, e = {e}: E - e sin E = M", E - e * math.sin(E), M)
        check(f"Kepler M = {M}, e = {e}: (dE/dM, dE/de)", G(kepler_E, (0, 1))(M, e),
              [1 / den, math.sin(E) / den])
        check(f"Kepler M = {M}, e = {e}: d2E/dM2", D(lambda M: G(kepler_E)(M, e))(M),
              -e * math.sin(E) / den ** 3)

    p = np.array([0.5, -0.3])
    x = equilibrium(p)
    Dx = np.diag(1 - x ** 2)
    J_exact = np.linalg.solve(np.eye(3) - Dx @ W, Dx @ U)
    check("equilibrium x* = tanh(W x* + U p)", x, np.tanh(W @ x + U @ p))
    check("equilibrium Jacobian dx*/dp by jacobian_f", nd.jacobian_f(equilibrium)(p), J_exact)
    check("equilibrium Jacobian dx*/dp by jacobian_r", nd.jacobian_r(equilibrium)(p), J_exact)
    plot()
    return 1 if bad else 0


def plot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    a = np.geomspace(0.25, 25, 100)
    ap = np.geomspace(0.25, 25, 9)
    derivs = [heron_sqrt, D(heron_sqrt), D(D(heron_sqrt)), D(D(D(heron_sqrt)))]
    exact = [np.sqrt(a), 0.5 / np.sqrt(a), 0.25 * a ** -1.5, 0.375 * a ** -2.5]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for k, (fn, ex) in enumerate(zip(derivs, exact)):
        ax.loglog(a, ex, color=f"C{k}", lw=1.5, label=f"|sqrt^({k})(a)|, closed form")
        ax.loglog(ap, [abs(fn(v)) for v in ap], "o", color=f"C{k}", ms=4)
    ax.plot([], [], "ko", ms=4, label="nestad through fixed_point")
    ax.set_xlabel("a")
    ax.set_title("Heron's sqrt: implicit derivatives of a fixed point")
    ax.legend(fontsize=8)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "implicit_fixed_point.png")
    print("saved implicit_fixed_point.png")


if __name__ == "__main__":
    sys.exit(main())
