"""Controlling differentiation: ``stop_gradient``, ``checkpoint``, ``checkpoint_loop``,
``fixed_point``.

Each works in every mode and nests: checkpoint, fixed_point and stop_gradient of a
function are ``FunctionOp``s (``CHECKPOINT``, ``FIXED_POINT``, ``STOPPED``) applied
through ``bind``, which hands the outermost perturbation among their arguments to that
interpretation's entry in their rule table (built from ``nestad.custom``); older
perturbations are handled the same way one run at a time.
"""
import functools
import math
import numbers
import random
import types
import warnings

import numpy as np

from . import batching, perturbation
from .custom import apply, forward_result, jvp_of, reads_closure, recomputing_cells, vjp_of
from .errors import InvalidInputError, NestadError
from .interpret import FORWARD, FunctionOp, bind
from .extraction import PRIMAL, ExtractedFunction, tangent_of
from .arrays import make_bundle
from .batching import all_members, call_per_member
from .structures import flatten, tree_map
from .values import Batched, Bundle, Perturbed, primal_value


def stop_gradient(x):
    """``x`` with every perturbation removed, leaf by leaf: no derivative of any run,
    forward or reverse, at any depth, flows through the result.

    A function leaf ``f`` (functions are values) becomes a function whose results carry
    no derivative of the runs going on now through what ``f`` closes over: ``f`` with
    those runs' perturbations set to zero.  Its arguments keep theirs: for ``y``
    perturbed by such a run, ``stop_gradient(f)(y)`` differentiates through ``y`` only
    (as ``x -> f(x)`` with ``f``'s captured values held constant).  Runs started later
    are not cut."""
    tags = None

    def stop(leaf):
        nonlocal tags
        if not callable(leaf) or isinstance(leaf, (Perturbed, type)):
            return primal_value(leaf)
        if tags is None:      # (a vmap's run is no derivative: its closure stays batched)
            tags = tuple(t for t in perturbation.live_tags() if t not in batching.LIVE)
        return _StoppedFunction(leaf, tags) if tags else leaf
    return tree_map(stop, x)


class _StoppedFunction:
    """``fn`` with the perturbations of runs ``tags`` cut from its closure."""
    __slots__ = ('fn', 'tags', '__weakref__')

    def __init__(self, fn, tags):
        self.fn, self.tags = fn, tags

    def __call__(self, *args, **kwargs):
        return _apply_stopped(self.fn, self.tags, args, kwargs)

    def __repr__(self):
        return f"<stop_gradient of {self.fn!r}>"


def _apply_stopped(fn, tags, args, kwargs):
    """``fn(*args, **kwargs)`` with runs ``tags`` cut from ``fn``'s closure, not from
    the arguments.  Forward runs are told apart by renaming: the arguments' perturbation
    ``t`` becomes an adjacent tag for the call, and ``t`` is then read out of the result
    (``primal_of``), as for a function-valued result (notes/functional-outputs.md).
    Reverse runs cannot be renamed (a tape is shared by cell ids), so while the
    arguments carry one, the call is the operator ``STOPPED`` through ``bind``: the
    outermost run's rule (``fn``'s jvp or vjp, run on a fresh tag) applied with the
    same cut."""
    leaves, tree = flatten((args, kwargs))
    if not any(_carries_reverse(x) for x in leaves):
        g = fn
        for t in reversed(tags):        # the newest run is cut first (innermost), so that
            g = _CutRun(t, g, PRIMAL)   # an older one is never read out of its tape
        out = g(*args, **kwargs)
        # A function it returns has these runs cut from it by renaming, which does not
        # keep a reverse run's perturbation of its own arguments: _ReverseCut does.
        return tree_map(lambda y: _ReverseCut(y, tags) if callable(y) else y, out)
    return bind(STOPPED, leaves, dict(fn=fn, tags=tags, tree=tree))


def _stopped_forward(top, leaves, carried, primals, params):
    """fn's jvp, applied with the same cut."""
    fn, tags, tree = params['fn'], params['tags'], params['tree']
    jvp_f = jvp_of(fn, tree, carried, "stop_gradient")
    tangents = [x.tangent for x, c in zip(leaves, carried) if c]
    out, tangent = _apply_stopped(jvp_f, tags, (list(primals), tangents), {})
    _numeric_outputs(out)
    return forward_result(top, out, tangent)


