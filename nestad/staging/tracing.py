"""``trace(f, *args)``: run ``f`` once on tracers and return the Program it did.

Floats, numpy floating scalars and floating-point ndarrays among the arguments'
leaves are traced; every other leaf (ints, bools, None, strings, functions, integer
arrays) is *static*: passed through as it is and baked into the program (``stage``
keys its cache on static leaves' values).
"""
import inspect
from numbers import Real

import numpy as np

from ..extraction import _checked
from ..structures import flatten
from ..tracer import StagingError, Trace, is_tracer, recording
from ..values import Perturbed
from .program import Program, _TRACED, simplify


def is_traced_leaf(x):
    """Leaves that become program inputs: real floating-point numbers and arrays."""
    if isinstance(x, (float, np.floating)):
        return True
    return isinstance(x, np.ndarray) and x.dtype.kind == 'f' and type(x) is np.ndarray


def trace(f, *args, static_argnums=(), **kwargs):
    """Record ``f(*args, **kwargs)`` as a Program.  Derivative operators inside ``f`` run
    while tracing, so the program computes their results with plain arithmetic.  The
    positional arguments numbered in ``static_argnums`` are not traced, whatever they are."""
    leaves, in_tree = flatten((args, kwargs))
    return trace_leaves(f, leaves, in_tree, static_mask(args, static_argnums))


def static_mask(args, static_argnums):
    """For each leaf of ``(args, kwargs)``: is it forced static?  (None: none is.)"""
    if not static_argnums:
        return None
    nums = {i % len(args) for i in static_argnums if -len(args) <= i < len(args)}
    mask = []
    for i, a in enumerate(args):
        mask.extend([i in nums] * len(flatten(a)[0]))
    return mask


def trace_leaves(f, leaves, in_tree, forced_static=None):
    """``trace`` on the flat leaves of ``(args, kwargs)``."""
    for x in leaves:
        if isinstance(x, Perturbed) or is_tracer(x):
            raise StagingError(
                "nestad.trace records a function of plain values; to get the program of a "
                "derivative, trace the derivative: nestad.trace(nestad.derivative(f), x).")
    t = Trace()
    values, inputs, static, example = [], [], [], []
    for k, x in enumerate(leaves):
        if is_traced_leaf(x) and not (forced_static and k < len(forced_static)
                                      and forced_static[k]):
            tr = t.new_tracer(x)
            values.append(tr)
            inputs.append(tr.var)
            static.append(_TRACED)
            example.append(x)
        else:
            values.append(x)
            static.append(x)
    with recording(t):
        call_args, call_kwargs = in_tree.build(values)
        out = f(*call_args, **call_kwargs)
    out_leaves, out_tree = flatten(out)
    outputs = [_output(x, t, k, out) for k, x in enumerate(out_leaves)]
    names = _input_names(f, in_tree.build(leaves), static)
    eqns, outputs = simplify(t.eqns, outputs)
    program = Program(inputs, eqns, outputs, in_tree, out_tree, static, names, example)
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


def _input_names(f, args_kwargs, static):
    """Printed names of the traced leaves: the parameter's name for a scalar argument,
    name_0, name_1, ... for the leaves of a structured one."""
    args, kwargs = args_kwargs
    try:
        params = [p.name for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
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
