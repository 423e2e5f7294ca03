"""A staged function called with perturbed arguments: its derivatives are staged too.

A staged ``f`` is the ``FunctionOp`` ``STAGED`` applied through ``bind``: for the
outermost perturbation ``t`` among the arguments, its rule for that interpretation is
staged:

* ``t`` is a forward run: one call of the staged ``jvp`` of ``f``
  (``(primals, tangents) -> (out, out tangent)``), and the output is ``out + out
  tangent * eps_t``;
* ``t`` is a vmap's: one call of the staged batched ``f`` (``vmap`` of it) on the
  stacked values, its outputs batched by ``t``;
* ``t`` is a reverse run: ``f`` runs staged on the primals, and each output leaf is
  a tape cell of ``t`` whose partials are linear maps that run the staged ``vjp`` of
  ``f`` (``(primals, output cotangents) -> input cotangents``).

Primals and tangents may carry older perturbations: the staged jvp and vjp are
staged functions like any other, so they peel those off the same way, one run at a
time.  Inside a trace, arguments are tracers under the perturbations, and the staged
jvp/vjp are traced through.
"""
from ..custom import apply, forward_result, jvp_of, reads_closure, recomputing_cells, vjp_of
from ..batching import batch_of
from ..interpret import FunctionOp, bind
from ..structures import tree_map
from ..values import Batched
from .randomness import is_generator, restore, states
from .tracing import closure_error

DERIVED_SIZE = 16   # staged jvps/vjps a staged function keeps (one per argument structure, mode)


def call_perturbed(staged, leaves, tree, mask=None):
    return bind(STAGED, leaves, dict(staged=staged, tree=tree, mask=mask))


def _run_function(top, leaves, carried, primals, params):
    """Taylor mode: the function itself on the jets."""
    return apply(params['staged'].f, params['tree'], leaves)


def _batch(top, leaves, carried, primals, params):
    """vmap: the staged batched f (vmap of f, staged like jvp and vjp) on the stacked values."""
    out = _derived(params['staged'], 'batch', params['tree'], carried, params['mask'])(
        list(primals))
    return tree_map(lambda o: Batched(top, o), out)


# A result carrying run ``top`` (or a later one) although ``f`` ran on primals without
# it: ``f`` read a value of that run from its closure.  The rules, applied from the
# arguments alone, would drop that dependence (a silent wrong derivative when ``f`` is
# traced through inside another trace, where no output check sees it).

def _forward(top, leaves, carried, primals, params):
    """One call of the staged jvp."""
    tangents = [x.tangent for x, c in zip(leaves, carried) if c]
    out, tangent = _derived(params['staged'], 'jvp', params['tree'], carried, params['mask'])(
        list(primals), tangents)
    if reads_closure((out, tangent), top):
        raise closure_error()
    return forward_result(top, out, tangent)


def _reverse(top, leaves, carried, primals, params):
    """f staged on the primals; tape cells whose partials call the staged vjp."""
    staged, tree, mask = params['staged'], params['tree'], params['mask']
    primals = list(primals)
    generators = [x for x in primals if is_generator(x)]
    before = states(generators)
    out = apply(staged, tree, primals)
    if reads_closure(out, top):
        raise closure_error()
    pullback = _derived(staged, 'vjp', tree, carried, mask)
    if generators:
        pullback = _replaying(pullback, generators, before)
    return recomputing_cells(top, leaves, carried, primals, out, pullback, "a staged function")


STAGED = FunctionOp('stage',
                   lambda leaves, p: apply(p['staged'], p['tree'], list(leaves)),
                   {'forward': _forward, 'reverse': _reverse, 'batch': _batch,
                    'taylor': _run_function})


def _replaying(pullback, generators, before):
    """``pullback``, which runs ``f`` again, with the generators among its arguments put
    back as they were for the forward run (so it sees the same draws), then as they are."""
    def replay(primals, cotangents):
        now = states(generators)
        restore(generators, before)
        try:
            return pullback(primals, cotangents)
        finally:
            restore(generators, now)
    return replay


def _derived(staged, kind, tree, carried, mask):
    """The staged jvp or vjp of ``staged.f`` for this argument structure (the static
    leaves among its primals stay static); at most ``DERIVED_SIZE`` are kept."""
    mask = tuple(mask) if mask is not None else None
    key = (kind, tree.signature(), carried, mask)
    derived = staged.derived
    fn = derived.get(key)
    if fn is None:
        make = jvp_of(staged.f, tree, carried, "stage") if kind == 'jvp' else \
            batch_of(staged.f, tree, carried) if kind == 'batch' else \
            vjp_of(staged.f, tree, carried, closure_error)
        fn = derived[key] = staged.derive(make, kind, mask)
        if len(derived) > DERIVED_SIZE:
            derived.popitem(last=False)
    else:
        derived.move_to_end(key)
    return fn
