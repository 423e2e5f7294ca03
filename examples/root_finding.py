"""Newton's and Halley's root finding, with the derivatives they need from nestad.

Newton's step uses f':       x <- x - f / f'                      (quadratic convergence)
Halley's step also uses f'': x <- x - 2 f f' / (2 f'^2 - f f'')   (cubic convergence)

``derivative(f)`` is f' as a function, and ``derivative(derivative(f))`` is f''.  The
roots are checked against closed forms or known constants to 4e-16 relative (2 ulps),
and Halley's method must take no more steps than Newton's.  Finally the solver itself is
differentiated: d/da of Newton's root of x^2 - a is checked against 1 / (2 sqrt(a)) to
1e-12 (the derivative of the root, by forward and reverse mode through the iterations).
The figure plots the error per iteration for Wallis's cubic.
"""
import math
import os
import sys
from pathlib import Path

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
EPS = 2.0 ** -52


def newton(f, x, max_iter=60):
    df = nd.derivative(f)
    history = [x]
    for _ in range(max_iter):
        step = f(x) / df(x)
        x = x - step
        history.append(x)
        if abs(step) <= 2 * EPS * abs(x):
            break
    return x, history


def halley(f, x, max_iter=60):
    df = nd.derivative(f)
    d2f = nd.derivative(df)
    history = [x]
    for _ in range(max_iter):
        fx, d1, d2 = f(x), df(x), d2f(x)
        step = 2 * fx * d1 / (2 * d1 * d1 - fx * d2)
        x = x - step
        history.append(x)
        if abs(step) <= 2 * EPS * abs(x):
            break
    return x, history


# Wallis's cubic x^3 - 2x - 5 = 0 (the equation Newton used), root by Cardano's formula.
_d = math.sqrt(25 / 4 - 8 / 27)
WALLIS_ROOT = math.cbrt(5 / 2 + _d) + math.cbrt(5 / 2 - _d)

# name, f, x0, the root
PROBLEMS = [
    ("x^2 - 2", lambda x: x * x - 2, 1.0, math.sqrt(2.0)),
    ("x^3 - 2x - 5 (Wallis)", lambda x: x ** 3 - 2 * x - 5, 2.0, WALLIS_ROOT),
    ("cos x - x (Dottie number)", lambda x: nd.cos(x) - x, 1.0, 0.7390851332151607),
    ("x e^x - 1 (omega constant)", lambda x: x * nd.exp(x) - 1, 1.0, 0.5671432904097838),
    ("log x - 1 (e)", lambda x: nd.log(x) - 1, 1.5, math.e),
]


def main():
    bad = 0
    for name, f, x0, root in PROBLEMS:
        steps = {}
        for method in (newton, halley):
            x, history = method(f, x0)
            steps[method] = len(history) - 1
            err = abs(x - root) / abs(root)
            ok = err <= 4e-16
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {method.__name__:<6} {name:<27} x = {x:.17g} "
                  f"rel err {err:.1e} after {len(history) - 1} steps")
        if steps[halley] > steps[newton]:
            bad += 1
            print(f"BAD Halley took more steps than Newton on {name}")

    # Differentiating the solver: x*(a) = sqrt(a) solves x^2 - a = 0; the iterations are
    # ordinary nestad arithmetic, so their derivative converges to dx*/da = 1/(2 sqrt a).
    def sqrt_by_newton(a):
        return newton(lambda x: x * x - a, 1.0)[0]

    for a in (2.0, 9.0):
        for mode, op in (("derivative", nd.derivative), ("gradient_r", nd.gradient_r)):
            got, want = op(sqrt_by_newton)(a), 1 / (2 * math.sqrt(a))
            err = abs(got - want) / want
            ok = err <= 1e-12
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {mode}(sqrt_by_newton)({a:g}) = {got:.17g} "
                  f"(1/(2 sqrt a) = {want:.17g}, rel err {err:.1e})")
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
    f = PROBLEMS[1][1]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for method, marker in ((newton, "o-"), (halley, "s-")):
        _, history = method(f, 1.0)
        errs = [max(abs(x - WALLIS_ROOT) / WALLIS_ROOT, 1e-17) for x in history]
        ax.semilogy(errs, marker, label=method.__name__.capitalize())
    ax.axhline(EPS, color="gray", ls=":", lw=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("relative error (floored at 1e-17)")
    ax.set_title("x^3 - 2x - 5 = 0 from x0 = 1")
    ax.legend()
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "root_finding.png")
    print("saved root_finding.png")


if __name__ == "__main__":
    sys.exit(main())
