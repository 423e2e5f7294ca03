"""The cost of nestad's checks on user primitives (``nd.primitive`` with
``defpartials``, ``defjvp``, ``defvjp``) and registered structures: each task is a
loop of such calls, timed as the minimum over repeats of CPU time per call.

Run it on two checkouts in turn (alternating, several times: a shared machine drifts)
to compare them::

    PYTHONPATH=. python benchmarks/user_primitives.py [task ...]
"""
import sys
import time

import numpy as np

import nestad as nd
import nestad.numpy as anp


@nd.primitive
def softplus(x):
    return np.logaddexp(0.0, x)


softplus.defpartials(lambda x, out: anp.exp(x - out))


@nd.primitive
def matvec(a, x):
    return a @ x


matvec.defjvp(lambda t, a, x, out: t @ x, lambda t, a, x, out: a @ t)
matvec.defvjp(lambda g, a, x, out: anp.outer(g, x), lambda g, a, x, out: anp.transpose(a) @ g)


@nd.primitive
def cube(x):
    return x ** 3


cube.defjvp(lambda t, x, out: 3 * x * x * t)
cube.defvjp(lambda g, x, out: 3 * x * x * g)


class Layer:
    def __init__(self, w, b, name):
        self.w, self.b, self.name = w, b, name


nd.register_structure(Layer, lambda l: ([l.w, l.b], l.name), lambda name, ch: Layer(*ch, name))

A = np.arange(12.0).reshape(3, 4) / 7
V = np.linspace(-1, 1, 4)
XS = np.linspace(-1, 1, 5)
LAYERS = [Layer(0.5 * k, 0.1, "dense") for k in range(10)]


def chain(x):
    for _ in range(20):
        x = softplus(x) * 0.5
    return x


def chain_cube(x):
    for _ in range(20):
        x = cube(x) * 0.5 + 0.1
    return x


def layers_loss(layers):
    acc = 0.0
    for layer in layers:
        acc = acc + layer.w * layer.b
    return acc


TASKS = {
    'plain calls (partials) x20': lambda: chain(0.3),
    'derivative (partials) x20': lambda: nd.derivative(chain)(0.3),
    'gradient_r (partials) x20': lambda: nd.gradient_r(chain)(0.3),
    'derivative (defjvp) x20': lambda: nd.derivative(chain_cube)(0.3),
    'gradient_r (defvjp) x20': lambda: nd.gradient_r(chain_cube)(0.3),
    'gradient_r array (partials) x20': lambda: nd.gradient_r(lambda x: anp.sum(chain(x)))(XS),
    'jacobian_f matvec': lambda: nd.jacobian_f(matvec, 1)(A, V),
    'gradient_r matvec': lambda: nd.gradient_r(lambda x: anp.sum(matvec(A, x) ** 2))(V),
    'hessian (partials)': lambda: nd.hessian(lambda x: anp.sum(softplus(x)))(XS),
    'gradient_r of 10 structures': lambda: nd.gradient_r(layers_loss)(LAYERS),
}


def per_call(task, repeats=9):
    task()
    n = 1
    while True:                           # enough calls for 50 ms of CPU time
        start = time.process_time()
        for _ in range(n):
            task()
        if time.process_time() - start > 0.05:
            break
        n *= 2
    best = float('inf')
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(n):
            task()
        best = min(best, (time.process_time() - start) / n)
    return best


if __name__ == '__main__':
    for name in sys.argv[1:] or TASKS:
        print(f"{name:34s} {per_call(TASKS[name]) * 1e6:9.1f} us")
