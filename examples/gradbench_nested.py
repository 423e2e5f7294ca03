"""GradBench's nested-AD workloads, saddle and particle, in all four mode pairings.

Each is an optimisation whose objective contains a gradient, so the outer gradient
differentiates through inner AD.  A pairing names the outer and the inner mode: ff, fr,
rf, rr (f = ``gradient_f``, forward; r = ``gradient_r``, reverse).  Both use GradBench's
gradient descent (``argmin``: step size from 1e-5, halved on failure, doubled after ten
successes).

* saddle: f(p, q) = |p|^2 - |q|^2 on R^2 x R^2.  x* = argmin_p max_q f(p, q), the inner
  max an inner gradient ascent that the outer gradient differentiates through; then
  y* = argmax_q f(x*, q).  Known answer: [x*, y*] = [8.246324826140356e-06] * 4.
* particle: a particle starts at (0, 8) with velocity (0.75, 0) and accelerates by
  -grad p(x) (the inner gradient), p(x) = 1/|x - (10, 10 - w)| + 1/|x - (10, 0)|; Euler
  steps of dt = 0.1 until it crosses the x axis; the crossing point x_f is interpolated
  and x_f^2 is minimised over w.  Known answer: w* = 0.2071918746486116.

A complete solve takes 1-10 s per pairing, so to keep this example quick the complete
solves run in the pairings ff and rr for saddle and ff for particle (checked: saddle
exactly, particle to 1e-10 relative); all four pairings compute one outer step (the
outer objective's gradient at the start point, the unit of work the solver repeats),
checked against its closed form 2p for saddle (the inner argmax does not depend on p) and
against a central finite difference (to 1e-7 relative) for particle, where the four
pairings must also agree with each other to 1e-13.  The figure shows
the particle's path at the start and at the optimal w.
"""
import os
import sys
import time
from pathlib import Path

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
GRADIENT = {"f": nd.gradient_f, "r": nd.gradient_r}
SADDLE_EXPECTED = [8.246324826140356e-06] * 4
PARTICLE_EXPECTED = 0.2071918746486116


def argmin(f, gradient, x):
    """GradBench's gradient descent from the list ``x``; ``gradient(x)`` is a list."""
    fx, g = f(x), gradient(x)
    i, eta = 0, 1e-5
    while True:
        if nd.sqrt(sum(gi * gi for gi in g)) <= 1e-5:
            return x
        if i == 10:
            eta, i = eta * 2.0, 0
            continue
        x_new = [xi - eta * gi for xi, gi in zip(x, g)]
        if nd.sqrt(sum((a - b) * (a - b) for a, b in zip(x, x_new))) <= 1e-5:
            return x
        fx_new = f(x_new)
        if fx_new < fx:
            x, fx, g = x_new, fx_new, gradient(x_new)
            i += 1
        else:
            eta, i = eta / 2.0, 0


# ------------------------------------------------------------------ saddle

def saddle_f(p, q):
    return (p[0] * p[0] + p[1] * p[1]) - (q[0] * q[0] + q[1] * q[1])


def saddle_outer(mode):
    """p -> max_q f(p, q) (by an inner gradient ascent), and its gradient operator."""
    outer, inner = GRADIENT[mode[0]], GRADIENT[mode[1]]

    def max_over_q(p):
        minus_f = lambda q: -saddle_f(p, q)
        return saddle_f(p, argmin(minus_f, inner(minus_f), [1.0, 1.0]))

    return max_over_q, outer(max_over_q)


def saddle(mode):
    objective, gradient = saddle_outer(mode)
    x_star = argmin(objective, gradient, [1.0, 1.0])
    minus_f = lambda q: -saddle_f(x_star, q)
    y_star = argmin(minus_f, GRADIENT[mode[0]](minus_f), [1.0, 1.0])
    return x_star + y_star


# ------------------------------------------------------------------ particle

def particle_path(w, gradient=nd.gradient_r, record=None):
    """x_f^2 where the particle crosses the x axis; ``gradient`` is the inner operator."""
    charges = ((10.0, 10.0 - w), (10.0, 0.0))

    def potential(x):
        total = 0.0
        for c0, c1 in charges:
            d0, d1 = x[0] - c0, x[1] - c1
            total = total + 1.0 / nd.sqrt(d0 * d0 + d1 * d1)
        return total

    grad_p = gradient(potential)
    x, v, dt = [0.0, 8.0], [0.75, 0.0], 0.1
    while True:
        if record is not None:
            record.append(x)
        g = grad_p(x)
        x_new = [x[0] + dt * v[0], x[1] + dt * v[1]]
        if not x_new[1] > 0:
            break
        x, v = x_new, [v[0] - dt * g[0], v[1] - dt * g[1]]
    x_f = x[0] - x[1] / v[1] * v[0]
    if record is not None:
        record.append([x_f, 0.0])
    return x_f * x_f


def particle_outer(mode):
    objective = lambda w: particle_path(w[0], GRADIENT[mode[1]])
    return objective, GRADIENT[mode[0]](objective)


def particle(mode):
    objective, gradient = particle_outer(mode)
    return argmin(objective, gradient, [0.0])[0]


# ------------------------------------------------------------------ checks

def main():
    bad = 0

    def report(ok, text):
        nonlocal bad
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {text}")

    for mode in ("ff", "rr"):
        t0 = time.perf_counter()
        out = saddle(mode)
        report(out == SADDLE_EXPECTED, f"saddle {mode}: solve gives {out} "
               f"({time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    w = particle("ff")
    err = abs(w - PARTICLE_EXPECTED) / PARTICLE_EXPECTED
    report(err <= 1e-10, f"particle ff: solve gives w* = {w!r}, rel err {err:.1e} "
           f"({time.perf_counter() - t0:.1f} s)")

    h = 1e-5
    fd = (particle_path(h) - particle_path(-h)) / (2 * h)
    steps = []
    for mode in ("ff", "fr", "rf", "rr"):
        g = saddle_outer(mode)[1]([1.0, 1.0])
        report(g == [2.0, 2.0], f"saddle {mode}: outer gradient at p = (1, 1) is {g} (2p)")
        g = particle_outer(mode)[1]([0.0])[0]
        steps.append(g)
        err = abs(g - fd) / abs(fd)
        report(err <= 1e-7, f"particle {mode}: outer gradient at w = 0 is {g:.15g} "
               f"(central difference {fd:.15g}, rel diff {err:.1e})")
    spread = (max(steps) - min(steps)) / abs(fd)
    report(spread <= 1e-13, f"particle: the four pairings agree to {spread:.1e} relative")
    plot(w)
    return 1 if bad else 0


def plot(w_star):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for w, style in ((0.0, "C0"), (w_star, "C3")):
        path = []
        particle_path(w, record=path)
        ax.plot([p[0] for p in path], [p[1] for p in path], ".-", color=style, ms=3,
                label=f"w = {w:.4f}: lands at x = {path[-1][0]:.3f}")
        ax.plot([10, 10], [10 - w, 0], "o", color=style, ms=9, mfc="none")
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_xlim(-0.5, 11)
    ax.set_title("particle: w moves a charge (circles) so that it lands at x = 0", fontsize=11)
    ax.legend(loc="center left", fontsize=9)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "gradbench_nested.png")
    print("saved gradbench_nested.png")


if __name__ == "__main__":
    sys.exit(main())
