"""Derivatives of functions that return functions: the "amazing bug".

    f  = lambda x: lambda g: lambda y: g(x + y)
    fh = derivative(f)(3.0)            # fh(g)(y) = d/dx g(x + y) at x = 3 = g'(3 + y)

so fh(exp)(y) = exp(3 + y) and fh(fh(exp))(y) = d/dy' exp(3 + y') at y' = 3 + y = exp(6 + y):
fh(fh(exp))(1) = exp(7).

Why this is hard: fh is f's derivative function, a closure over x = 3 + eps, post-composed
with "take the eps-coefficient".  In fh(fh(exp)) the inner fh(exp) is called by the outer
fh on 3 + eps + y, a value carrying the *outer* application's eps; if both applications
share one eps, the inner one extracts the outer one's perturbation as its own and the outer
one then finds nothing left: a naive implementation returns 0.  nestad gives each
application its own fresh perturbation (Manzyuk et al., "Perturbation confusion in forward
automatic differentiation of higher-order functions", JFP 2019; notes/functional-outputs.md).

Checked, to 1e-15 relative: fh(exp)(1) = e^4, fh(fh(exp))(1) = e^7, three deep e^10,
fh(fh(sin))(y) = -sin(6 + y); inside both outer modes: d/dy fh(fh(exp))(y) = e^(6+y) by
``derivative`` and by ``gradient_r``, and d/dx of derivative(f)(x)(exp)(1) = e^(x+1) with the
function-valued derivative built inside ``derivative`` and inside ``gradient_r``; ``jvp``
gives the same tangent function.  Reverse mode cannot return a function (there is no
cotangent to seed for one) and says so.  The figure plots fh(sin) and fh(fh(sin)).
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))


def f(x):
    return lambda g: lambda y: g(x + y)


fh = nd.derivative(f)(3.0)


def main():
    bad = 0

    def check(label, got, want):
        nonlocal bad
        err = abs(got - want) / abs(want)
        ok = err <= 1e-15
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label} = {got!r} (want {want!r}, rel err {err:.1e})")

    check("fh(exp)(1)", fh(nd.exp)(1.0), math.exp(4))
    check("fh(fh(exp))(1)", fh(fh(nd.exp))(1.0), math.exp(7))
    check("fh(fh(fh(exp)))(1)", fh(fh(fh(nd.exp)))(1.0), math.exp(10))
    for y in (-1.0, 0.5, 2.0):
        check(f"fh(fh(sin))({y})", fh(fh(nd.sin))(y), -math.sin(6 + y))

    # The applications inside an outer derivative run, in either mode.
    for name, outer in (("derivative", nd.derivative), ("gradient_r", nd.gradient_r)):
        check(f"{name}(y -> fh(fh(exp))(y))(1)", outer(lambda y: fh(fh(nd.exp))(y))(1.0),
              math.exp(7))
        check(f"{name}(x -> derivative(f)(x)(exp)(1))(3)",
              outer(lambda x: nd.derivative(f)(x)(nd.exp)(1.0))(3.0), math.exp(4))

    _, tangent = nd.jvp(f, (3.0,), (1.0,))            # the same function from jvp
    check("jvp's tangent function, t(t(exp))(1)", tangent(tangent(nd.exp))(1.0), math.exp(7))

    try:
        nd.vjp(f, 3.0)
        print("BAD reverse mode returned something for a function-valued output")
        bad += 1
    except nd.NestadError as e:
        print(f"ok  reverse mode refuses a function-valued output: {type(e).__name__}: "
              f"{str(e)[:70]}...")
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
    ys = np.linspace(-4, 4, 200)
    yp = np.linspace(-4, 4, 17)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(ys, np.sin(ys), color="gray", lw=1, label="sin y")
    ax.plot(ys, np.cos(3 + ys), "C0", label="cos(3 + y)")
    ax.plot(yp, [fh(nd.sin)(y) for y in yp], "o", color="C0", label="fh(sin)(y)")
    ax.plot(ys, -np.sin(6 + ys), "C3", label="-sin(6 + y)")
    ax.plot(yp, [fh(fh(nd.sin))(y) for y in yp], "s", color="C3", label="fh(fh(sin))(y)")
    ax.set_xlabel("y")
    ax.set_title("fh = derivative(x -> g -> y -> g(x + y))(3)")
    ax.legend(loc="lower left", fontsize=8, ncol=3)
    ax.set_ylim(-1.6, 1.2)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "amazing_bug.png")
    print("saved amazing_bug.png")


if __name__ == "__main__":
    sys.exit(main())
