"""``scan`` and ``fori_loop``: loops of a fixed trip count, with JAX's signatures.

Both are ``while_loop``s on a state that holds a step counter: eagerly they run as
Python loops (differentiated by overloading), traced they stage as one loop equation,
whatever the trip count, and their derivatives are ``while_loop``'s (the adjoint rule
in reverse mode, ``nestad.staging.loops``).

``scan`` keeps ``xs`` in the loop's state, unchanged (a loop invariant, so that a
perturbation of ``xs`` is differentiated like the rest of the state), reads row ``i``
of each leaf, and writes the step's ``y`` into row ``i`` of buffers for the stacked
``ys`` (``nestad.staging.loops.row`` / ``row_set``).
"""
import numpy as np

from .errors import InvalidInputError
from .revolve import check_checkpoints
from .staging.control import while_loop
from .staging.loops import row, row_set
from .structures import flatten
from .tracer import active, is_tracer
from .values import Perturbed, primal_value
from . import numpy as anp


def fori_loop(lower, upper, body, init_val, checkpoints=None):
    """``for i in range(lower, upper): val = body(i, val)``; returns ``val`` (JAX's
    ``lax.fori_loop``).  ``lower`` and ``upper`` are integers (traced ones too).
    ``checkpoints=N``: reverse mode keeps at most N states (``while_loop``'s)."""
    check_checkpoints("fori_loop", checkpoints)
    for name, b in (("lower", lower), ("upper", upper)):
        v = primal_value(b)
        if isinstance(v, (bool, np.bool_)) or not (
                isinstance(v, (int, np.integer)) or (is_tracer(v) or isinstance(v, np.ndarray))
                and v.dtype.kind in 'iu' and v.shape == ()):
            raise InvalidInputError(
                f"fori_loop: {name} must be an integer, not {type(v).__name__} {v!r:.30}; "
                "pass the loop bounds as ints")
    lower, upper = primal_value(lower), primal_value(upper)
    def step(s):
        return s[0] + 1, body(s[0], s[1])
    if isinstance(lower, (int, np.integer)) and isinstance(upper, (int, np.integer)):
        step.known_trips = max(0, int(upper) - int(lower))   # (checkpoints placed as it runs)
    _, out = while_loop(lambda s: s[0] < upper, step, (lower, init_val), checkpoints=checkpoints)
    return out


def scan(f, init, xs=None, length=None, reverse=False, checkpoints=None):
    """``(carry, ys)``: ``carry, y = f(carry, x)`` for each ``x`` along the leading axis
    of ``xs`` (a structure of arrays), the ``y``s stacked (JAX's ``lax.scan``).  ``xs``
    None: ``length`` steps with ``x`` None; ``reverse``: from the last row to the first
    (``ys`` still in the order of ``xs``).  ``checkpoints=N``: reverse mode keeps at most
    N states of the loop (the carry and the ys' buffers) and recomputes the others
    (``while_loop``'s); eagerly too, where it then runs as that loop when ``init`` or
    ``xs`` carries a derivative."""
    checkpoints = check_checkpoints("scan", checkpoints)
    x_leaves, x_tree = flatten(xs) if xs is not None else ([], None)
    n = _length(x_leaves, length)
    if n == 0:
        raise InvalidInputError("scan: zero steps (xs of length 0 or length=0): the shape of "
                                "ys is unknown; give at least one step")
    leaves = flatten((init, xs))[0]
    traced = active() is not None or any(is_tracer(primal_value(v)) for v in leaves)
    if not traced and (checkpoints is None or not any(isinstance(v, Perturbed) for v in leaves)):
        return _eager(f, init, x_leaves, x_tree, n, reverse)

    def x_at(xl, j):
        return x_tree.build([row(x, j) for x in xl])
    # one step, traced and dropped as dead code, gives the ys' shapes and dtypes
    first = n - 1 if reverse else 0
    _, y0 = _step(f, init, x_at(x_leaves, first) if x_leaves else None)
    y_leaves, y_tree = _flat(y0)
    bufs = [np.zeros((n,) + np.shape(primal_value(y)), _dtype(y)) for y in y_leaves]

    def body(s):
        i, carry, b, xl = s
        j = n - 1 - i if reverse else i
        carry, y = _step(f, carry, x_at(xl, j) if xl else None)
        ys, tree = _flat(y)
        if _signature(tree) != _signature(y_tree):
            raise InvalidInputError("scan: f returned ys of different structures in two steps")
        return i + 1, carry, [row_set(bb, j, yy) for bb, yy in zip(b, ys)], xl
    body.known_trips = n
    _, carry, bufs, _ = while_loop(lambda s: s[0] < n, body, (0, init, bufs, list(x_leaves)),
                                   checkpoints=checkpoints)
    return carry, None if y_tree is None else y_tree.build(bufs)


def _flat(y):
    """A step's y as (leaves, tree); None (no y) as no leaves."""
    return ([], None) if y is None else flatten(y)


def _signature(tree):
    return None if tree is None else tree.signature()


def _step(f, carry, x):
    out = f(carry, x)
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise InvalidInputError(f"scan: f must return a pair (carry, y), not {type(out).__name__}"
                                "; return (new_carry, None) if there is no y")
    return out


def _eager(f, carry, x_leaves, x_tree, n, reverse):
    ys = [None] * n
    for j in (range(n - 1, -1, -1) if reverse else range(n)):
        carry, ys[j] = _step(f, carry, x_tree.build([x[j] for x in x_leaves])
                             if x_leaves else None)
    leaves = [_flat(y) for y in ys]
    if any(_signature(t) != _signature(leaves[0][1]) for _, t in leaves):
        raise InvalidInputError("scan: f returned ys of different structures in two steps")
    if leaves[0][1] is None:
        return carry, None
    stacked = [anp.stack([ls[k] for ls, _ in leaves]) for k in range(len(leaves[0][0]))]
    return carry, leaves[0][1].build(stacked)


def _length(x_leaves, length):
    lens = {np.shape(primal_value(x))[0] if np.ndim(primal_value(x)) else None for x in x_leaves}
    if None in lens:
        raise InvalidInputError("scan: every leaf of xs needs a leading axis to scan over; "
                                "a scalar has none")
    if len(lens) > 1:
        raise InvalidInputError(f"scan: the leaves of xs have different leading lengths "
                                f"{sorted(lens)}; give them all the same number of rows")
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
            raise InvalidInputError(f"scan: length must be a non-negative int, not {length!r:.30}")
        if lens and lens != {length}:
            raise InvalidInputError(f"scan: length={length} but xs has {lens.pop()} rows; "
                                    "drop length or make them agree")
        return int(length)
    if not lens:
        raise InvalidInputError("scan: xs is None (or holds no arrays), so give length=, the "
                                "number of steps")
    return lens.pop()


def _dtype(y):
    v = primal_value(y)
    return getattr(v, 'dtype', None) or np.result_type(v)
