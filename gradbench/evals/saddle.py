"""GradBench's ``saddle``: a saddle point of ``f(x, y) = (x1^2 + y1^2) - (x2^2 + y2^2)``
found by nested gradient descent, ``x* = argmin_x max_y f(x, y)`` and then
``y* = argmax_y f(x*, y)``, all from the given start.

The outer gradient differentiates through the inner solver (a gradient ascent with
its own gradient inside).  A function ``ab`` takes the outer gradient (the argmin,
and the final argmax) in mode ``a`` and the inner one in mode ``b``; ``f`` is
``nestad.gradient_f``, ``r`` is ``nestad.gradient_r``.
"""
from . import function
from .solver import GRADIENT, argmax, argmin


def f(x1, y1, x2, y2):
    return (x1 * x1 + y1 * y1) - (x2 * x2 + y2 * y2)


def saddle(start, outer, inner):
    def cost_at(p):                     # q -> f(p, q)
        return lambda q: f(p[0], p[1], q[0], q[1])

    def max_cost(p):                    # max_q f(p, q), by an inner gradient ascent
        cost = cost_at(p)
        return cost(argmax(inner, cost, start))

    x = argmin(outer, max_cost, start)
    y = argmax(outer, cost_at(x), start)
    return [float(v) for v in x + y]


def _mode(outer, inner):
    @function(prepare=lambda input: ([float(v) for v in input['start']],), output=list)
    def solve(start):
        return saddle(start, GRADIENT[outer], GRADIENT[inner])
    return solve


ff = _mode('f', 'f')
fr = _mode('f', 'r')
rf = _mode('r', 'f')
rr = _mode('r', 'r')
