"""Perturbation tags: one fresh tag per run of AD, totally ordered by creation.

A tag is a plain ``int`` so that the comparison done on every lifted operation
("which argument is outermost?") is a single machine-level int compare.  The
counter is an ``itertools.count``, whose ``next`` is atomic under the GIL, so
tags are unique and ordered across threads.

Tags are spaced ``STRIDE`` apart.  A run of AD takes ``k * STRIDE``; the gap
above it is reserved for tags that must sit *adjacent* to it in the order
(renaming a perturbation when a derivative-valued function is applied, see
``notes/functional-outputs.md``): a tag in the gap compares with every other
run's tag exactly as its base does.

A tag is *live* while the call that created it is running.  A perturbed value
found with a tag that is no longer live escaped its derivative call through a
side effect; using it is an error, not a silently wrong number.
"""
import itertools

STRIDE = 1 << 32

_counter = itertools.count(1)
_live = set()


def fresh():
    """A new tag, larger than every tag made before it, marked live."""
    tag = next(_counter) * STRIDE
    _live.add(tag)
    return tag


def retire(tag):
    """The call that owns ``tag`` has returned."""
    _live.discard(tag)


def is_live(tag):
    return tag in _live


def base_of(tag):
    """The run a (possibly renamed, adjacent) tag belongs to."""
    return tag - tag % STRIDE
