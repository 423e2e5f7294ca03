"""``nd.check_grads``: check a function's derivatives, as autograd's ``check_grads``.

Along random directions, forward mode (``jvp``) and reverse mode (``vjp``) are each
compared with central differences, then the functions computing those derivatives are
checked in turn, to the order asked; and the two modes are compared with each other to
rounding (``<u, J v>`` by jvp against ``<J^T u, v>`` by vjp).  A disagreement raises
``AssertionError`` naming the check, the order and both numbers.
"""
import numpy as np

from .operators import jvp, vjp
from .structures import flatten
from .values import primal_value

_MODES = ("fwd", "rev")


def check_grads(f, modes=_MODES, order=2, *, eps=1e-6, rtol=1e-6, atol=1e-6, seed=0):
    """``check_grads(f, modes=("fwd", "rev"), order=2)(*args, **kwargs)`` checks ``f``'s
    derivatives in all its positional arguments (numbers, arrays, structures of them)
    up to ``order``; keyword arguments are passed to ``f`` undifferentiated.  Returns
    None, or raises AssertionError."""
    unknown = set(modes) - set(_MODES)
    if unknown:
        raise ValueError(f"check_grads: modes must be among {_MODES}, not {sorted(unknown)}")

    def check(*args, **kwargs):
        rng = np.random.default_rng(seed)
        name = getattr(f, '__name__', 'f')
        # the modes agree to rounding: of float64, or of a narrower float argument's
        narrow = any(getattr(primal_value(v), 'dtype', np.dtype(float)).itemsize < 8
                     for v in flatten(args)[0])
        _check(lambda x: f(*x, **kwargs), tuple(args), tuple(modes), order,
               _Tolerance(eps, rtol, atol, 1e-4 if narrow else 1e-9, rng), name)
    return check


class _Tolerance:
    def __init__(self, eps, rtol, atol, modes, rng):
        self.eps, self.rtol, self.atol, self.modes, self.rng = eps, rtol, atol, modes, rng

    def close(self, a, b):
        return abs(a - b) <= self.atol + self.rtol * max(abs(a), abs(b))


def _leaves(x):
    return [np.asarray(primal_value(v), dtype=float) for v in flatten(x)[0]]


def _random_like(x, rng):
    leaves, tree = flatten(x)
    return tree.build([rng.standard_normal(np.shape(primal_value(v))) if np.shape(primal_value(v))
                       else float(rng.standard_normal()) for v in leaves])


def _axpy(a, x, y):
    lx, tree = flatten(x)
    return tree.build([a * u + v for u, v in zip(lx, flatten(y)[0])])


def _inner(x, y):
    return float(sum(np.sum(a * b) for a, b in zip(_leaves(x), _leaves(y))))


def _central(f, x, v, u, eps):
    """<u, (f(x + eps/2 v) - f(x - eps/2 v)) / eps>: <u, J v> by central differences."""
    return (_inner(u, f(_axpy(eps / 2, v, x))) - _inner(u, f(_axpy(-eps / 2, v, x)))) / eps


def _check(f, x, modes, order, tol, name):
    where = f"check_grads of {name} (order {order} to go)"
    if "fwd" in modes and "rev" in modes:
        v = _random_like(x, tol.rng)
        y, pullback = vjp(f, x)
        u = _random_like(y, tol.rng)
        a, b = _inner(u, jvp(f, (x,), (v,))[1]), _inner(pullback(u)[0], v)
        if abs(a - b) > tol.modes * (1 + abs(a) + abs(b)):
            raise AssertionError(f"{where}: forward and reverse mode disagree: "
                                 f"<u, J v> by jvp = {a!r}, <J^T u, v> by vjp = {b!r}")
    if "fwd" in modes:
        v = _random_like(x, tol.rng)
        u = _random_like(f(x), tol.rng)
        exact = _inner(u, jvp(f, (x,), (v,))[1])
        numeric = _central(f, x, v, u, tol.eps)
        if not tol.close(exact, numeric):
            raise AssertionError(f"{where}: forward mode (jvp) = {exact!r} but central "
                                 f"differences give {numeric!r}")
        if order > 1:
            _check(lambda xv: jvp(f, (xv[0],), (xv[1],))[1], (x, v), modes, order - 1, tol,
                   f"jvp of {name}")
    if "rev" in modes:
        v = _random_like(x, tol.rng)
        y, pullback = vjp(f, x)
        u = _random_like(y, tol.rng)
        exact = _inner(pullback(u)[0], v)
        numeric = _central(f, x, v, u, tol.eps)
        if not tol.close(exact, numeric):
            raise AssertionError(f"{where}: reverse mode (vjp) = {exact!r} but central "
                                 f"differences give {numeric!r}")
        if order > 1:
            _check(lambda xu: vjp(f, xu[0])[1](xu[1])[0], (x, u), modes, order - 1, tol,
                   f"vjp of {name}")
