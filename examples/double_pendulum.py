"""Lagrangian mechanics: a double pendulum's equations of motion from its Lagrangian.

For a Lagrangian L(q, qdot) the Euler-Lagrange equations  d/dt dL/dqdot = dL/dq  expand to

    M qddot + C qdot = dL/dq,   M = d2L/dqdot2 (the mass matrix),  C = d2L/dq dqdot,

so  qddot = M^-1 (dL/dq - C qdot).  M is ``hessian`` in qdot, C the Jacobian in q of the
gradient in qdot, dL/dq a gradient: nestad derives the dynamics from L alone.  The energy
is the Legendre transform  E = qdot . dL/dqdot - L.

``nd.stage`` compiles the acceleration, derivatives included, to plain Python once, and
RK4 (dt = 0.005) integrates 10 s.  Checks: the acceleration against the textbook
double-pendulum equations at every step of the run (1e-12 relative to its size), the
staged acceleration against the unstaged one (1e-13), the energy from the Legendre
transform against T + V written out (1e-13), and energy conservation by the integrator:
over 10 s of this chaotic motion the drift stays below 1e-4 of the energy scale, and
halving the step shrinks it at least 10 times (RK4's error is O(dt^4): 16 times).  The
figure shows the path of the lower bob and the energy error.
"""
import os
import sys
from pathlib import Path

import numpy as np

import nestad as nd

FIGURES = Path(os.environ.get("NESTAD_EXAMPLES_FIGURES", Path(__file__).parent / "figures"))
M1, M2, L1, L2, G = 1.0, 2.0, 1.0, 0.7, 9.81


def lagrangian(q, qdot):
    """T - V of a double pendulum: angles q from the downward vertical."""
    t1, t2 = q[0], q[1]
    w1, w2 = qdot[0], qdot[1]
    T = (0.5 * (M1 + M2) * L1 ** 2 * w1 * w1 + 0.5 * M2 * L2 ** 2 * w2 * w2
         + M2 * L1 * L2 * w1 * w2 * nd.cos(t1 - t2))
    V = -(M1 + M2) * G * L1 * nd.cos(t1) - M2 * G * L2 * nd.cos(t2)
    return T - V


def acceleration(q, qdot):
    M = nd.hessian(lambda v: lagrangian(q, v))(qdot)
    dL_dq = nd.gradient_r(lambda u: lagrangian(u, qdot))(q)
    C = nd.jacobian_f(lambda u: nd.gradient_r(lambda v: lagrangian(u, v))(qdot))(q)
    return np.linalg.solve(M, dL_dq - C @ qdot)


def energy(q, qdot):
    return qdot @ nd.gradient_r(lambda v: lagrangian(q, v))(qdot) - lagrangian(q, qdot)


def acceleration_textbook(q, qdot):
    """The double pendulum's equations of motion solved by hand (e.g. myphysicslab)."""
    t1, t2 = q
    w1, w2 = qdot
    d = t1 - t2
    den = 2 * M1 + M2 - M2 * np.cos(2 * d)
    a1 = (-G * (2 * M1 + M2) * np.sin(t1) - M2 * G * np.sin(t1 - 2 * t2)
          - 2 * np.sin(d) * M2 * (w2 * w2 * L2 + w1 * w1 * L1 * np.cos(d))) / (L1 * den)
    a2 = (2 * np.sin(d) * (w1 * w1 * L1 * (M1 + M2) + G * (M1 + M2) * np.cos(t1)
                           + w2 * w2 * L2 * M2 * np.cos(d))) / (L2 * den)
    return np.array([a1, a2])


def energy_textbook(q, qdot):
    t1, t2 = q
    w1, w2 = qdot
    T = 0.5 * (M1 + M2) * (L1 * w1) ** 2 + 0.5 * M2 * (L2 * w2) ** 2 \
        + M2 * L1 * L2 * w1 * w2 * np.cos(t1 - t2)
    return T - (M1 + M2) * G * L1 * np.cos(t1) - M2 * G * L2 * np.cos(t2)


