"""Tuning the regularisation of a ridge regression through its training, by implicit
differentiation (``nd.minimize``) and by unrolling the training.

Training: w(theta) = argmin_w |X w - y|^2 / n + exp(theta) |w|^2 (30 samples, 20 features).
Validation: V(theta) = |Xv w(theta) - yv|^2 / m.  The hypergradient dV/dtheta:

* implicit: ``nd.gradient_r(V)`` with w(theta) from ``nd.minimize`` (Newton's method);
  nestad differentiates the optimality condition grad_w = 0, not the iterations.
  Closed form: w = A^-1 X^T y / n with A = X^T X / n + lambda I, dw/dtheta = -lambda A^-1 w,
  dV/dtheta = 2 (Xv w - yv)^T Xv dw/dtheta / m.  Checked to 1e-10.
* unrolled: k steps of gradient descent (step 1/L), differentiated by ``nd.gradient_r``
  through every step.  Its hypergradient is that of the truncated training, so its error
  against the closed form must fall as k grows (checked: k = 10, 30, 100, 300); its time
  and peak memory (tracemalloc) grow with k, the implicit one's do not (printed).
* tuning: Newton's method on theta with V'' = d/dtheta of the implicit hypergradient
  (``nd.derivative`` over ``nd.gradient_r`` over ``nd.minimize``): at the optimum the
  closed-form dV/dtheta is below 1e-12 and V'' > 0.
The figure shows V(theta) with the tuned theta, and the unrolled hypergradient's error
against k.
"""
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

import nestad as nd
import nestad.numpy as anp

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
RNG = np.random.default_rng(3)
N, D = 30, 20
W_TRUE = 0.5 * RNG.normal(size=D)
X, XV = RNG.normal(size=(N, D)), RNG.normal(size=(N, D))
Y = X @ W_TRUE + 2 * RNG.normal(size=N)
YV = XV @ W_TRUE + 2 * RNG.normal(size=N)
STEP = 1 / (2 * np.linalg.eigvalsh(X.T @ X / N).max() + 2)


def train_loss(w, theta):
    return anp.sum((X @ w - Y) ** 2) / N + anp.exp(theta) * anp.sum(w * w)


def validation(w):
    return anp.sum((XV @ w - YV) ** 2) / N


def implicit(theta):
    return validation(nd.minimize(train_loss, np.zeros(D), theta, method="newton"))


def unrolled(theta, k):
    w = np.zeros(D)
    for _ in range(k):
        w = w - STEP * nd.gradient_r(train_loss)(w, theta)
    return validation(w)


def closed_form(theta):
    lam = np.exp(theta)
    A = X.T @ X / N + lam * np.eye(D)
    w = np.linalg.solve(A, X.T @ Y / N)
    dw = -lam * np.linalg.solve(A, w)
    return validation(w), 2 * (XV @ w - YV) @ XV @ dw / N


def measured(fn):
    tracemalloc.start()
    t0 = time.process_time()
    out = fn()
    seconds = time.process_time() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, seconds, peak


def main():
    bad = 0

    def check(label, ok, detail):
        nonlocal bad
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: {detail}")

    theta = -2.5
    exact = closed_form(theta)[1]
    g, sec, peak = measured(lambda: nd.gradient_r(implicit)(theta))
    err = abs(g - exact) / abs(exact)
    check("implicit hypergradient against the closed form", err < 1e-10,
          f"{g:.15g} (rel err {err:.1e}; {sec * 1e3:.1f} ms, {peak / 1e3:.0f} kB)")
    errors = []
    for k in (10, 30, 100, 300):
        gk, sec, peak = measured(lambda: nd.gradient_r(lambda th: unrolled(th, k))(theta))
        errors.append(abs(gk - exact) / abs(exact))
        print(f"    unrolled, {k:3d} steps: {gk:.15g} (rel err {errors[-1]:.1e}; "
              f"{sec * 1e3:.1f} ms, {peak / 1e3:.0f} kB)")
    check("unrolled hypergradient's error falls with the number of steps",
          all(b < a for a, b in zip(errors, errors[1:])), ", ".join(f"{e:.1e}" for e in errors))

    dV = nd.gradient_r(implicit)
    d2V = nd.derivative(dV)
    path = [theta]
    for _ in range(20):
        step = -dV(theta) / d2V(theta)
        theta += step
        path.append(theta)
        if abs(step) < 1e-12:
            break
    grad_at_opt = closed_form(theta)[1]
    check("Newton on theta with V'' through minimize: closed-form dV/dtheta at the optimum",
          abs(grad_at_opt) < 1e-12 and d2V(theta) > 0,
          f"theta* = {theta:.12f} (lambda = {np.exp(theta):.6g}) after {len(path) - 1} steps, "
          f"dV/dtheta = {grad_at_opt:.1e}, V'' = {d2V(theta):.3g}")
    plot(theta, errors)
    return 1 if bad else 0


def plot(theta_star, errors):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    thetas = np.linspace(-6, 3, 100)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(6, 4), dpi=100)
    a1.plot(thetas, [closed_form(t)[0] for t in thetas], "C0", lw=1.5)
    a1.axvline(theta_star, color="C3", ls="--", lw=1, label="tuned by Newton")
    a1.set_xlabel("theta = log lambda")
    a1.set_title("validation loss", fontsize=9)
    a1.legend(fontsize=7)
    a2.loglog([10, 30, 100, 300], errors, "o-", color="C1", label="unrolled")
    a2.set_xlabel("gradient descent steps")
    a2.set_title("hypergradient rel. error", fontsize=9)
    a2.legend(fontsize=7)
    fig.suptitle("Ridge regression: hyperparameter through the training", fontsize=10)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "hyperparameter_tuning.png")
    print("saved hyperparameter_tuning.png")


if __name__ == "__main__":
    sys.exit(main())
