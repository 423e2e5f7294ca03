"""Laplacians from Hessian traces, and a physics-informed fit of a Poisson equation.

The Laplacian is the trace of the Hessian, Delta u = tr(d2u/dx2) (``hessian``: forward
mode over reverse mode).  Checks, each to 1e-12 relative to the size of the Hessian:

* harmonic functions have Delta u = 0: x^2 - y^2, e^x sin y, Re (x + iy)^5, log|x| in 2-d,
  1/|x| in 3-d;
* Poisson solutions have the right source: Delta sin(pi x) sin(pi y) = -2 pi^2 u, and
  Delta exp(-|x|^2) = (4 |x|^2 - 2n) u in n = 3 dimensions.

Then the physics-informed fit: solve -Delta u = f = 2 pi^2 sin(pi x) sin(pi y) on the unit
square with u = 0 on the boundary, with the ansatz u_c = x(1-x) y(1-y) sum_k c_k x^i y^j
(degree <= 4, 15 coefficients) by minimising the mean squared PDE residual
Delta u_c + f at 36 collocation points.  The residual is linear in c, so one least-squares
solve with its Jacobian (``jacobian_f`` of a function computing Hessians) finds the
minimum.  Checks: the fit is within 1e-3 of the exact solution sin(pi x) sin(pi y) on a
21 x 21 grid, and the loss gradient (``gradient_r`` over ``hessian``: three nested runs)
against a central difference along a random direction (the loss is quadratic, so the
difference is exact up to rounding: 1e-8 relative), and that gradient vanishes at the
fit (below 1e-8 of its size at c = 0).  The figure shows the fit and its error.
"""
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
PI = np.pi


def laplacian(u):
    def lap(x):
        return np.trace(nd.hessian(u)(x))
    return lap


HARMONIC = [
    ("x^2 - y^2", lambda p: p[0] ** 2 - p[1] ** 2),
    ("e^x sin y", lambda p: np.exp(p[0]) * np.sin(p[1])),
    ("Re (x + iy)^5", lambda p: p[0] ** 5 - 10 * p[0] ** 3 * p[1] ** 2 + 5 * p[0] * p[1] ** 4),
    ("log |x| (2-d)", lambda p: 0.5 * np.log(p[0] ** 2 + p[1] ** 2)),
    ("1 / |x| (3-d)", lambda p: 1 / np.sqrt(np.sum(p * p))),
]

# name, u, the Laplacian it must have
POISSON = [
    ("sin(pi x) sin(pi y)", lambda p: np.sin(PI * p[0]) * np.sin(PI * p[1]),
     lambda p: -2 * PI ** 2 * np.sin(PI * p[0]) * np.sin(PI * p[1])),
    ("exp(-|x|^2) (3-d)", lambda p: np.exp(-np.sum(p * p)),
     lambda p: (4 * np.sum(p * p) - 6) * np.exp(-np.sum(p * p))),
]

# ------------------------------------------------------------------ the physics-informed fit

POWERS = [(i, j) for i in range(5) for j in range(5 - i)]
GRID = np.linspace(0.05, 0.95, 6)
COLLOCATION = [np.array([a, b]) for a in GRID for b in GRID]


def ansatz(c, p):
    x, y = p[0], p[1]
    return x * (1 - x) * y * (1 - y) * sum(ck * x ** i * y ** j for ck, (i, j) in zip(c, POWERS))


def source(p):
    return 2 * PI ** 2 * np.sin(PI * p[0]) * np.sin(PI * p[1])


def residual(c):
    """Delta u_c + f at the collocation points."""
    return nd.numpy.stack([laplacian(lambda q: ansatz(c, q))(p) + source(p)
                           for p in COLLOCATION])


def loss(c):
    return np.mean(residual(c) ** 2)


def main():
    bad = 0

    def check(label, err, tol):
        nonlocal bad
        ok = err <= tol
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: {err:.1e} (tolerance {tol:g})")

    rng = np.random.default_rng(0)
    for name, u in HARMONIC:
        n = 3 if "3-d" in name else 2
        points = rng.uniform(0.3, 1.5, size=(4, n)) * rng.choice([-1, 1], size=(4, n))
        err = max(abs(laplacian(u)(p)) / np.max(np.abs(nd.hessian(u)(p))) for p in points)
        check(f"harmonic {name}: |Delta u| / max|H| at 4 points", err, 1e-12)
    for name, u, lap_u in POISSON:
        n = 3 if "3-d" in name else 2
        points = rng.uniform(-1, 1, size=(4, n))
        err = max(abs(laplacian(u)(p) - lap_u(p)) / np.max(np.abs(nd.hessian(u)(p)))
                  for p in points)
        check(f"Poisson {name}: Delta u vs closed form at 4 points", err, 1e-12)

    c0 = np.zeros(len(POWERS))
    J = nd.jacobian_f(residual)(c0)                  # residual(c) = residual(0) + J c
    c = np.linalg.lstsq(J, -residual(c0), rcond=None)[0]
    xs = np.linspace(0, 1, 21)
    X, Y = np.meshgrid(xs, xs)
    fit_error = np.abs(ansatz(c, (X, Y)) - np.sin(PI * X) * np.sin(PI * Y))
    print(f"    fitted {len(c)} coefficients: loss {loss(c0):.3g} -> {loss(c):.3g}")
    check("fit vs exact solution sin(pi x) sin(pi y), max on a 21 x 21 grid",
          fit_error.max(), 1e-3)
    v = rng.normal(size=len(c))
    h = 1e-3
    g0 = nd.gradient_r(loss)(c0)
    fd0 = (loss(c0 + h * v) - loss(c0 - h * v)) / (2 * h)
    check("loss gradient at c = 0 along v vs central difference", abs(g0 @ v - fd0) / abs(fd0),
          1e-8)
    check("loss gradient at the fit (the minimum), relative to the one at c = 0",
          np.linalg.norm(nd.gradient_r(loss)(c)) / np.linalg.norm(g0), 1e-8)
    plot(c, fit_error, X, Y)
    return 1 if bad else 0


def plot(c, fit_error, X, Y):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(6, 4), dpi=100)
    ax.contourf(X, Y, ansatz(c, (X, Y)), levels=12, cmap="viridis")
    ax.plot([p[0] for p in COLLOCATION], [p[1] for p in COLLOCATION], "w.", ms=4)
    ax.set_title("fitted u (dots: collocation)", fontsize=10)
    cs = bx.contourf(X, Y, fit_error, levels=12, cmap="magma")
    fig.colorbar(cs, ax=bx, orientation="horizontal", format="%.0e", pad=0.08)
    bx.set_title("|u - sin(pi x) sin(pi y)|", fontsize=10)
    for a in (ax, bx):
        a.set_aspect("equal")
    fig.suptitle("-Delta u = 2 pi^2 sin(pi x) sin(pi y), physics-informed fit", fontsize=11)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "physics_informed.png")
    print("saved physics_informed.png")


if __name__ == "__main__":
    sys.exit(main())
