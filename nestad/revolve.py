"""The binomial checkpointing schedule (Griewank's *revolve*) for reversing a loop.

Reverse mode through ``steps`` iterations of ``x = body(x)`` needs the iterates
``x_{steps-1}, ..., x_0`` in that order.  Storing them all costs ``steps`` states; with
room for at most ``slots`` states (``x_0`` in one of them) the others are recomputed
from a stored one.  The schedule here recomputes the fewest body steps possible
(Griewank 1992; Griewank and Walther, "Algorithm 799: revolve", 2000):

* ``slots`` states and ``r`` recomputations of each step reverse at most
  ``C(slots + r, slots)`` steps, so ``r`` is the least with ``C(slots + r, slots) >=
  steps``;
* the body steps recomputed (``advances``) are then ``r * steps - C(slots + r, slots + 1)``
  (0 when every iterate can be kept);
* the split: to reverse ``l`` steps from a stored state with ``s`` slots free, advance
  ``m`` steps, store that state, reverse the ``l - m`` steps after it with ``s - 1``
  free slots, then the first ``m`` with ``s``.  ``m`` is optimal exactly when the first
  part is reversed with ``r - 1`` recomputations and the second with ``r``:
  ``max(L(s, r-2), l - L(s-1, r)) <= m <= min(L(s, r-1), l - L(s-1, r-1))``, where
  ``L(s, r) = C(s + r + 1, s + 1)`` steps can be reversed with ``s`` free slots
  (checked against the dynamic program in tests/test_loop_checkpoints.py).

The schedule is a list of *sweeps*, one per step reversed, last step first: restore a
stored state, then a few times advance some steps and store the state reached in a
slot, then advance to the step and reverse it.  ``schedule`` gives it as integer arrays, so
that a staged loop can read it row by row (``nestad.staging.loops``); the eager loop
reads the same arrays.
"""
from math import comb

import numpy as np


def reversible(free, reps):
    """Steps reversible from one stored state with ``free`` more slots and ``reps``
    recomputations of each step (``L(s, r)`` above)."""
    return 0 if reps < 0 else comb(free + reps + 1, free + 1)


def repetitions(steps, slots):
    """The least number of recomputations of a step that reverses ``steps`` steps with
    ``slots`` stored states (the initial one included)."""
    r = 0
    while reversible(slots - 1, r) < steps:
        r += 1
    return r


def advances(steps, slots):
    """The fewest body steps recomputed to reverse ``steps`` steps with ``slots`` states
    (the binomial count)."""
    if steps <= 1:
        return 0
    r = repetitions(steps, slots)
    return r * steps - reversible(slots, r - 1)


def _split(l, s):
    """The largest optimal first advance for ``l`` steps with ``s >= 1`` free slots."""
    r = repetitions(l, s + 1)
    return min(reversible(s, r - 1), l - reversible(s - 1, r - 1), l - 1)


def schedule(steps, slots):
    """The schedule for ``steps`` steps and ``slots`` states as six integer arrays
    ``(restore, first, count, final, gap, slot)``: sweep ``j`` reverses step
    ``steps - 1 - j``; it restores slot ``restore[j]``, then for each ``k`` in
    ``range(first[j], first[j] + count[j])`` advances ``gap[k]`` steps and stores the
    state in slot ``slot[k]``, then advances ``final[j]`` steps and reverses the step it
    reached.  Slot 0 holds the initial state."""
    restore, first, count, final, gap, slot = [], [], [], [], [], []
    free = list(range(slots - 1, 0, -1))
    # ranges left to reverse, the last first: (start, length, slot holding the start,
    # free slots, the slot to free when it comes up: the one stored inside it before)
    pending = [(0, steps, 0, slots - 1, None)] if steps else []
    while pending:
        pos, l, at, s, done = pending.pop()
        if done is not None:
            free.append(done)
        restore.append(at)
        first.append(len(gap))
        while l > 1 and s > 0:
            m = _split(l, s)
            new = free.pop()
            gap.append(m)
            slot.append(new)
            pending.append((pos, m, at, s, new))
            pos, l, at, s = pos + m, l - m, new, s - 1
        count.append(len(gap) - first[-1])
        final.append(l - 1)
        if l > 1:                      # no slot free: the next sweep restarts here
            pending.append((pos, l - 1, at, 0, None))
    return tuple(np.array(v, dtype=np.int64) for v in (restore, first, count, final, gap, slot))


def plan_arrays(steps, slots, _cache={}):
    """``schedule(steps, slots)``, each array with one more row of zeros (a traced loop
    body runs once on the example state, which reads row 0 even of a plan with no sweeps
    or no stores), made once per ``(steps, slots)``: a loop reversed again with the same
    trip count reuses it.  (The staged backward loop's plain implementation, so no class
    and no module state: ``nestad.export`` copies it by its source.)"""
    key = (int(steps), int(slots))
    found = _cache.get(key)
    if found is None:
        if len(_cache) > 64:
            _cache.clear()
        found = _cache[key] = tuple(np.append(a, 0) for a in schedule(*key))
    return found


def check_checkpoints(op, checkpoints):
    """``checkpoints`` as given to a loop: None (keep every iterate) or an int >= 1."""
    if checkpoints is None:
        return None
    if isinstance(checkpoints, (bool, np.bool_)) or not isinstance(checkpoints, (int, np.integer)) \
            or checkpoints < 1:
        from .errors import InvalidInputError
        raise InvalidInputError(
            f"{op}: checkpoints must be an int >= 1 (the most states of the loop that reverse "
            f"mode keeps at once; the initial state is one of them) or None (keep every "
            f"iterate), not {checkpoints!r:.40}")
    return int(checkpoints)
