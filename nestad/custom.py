"""What the rules of functions with rules of their own are made of.

A staged function, a checkpointed one, a fixed point, a solver: each is a function
``f`` whose derivatives nestad computes another way than by running ``f`` on perturbed
values.  Each is a ``nestad.interpret.FunctionOp`` applied through ``bind``, which finds
the outermost perturbation ``t`` among the arguments and hands its rule the primals
(which may carry older perturbations: the rule computes on them through the operator
again, one run at a time).  The forward and reverse rules give back

* for a forward run: ``out + tangent * eps_t``, the tangent from the function's jvp;
* for a reverse run: one tape cell of ``t`` per output leaf, whose partials are linear
  maps calling the function's vjp (``recomputing_cells``).  The vjp runs when the
  reverse phase reaches the cell, once for all inputs, from the primals the cell
  keeps: what ``f`` computed inside is recomputed, not stored.
"""
import numpy as np

from . import perturbation
from .arrays import VJP, make_bundle, make_cell
from .errors import EscapedPerturbationError, InvalidInputError
from .extraction import primal_of, tangent_of
from .structures import flatten
from .values import Batched, Perturbed, primal_value


def reads_closure(out, top):
    """Does ``out``, computed from arguments whose outermost run is older than ``top``,
    carry run ``top`` or a later one?  Then the function read a value of that run from
    its closure, and a rule applied from its arguments alone would miss it."""
    return any(isinstance(x, Perturbed) and x.tag >= top for x in flatten(out)[0])


def apply(f, tree, leaves):
    """``f`` called on the ``(args, kwargs)`` that ``tree`` rebuilds from ``leaves``."""
    args, kwargs = tree.build(leaves)
    return f(*args, **kwargs)


def jvp_of(f, tree, carried, op):
    """``(primals, tangents) -> (out, out tangent)`` of ``f``, tangents for the carried
    leaves only."""
    def jvp_f(primals, tangents):
        tag = perturbation.fresh()
        try:
            it = iter(tangents)
            args = [make_bundle(tag, p, next(it)) if c else p for p, c in zip(primals, carried)]
            out = apply(f, tree, args)
            return primal_of(tag, out, op), tangent_of(tag, out, op)
        finally:
            perturbation.retire(tag)
    return jvp_f


def vjp_of(f, tree, carried, closure_error):
    """``(primals, cotangents) -> cotangents of the carried leaves`` of ``f``.

    It runs ``f`` again, when the reverse phase needs it: possibly after the run has
    returned (a vjp's pullback), so that a value of the run in ``f``'s closure is dead
    by then.  That raises ``closure_error()``, which says to pass the value as an
    argument (``EscapedPerturbationError`` would blame a side effect)."""
    from .operators import vjp

    def vjp_f(primals, cotangents):
        def g(*chosen):
            it = iter(chosen)
            return apply(f, tree, [next(it) if c else p for p, c in zip(primals, carried)])
        try:
            _, pullback = vjp(g, *[p for p, c in zip(primals, carried) if c])
            return pullback(cotangents)
        except EscapedPerturbationError as e:
            raise closure_error() from e
    return vjp_f


def forward_result(top, out, tangent):
    """``out + tangent * eps_top``, leaf by leaf."""
    out_leaves, out_tree = flatten(out)
    return out_tree.build([make_bundle(top, o, d) for o, d in zip(out_leaves, flatten(tangent)[0])])


def recomputing_cells(top, leaves, carried, primals, out, pullback, what):
    """Tape cells of run ``top`` for ``out``; their partials call
    ``pullback(primals, output cotangents)`` when the reverse phase reaches them."""
    out_leaves, out_tree = flatten(out)
    inputs = [x for x, c in zip(leaves, carried) if c]
    cells = []
    for k, o in enumerate(out_leaves):
        if callable(o) or not isinstance(primal_value(o), (float, int, np.ndarray, np.number,
                                                           Batched)) and not _is_traced(o):
            raise InvalidInputError(f"reverse mode through {what} needs numeric outputs; "
                                    f"output {k} is {type(o).__name__}")
        shared = _Pullback(pullback, out_tree, out_leaves)
        cells.append(make_cell(top, o, tuple(
            (x, VJP(_pullback_rule, tuple(primals), o, dict(shared=shared, k=k, i=i)))
            for i, x in enumerate(inputs))))
    return out_tree.build(cells)


def _is_traced(o):
    from .tracer import is_tracer
    return is_tracer(primal_value(o))


class _Pullback:
    """The input cotangents for output ``k`` and sensitivity ``g``, computed once for
    all inputs (the reverse phase asks each input's partial in turn)."""
    __slots__ = ('fn', 'out_tree', 'outs', 'last')

    def __init__(self, fn, out_tree, outs):
        self.fn, self.out_tree, self.outs, self.last = fn, out_tree, outs, None

    def cotangents(self, primals, k, g):
        last = self.last
        if last is not None and last[0] is g and all(a is b for a, b in zip(last[1], primals)):
            return last[2]
        cts = [g if j == k else _zeros_like(o) for j, o in enumerate(self.outs)]
        result = self.fn(list(primals), self.out_tree.build(cts))
        self.last = (g, primals, result)
        return result


def _pullback_rule(g, *primals, out, shared, k, i):
    return shared.cotangents(primals, k, g)[i]


def _zeros_like(x):
    shape = np.shape(primal_value(x))
    return np.zeros(shape) if shape else 0.0
