"""GradBench's ``particle``: the control ``w`` for which a charged particle, pushed
by two fixed charges at (10, 10 - w) and (10, 0), crosses the x axis at the origin.

The particle starts at (0, 8) with velocity (0.75, 0) and accelerates by ``-grad p``
(the inner gradient), ``p(x) = sum 1/|x - charge|``; naive Euler steps of 0.1 run
until the next step would cross the x axis, and the crossing point is interpolated
linearly.  ``w`` minimises the squared x coordinate of the crossing by gradient
descent from the given ``w`` (the outer gradient, through the whole simulation).
A function ``ab`` takes the outer gradient in mode ``a`` and the inner in mode ``b``.
"""
import nestad as nd

from . import function
from .solver import GRADIENT, argmin

DT = 0.1


def naive_euler(w, gradient):
    charges = [(10.0, 10.0 - w), (10.0, 0.0)]

    def potential(x):
        return sum(1 / nd.sqrt((x[0] - c0) ** 2 + (x[1] - c1) ** 2) for c0, c1 in charges)

    force = gradient(potential)
    x, xdot = [0.0, 8.0], [0.75, 0.0]
    while True:
        xddot = [-g for g in force(x)]
        x_new = [x[0] + DT * xdot[0], x[1] + DT * xdot[1]]
        if not x_new[1] > 0:
            break
        x, xdot = x_new, [xdot[0] + DT * xddot[0], xdot[1] + DT * xddot[1]]
    dt_f = -x[1] / xdot[1]
    x_f = x[0] + dt_f * xdot[0]
    return x_f * x_f


def particle(w0, outer, inner):
    w = argmin(outer, lambda w: naive_euler(w[0], inner), [w0])
    return float(w[0])


def _mode(outer, inner):
    @function(prepare=lambda input: (float(input['w']),))
    def solve(w0):
        return particle(w0, GRADIENT[outer], GRADIENT[inner])
    return solve


ff = _mode('f', 'f')
fr = _mode('f', 'r')
rf = _mode('r', 'f')
rr = _mode('r', 'r')