def _stopped_reverse(top, leaves, carried, primals, params):
    """Tape cells whose pullback reruns fn (on a fresh tag), applied with the same cut."""
    fn, tags, tree = params['fn'], params['tags'], params['tree']
    rerun = _Rerun(fn, leaves, "stop_gradient")   # (the pullback runs fn again)
    out = _apply_stopped(lambda *ls: apply(fn, tree, ls), tags, tuple(primals), {})
    _numeric_outputs(out)
    if reads_closure(out, top + 1):
        raise _stopped_closure_error(fn, newer=True)
    rerun.first = flatten(out)[0]
    vjp_f = vjp_of(rerun, tree, carried, lambda: _stopped_closure_error(fn))
    return recomputing_cells(
        top, leaves, carried, primals, out,
        lambda prims, ct: _apply_stopped(vjp_f, tags, (prims, ct), {}), "stop_gradient(f)")


STOPPED = FunctionOp(
    'stop_gradient(f)',
    lambda leaves, p: _apply_stopped(p['fn'], p['tags'], *p['tree'].build(list(leaves))),
    {'forward': _stopped_forward, 'reverse': _stopped_reverse,
     'batch': lambda top, leaves, carried, primals, p: call_per_member(
         lambda a: _apply_stopped(p['fn'], p['tags'], *a), leaves, p['tree'], top,
         'stop_gradient(f)')},
    missing={'taylor': (
        "stop_gradient(f)(...) of a function under Taylor mode (nestad.jet, derivatives, "
        "taylor_series): cutting a jet's run from a function's closure is not supported. "
        "Apply stop_gradient to the values the function closes over instead")})


class _ReverseCut(_StoppedFunction):
    """A function returned by a stopped function: runs ``tags`` are cut from it
    already, by renaming; for arguments that carry one of them in reverse mode, the
    reverse runs among them are cut by peeling instead (its closure may hold forward
    perturbations of the first call's arguments, which are kept)."""
    __slots__ = ()

    def __call__(self, *args, **kwargs):
        found = set()
        for x in flatten((args, kwargs))[0]:
            _reverse_tags(x, found)
        cut = tuple(t for t in self.tags if t in found)
        return _apply_stopped(self.fn, cut, args, kwargs) if cut else self.fn(*args, **kwargs)


def _reverse_tags(x, found):
    """Add to ``found`` the tags of the reverse-mode perturbations in the value ``x``
    (a jet's too, which cannot be renamed either; a vmap's batch is renamed like a forward
    run, its members' values inside it)."""
    while isinstance(x, Perturbed):
        if isinstance(x, Bundle):
            _reverse_tags(x.tangent, found)
        elif x.__class__ is not Batched:
            found.add(x.tag)
        x = x.primal


def _carries_reverse(x):
    """Does the value ``x`` carry a reverse-mode perturbation anywhere inside?"""
    found = set()
    _reverse_tags(x, found)
    return bool(found)


def _numeric_outputs(out):
    if any(callable(y) for y in flatten(out)[0]):
        raise InvalidInputError(
            "stop_gradient(f)(...): f returned a function while its arguments carry a "
            "reverse-mode (gradient_r) perturbation; nestad differentiates function-valued "
            "results in forward mode only. Apply the returned function inside f, or use "
            "derivative / jvp for this run")


def _stopped_closure_error(fn, newer=False):
    if newer:
        return InvalidInputError(
            f"stop_gradient({getattr(fn, '__name__', 'f')}): the function reads from its "
            "closure a value of a run newer than its arguments' (a value mapped by a vmap "
            "inside the gradient), which the reverse phase cannot rerun; pass that value as "
            "an argument")
    return InvalidInputError(
        f"stop_gradient({getattr(fn, '__name__', 'f')}): the reverse phase ran the function "
        "again after a run whose value it reads from its closure had returned; call the "
        "function before that run returns (inside it)")


class _CutRun(ExtractedFunction):
    """One run cut from a function's closure by ``stop_gradient`` (what is not a number
    or a function in its results, a string or None, is passed on as stop_gradient
    passes it)."""
    __slots__ = ()
    op, strict = "stop_gradient", False


