"""Meta-learning: the hypergradient of a validation loss with respect to a learning rate.

Train logistic regression by k steps of gradient descent from w_0 = 0,

    w_{t+1} = w_t - eta grad L_train(w_t),

and score the result on held-out data: V(eta) = L_val(w_k(eta)).  dV/deta differentiates
through the whole training run, including the gradient inside every step: ``gradient_r``
of a function that calls ``gradient_r`` (reverse over reverse; nestad's tags keep the two
runs apart).

Checks: the hypergradient against a central finite difference (1e-6 relative) at three
learning rates and against forward mode over reverse (``derivative`` of the same
function, 1e-12); for a quadratic training loss, where w_k(eta) obeys a linear recursion
differentiated by hand, against that closed form (1e-12).  Then eta is tuned by Newton's
method, V'' being ``derivative`` of the hypergradient (three nested runs; checked against a
central difference of V', 1e-6): the tuned eta must be a minimum (|V'| < 1e-10, V'' > 0).
The figure shows V(eta), its tangents from the hypergradient and Newton's steps.
"""
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
K = 20                                            # inner gradient steps

rng = np.random.default_rng(1)
w_true = rng.normal(size=5)
X_train, X_val = rng.normal(size=(40, 5)), rng.normal(size=(200, 5))
y_train = np.sign(X_train @ w_true + 0.5 * rng.normal(size=40))
y_val = np.sign(X_val @ w_true + 0.5 * rng.normal(size=200))


def logistic_loss(w, X, y):
    return np.mean(np.log1p(np.exp(-y * (X @ w))))


def train(eta, loss, k=K):
    grad = nd.gradient_r(loss)
    w = np.zeros(5)
    for _ in range(k):
        w = w - eta * grad(w)
    return w


def validation_loss(eta):
    w = train(eta, lambda w: logistic_loss(w, X_train, y_train))
    return logistic_loss(w, X_val, y_val)


hypergradient = nd.gradient_r(validation_loss)


# A quadratic training loss 0.5 w.A w - b.w has grad A w - b, so w_{t+1} = w_t - eta (A w_t - b)
# and its eta-derivative obeys  dw_{t+1} = dw_t - (A w_t - b) - eta A dw_t, by hand.
A = X_train.T @ X_train / 40
b = X_train.T @ y_train / 40


def quadratic_validation(eta):
    w = train(eta, lambda w: 0.5 * w @ (A @ w) - b @ w)
    return np.sum((X_val @ w - y_val) ** 2) / 200


def quadratic_hypergradient_by_hand(eta):
    w, dw = np.zeros(5), np.zeros(5)
    for _ in range(K):
        w, dw = w - eta * (A @ w - b), dw - (A @ w - b) - eta * (A @ dw)
    return 2 * (X_val @ w - y_val) @ (X_val @ dw) / 200


def main():
    bad = 0

    def check(label, err, tol):
        nonlocal bad
        ok = err <= tol
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: {err:.1e} (tolerance {tol:g})")

    for eta in (0.1, 1.0, 3.0):
        g = hypergradient(eta)
        h = 1e-5
        fd = (validation_loss(eta + h) - validation_loss(eta - h)) / (2 * h)
        print(f"    eta = {eta}: V = {validation_loss(eta):.6f}, dV/deta = {g:.10f}")
        check(f"eta = {eta}: reverse-over-reverse vs central difference", abs(g - fd) / abs(fd),
              1e-6)
        check(f"eta = {eta}: reverse-over-reverse vs forward-over-reverse",
              abs(g - nd.derivative(validation_loss)(eta)) / abs(g), 1e-12)
        want = quadratic_hypergradient_by_hand(eta / 4)   # eta / 4: gradient descent on
        # the quadratic is stable only for eta < 2 / (largest eigenvalue of A), about 1
        check(f"quadratic loss, eta = {eta / 4}: vs the recursion by hand",
              abs(nd.gradient_r(quadratic_validation)(eta / 4) - want) / abs(want), 1e-12)

    # Tune the learning rate by Newton's method on eta: V'' is the derivative of the
    # hypergradient, forward mode over reverse over reverse.
    second = nd.derivative(hypergradient)
    h = 1e-4
    fd = (hypergradient(1.0 + h) - hypergradient(1.0 - h)) / (2 * h)
    check("V''(1) (forward over reverse over reverse) vs central difference of V'",
          abs(second(1.0) - fd) / abs(fd), 1e-6)
    eta, path = 1.0, [1.0]
    while abs(hypergradient(eta)) > 1e-12 and len(path) < 20:
        eta = eta - hypergradient(eta) / second(eta)
        path.append(eta)
    eta_star = eta
    print(f"    Newton on eta: {len(path) - 1} steps to eta = {eta_star:.10f}, "
          f"V = {validation_loss(eta_star):.6f} (V = {validation_loss(1.0):.6f} at eta = 1)")
    check("dV/deta at the tuned eta", abs(hypergradient(eta_star)), 1e-10)
    ok = second(eta_star) > 0 and validation_loss(eta_star) < validation_loss(1.0)
    bad += not ok
    print(f"{'ok ' if ok else 'BAD'} the tuned eta is a minimum (V'' > 0) below V(1)")
    plot(path, eta_star)
    return 1 if bad else 0


def plot(path, eta_star):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    etas = np.linspace(0.02, max(6.0, 1.5 * eta_star), 60)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(etas, [validation_loss(e) for e in etas], "k", lw=2, label="V(eta)")
    for e in (0.6, 2.0, 5.0):
        v, g = validation_loss(e), hypergradient(e)
        ax.plot([e - 0.6, e + 0.6], [v - 0.6 * g, v + 0.6 * g], "C1", lw=1.5)
    ax.plot([], [], "C1", label="tangents from dV/deta")
    ax.plot(path, [validation_loss(e) for e in path], "o", color="C0", ms=3,
            label="Newton's steps on eta")
    ax.axvline(eta_star, color="C3", ls=":", label=f"tuned eta = {eta_star:.3f}")
    ax.set_xlabel("learning rate eta")
    ax.set_ylabel(f"validation loss after {K} steps")
    ax.legend()
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "meta_learning.png")
    print("saved meta_learning.png")


if __name__ == "__main__":
    sys.exit(main())