def rk4(accel, q, qdot, dt, steps):
    """Integrate q'' = accel(q, q'); returns the states (q, q') at every step."""
    states = [(q, qdot)]
    for _ in range(steps):
        k1q, k1v = qdot, accel(q, qdot)
        k2q, k2v = qdot + dt / 2 * k1v, accel(q + dt / 2 * k1q, qdot + dt / 2 * k1v)
        k3q, k3v = qdot + dt / 2 * k2v, accel(q + dt / 2 * k2q, qdot + dt / 2 * k2v)
        k4q, k4v = qdot + dt * k3v, accel(q + dt * k3q, qdot + dt * k3v)
        q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        qdot = qdot + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        states.append((q, qdot))
    return states


def main():
    bad = 0

    def check(label, err, tol):
        nonlocal bad
        ok = err <= tol
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {label}: {err:.1e} (tolerance {tol:g})")

    staged = nd.stage(acceleration)
    q0, qdot0 = np.array([2.0, 2.5]), np.array([0.0, 0.0])
    check("staged vs unstaged acceleration at the start",
          np.max(np.abs(staged(q0, qdot0) - acceleration(q0, qdot0))), 1e-13)

    dt, steps = 0.005, 2000
    states = rk4(staged, q0, qdot0, dt, steps)
    scale = (M1 + M2) * G * L1 + M2 * G * L2                # the size of the energies here
    acc_err = max(np.max(np.abs(acceleration_textbook(q, v) - staged(q, v)))
                  / max(1.0, np.max(np.abs(acceleration_textbook(q, v)))) for q, v in states)
    check(f"acceleration vs textbook, max over {steps + 1} states", acc_err, 1e-12)
    E = np.array([energy_textbook(q, v) for q, v in states])
    check("Legendre-transform energy vs T + V, at 20 states",
          max(abs(energy(q, v) - energy_textbook(q, v)) for q, v in states[::100]) / scale,
          1e-13)
    drift = np.max(np.abs(E - E[0])) / scale
    check(f"energy drift over 10 s of RK4, dt = {dt}, relative to {scale:g}", drift, 1e-4)
    coarse = rk4(staged, q0, qdot0, 2 * dt, steps // 2)
    drift_coarse = max(abs(energy_textbook(q, v) - E[0]) for q, v in coarse) / scale
    ratio = drift_coarse / drift
    ok = ratio >= 10
    bad += not ok
    print(f"{'ok ' if ok else 'BAD'} with dt = {2 * dt} the drift is {drift_coarse:.1e}, "
          f"{ratio:.0f} times larger (at least 10; RK4's O(dt^4) predicts 16)")
    plot(states, (E - E[0]) / scale, dt)
    return 1 if bad else 0


def plot(states, energy_error, dt):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no figure")
        return
    t1 = np.array([q[0] for q, _ in states])
    t2 = np.array([q[1] for q, _ in states])
    x = L1 * np.sin(t1) + L2 * np.sin(t2)
    y = -L1 * np.cos(t1) - L2 * np.cos(t2)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(6, 4), dpi=100,
                                 gridspec_kw={"width_ratios": [1.1, 1]})
    ax.plot(x, y, lw=0.6)
    ax.plot([0, L1 * np.sin(t1[0]), x[0]], [0, -L1 * np.cos(t1[0]), y[0]], "ko-", ms=4)
    ax.set_aspect("equal")
    ax.set_title("lower bob, 10 s", fontsize=10)
    bx.plot(np.arange(len(states)) * dt, energy_error, lw=0.8)
    bx.set_xlabel("t (s)")
    bx.set_title("(E - E0) / energy scale", fontsize=10)
    fig.suptitle("Double pendulum from its Lagrangian (RK4, dt = 0.005)", fontsize=11)
    fig.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(FIGURES / "double_pendulum.png")
    print("saved double_pendulum.png")


if __name__ == "__main__":
    sys.exit(main())
