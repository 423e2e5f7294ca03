"""Lifting a primitive to perturbed arguments, generically.

A primitive knows three things: its name, its ``plain`` implementation on
untagged numbers, and one ``partial`` per argument: ``partial(*primals, out)``
returns d out / d argument, written with nestad's own (lifted) operations so that
the rule can itself be differentiated by an enclosing run of AD.

``lift1``/``lift2`` are ``nestad.interpret.bind`` for one and two scalar arguments:
they find the outermost (largest) tag among the arguments and hand the application to
its interpretation, which handles that run only (forward and reverse below):  every argument carrying the tag is split into its primal
and its tangent (Bundle) or its cell (TapeCell); every other argument is, by the
ordering invariant, a constant for that run.  The primitive is then applied to
the primals through its *lifted* entry point, which recurses on the next tag
down.  The result's fields are computed from primals only, so they hold smaller
tags: the invariant is preserved.

Below every perturbation, a primitive meets plain numbers, or tracers of a program
being recorded (``nestad.tracer``): those it records instead of computing.

These are the general paths.  The arithmetic operators also have hand-written
fast paths (same tag on both sides, or a plain float on one side) installed on
Bundle and TapeCell in ``primitives.py`` next to their rules.
"""
from numbers import Real

import numpy as np

from . import registry
from .arrays import ArrayBundle, ArrayTapeCell, is_array, subclass_error
from .errors import InvalidInputError
from .interpret import EMPTY
from .tracer import SCALAR_OPS, ArrayTracer, Tracer, apply_traced, record1
from .values import Batched, Bundle, Perturbed, TapeCell, next_id

# Scalar primitive name -> the nestad.numpy primitive used when an argument is an array
# (filled in by nestad.numpy).  Arrays need broadcasting-aware reverse rules.
ARRAY_ROUTES = {}
_ARRAY_CLASSES = (np.ndarray, ArrayBundle, ArrayTapeCell, ArrayTracer, Batched)
_ARRAY_CLASS_SET = frozenset(_ARRAY_CLASSES)      # (one hash on the hot path, not five compares)


def _array_route(prim, args):
    route = ARRAY_ROUTES.get(prim.name)
    if route is None:
        raise InvalidInputError(f"nestad.{prim.name} has no array version; use nestad.numpy")
    return route(*args)


class Primitive:
    """A differentiable operation on scalars and its rule.

    ``partials`` is None for a piecewise-constant operation (floor, comparisons):
    its derivative is zero and its result carries no perturbation.  How staged code
    spells it is nestad.staging.lowering's."""

    __slots__ = ('name', 'plain', 'partials', 'lifted', 'qualname')

    def __init__(self, name, plain, partials, lifted=None):
        self.name = name
        self.plain = plain          # implementation on plain numbers
        self.partials = partials    # tuple of partial(*primals, out), one per argument
        self.lifted = lifted        # the public function, used to recurse on primals
        registry.register(self, name)

    def __reduce__(self):             # (by name: rules are closures)
        return registry.reduce(self, self.name)

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        return f"<primitive {self.name}>"

    # The rules of a scalar primitive for each interpretation (nestad.interpret).
    def evaluate(self, args, params):
        for a in args:
            if a.__class__ is Tracer:
                return apply_traced(self, args, params)
        return self.plain(*args)

    def forward(self, top, args, carried, primals, params):
        out = self.lifted(*primals)
        tangent = None
        for d, a, c in zip(self.partials, args, carried):
            if c:
                term = d(*primals, out) * a.tangent
                tangent = term if tangent is None else tangent + term
        return Bundle(top, out, tangent)

    def reverse(self, top, args, carried, primals, params):
        out = self.lifted(*primals)
        return TapeCell(top, next_id(), out, tuple(
            (a, d(*primals, out)) for d, a, c in zip(self.partials, args, carried) if c))


SCALAR_OPS.add(Primitive)       # (apply_traced records these without parameters fast)


_OPERATORS = {'add': '+', 'sub': '-', 'mul': '*', 'div': '/', 'mod': '%', 'pow': '**'}


def not_a_number(name, value):
    what = f"the {_OPERATORS[name]} operator" if name in _OPERATORS else f"nestad.{name}"
    if isinstance(value, np.ndarray):           # a subclass: plain ndarrays were routed
        return subclass_error(value, what)
    return InvalidInputError(
        f"{what} got {type(value).__name__} {value!r:.60}, which is not a real number "
        "or a nestad number.")


def lift1(prim, x):
    """``bind`` for one scalar argument, with the forward and reverse interpretations
    inlined (the hot path of every elementary function of a perturbed number)."""
    cls = x.__class__
    if cls is Bundle:
        p = x.primal
        out = prim.lifted(p)
        return Bundle(x.tag, out, prim.partials[0](p, out) * x.tangent)
    if cls is TapeCell:
        p = x.primal
        out = prim.lifted(p)
        return TapeCell(x.tag, next_id(), out, ((x, prim.partials[0](p, out)),))
    if cls is Tracer:                       # (tracing: before the ABC's isinstance)
        out = record1(prim, x)
        return out if out is not None else apply_traced(prim, (x,), EMPTY)
    if isinstance(x, Real):
        return prim.plain(x)
    if isinstance(x, _ARRAY_CLASSES) or is_array(x):
        return _array_route(prim, (x,))
    if isinstance(x, Perturbed):            # another interpretation's value
        return x.interpretation.process(prim, x.tag, (x,), (True,), (x.primal,), EMPTY)
    raise not_a_number(prim.name, x)


def lift2(prim, x, y):
    """``bind`` for two scalar arguments (the arithmetic operators' fast paths handle the
    same-tag and float cases before this)."""
    if x.__class__ in _ARRAY_CLASS_SET or y.__class__ in _ARRAY_CLASS_SET:
        return _array_route(prim, (x, y))
    if isinstance(x, Perturbed):
        tx = x.tag
    elif isinstance(x, Real):
        tx = -1
    else:
        raise not_a_number(prim.name, x)
    if isinstance(y, Perturbed):
        ty = y.tag
    elif isinstance(y, Real):
        ty = -1
    else:
        raise not_a_number(prim.name, y)
    if tx < 0 and ty < 0:
        if x.__class__ is Tracer or y.__class__ is Tracer:
            return apply_traced(prim, (x, y), {})
        return prim.plain(x, y)
    top = tx if tx >= ty else ty
    xp = x.primal if tx == top else x
    yp = y.primal if ty == top else y
    cls = (x if tx == top else y).__class__
    if cls is not Bundle and cls is not TapeCell:       # another interpretation's value
        return (x if tx == top else y).interpretation.process(
            prim, top, (x, y), (tx == top, ty == top), (xp, yp), EMPTY)
    # FORWARD's and REVERSE's rules (Primitive.forward, .reverse) for two arguments, inlined
    out = prim.lifted(xp, yp)
    dx, dy = prim.partials
    if cls is Bundle:
        if tx == top and ty == top:
            tangent = dx(xp, yp, out) * x.tangent + dy(xp, yp, out) * y.tangent
        elif tx == top:
            tangent = dx(xp, yp, out) * x.tangent
        else:
            tangent = dy(xp, yp, out) * y.tangent
        return Bundle(top, out, tangent)
    if tx == top and ty == top:
        partials = ((x, dx(xp, yp, out)), (y, dy(xp, yp, out)))
    elif tx == top:
        partials = ((x, dx(xp, yp, out)),)
    else:
        partials = ((y, dy(xp, yp, out)),)
    return TapeCell(top, next_id(), out, partials)