# ---------------------------------------------------------------- checkpointing

def checkpoint(f):
    """``f``, computed so that reverse mode does not keep its tape (seed 002's
    checkpointing): the forward phase runs ``f`` on the primal values and keeps only
    its arguments; the reverse phase reruns ``f`` with a tape when it needs the
    sensitivities.  Memory for the time of one more run of ``f``.  The outermost run at
    the call decides: under a forward run ``f`` runs as usual (forward mode keeps no tape).

    The rerun must compute what the first run did.  As PyTorch's checkpoint does, the
    random generators ``f`` may draw from are put back in the state they had before the
    first run for each rerun (and restored after it): the ``numpy.random.Generator``,
    ``RandomState`` and ``random.Random`` objects found in ``f``'s arguments, closure,
    defaults and the globals it names, and numpy's global one and Python's ``random`` if
    that code names ``random``.  The
    rerun's value is compared with the first one's, and a difference raises, naming
    ``f``: never a gradient of another function."""
    _check_function("checkpoint(f)", "f", f)

    @functools.wraps(f)
    def checkpointed(*args, **kwargs):
        leaves, tree = flatten((args, kwargs))
        return bind(CHECKPOINT, leaves, dict(f=f, tree=tree))
    return checkpointed


def _run_function(top, leaves, carried, primals, params):
    """The rule of forward mode, batching and Taylor mode, which keep no tape: ``f``
    itself on the values."""
    return apply(params['f'], params['tree'], leaves)


def _checkpoint_reverse(top, leaves, carried, primals, params):
    """Keep the arguments; the pullback reruns ``f`` with a tape."""
    f, tree = params['f'], params['tree']
    rerun = _Rerun(f, leaves)
    out = CHECKPOINT.lifted(*primals, **params)
    rerun.first = flatten(out)[0]
    if reads_closure(out, top):
        # f reads a value of this run from its closure: the recomputation could not
        # reach it, so this run is taped as usual (correct, but without the saving).
        warnings.warn(f"checkpoint: {_name(f)} reads a value "
                      "being differentiated from its closure, so its tape is kept; pass "
                      "that value as an argument to save the memory",
                      stacklevel=7)       # (the caller of checkpointed, through bind)
        return apply(rerun, tree, leaves)
    return recomputing_cells(top, leaves, carried, primals, out,
                             vjp_of(rerun, tree, carried, lambda: _closure_error(f)),
                             "a checkpointed function")


CHECKPOINT = FunctionOp('checkpoint', lambda leaves, p: apply(p['f'], p['tree'], leaves),
                        {'forward': _run_function, 'reverse': _checkpoint_reverse,
                         'batch': _run_function, 'taylor': _run_function})


def _name(f):
    return getattr(f, '__qualname__', None) or getattr(f, '__name__', None) or repr(f)


class _Rerun:
    """``f`` run again as it ran the first time: the random generators it may read are
    saved before the first run and put back for each rerun (then restored, so that the
    program's own stream goes on where it was), and the rerun's value is checked against
    the first run's (``first``, its output leaves)."""

    def __init__(self, f, leaves, op="checkpoint"):
        self.f, self.first, self.op = f, None, op
        self.saved = [(g, _rng_state(g)) for g in _generators(f, leaves)]

    def __call__(self, *args, **kwargs):
        now = []
        for g, state in self.saved:
            current = _rng_state(g)
            if current is not state:          # (the same state is the same object)
                now.append((g, current))
                _set_rng_state(g, state)
        try:
            out = self.f(*args, **kwargs)
        finally:
            for g, state in now:
                _set_rng_state(g, state)
        self._check(flatten(out)[0])
        return out

    def _check(self, again):
        for k, (a, b) in enumerate(zip(self.first, again)):
            a, b = _under_all(a), _under_all(b)
            if a.__class__ is float and b.__class__ is float and (a == b or a != a and b != b):
                continue                  # (the common case, without numpy's overhead)
            if _is_traced(a) or _is_traced(b):
                continue                  # (staged: the values are not known here)
            try:
                same = np.array_equal(a, b, equal_nan=True)
            except TypeError:
                same = np.array_equal(a, b)
            if not same:
                raise NestadError(
                    f"{self.op}: {_name(self.f)} computed another value when the reverse phase "
                    f"ran it again (output {k}: {b!r:.60} against {a!r:.60} the first time), so "
                    "the gradient would be another function's. It draws random numbers nestad "
                    "could not restore, or reads state that changed in between. Draw the random "
                    "numbers outside the function and pass them in (or pass the "
                    "numpy Generator as an argument), and keep the function pure")


