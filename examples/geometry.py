"""Differential geometry: curvature of a curve, Christoffel symbols and Gaussian curvature.

* Plane curve gamma(t) = (x, y): curvature k = (x' y'' - y' x'') / (x'^2 + y'^2)^(3/2),
  with gamma' and gamma'' from ``derivative`` of a function returning a tuple, and dk/dt
  (third derivatives of gamma) from ``derivative`` of k.  For the ellipse
  (a cos t, b sin t):  k = ab / s^(3/2),  dk/dt = -3ab (a^2 - b^2) sin t cos t / s^(5/2),
  s = a^2 sin^2 t + b^2 cos^2 t.
* A surface X(u) in R^3 has metric g = J^T J (J = dX/du, ``jacobian_r``); its Christoffel
  symbols  G^k_ij = 1/2 g^kl (d_i g_jl + d_j g_il - d_l g_ij)  need d g (``jacobian_f`` of
  g: second derivatives of X); the Riemann tensor
  R^a_bcd = d_c G^a_db - d_d G^a_cb + G^a_ce G^e_db - G^a_de G^e_cb  needs d G (third
  derivatives of X), and the Gaussian curvature is  K = g_0e R^e_101 / det g.  Three
  nested Jacobians, reverse innermost.

Checked to 1e-12 (relative to max(1, |value|)) against closed forms: the ellipse's k and
dk/dt; the sphere of radius R (G^u_vv = -sin u cos u, G^v_uv = cot u, K = 1/R^2) and the
torus (G^u_uv = -r sin v / rho, G^v_uu = rho sin v / r, K = cos v / (r rho), rho =
R + r cos v).  The figure shows the ellipse with osculating circles, and K on the torus.
"""
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
A_AX, B_AX = 2.0, 1.0                     # ellipse semi-axes
R_SPHERE = 1.5
R_TORUS, r_TORUS = 3.0, 1.0


# ------------------------------------------------------------------ plane curves

def curvature(gamma):
    d1 = nd.derivative(gamma)
    d2 = nd.derivative(d1)

    def k(t):
        (x1, y1), (x2, y2) = d1(t), d2(t)
        return (x1 * y2 - y1 * x2) / (x1 * x1 + y1 * y1) ** 1.5
    return k


def ellipse(t):
    return (A_AX * nd.cos(t), B_AX * nd.sin(t))


def ellipse_curvature(t):
    s = A_AX ** 2 * np.sin(t) ** 2 + B_AX ** 2 * np.cos(t) ** 2
    return A_AX * B_AX / s ** 1.5


def ellipse_curvature_rate(t):
    s = A_AX ** 2 * np.sin(t) ** 2 + B_AX ** 2 * np.cos(t) ** 2
    return -3 * A_AX * B_AX * (A_AX ** 2 - B_AX ** 2) * np.sin(t) * np.cos(t) / s ** 2.5


# ------------------------------------------------------------------ surfaces

def metric(X):
    def g(u):
        J = nd.jacobian_r(X)(u)              # 3 x 2
        return J.T @ J
    return g


def christoffel(g):
    def Gamma(u):
        dg = nd.jacobian_f(g)(u)             # dg[i, j, l] = d_l g_ij
        t = np.einsum("jli->ijl", dg) + np.einsum("ilj->ijl", dg) - dg
        return 0.5 * np.einsum("kl,ijl->kij", np.linalg.inv(g(u)), t)   # G[k, i, j]
    return Gamma


def gaussian_curvature(g):
    Gamma = christoffel(g)

    def K(u):
        G = Gamma(u)
        dG = nd.jacobian_f(Gamma)(u)         # dG[a, b, c, d] = d_d G^a_bc
        R = (np.einsum("adbc->abcd", dG) - np.einsum("acbd->abcd", dG)
             + np.einsum("ace,edb->abcd", G, G) - np.einsum("ade,ecb->abcd", G, G))
        gu = g(u)
        return gu[0] @ R[:, 1, 0, 1] / np.linalg.det(gu)
    return K


def sphere(u):
    return R_SPHERE * np.stack([np.sin(u[0]) * np.cos(u[1]), np.sin(u[0]) * np.sin(u[1]),
                                np.cos(u[0])])


