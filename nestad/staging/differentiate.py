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
from ..custom import apply, forward_result, jvp_of, peel, recomputing_cells, vjp_of


def call_perturbed(staged, leaves, tree):
    top, carried, primals, forward = peel(leaves)
    if forward:
        tangents = [x.tangent for x, c in zip(leaves, carried) if c]
        out, tangent = _derived(staged, 'jvp', tree, carried)(primals, tangents)
        return forward_result(top, out, tangent)
    out = apply(staged, tree, primals)
    return recomputing_cells(top, leaves, carried, primals, out,
                             _derived(staged, 'vjp', tree, carried), "a staged function")


def _derived(staged, kind, tree, carried):
    """The staged jvp or vjp of ``staged.f`` for this argument structure."""
    key = (kind, tree.signature(), carried)
    fn = staged.derived.get(key)
    if fn is None:
        make = jvp_of(staged.f, tree, carried, "stage") if kind == 'jvp' else \
            vjp_of(staged.f, tree, carried)
        fn = staged.derived[key] = staged.derive(make)
    return fn