def _under_all(x):
    """The value under every perturbation, a vmap's too (its members stacked)."""
    while isinstance(x, Perturbed):
        x = x.primal
    return x


def _is_traced(v):
    from .tracer import is_tracer
    return is_tracer(v)


_RANDOM = (np.random.Generator, np.random.RandomState, random.Random)


def _generators(f, leaves):
    """The random generators ``f`` may draw from: those among its arguments and
    reachable from it (closure cells, defaults, the globals its code names, bound
    objects, partials, a few levels of containers and object attributes), and numpy's
    global one and Python's ``random`` if code found so names ``random``
    (``np.random.normal``, ``random.gauss``; reading numpy's global state costs 0.1 ms,
    too much for each segment of a checkpointed loop that draws nothing).  What this
    misses, ``_Rerun``'s check of the value catches."""
    found = {}
    seen = set()
    names_random = False

    def visit(x, depth):
        nonlocal names_random
        if isinstance(x, _RANDOM):
            found[id(x)] = x
            return
        if depth > 3 or id(x) in seen or isinstance(x, (Perturbed, np.ndarray, numbers.Number,
                                                        str, bytes, type, types.ModuleType)):
            return
        seen.add(id(x))
        more = []
        if isinstance(x, types.FunctionType):
            more += [c.cell_contents for c in x.__closure__ or () if _filled(c)]
            more += list(x.__defaults__ or ()) + list((x.__kwdefaults__ or {}).values())
            names = _names_used(x.__code__)
            names_random = names_random or 'random' in names
            more += [x.__globals__[n] for n in names if n in x.__globals__]
        elif isinstance(x, functools.partial):
            more += [x.func, *x.args, *x.keywords.values()]
        elif isinstance(x, (list, tuple, set, frozenset)):
            more += list(x)[:100]
        elif isinstance(x, dict):
            more += list(x.values())[:100]
        else:
            bound = getattr(x, '__self__', None)      # a bound method (rng.normal too)
            if bound is not None and not isinstance(bound, types.ModuleType):
                more += [bound, getattr(x, '__func__', None)]
            more += list(getattr(x, '__dict__', {}).values())[:100]
        for y in more:
            visit(y, depth + 1)

    visit(f, 0)
    for x in leaves:
        visit(x, 1)
    if names_random:
        found.update((id(g), g) for g in (np.random.mtrand._rand, random._inst))
    return list(found.values())


