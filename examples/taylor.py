"""Taylor coefficients to order 8 by nested forward mode.

The Taylor series of f about a is  f(a + h) = sum_k c_k h^k  with  c_k = f^(k)(a) / k!.
Applying ``derivative`` k times gives f^(k) as an ordinary function: each application
adds one level of forward-mode perturbation, and nestad keeps the levels apart, so
``derivative(derivative(f))`` is the second derivative and not a confused first one.

Checked against series known in closed form (exact rationals), to 1e-12 relative to
max(1, |c_k|).  The figure shows log(1 + x) and its Taylor polynomials: they converge
inside the radius of convergence |x| < 1 and part ways beyond it.
"""
import math
import os
import sys
from fractions import Fraction as F
from pathlib import Path

import nestad as nd

ORDER = 8
FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))


def nth_derivative(f, k):
    for _ in range(k):
        f = nd.derivative(f)
    return f


def taylor_coefficients(f, a=0.0, order=ORDER):
    return [nth_derivative(f, k)(a) / math.factorial(k) for k in range(order + 1)]


# Each entry: name, function, expansion point a, exact coefficients c_0..c_8.
CASES = [
    ("exp(x)", nd.exp, 0.0, [F(1, math.factorial(k)) for k in range(9)]),
    ("sin(x)", nd.sin, 0.0,
     [F((-1) ** (k // 2), math.factorial(k)) if k % 2 else F(0) for k in range(9)]),
    ("cos(x)", nd.cos, 0.0,
     [F((-1) ** (k // 2), math.factorial(k)) if k % 2 == 0 else F(0) for k in range(9)]),
    ("log(1 + x)", nd.log1p, 0.0, [F(0)] + [F((-1) ** (k + 1), k) for k in range(1, 9)]),
    ("log(x) about 2", nd.log, 2.0,
     [math.log(2.0)] + [F((-1) ** (k + 1), k * 2 ** k) for k in range(1, 9)]),
    ("1 / (1 - x)", lambda x: 1 / (1 - x), 0.0, [F(1)] * 9),
    ("sqrt(1 + x)", lambda x: nd.sqrt(1 + x), 0.0,          # binomial series, C(1/2, k)
     [math.prod((F(1, 2) - j for j in range(k)), start=F(1)) / math.factorial(k)
      for k in range(9)]),
    ("atan(x)", nd.atan, 0.0,
     [F((-1) ** (k // 2), k) if k % 2 else F(0) for k in range(9)]),
    ("tan(x)", nd.tan, 0.0, [F(0), F(1), F(0), F(1, 3), F(0), F(2, 15), F(0), F(17, 315), F(0)]),
    ("exp(sin(x))", lambda x: nd.exp(nd.sin(x)), 0.0,   # OEIS A003704 / k!
     [F(1), F(1), F(1, 2), F(0), F(-1, 8), F(-1, 15), F(-1, 240), F(1, 90), F(31, 5760)]),
]


def main():
    bad = 0
    for name, f, a, exact in CASES:
        got = taylor_coefficients(f, a)
        want = [float(c) for c in exact]
        err = max(abs(g - w) / max(1.0, abs(w)) for g, w in zip(got, want))
        ok = err <= 1e-12
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name:<15} about {a:g}: max rel err {err:.1e}  "
              + " ".join(f"{g:.6g}" for g in got))
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
    import numpy as np
    c = taylor_coefficients(nd.log1p)
    xs = np.linspace(-0.95, 1.6, 300)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(xs, np.log1p(xs), "k", lw=2.5, label="log(1 + x)")
    for n in (1, 2, 4, 8):
        ax.plot(xs, sum(c[k] * xs ** k for k in range(n + 1)), label=f"order {n}")
    ax.axvline(1.0, color="gray", ls=":", lw=1)
    ax.set_ylim(-3, 1.5)
    ax.set_xlabel("x")
    ax.set_title("Taylor polynomials of log(1 + x) from nested derivative")
    ax.legend(loc="lower right")
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    out = FIGURES / "taylor.png"
    fig.savefig(out)
    print("saved", out.name)


if __name__ == "__main__":
    sys.exit(main())
