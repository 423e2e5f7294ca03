"""Controlling differentiation: ``stop_gradient``, ``checkpoint``, ``checkpoint_loop``,
``fixed_point``.

Each works in every mode and nests: for the outermost perturbation among its
arguments it applies its own rule (``nestad.custom``), and older perturbations are
handled the same way one run at a time.
"""
import functools
import math
import warnings

import numpy as np

from . import perturbation
from .custom import apply, forward_result, peel, reads_closure, recomputing_cells, vjp_of
from .errors import InvalidInputError, NestadError
from .extraction import tangent_of
from .arrays import make_bundle
from .batching import all_members, batched_top, call_per_member
from .structures import flatten, tree_map
from .values import Perturbed, primal_value


def stop_gradient(x):
    """``x`` with every perturbation removed, leaf by leaf: no derivative of any run,
    forward or reverse, at any depth, flows through the result."""
    return tree_map(primal_value, x)


# ---------------------------------------------------------------- checkpointing

def checkpoint(f):
    """``f``, computed so that reverse mode does not keep its tape (seed 002's
    checkpointing): the forward phase runs ``f`` on the primal values and keeps only
    its arguments; the reverse phase reruns ``f`` with a tape when it needs the
    sensitivities (so ``f`` must be deterministic: random numbers drawn inside it would
    differ in the rerun; draw them outside and pass them in).  Memory for the time of one
    more run of ``f``.  The outermost run at the call decides: under a forward run ``f``
    runs as usual (forward mode keeps no tape)."""
    @functools.wraps(f)
    def checkpointed(*args, **kwargs):
        leaves, tree = flatten((args, kwargs))
        if not any(isinstance(x, Perturbed) for x in leaves):
            return f(*args, **kwargs)
        top, carried, primals, forward = peel(leaves)
        if forward or batched_top(leaves) is not None:     # no tape to save
            return f(*args, **kwargs)
        out = apply(checkpointed, tree, primals)
        if reads_closure(out, top):
            # f reads a value of this run from its closure: the recomputation could not
            # reach it, so this run is taped as usual (correct, but without the saving).
            warnings.warn(f"checkpoint: {getattr(f, '__name__', 'the function')} reads a value "
                          "being differentiated from its closure, so its tape is kept; pass "
                          "that value as an argument to save the memory", stacklevel=2)
            return f(*args, **kwargs)
        return recomputing_cells(top, leaves, carried, primals, out,
                                 vjp_of(f, tree, carried, lambda: _closure_error(f)),
                                 "a checkpointed function")
    return checkpointed


def _closure_error(f):
    return InvalidInputError(
        f"checkpoint: {getattr(f, '__name__', 'the function')} reads a value being "
        "differentiated from its closure, and the reverse phase ran it again after that "
        "value's run had returned; pass the value to the checkpointed function as an "
        "argument")


def checkpoint_loop(body, state, steps, every=None):
    """``steps`` times ``state = body(state)``, checkpointed every ``every`` steps
    (default about sqrt(steps)): reverse mode keeps the state at each checkpoint and the
    tape of one segment at a time, so memory grows like sqrt(steps), not steps, for one
    more forward run of the loop."""
    if not isinstance(steps, int) or steps < 0:
        raise InvalidInputError(f"checkpoint_loop: steps must be an int >= 0, not {steps!r}")
    every = every or max(1, math.isqrt(steps - 1) + 1 if steps else 1)
    segment = checkpoint(_run_segment)
    done = 0
    while done < steps:
        m = min(every, steps - done)
        state = segment(body, state, m)
        done += m
    return state


def _run_segment(body, state, m):
    for _ in range(m):
        state = body(state)
    return state


# ---------------------------------------------------------------- fixed points

