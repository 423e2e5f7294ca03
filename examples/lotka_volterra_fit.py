"""Fitting the parameters of an ODE by Newton's method, with the exact Hessian through
``nd.odeint``.

The Lotka-Volterra equations, prey x and predators y,

    x' = a x - b x y,    y' = c x y - d y,

are solved by ``nd.odeint`` (adaptive Dormand-Prince RK45, rtol = atol = 1e-8) at 11
times on [0, 10].  The data are the solution for p* = (a, b, c, d) = (1, 0.6, 0.4, 0.8);
the loss is the sum of squared differences L(p) = sum |y(t_i; p) - data_i|^2.

Newton's method on L uses its gradient (``nd.gradient_r``: the adjoint equations, solved
backwards) and its Hessian (``nd.hessian``: forward mode over the adjoint, i.e. the
sensitivity equations of the adjoint system), both derivatives of the exact solution,
with a backtracking line search.  Checks:

* the fit recovers p* to 1e-7 (the data are noise-free), and L falls below 1e-16;
* the gradient at the start against central differences of L (1e-6 relative: the
  differences see the integrator's tolerance);
* the Hessian is symmetric and equals forward-over-forward (``jacobian_f(gradient_f)``:
  the sensitivity equations of the sensitivity equations) to 1e-6;
* Newton converges quadratically: the last steps' errors fall at least as e_{k+1} <=
  100 e_k^2.
The figure shows the data, the starting guess and the fit.
"""
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd
import nestad.numpy as anp

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
T = np.linspace(0.0, 10.0, 11)
Y0 = np.array([1.0, 0.5])
P_TRUE = np.array([1.0, 0.6, 0.4, 0.8])
P_START = np.array([0.9, 0.55, 0.45, 0.75])


def lotka_volterra(y, t, p):
    return anp.stack([p[0] * y[0] - p[1] * y[0] * y[1], p[2] * y[0] * y[1] - p[3] * y[1]])


def solve(p):
    return nd.odeint(lotka_volterra, Y0, T, p, rtol=1e-8, atol=1e-8)


DATA = solve(P_TRUE)


def loss(p):
    return anp.sum((solve(p) - DATA) ** 2)


def newton(p, steps=8):
    path = [p]
    for _ in range(steps):
        g, H = nd.gradient_r(loss)(p), nd.hessian(loss)(p)
        w, V = np.linalg.eigh(H)                  # shift to positive definite if need be
        step = -(V / np.maximum(w, 1e-8 * w.max())) @ V.T @ g
        t, L0 = 1.0, loss(p)
        while True:
            try:
                if loss(p + t * step) <= L0 + 1e-4 * t * (g @ step) or t < 1e-8:
                    break
            except nd.NestadError:                # parameters where the equations blow up
                pass
            t /= 2
        p = p + t * step
        path.append(p)
        if np.max(np.abs(t * step)) < 1e-10:
            break
    return p, path


def main():
    bad = 0

    def check(label, ok, detail):
        nonlocal bad
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: {detail}")

    g = nd.gradient_r(loss)(P_START)
    eps = 1e-5
    fd = np.array([(loss(P_START + eps * e) - loss(P_START - eps * e)) / (2 * eps)
                   for e in np.eye(4)])
    err = np.max(np.abs(g - fd)) / np.max(np.abs(fd))
    check("gradient at the start against central differences", err < 1e-6, f"rel err {err:.1e}")
    H = nd.hessian(loss)(P_START)
    H_ff = nd.jacobian_f(nd.gradient_f(loss))(P_START)
    err = max(np.max(np.abs(H - H_ff)), np.max(np.abs(H - H.T))) / np.max(np.abs(H))
    check("Hessian: forward over reverse (hessian) and forward over forward agree, symmetric",
          err < 1e-6, f"rel err {err:.1e}")

    p, path = newton(P_START)
    errors = [np.max(np.abs(q - P_TRUE)) for q in path]
    check("Newton recovers p* = (1, 0.6, 0.4, 0.8)", errors[-1] < 1e-7,
          f"p = {np.round(p, 10).tolist()} after {len(path) - 1} steps, error {errors[-1]:.1e}")
    check("loss at the fit", loss(p) < 1e-16, f"{loss(p):.1e}")
    quad = [(a, b) for a, b in zip(errors, errors[1:]) if 1e-12 < b and a < 1e-2]
    check("quadratic convergence e_(k+1) <= 100 e_k^2", all(b <= 100 * a * a for a, b in quad),
          ", ".join(f"{e:.1e}" for e in errors))
    plot(p)
    return 1 if bad else 0


def plot(p):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    tt = np.linspace(0.0, 10.0, 200)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for q, style, label in ((P_START, "--", "start"), (p, "-", "Newton fit")):
        ys = nd.odeint(lotka_volterra, Y0, tt, q)
        ax.plot(tt, ys[:, 0], "C0" + style, lw=1.2, label=f"prey, {label}")
        ax.plot(tt, ys[:, 1], "C1" + style, lw=1.2, label=f"predators, {label}")
    ax.plot(T, DATA[:, 0], "C0o", ms=4, label="data")
    ax.plot(T, DATA[:, 1], "C1o", ms=4)
    ax.set_xlabel("t")
    ax.set_title("Lotka-Volterra fit: Newton, exact Hessian through odeint", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "lotka_volterra_fit.png")
    print("saved lotka_volterra_fit.png")


if __name__ == "__main__":
    sys.exit(main())
