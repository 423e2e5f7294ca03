"""A staged function called with perturbed arguments: its derivatives are staged too.

For the outermost perturbation ``t`` among the arguments (the same outermost-first
rule as lifting), a staged ``f`` behaves as a primitive whose rules are staged:

* ``t`` is a forward run: one call of the staged ``jvp`` of ``f``
  (``(primals, tangents) -> (out, out tangent)``), and the output is ``out + out
  tangent * eps_t``;
* ``t`` is a reverse run: ``f`` runs staged on the primals, and each output leaf is
  a tape cell of ``t`` whose partials are linear maps that run the staged ``vjp`` of
  ``f`` (``(primals, output cotangents) -> input cotangents``).

Primals and tangents may carry older perturbations: the staged jvp and vjp are
staged functions like any other, so they peel those off the same way, one run at a
time.  Inside a trace, arguments are tracers under the perturbations, and the staged
jvp/vjp are traced through.
"""
import numpy as np

from .. import perturbation
from ..arrays import VJP, make_bundle, make_cell
from ..extraction import primal_of, tangent_of
from ..operators import vjp as _vjp
from ..structures import flatten
from ..tracer import StagingError
from ..values import Bundle, Perturbed, primal_value


def call_perturbed(staged, leaves, tree):
    top = max(x.tag for x in leaves if isinstance(x, Perturbed))
    carried = tuple(isinstance(x, Perturbed) and x.tag == top for x in leaves)
    primals = [x.primal if c else x for x, c in zip(leaves, carried)]
    first = leaves[carried.index(True)]
    if isinstance(first, Bundle):
        tangents = [x.tangent for x, c in zip(leaves, carried) if c]
        out, tangent = _derived(staged, 'jvp', tree, carried)(primals, tangents)
        out_leaves, out_tree = flatten(out)
        return out_tree.build([make_bundle(top, o, d)
                               for o, d in zip(out_leaves, flatten(tangent)[0])])
    out = _apply(staged, tree, primals)
    out_leaves, out_tree = flatten(out)
    pullback = _derived(staged, 'vjp', tree, carried)
    inputs = [x for x, c in zip(leaves, carried) if c]
    cells = []
    for k, o in enumerate(out_leaves):
        if callable(o) or not isinstance(primal_value(o), (float, int, np.ndarray, np.number)):
            raise StagingError("reverse mode through a staged function needs numeric outputs")
        shared = _Pullback(pullback, out_tree, out_leaves)
        cells.append(make_cell(top, o, tuple(
            (x, VJP(_pullback_rule, tuple(primals), o, dict(shared=shared, k=k, i=i)))
            for i, x in enumerate(inputs))))
    return out_tree.build(cells)


def _apply(f, tree, leaves):
    """``f`` called on the ``(args, kwargs)`` that ``tree`` rebuilds from ``leaves``."""
    args, kwargs = tree.build(leaves)
    return f(*args, **kwargs)


def _derived(staged, kind, tree, carried):
    """The staged jvp or vjp of ``staged.f`` for this argument structure."""
    key = (kind, tree.signature(), carried)
    fn = staged.derived.get(key)
    if fn is None:
        fn = staged.derived[key] = staged.derive(
            (_jvp_of if kind == 'jvp' else _vjp_of)(staged.f, tree, carried))
    return fn


def _jvp_of(f, tree, carried):
    def jvp_f(primals, tangents):
        tag = perturbation.fresh()
        try:
            it = iter(tangents)
            args = [make_bundle(tag, p, next(it)) if c else p for p, c in zip(primals, carried)]
            out = _apply(f, tree, args)
            return primal_of(tag, out, "stage"), tangent_of(tag, out, "stage")
        finally:
            perturbation.retire(tag)
    return jvp_f


def _vjp_of(f, tree, carried):
    def vjp_f(primals, cotangents):
        def g(*chosen):
            it = iter(chosen)
            return _apply(f, tree, [next(it) if c else p for p, c in zip(primals, carried)])
        _, pullback = _vjp(g, *[p for p, c in zip(primals, carried) if c])
        return pullback(cotangents)
    return vjp_f


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

