"""``trace(f, *args)``: run ``f`` once on tracers and return the Program it did.

Floats and ints (Python's and numpy's scalars) and floating-point ndarrays among the
arguments' leaves are traced, as in JAX; every other leaf (bools, None, strings,
functions, integer arrays) is *static*: passed through as it is and baked into the
program (``stage`` keys its cache on static leaves' values), and so are the arguments
named in ``static_argnums``/``static_argnames``.
"""
import inspect
from numbers import Real

import numpy as np

from ..extraction import _checked
from ..errors import InvalidInputError
from ..structures import flatten
from ..tracer import StagingError, Trace, active, is_tracer, recording
from ..reverse import young_collections_only
from ..values import Perturbed
from .program import Program, _GENERATOR, _TRACED, positional_names, simplify
from .randomness import TracingGenerator, warn_frozen, watch


def is_traced_leaf(x):
    """Leaves that become program inputs: real numbers (not bools: a flag is static) and
    floating-point arrays."""
    c = x.__class__
    if c is float or c is int or isinstance(x, (float, np.floating, np.integer)):
        return True
    return c is np.ndarray and x.dtype.kind == 'f'


def trace(f, *args, static_argnums=(), static_argnames=(), **kwargs):
    """Record ``f(*args, **kwargs)`` as a Program.  Derivative operators inside ``f`` run
    while tracing, so the program computes their results with plain arithmetic.  The
    positional arguments numbered in ``static_argnums`` and the keyword arguments named
    in ``static_argnames`` are not traced, whatever they are."""
    nums, names = static_arguments(f, static_argnums, static_argnames, "trace")
    leaves, in_tree = flatten((args, kwargs))
    return trace_leaves(f, leaves, in_tree, static_mask(args, kwargs, nums, names))


