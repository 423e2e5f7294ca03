"""Newton's method for minimisation, with the gradient and Hessian from nestad.

Newton's step solves  H(x) s = -g(x)  with g = grad f (``gradient_r``, reverse mode) and
H the Hessian (``hessian``: forward mode over reverse mode).  Near a minimum with H
positive definite it converges quadratically.  Far from it, H is shifted to be positive
definite and a backtracking line search halves the step until f decreases enough.

Checks: the Hessian of the 2-d Rosenbrock function f = (1 - x)^2 + 100 (y - x^2)^2
against its closed form, H = [[2 - 400 (y - x^2) + 800 x^2, -400 x], [-400 x, 200]] (to
1e-12 relative); Newton reaches the known minimum (1, 1) from (-1.2, 1) to 1e-12; the
10-d Rosenbrock function, written with array operations, reaches (1, ..., 1) from 0 to
1e-12, and its Hessian there is the known tridiagonal matrix.
The figure shows Newton's path over the banana-shaped valley.
"""
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))


def rosenbrock(v):
    x, y = v[0], v[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def rosenbrock_nd(v):
    """The n-dimensional Rosenbrock function, written with array operations."""
    return np.sum(100 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2)


def hessian_closed_form(v):
    x, y = v
    return np.array([[2 - 400 * (y - x ** 2) + 800 * x ** 2, -400 * x], [-400 * x, 200.0]])


def newton_minimize(f, x, tol=1e-13, max_iter=100):
    grad, hess = nd.gradient_r(f), nd.hessian(f)
    path = [x]
    for _ in range(max_iter):
        g = grad(x)
        if np.linalg.norm(g) <= tol:
            break
        H = hess(x)
        # Where H is not positive definite the Newton step need not go downhill: add a
        # multiple of the identity until it is (Nocedal and Wright, section 3.4).
        shift = 0.0
        while True:
            try:
                L = np.linalg.cholesky(H + shift * np.eye(len(x)))
                break
            except np.linalg.LinAlgError:
                shift = max(2 * shift, 1e-3 * np.max(np.abs(H)))
        step = -np.linalg.solve(L.T, np.linalg.solve(L, g))
        t, fx = 1.0, f(x)
        while f(x + t * step) > fx + 1e-4 * t * (g @ step) and t > 1e-12:  # backtracking
            t /= 2
        x = x + t * step
        path.append(x)
    return x, path


def main():
    bad = 0

    def check(label, err, tol):
        nonlocal bad
        ok = err <= tol
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: error {err:.1e} (tolerance {tol:g})")

    for v in ([-1.2, 1.0], [0.3, -0.7], [2.0, 3.0]):
        v = np.array(v)
        H, H_exact = nd.hessian(rosenbrock)(v), hessian_closed_form(v)
        check(f"2-d Hessian at {v} vs closed form",
              np.max(np.abs(H - H_exact)) / np.max(np.abs(H_exact)), 1e-12)

    x, path = newton_minimize(rosenbrock, np.array([-1.2, 1.0]))
    print(f"    2-d: {len(path) - 1} Newton steps from (-1.2, 1) to {x}")
    check("2-d minimum vs (1, 1)", np.max(np.abs(x - 1)), 1e-12)

    x10, path10 = newton_minimize(rosenbrock_nd, np.zeros(10))
    print(f"    10-d: {len(path10) - 1} Newton steps from the origin")
    check("10-d minimum vs (1, ..., 1)", np.max(np.abs(x10 - 1)), 1e-12)
    check("10-d Hessian at the minimum vs the tridiagonal closed form",
          np.max(np.abs(nd.hessian(rosenbrock_nd)(np.ones(10))
                        - hessian_nd_at_ones(10))) / 802, 1e-12)
    plot(path)
    return 1 if bad else 0


def hessian_nd_at_ones(n):
    """At x = 1 the n-d Rosenbrock Hessian is tridiagonal: diagonal 802 (first 802,
    interior 1002, last 200), off-diagonal -400."""
    H = np.diag([802.0] + [1002.0] * (n - 2) + [200.0])
    H += np.diag([-400.0] * (n - 1), 1) + np.diag([-400.0] * (n - 1), -1)
    return H


def plot(path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    xs, ys = np.meshgrid(np.linspace(-1.6, 1.6, 200), np.linspace(-0.6, 1.8, 200))
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.contourf(xs, ys, np.log1p(rosenbrock([xs, ys])), levels=12, cmap="Blues_r")
    p = np.array(path)
    ax.plot(p[:, 0], p[:, 1], "o-", color="C3", label=f"Newton, {len(path) - 1} steps")
    ax.plot([1], [1], "k*", ms=12, label="minimum (1, 1)")
    ax.set_title("Newton's method on the Rosenbrock function")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(loc="lower right")
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "newton_minimize.png")
    print("saved newton_minimize.png")


if __name__ == "__main__":
    sys.exit(main())
