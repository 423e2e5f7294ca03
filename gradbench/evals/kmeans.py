"""GradBench's ``kmeans``: the cost ``sum_i min_j |C_j - P_i|^2`` of centroids C for
points P, and the Newton direction ``J / H`` where J is its gradient in C and H the
diagonal of its Hessian (which is diagonal).  Both come from one forward-over-reverse
pass: the JVP of the reverse-mode gradient along a vector of ones gives J and
``H @ ones``, which is H's diagonal."""
import numpy

import nestad as nd
import nestad.numpy as np

from . import function, to_list


def kmeans_cost(points, centroids):
    # squared distances (k, n) as |C_j|^2 + |P_i|^2 - 2 C_j . P_i
    distances = (np.sum(centroids * centroids, axis=1)[:, None]
                 + numpy.sum(points * points, axis=1)[None, :]
                 - 2 * centroids @ points.T)
    return np.sum(np.min(distances, axis=0))


def _prepare(input):
    return (numpy.array(input['points'], dtype=float),
            numpy.array(input['centroids'], dtype=float))


@function(prepare=_prepare)
def cost(points, centroids):
    return kmeans_cost(points, centroids)


@function(prepare=_prepare, output=to_list)
def dir(points, centroids):   # noqa: A001  (the eval's name)
    J, H_ones = nd.jvp(nd.gradient_r(lambda c: kmeans_cost(points, c)),
                       (centroids,), (numpy.ones_like(centroids),))
    return J / H_ones