def fixed_point(f, x0, *params, tol=1e-12, max_iter=10_000):
    """The fixed point of ``x -> f(x, *params)``, iterated from ``x0`` until a step
    changes no entry by more than ``tol`` (relative to the largest entry, at least 1).

    Its derivative with respect to ``params`` is the implicit one (DVL's open issue 1):
    with ``x* = f(x*, p)``, forward mode iterates the tangent equation
    ``dx = df/dx dx + df/dp dp`` and reverse mode the adjoint equation
    ``w = ct + w df/dx`` (then ``dp = w df/dp``) to convergence, instead of
    differentiating the iterations; ``x0`` carries no derivative.  Both need
    ``x -> f(x, p)`` to be a contraction near ``x*`` (as the primal iteration does).
    Nests to any depth and pairing; staged, the iterations are ``while_loop``s."""
    x0 = stop_gradient(x0)
    every, every_tree = flatten((x0, params))
    top = batched_top(every)
    if top is not None:           # vmap: each member's fixed point (batching.FALLBACKS)
        return call_per_member(lambda s: fixed_point(f, s[0], *s[1], tol=tol, max_iter=max_iter),
                               every, every_tree, top, 'fixed_point')
    leaves, tree = flatten(params)
    if not any(isinstance(x, Perturbed) for x in leaves):
        x_star = _iterate(lambda x: f(x, *params), x0, tol, max_iter, "fixed_point")
        if reads_closure(x_star, -1):
            raise InvalidInputError(
                "fixed_point: the function reads a value being differentiated from its "
                "closure; pass that value in params, so that its derivative is the implicit "
                "one (differentiating the iterations would be another method, with its own "
                "convergence)")
        return x_star
    top, carried, primals, forward = peel(leaves)
    p = tree.build(primals)
    x_star = fixed_point(f, x0, *p, tol=tol, max_iter=max_iter)
    if forward:
        it = iter([x.tangent for x, c in zip(leaves, carried) if c])
        dp = [next(it) if c else None for c in carried]

        def tangent_step(dx):         # df/dx dx + df/dp dp at the fixed point
            tag = perturbation.fresh()
            try:
                xb = _zip_map(lambda a, d: make_bundle(tag, a, d), x_star, dx)
                pb = [make_bundle(tag, a, d) if d is not None else a for a, d in zip(primals, dp)]
                return tangent_of(tag, f(xb, *tree.build(pb)), "fixed_point")
            finally:
                perturbation.retire(tag)
        dx = _iterate(tangent_step, tree_map(_zero_like, x_star), tol, max_iter,
                      "fixed_point's tangent equation")
        return forward_result(top, x_star, dx)

    def pullback(prims, ct):
        from .operators import vjp
        _, pb = vjp(lambda x, *ls: f(x, *tree.build(ls)), x_star, *prims)
        w = _iterate(lambda w: _add(ct, pb(w)[0]), ct, tol, max_iter,
                     "fixed_point's adjoint equation")
        cts = pb(w)[1:]
        return [c for c, k in zip(cts, carried) if k]
    return recomputing_cells(top, leaves, carried, primals, x_star, pullback, "fixed_point")


def _zero_like(x):
    shape = np.shape(primal_value(x))
    return np.zeros(shape) if shape else 0.0


def _zip_map(fn, a, b):
    """``fn`` leaf by leaf over two structures of the same shape."""
    la, ta = flatten(a)
    return ta.build([fn(x, y) for x, y in zip(la, flatten(b)[0])])


def _add(a, b):
    return _zip_map(lambda x, y: x + y, a, b)


def _change(new, old):
    """max |new - old| and max |new| over the leaves (nestad values: traced if traced)."""
    from . import numpy as anp
    from .primitives import maximum
    worst = scale = 0.0
    for a, b in zip(flatten(new)[0], flatten(old)[0]):
        d, s = anp.abs(a - b), anp.abs(a)
        if np.ndim(primal_value(d)):
            d, s = anp.max(d), anp.max(s)
        worst, scale = maximum(worst, d), maximum(scale, s)
    return stop_gradient(worst), stop_gradient(scale)


def _iterate(g, x, tol, max_iter, what):
    """Iterate ``x = g(x)`` until it stops changing (at most ``max_iter`` steps)."""
    from .primitives import maximum
    from .staging import while_loop

    def converged(x_new, x_old):
        worst, scale = _change(x_new, x_old)
        return worst <= tol * maximum(1.0, scale)

    def cond(s):
        x_prev, x, k = s
        # (Python's `not` would fix the answer when traced; `== False` stays a value)
        return (k == 0) | ((converged(x, x_prev) == False) & (k < max_iter))   # noqa: E712

    def body(s):
        _, x, k = s
        return (x, g(x), k + 1)
    x_prev, x, k = while_loop(cond, body, (x, x, 0))
    if not all_members(converged(x, x_prev)):
        worst, _ = _change(x, x_prev)
        raise NestadError(f"{what} did not converge in {max_iter} iterations (the last step "
                          f"changed an entry by {primal_value(worst):.3g}); check that the map "
                          "is a contraction near the fixed point, or raise max_iter")
    return x
