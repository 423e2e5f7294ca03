"""Perturbation tags: one fresh tag per run of AD, totally ordered by creation.

A tag is a plain ``int`` so that the comparison done on every lifted operation
("which argument is outermost?") is a single int compare.  The counter is an
``itertools.count``, whose ``next`` is atomic under the GIL, so tags are unique
and ordered across threads.

Tags of runs are spaced ``STRIDE`` apart.  The gap above a run's tag holds the
tags *adjacent* to it: ``adjacent(t)`` is larger than ``t`` and smaller than
every later run's tag, so it compares with every other run exactly as ``t``
does.  Applying a derivative-valued function renames its perturbation to such a
tag (notes/functional-outputs.md explains why that keeps lifting correct).

A tag is *live* while some call that uses it is running: the derivative call
that made it, or an application of a function it returned.  A perturbed value
met with a tag that is not live escaped through a side effect; using it is an
error, not a silently wrong number.
"""
import itertools
import threading

STRIDE = 1 << 32

_counter = itertools.count(1)
_lock = threading.Lock()
_live = {}                      # tag -> number of running calls that use it
# Adjacent tags come from one counter for all runs (a table of counters per run would
# keep an entry for every function-valued derivative ever made).  Adjacent tags of one
# run are distinct until 2**32 - 1 of them have been made since the oldest one still in
# use, far beyond any nesting.
_adjacent = itertools.count(1)


def fresh():
    """A new run's tag, larger than every tag made before it, marked live."""
    tag = next(_counter) * STRIDE
    with _lock:
        _live[tag] = 1
    return tag


def adjacent(tag):
    """A new tag in the gap above ``tag``'s run, marked live."""
    new = tag - tag % STRIDE + 1 + next(_adjacent) % (STRIDE - 1)
    with _lock:
        _live[new] = 1
    return new


def revive(tag):
    """A call that uses ``tag`` starts (a derivative-valued function is applied)."""
    with _lock:
        _live[tag] = _live.get(tag, 0) + 1


def retire(tag):
    """A call that used ``tag`` has returned."""
    with _lock:
        n = _live.get(tag, 0) - 1
        if n > 0:
            _live[tag] = n
        else:
            _live.pop(tag, None)


def is_live(tag):
    return tag in _live


def live_tags():
    """The tags of the runs going on now, oldest first."""
    with _lock:
        return sorted(_live)
