"""The gradient-descent solver that GradBench's ``saddle`` and ``particle`` evals
prescribe (Pearlmutter and Siskind's ``multivariate-argmin``).

Points are lists of numbers, which may carry the perturbations of enclosing
derivative calls: the comparisons below look at values, and ``nestad.sqrt`` keeps
the derivative of the norms.
"""
import nestad as nd

# The two modes of a gradient: nestad's forward- and reverse-mode operators.
GRADIENT = {'f': nd.gradient_f, 'r': nd.gradient_r}


def magnitude(v):
    return nd.sqrt(sum(vi * vi for vi in v))


def distance(u, v):
    return magnitude([ui - vi for ui, vi in zip(u, v)])


def argmin(gradient, f, x):
    """Minimise ``f`` from the point ``x``, with ``gradient(f)`` for its gradient.

    The step ``eta`` starts at 1e-5, doubles after ten successful steps in a row and
    halves after a step that does not decrease ``f``; the descent stops when the
    gradient or the step is at most 1e-5 long."""
    g = gradient(f)
    fx, gx = f(x), g(x)
    eta, i = 1e-5, 0
    while True:
        if magnitude(gx) <= 1e-5:
            return x
        if i == 10:
            eta, i = 2 * eta, 0
            continue
        x_new = [xi - eta * gi for xi, gi in zip(x, gx)]
        if distance(x, x_new) <= 1e-5:
            return x
        fx_new = f(x_new)
        if fx_new < fx:
            x, fx, gx, i = x_new, fx_new, g(x_new), i + 1
        else:
            eta, i = eta / 2, 0


def argmax(gradient, f, x):
    return argmin(gradient, lambda y: -f(y), x)
