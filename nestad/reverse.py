"""The reverse phase: push sensitivities from output cells back to input cells.

1. Find the cells of run ``tag`` that reach the outputs: a depth-first search
   along ``partials`` keyed on cell ids, which also counts, for every cell found,
   how many of the found cells consume it.  Cells that do not reach an output are
   never visited (the tape is pruned).  No Python recursion: a 1,000,000-deep chain
   is fine.
2. Visit the cells in topological order, outputs first (Kahn's algorithm): a cell
   is ready when every cell that consumes it has been processed, so its sensitivity
   is complete when it is read.  Each cell is processed exactly once however often
   it is shared: sensitivity[input] += partial * sensitivity[cell].

Both steps touch each reachable cell and each of its partials a constant number of
times, so the phase is linear in the size of the reachable tape.  The arithmetic is
nestad's own, so partials and sensitivities may be perturbed by enclosing runs of
either mode, which then differentiate this phase too.
"""
import gc

from .values import TapeCell


def _count_consumers(roots, tag, skip=None):
    """(pending, ready): for each reachable cell of run ``tag``, the number of reachable
    cells that consume it; and the roots nothing reachable consumes.  Cells whose id is
    in ``skip`` are treated as absent."""
    pending = {}
    stack = []
    for r in roots:
        if isinstance(r, TapeCell) and r.tag == tag and r.id not in pending \
                and (skip is None or r.id not in skip):
            pending[r.id] = 0
            stack.append(r)
    starts = list(stack)
    get, push, pop = pending.get, stack.append, stack.pop
    while stack:
        for inp, _ in pop().partials:
            i = inp.id
            if skip is not None and i in skip:
                continue
            k = get(i)
            if k is None:
                pending[i] = 1
                push(inp)
            else:
                pending[i] = k + 1
    return pending, [r for r in starts if pending[r.id] == 0]


def topological_order(roots, tag, visited=None):
    """Cells of run ``tag`` reachable from ``roots``, inputs before outputs.

    Cells whose id is already in ``visited`` (which is updated) are not entered.
    """
    pending, ready = _count_consumers(roots, tag, visited)
    order = []
    while ready:
        cell = ready.pop()
        order.append(cell)
        for inp, _ in cell.partials:
            i = inp.id
            if visited is not None and i in visited:
                continue
            k = pending[i] - 1
            if k:
                pending[i] = k
            else:
                ready.append(inp)
    if visited is not None:
        visited.update(pending)
    order.reverse()
    return order


def backpropagate(roots, seeds, tag, consume=False):
    """Sensitivities of the leaf cells, as a dict id -> sensitivity.

    ``roots`` are output values, ``seeds`` their sensitivities.  Roots that are not
    cells of run ``tag`` do not depend on its inputs and contribute nothing.
    ``consume``: the tape is used once (a gradient's own): each cell lets go of its
    partials once they are pushed, so the tape is freed as the sweep goes rather than
    after it (under ``nd.stage`` each partial is a recorded equation's tracer).
    """
    sens = {}
    for root, seed in zip(roots, seeds):
        if isinstance(root, TapeCell) and root.tag == tag:
            prev = sens.get(root.id)
            sens[root.id] = seed if prev is None else prev + seed
    pending, ready = _count_consumers(roots, tag)
    get, pop_sens, push = sens.get, sens.pop, ready.append
    while ready:
        cell = ready.pop()
        partials = cell.partials
        if not partials:
            continue            # an input cell: keep its sensitivity for the caller
        s = pop_sens(cell.id)
        if consume:
            cell.partials = ()
        for inp, d in partials:
            i = inp.id
            prev = get(i)
            sens[i] = d * s if prev is None else prev + d * s
            k = pending[i] - 1
            if k:
                pending[i] = k
            else:
                push(inp)
    return sens


class young_collections_only:
    """While a tape is alive, the cyclic garbage collector collects only its youngest
    generation (as often as the user's threshold says: by default every 700 allocations).

    A tape is a large, growing, acyclic graph that reference counting frees.  Full
    collections would rescan it again and again as it grows; young collections see each
    object once, when it is new, and still free the cyclic garbage that the user's code
    makes (which pausing the collector would keep until the tape died: measured, 341 MB
    against 17 MB of peak memory for a gradient whose function makes 80 MB of cycles, for
    1% more instructions per gradient than a pause; notes/benchmarks.md).  Only the outermost
    tape acts, and a collector the user disabled stays disabled.
    """
    __slots__ = ()
    _depth = 0
    _saved = None

    def __enter__(self):
        cls = young_collections_only
        cls._depth += 1
        if cls._depth == 1 and gc.isenabled():
            cls._saved = gc.get_threshold()
            gc.set_threshold(cls._saved[0], 1 << 30, 1 << 30)

    def __exit__(self, *exc):
        cls = young_collections_only
        cls._depth -= 1
        if cls._depth == 0 and cls._saved is not None:
            gc.set_threshold(*cls._saved)
            cls._saved = None
