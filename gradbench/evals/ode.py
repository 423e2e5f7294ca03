"""GradBench's ``ode`` (from cmpad): ``y' = f(y)`` with ``f(y)_0 = x_0`` and
``f(y)_i = x_i y_{i-1}``, ``y(0) = 0``, solved to t = 2 by ``s`` steps of classical
Runge-Kutta; ``primal`` is y(2), ``gradient`` the gradient of its last entry with
respect to x, by reverse mode through the s steps."""
import numpy

import nestad as nd
import nestad.numpy as np

from . import function, to_list


def runge_kutta(x, s):
    def f(y):
        return np.concatenate([x[:1], x[1:] * y[:-1]])

    h = 2.0 / s
    y = numpy.zeros(len(x))
    for _ in range(s):
        k1 = f(y)
        k2 = f(y + h * k1 / 2)
        k3 = f(y + h * k2 / 2)
        k4 = f(y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


def _prepare(input):
    return numpy.array(input['x'], dtype=float), int(input['s'])


@function(prepare=_prepare, output=to_list)
def primal(x, s):
    return runge_kutta(x, s)


@function(prepare=_prepare, output=to_list)
def gradient(x, s):
    return nd.gradient_r(lambda x: runge_kutta(x, s)[-1])(x)