def static_arguments(f, static_argnums, static_argnames, op):
    """``static_argnums`` and ``static_argnames`` checked against ``f``'s signature and
    completed from each other (a positional parameter is static whether it is passed by
    position or by name), as JAX does: (frozenset of positions, frozenset of names)."""
    nums = (static_argnums,) if isinstance(static_argnums, int) else static_argnums
    names = (static_argnames,) if isinstance(static_argnames, str) else static_argnames
    try:
        nums, names = tuple(nums), tuple(names)
    except TypeError:
        raise InvalidInputError(f"{op}: static_argnums must be an int or a tuple of ints and "
                                "static_argnames a str or a tuple of strs; got "
                                f"{static_argnums!r:.60} and {static_argnames!r:.60}") from None
    for i in nums:
        if i.__class__ is not int or i < 0:
            raise InvalidInputError(
                f"{op}: static_argnums={static_argnums!r}: each must be the position of a "
                "positional parameter, an int counted from 0 (a negative position would "
                "name another argument when optional ones are left out)")
    for n in names:
        if not isinstance(n, str):
            raise InvalidInputError(f"{op}: static_argnames={static_argnames!r}: each must be "
                                    "the name of a parameter (a str)")
    if len(set(nums)) < len(nums) or len(set(names)) < len(names):
        raise InvalidInputError(f"{op}: static_argnums={static_argnums!r}, static_argnames="
                                f"{static_argnames!r}: an argument is named twice")
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):       # no signature to check against
        return frozenset(nums), frozenset(names)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    varkw = any(p.kind == p.VAR_KEYWORD for p in params)
    by_name = {p.name: p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    name = getattr(f, '__name__', 'the function')
    for i in nums:
        if i >= len(positional) and not varargs:
            raise InvalidInputError(
                f"{op}: static_argnums={static_argnums!r}, but {name} takes "
                f"{len(positional)} positional argument(s) "
                f"({', '.join(p.name for p in positional) or 'none'}): position {i} names none "
                "of them. Count positions from 0.")
    for n in names:
        if n not in by_name and not varkw:
            raise InvalidInputError(
                f"{op}: static_argnames={static_argnames!r}, but {name} has no parameter "
                f"{n!r} that can be passed by name (its parameters: "
                f"{', '.join(p.name for p in params) or 'none'})")
    nums = set(nums) | {k for k, p in enumerate(positional)
                        if p.name in names and p.kind == p.POSITIONAL_OR_KEYWORD}
    names = set(names) | {positional[i].name for i in nums if i < len(positional)
                          and positional[i].kind == positional[i].POSITIONAL_OR_KEYWORD}
    return frozenset(nums), frozenset(names)


def static_mask(args, kwargs, nums, names):
    """For each leaf of ``(args, kwargs)``: is it forced static?  (None: none is.)"""
    if not nums and not names:
        return None
    mask = []
    for i, a in enumerate(args):
        mask.extend([i in nums] * len(flatten(a)[0]))
    for k, v in kwargs.items():
        mask.extend([k in names] * len(flatten(v)[0]))
    return mask


def trace_leaves(f, leaves, in_tree, forced_static=None):
    """``trace`` on the flat leaves of ``(args, kwargs)``."""
    for x in leaves:
        if isinstance(x, Perturbed) or is_tracer(x):
            raise StagingError(
                "nestad.trace records a function of plain values; to get the program of a "
                "derivative, trace the derivative: nestad.trace(nestad.derivative(f), x).")
    outermost = active() is None
    t = Trace()
    values, inputs, static, example = [], [], [], []
    generators = 0
    for k, x in enumerate(leaves):
        forced = forced_static and k < len(forced_static) and forced_static[k]
        if is_traced_leaf(x) and not forced:
            tr = t.new_tracer(x)
            values.append(tr)
            inputs.append(tr.var)
            static.append(_TRACED)
            example.append(x)
        elif isinstance(x, np.random.Generator) and not forced:
            values.append(TracingGenerator(x, generators, t))   # its draws are inputs
            static.append(_GENERATOR)
            generators += 1
        else:
            values.append(x)
            static.append(x)
    # (generator arguments that are static draw constants too)
    snapshots = watch(f, [x for x, s in zip(leaves, static) if s is x]) if outermost else None
    params = positional_names(f)
    names = _input_names(params, in_tree.build(leaves), static)
    t.input_names = (names, inputs, len(inputs))    # (for an error message: the arguments, not
    #                                                 the draws that join both lists below)
    # A trace, like a tape, is a large growing structure that reference counting frees:
    # full collections would rescan it again and again (reverse.young_collections_only).
    with young_collections_only():
        with recording(t):
            call_args, call_kwargs = in_tree.build(values)
            out = f(*call_args, **call_kwargs)
        out_leaves, out_tree = flatten(out)
        outputs = [_output(x, t, k, out) for k, x in enumerate(out_leaves)]
        for j, (slot, method, a, kw, var, value) in enumerate(t.draws):
            inputs.append(var)
            example.append(value)
            names.append(f"{method}_{j}")
        # (what only recording needed goes before simplifying: it held a tracer, with its
        # example value, for every equation recorded, the dead ones too; making the
        # Eqns and simplifying allocate as much again, so the collector stays young)
        t.cse.clear()
        t.tracers.clear()
        eqns, outputs = simplify(t.eqns, outputs, checks=True)  # (remove_dead makes Eqns)
        t.eqns.clear()      # (its unused records are tracers of t: a cycle, else kept for gc)
    program = Program(inputs, eqns, outputs, in_tree, out_tree, static, names, example)
    program.params = params
    program.draws = tuple((slot, method, a, kw) for slot, method, a, kw, _, _ in t.draws)
    if snapshots:
        warn_frozen(snapshots, f"the traced function {getattr(f, '__name__', f)!r}")
    # What the program computes at the example: tracing computed it on the way.
    program.example_out = [x.val if is_tracer(x) else x for x in out_leaves]
    return program


def _output(x, t, k, out):
    if is_tracer(x):
        if x.trace is not t:
            raise StagingError("the traced function returned a value traced by another "
                               "nestad.trace/stage call (it escaped through a closure)")
        return x.var
    if isinstance(x, Perturbed):
        _checked(x, "a staged function's output")     # (a leaked value of a finished run)
        raise closure_error()
    if isinstance(x, (Real, np.ndarray)):
        return x                        # a constant output
    if callable(x):
        raise StagingError("a staged function cannot return a function (output "
                           f"{k} is {x!r:.60}); stage the function it returns instead")
    raise StagingError(f"output {k} of the staged function is a {type(x).__name__}, not a "
                       "number or array")


def closure_error():
    return StagingError(
        "the staged function returned a value carrying a perturbation from outside it: "
        "it closes over a value being differentiated. Pass that value to the staged "
        "function as an argument instead of capturing it, so that the derivative "
        "flows through the argument.")


def _input_names(params, args_kwargs, static):
    """Printed names of the traced leaves: the parameter's name (``params``: the positional
    ones) for a scalar argument, name_0, name_1, ... for the leaves of a structured one."""
    args, kwargs = args_kwargs
    names, pos = [], 0
    named = [(params[i] if i < len(params) else f"x{i}", a) for i, a in enumerate(args)]
    for base, a in named + list(kwargs.items()):
        n = len(flatten(a)[0])
        flags = static[pos:pos + n]
        traced = [j for j, s in enumerate(flags) if s is _TRACED]
        if n == 1 and traced:
            names.append(base)
        else:
            names.extend(f"{base}_{j}" for j in traced)
        pos += n
    return names
