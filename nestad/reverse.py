"""The reverse phase: push sensitivities from output cells back to input cells.

1. Find the cells of run ``tag`` that reach the outputs: an iterative
   depth-first search over ``partials``, remembering visited cell ids.  Cells
   that do not reach an output are never visited (the tape is pruned).
2. The DFS finishing order is a topological order (an input finishes before
   any cell computed from it), so walking it backwards visits each cell after
   every cell that uses it: its sensitivity is complete when it is read.
3. Each cell is processed exactly once, however often it is shared:
   sensitivity[input] += partial * sensitivity[cell].

Both steps touch each cell and each partial once, so the phase is linear in the
size of the reachable tape.  The arithmetic is nestad's own, so partials and
sensitivities may be perturbed by enclosing runs of either mode, which then
differentiate this phase too.
"""
from .values import TapeCell


def topological_order(roots, tag, visited=None):
    """Cells of run ``tag`` reachable from ``roots``, inputs before outputs.

    Cells whose id is already in ``visited`` (which is updated) are not entered.
    """
    if visited is None:
        visited = set()
    order = []
    for root in roots:
        if not isinstance(root, TapeCell) or root.tag != tag or root.id in visited:
            continue
        visited.add(root.id)
        stack = [(root, iter(root.partials))]
        while stack:
            cell, pending = stack[-1]
            for inp, _ in pending:
                if inp.id not in visited:
                    visited.add(inp.id)
                    stack.append((inp, iter(inp.partials)))
                    break
            else:
                stack.pop()
                order.append(cell)
    return order


def backpropagate(roots, seeds, tag):
    """Sensitivities of the leaf cells, as a dict id -> sensitivity.

    ``roots`` are output values, ``seeds`` their sensitivities.  Roots that are not
    cells of run ``tag`` do not depend on its inputs and contribute nothing.
    """
    sens = {}
    for root, seed in zip(roots, seeds):
        if isinstance(root, TapeCell) and root.tag == tag:
            prev = sens.get(root.id)
            sens[root.id] = seed if prev is None else prev + seed
    order = topological_order(roots, tag)
    get = sens.get
    for i in range(len(order) - 1, -1, -1):
        cell = order[i]
        partials = cell.partials
        if not partials:
            continue            # an input cell: keep its sensitivity for the caller
        s = sens.pop(cell.id)   # complete: every consumer was processed before
        for inp, d in partials:
            key = inp.id
            prev = get(key)
            sens[key] = d * s if prev is None else prev + d * s
    order.clear()
    return sens