def _filled(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:                   # (a cell not yet assigned)
        return False


def _names_used(code):
    """The global names a code object and the functions defined in it read."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names_used(c)
    return names


def _rng_state(g):
    """``g``'s state, the object saved last time if the state is the same: a loop of
    checkpointed segments that draws nothing keeps one copy of numpy's and Python's
    global states (20 KB each), not one per segment."""
    if isinstance(g, np.random.Generator):
        state = g.bit_generator.state
    else:
        state = g.get_state() if isinstance(g, np.random.RandomState) else g.getstate()
    last = _last_states.get(id(g))
    if last is not None and _same(last, state):
        return last
    if len(_last_states) > 64:
        _last_states.clear()
    _last_states[id(g)] = state
    return state


_last_states = {}


def _same(a, b):
    try:
        return type(a) is type(b) and bool(a == b)     # (Python's random: a tuple of ints)
    except ValueError:                                 # (an array inside: compare by parts)
        pass
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _set_rng_state(g, state):
    if isinstance(g, np.random.Generator):
        g.bit_generator.state = state
    elif isinstance(g, np.random.RandomState):
        g.set_state(state)
    else:
        g.setstate(state)


def _closure_error(f):
    return InvalidInputError(
        f"checkpoint: {_name(f)} reads a value being "
        "differentiated from its closure, and the reverse phase ran it again after that "
        "value's run had returned; pass the value to the checkpointed function as an "
        "argument")


def checkpoint_loop(body, state, steps, every=None):
    """``steps`` times ``state = body(state)``, checkpointed every ``every`` steps
    (default about sqrt(steps)): reverse mode keeps the state at each checkpoint and the
    tape of one segment at a time, so memory grows like sqrt(steps), not steps, for one
    more forward run of the loop."""
    _check_function("checkpoint_loop(body, state, steps)", "body", body)
    _check_int("checkpoint_loop", "steps", steps, 0)
    if every is not None:
        _check_int("checkpoint_loop", "every", every, 1, " (or None: about sqrt(steps))")
    every = every or max(1, math.isqrt(steps - 1) + 1 if steps else 1)
    segment = checkpoint(_run_segment)
    done = 0
    while done < steps:
        m = min(every, steps - done)
        state = segment(body, state, m)
        done += m
    return state


def _check_function(call, name, f):
    if not callable(f):
        raise InvalidInputError(f"{call}: {name} must be a function, not {type(f).__name__} "
                                f"({f!r:.40})")


def _check_int(op, name, v, least, hint=""):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < least:
        raise InvalidInputError(f"{op}: {name} must be an int >= {least}{hint}, not {v!r}")


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
    _check_function("fixed_point(f, x0, *params)", "f", f)
    _check_int("fixed_point", "max_iter", max_iter, 1)
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real) \
            or not tol >= 0 or tol == math.inf:
        raise InvalidInputError(f"fixed_point: tol must be a finite real number >= 0 (the "
                                f"largest step taken for convergence, relative), not {tol!r}")
    x0 = stop_gradient(x0)
    leaves, tree = flatten((x0, params))
    return bind(FIXED_POINT, leaves, dict(f=f, tree=tree, n0=len(flatten(x0)[0]), tol=tol,
                                          max_iter=max_iter))


def _fixed_point_plain(leaves, params):
    f, tol, max_iter = params['f'], params['tol'], params['max_iter']
    x0, p = params['tree'].build(list(leaves))
    x_star = _iterate(lambda x: f(x, *p), x0, tol, max_iter, "fixed_point")
    if reads_closure(x_star, -1):
        raise InvalidInputError(
            "fixed_point: the function reads a value being differentiated from its "
            "closure; pass that value in params, so that its derivative is the implicit "
            "one (differentiating the iterations would be another method, with its own "
            "convergence)")
    return x_star


def _fixed_point_batch(top, leaves, carried, primals, params):
    """vmap: each member's fixed point (counted in batching.FALLBACKS)."""
    f, tol, max_iter = params['f'], params['tol'], params['max_iter']
    return call_per_member(lambda s: fixed_point(f, s[0], *s[1], tol=tol, max_iter=max_iter),
                           leaves, params['tree'], top, 'fixed_point')


def _fixed_point_derivative(top, leaves, carried, primals, params):
    """The implicit derivative: the tangent equation (forward) or the adjoint equation
    (reverse) iterated at the fixed point (``x0``'s leaves, first, carry no run)."""
    f, tol, max_iter, n0 = params['f'], params['tol'], params['max_iter'], params['n0']
    x0, p = params['tree'].build(list(primals))
    tree = flatten(p)[1]
    leaves, carried, primals = leaves[n0:], carried[n0:], list(primals[n0:])
    x_star = fixed_point(f, x0, *p, tol=tol, max_iter=max_iter)
    if leaves[carried.index(True)].interpretation is FORWARD:
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
        # (tangents may carry a batch of directions, jacobian_f's: the iteration's state
        # has their batch axes from the start)
        d, q = next((d, q) for d, q in zip(dp, primals) if d is not None)
        batch = np.shape(primal_value(d))[:np.ndim(primal_value(d)) - np.ndim(primal_value(q))]
        dx = _iterate(tangent_step, tree_map(lambda x: _zero_like(x, batch), x_star), tol, max_iter,
                      "fixed_point's tangent equation", _LINEARISED)
        return forward_result(top, x_star, dx)

    def pullback(prims, ct):
        from .operators import vjp
        _, pb = vjp(lambda x, *ls: f(x, *tree.build(ls)), x_star, *prims)
        w = _iterate(lambda w: _add(ct, pb(w)[0]), ct, tol, max_iter,
                     "fixed_point's adjoint equation", _LINEARISED)
        cts = pb(w)[1:]
        return [c for c, k in zip(cts, carried) if k]
    return recomputing_cells(top, leaves, carried, primals, x_star, pullback, "fixed_point")


def _fixed_point_jet(top, leaves, carried, primals, params):
    """fixed_point under Taylor mode: the fixed point of the primals, then its higher
    coefficients as the fixed point of the map on jets, ``x = f(x, p)`` with ``x``'s
    primal held at ``x*`` (for a contraction the map's coefficient k contracts at the
    rate of the primal iteration once the lower ones have converged, so the limit is the
    Taylor expansion of ``x*(p(t))``: the implicit derivatives of every order)."""
    from .taylor import coefficients, make_jet
    f, tol, max_iter = params['f'], params['tol'], params['max_iter']
    x0, p = params['tree'].build(list(primals))
    params_jets = params['tree'].build(list(leaves))[1]
    x_star = fixed_point(f, x0, *p, tol=tol, max_iter=max_iter)
    K = min(len(x.series) for x, c in zip(leaves, carried) if c)
    x_leaves, x_tree = flatten(x_star)

    def jets(C):
        return x_tree.build([make_jet(top, [a, *c]) for a, c in zip(x_leaves, C)])

    def step(C):
        out = flatten(f(jets(C), *params_jets))[0]
        return [coefficients(y, top, K)[1:] for y in out]
    C = _iterate(step, [[_zero_like(a)] * K for a in x_leaves], tol, max_iter,
                 "fixed_point's Taylor coefficients", _LINEARISED)
    return jets(C)


FIXED_POINT = FunctionOp('fixed_point', _fixed_point_plain,
                         {'forward': _fixed_point_derivative,
                          'reverse': _fixed_point_derivative,
                          'batch': _fixed_point_batch, 'taylor': _fixed_point_jet})


_LINEARISED = (
    "the implicit derivative iterates the map linearised at the fixed point, which needs "
    "df/dx there to be a contraction (spectral radius < 1; I - df/dx is singular or the "
    "primal iteration only reached a repelling fixed point by starting on it). Rewrite the "
    "map so that it contracts near the fixed point (for example x - (g(x) - x) / g'(x), "
    "Newton's step, for a root of g(x) - x)")


def _zero_like(x, batch=()):
    shape = batch + np.shape(primal_value(x))
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


def _iterate(g, x, tol, max_iter, what, hint=None):
    """Iterate ``x = g(x)`` until it stops changing (at most ``max_iter`` steps).  An
    iterate that is not finite ends the loop and raises: a run-off to inf made a last
    step of inf, and inf <= tol * inf read as convergence."""
    from .primitives import maximum
    from .staging import while_loop

    def finite(x):
        return _change(x, x)[1] < math.inf          # (nan < inf is False too)

    def converged(x_new, x_old):
        worst, scale = _change(x_new, x_old)
        return (worst <= tol * maximum(1.0, scale)) & (scale < math.inf)

    def cond(s):
        x_prev, x, k = s
        # (Python's `not` would fix the answer when traced; `== False` stays a value)
        return (k == 0) | ((converged(x, x_prev) == False) & (k < max_iter)   # noqa: E712
                           & finite(x))

    def body(s):
        _, x, k = s
        return (x, g(x), k + 1)
    x_prev, x, k = while_loop(cond, body, (x, x, 0))
    if not all_members(finite(x)):
        raise NestadError(
            f"{what} diverged: iterate {_shown(k)} is not finite (inf or nan); "
            + (hint or "the iteration runs away from the fixed point: start nearer to it, or "
               "use a map that is a contraction there (|df/dx| < 1)"))
    if not all_members(converged(x, x_prev)):
        worst, _ = _change(x, x_prev)
        raise NestadError(f"{what} did not converge in {max_iter} iterations (the last step "
                          f"changed an entry by {_shown(worst):.3g}); "
                          + (hint or "check that the map is a contraction near the fixed "
                             "point, or raise max_iter"))
    return x


def _shown(v):
    """A number for a message: the value under perturbations, and under a tracer."""
    v = primal_value(v)
    return getattr(v, 'val', v)
