"""Tangents as vectors: pointwise addition and scaling of numbers, structures and
functions (a function's tangent is a function, so sums of them are functions too)."""
from numbers import Real

from .errors import InvalidInputError
from .structures import flatten


def tangent_add(a, b):
    """``a + b`` leaf by leaf; ``a`` and ``b`` must have the same structure."""
    la, da = flatten(a)
    lb, db = flatten(b)
    if len(la) != len(lb) or da.signature() != db.signature():
        raise InvalidInputError("tangent_add: both tangents must have the same structure")
    return da.build([_add(x, y) for x, y in zip(la, lb)])


def tangent_scale(s, a):
    """``s * a`` leaf by leaf, for a scalar ``s``."""
    leaves, treedef = flatten(a)
    return treedef.build([_scale(s, x) for x in leaves])


def _add(x, y):
    if callable(x) and callable(y) and not isinstance(x, Real):
        return lambda *args, **kw: tangent_add(x(*args, **kw), y(*args, **kw))
    return x + y


def _scale(s, x):
    if callable(x) and not isinstance(x, Real):
        return lambda *args, **kw: tangent_scale(s, x(*args, **kw))
    return s * x

