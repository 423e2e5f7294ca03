"""``nestad.optim``: gradient-based optimizers over any parameter structure, in the
functional style of autograd's ``misc.optimizers``.

``adam(grad, x0, callback=None, num_iters=100, step_size=0.001)`` calls ``grad(x, i)``
(the gradient at parameters ``x`` on iteration ``i``, a structure like ``x0``), calls
``callback(x, i, g)`` if given, updates, and returns the final parameters in ``x0``'s
structure.  Internally parameters are one flat vector (``flatten``); the updates are
written with nestad.numpy, so an optimizer's result can itself be differentiated (with
respect to ``x0`` or a step size: meta-optimization).

``sgd``, ``rmsprop`` and ``adam`` are autograd's update equations, iterate for iterate
(autograd's ``sgd`` has momentum: ``mass=0.9``; ``mass=0`` is plain gradient descent);
``momentum`` is the heavy-ball form of JAX's ``example_libraries.optimizers``.
"""
import functools

import numpy as np

from . import numpy as anp
from .operators import _leaves_of
from .values import primal_value

__all__ = ['flatten', 'sgd', 'momentum', 'rmsprop', 'adam']


def flatten(structure):
    """``(vector, unflatten)``: every number of ``structure`` (numbers and arrays in
    tuples, lists, dicts... as the operators take them) in one 1-d array, and the function
    that rebuilds the structure from such a vector.  Both directions differentiate: the
    vector is made by ravel and concatenate, the structure by slicing and reshape."""
    leaves, tree = _leaves_of(structure, "flatten", "structure")    # (numbers only)
    shapes = [np.shape(primal_value(x)) for x in leaves]
    scalar = [np.ndim(x) == 0 and not isinstance(x, np.ndarray) for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    vector = (anp.concatenate([anp.ravel(x) for x in leaves]) if leaves
              else np.zeros(0))

    def unflatten(vector):
        parts, start = [], 0
        for shape, size, as_number in zip(shapes, sizes, scalar):
            part = vector[start] if as_number else anp.reshape(vector[start:start + size], shape)
            parts.append(part)
            start += size
        return tree.build(parts)
    return vector, unflatten


def _over_structures(optimize):
    """An optimizer of flat vectors as one of any parameter structure."""
    @functools.wraps(optimize)
    def optimizer(grad, x0, callback=None, *args, **kwargs):
        x, unflatten = flatten(x0)
        flat_grad = lambda x, i: flatten(grad(unflatten(x), i))[0]          # noqa: E731
        flat_callback = callback and (lambda x, i, g: callback(unflatten(x), i, unflatten(g)))
        return unflatten(optimize(flat_grad, x, flat_callback, *args, **kwargs))
    return optimizer


@_over_structures
def sgd(grad, x, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """Stochastic gradient descent with momentum, autograd's: the velocity is an
    exponential average of the negative gradients, v = mass v - (1 - mass) g."""
    velocity = np.zeros(len(primal_value(x)))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@_over_structures
def momentum(grad, x, callback=None, num_iters=100, step_size=0.1, mass=0.9):
    """Heavy-ball momentum (JAX's example_libraries.optimizers.momentum):
    v = mass v + g, x = x - step_size v."""
    velocity = np.zeros(len(primal_value(x)))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity + g
        x = x - step_size * velocity
    return x


@_over_structures
def rmsprop(grad, x, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=1e-8):
    """Root-mean-square propagation: each step divided by a running root mean square of
    the gradient (autograd's: the average starts at ones)."""
    avg_sq_grad = np.ones(len(primal_value(x)))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        avg_sq_grad = avg_sq_grad * gamma + g ** 2 * (1 - gamma)
        x = x - step_size * g / (anp.sqrt(avg_sq_grad) + eps)
    return x


@_over_structures
def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba, arXiv:1412.6980): momentum of the gradient and of its square,
    both corrected for their start at zero."""
    m = np.zeros(len(primal_value(x)))
    v = np.zeros(len(primal_value(x)))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * (g ** 2) + b2 * v
        mhat = m / (1 - b1 ** (i + 1))
        vhat = v / (1 - b2 ** (i + 1))
        x = x - step_size * mhat / (anp.sqrt(vhat) + eps)
    return x
