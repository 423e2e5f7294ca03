"""GradBench's ``llsq`` (from cmpad): ``y(x) = 1/2 sum_i (s_i - sum_j x_j t_i^j)^2`` with
``t_i = -1 + 2i/(n-1)`` and ``s_i = sign(t_i)``, and its gradient by reverse mode."""
import numpy

import nestad as nd
import nestad.numpy as np

from . import function, to_list


def llsq(x, n):
    t = -1 + numpy.arange(n) * 2 / (n - 1)
    powers = numpy.vander(t, len(x), increasing=True)      # powers[i, j] = t_i ** j
    residual = numpy.sign(t) - powers @ x
    return np.sum(residual * residual) / 2


def _prepare(input):
    return numpy.array(input['x'], dtype=float), int(input['n'])


@function(prepare=_prepare)
def primal(x, n):
    return llsq(x, n)


@function(prepare=_prepare, output=to_list)
def gradient(x, n):
    return nd.gradient_r(llsq)(x, n)