def torus(u):
    rho = R_TORUS + r_TORUS * np.cos(u[1])
    return np.stack([rho * np.cos(u[0]), rho * np.sin(u[0]), r_TORUS * np.sin(u[1])])


def sphere_christoffel(u):
    G = np.zeros((2, 2, 2))
    G[0, 1, 1] = -np.sin(u[0]) * np.cos(u[0])
    G[1, 0, 1] = G[1, 1, 0] = np.cos(u[0]) / np.sin(u[0])
    return G


def torus_christoffel(u):
    rho = R_TORUS + r_TORUS * np.cos(u[1])
    G = np.zeros((2, 2, 2))
    G[0, 0, 1] = G[0, 1, 0] = -r_TORUS * np.sin(u[1]) / rho
    G[1, 0, 0] = rho * np.sin(u[1]) / r_TORUS
    return G


def torus_curvature(u):
    return np.cos(u[1]) / (r_TORUS * (R_TORUS + r_TORUS * np.cos(u[1])))


def main():
    bad = 0

    def check(label, got, want, tol=1e-12):
        nonlocal bad
        got, want = np.asarray(got), np.asarray(want)
        err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))
        ok = err <= tol
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: error {err:.1e} (tolerance {tol:g})")

    k = curvature(ellipse)
    for t in (0.0, 0.4, 1.3, 2.5):
        check(f"ellipse curvature at t = {t}", k(t), ellipse_curvature(t))
        check(f"ellipse dk/dt at t = {t}", nd.derivative(k)(t), ellipse_curvature_rate(t))

    g_sphere, g_torus = metric(sphere), metric(torus)
    for u in ([0.7, 0.3], [1.2, -2.0], [2.6, 1.0]):
        u = np.array(u)
        check(f"sphere metric at {u}", g_sphere(u),
              np.diag([R_SPHERE ** 2, (R_SPHERE * np.sin(u[0])) ** 2]))
        check(f"sphere Christoffel symbols at {u}", christoffel(g_sphere)(u),
              sphere_christoffel(u))
        check(f"sphere Gaussian curvature at {u}", gaussian_curvature(g_sphere)(u),
              1 / R_SPHERE ** 2)
        check(f"torus Christoffel symbols at {u}", christoffel(g_torus)(u), torus_christoffel(u))
        check(f"torus Gaussian curvature at {u}", gaussian_curvature(g_torus)(u),
              torus_curvature(u))
    plot(k, gaussian_curvature(g_torus))
    return 1 if bad else 0


def plot(k, K_torus):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(6, 4), dpi=100,
                                 gridspec_kw={"width_ratios": [1.3, 1]})
    ts = np.linspace(0, 2 * np.pi, 200)
    ax.plot(A_AX * np.cos(ts), B_AX * np.sin(ts), "k", lw=2)
    for t in (0.0, 0.6, np.pi / 2):
        (x, y), (dx, dy) = ellipse(t), nd.derivative(ellipse)(t)
        radius = 1 / k(t)
        n = np.array([-dy, dx]) / np.hypot(dx, dy)          # the inward normal
        c = np.array([x, y]) + radius * n
        ax.plot(c[0] + radius * np.cos(ts), c[1] + radius * np.sin(ts), lw=1)
        ax.plot([x], [y], "o", ms=4, color="k")
    ax.set_aspect("equal")
    ax.set_xlim(-2.6, 2.6)
    ax.set_ylim(-3.2, 1.4)
    ax.set_title("ellipse, osculating circles (1/k)", fontsize=10)
    vs = np.linspace(-np.pi, np.pi, 100)
    bx.plot(vs, torus_curvature((0.0, vs)), "k", lw=2, label="closed form")
    vp = np.linspace(-np.pi, np.pi, 13)
    bx.plot(vp, [K_torus(np.array([0.0, v])) for v in vp], "o", color="C3", label="nestad")
    bx.set_xlabel("v (around the tube)")
    bx.set_title("torus: Gaussian curvature K", fontsize=10)
    bx.legend(fontsize=8)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "geometry.png")
    print("saved geometry.png")


if __name__ == "__main__":
    sys.exit(main())
