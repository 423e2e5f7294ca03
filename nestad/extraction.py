"""Reading one run's perturbation out of a value, and renaming perturbations.

``tangent_of(tag, y)`` / ``primal_of(tag, y)`` take the coefficient of eps_tag /
the part free of it, leaf by leaf through structures.  A leaf may hold ``tag``
below later runs' layers; those layers are kept:

* a later Bundle ``p + d eps_u`` gives ``T(p) + T(d) eps_u`` (T is linear);
* a later run's TapeCell cannot be read that way: the tangent along ``tag`` is
  not a multiple of the cell (it is not linear over that run's scalars), so the
  part of that run's tape which carries ``tag`` is *split*: each cell
  ``c = c0 + c1 eps`` becomes two cells with partials from the chain rule
  ``dc0 = sum d0 dx0``, ``dc1 = sum (d0 dx1 + d1 dx0)`` (see ``_split``).  Cells
  that do not carry ``tag`` are kept as they are, so the later run still finds
  its input cells by id.

A function-valued leaf becomes a function that does the extraction when it is
applied, renaming ``tag`` to a fresh adjacent tag on the way in and back on the
way out, so that perturbations of the caller are never confused with the ones
captured inside the function (notes/functional-outputs.md).
"""
from numbers import Real

import numpy as np

from . import perturbation
from .arrays import LinearMap, make_bundle, make_cell, rebuild_bundle, rebuild_cell
from .errors import EscapedPerturbationError, InvalidInputError, NestadError
from .reverse import backpropagate, topological_order
from .structures import flatten, leaf_paths
from .tracer import ArrayTracer
from .values import Batched, Bundle, Perturbed, TapeCell

TANGENT, PRIMAL = True, False


def tangent_of(tag, y, op="derivative"):
    """The coefficient of perturbation ``tag`` in ``y``."""
    return _extract(tag, y, TANGENT, op)


def primal_of(tag, y, op="derivative"):
    """``y`` with perturbation ``tag`` set to zero."""
    return _extract(tag, y, PRIMAL, op)


def run_jvp(f, x, t):
    """(f(x), its tangent along t) by a forward run of its own: for a rule that
    differentiates a function made of nestad's primitives (t may be batched)."""
    tag = perturbation.fresh()
    try:
        y = f(make_bundle(tag, x, t))
        return primal_of(tag, y), tangent_of(tag, y)
    finally:
        perturbation.retire(tag)


def run_vjp(f, x, g):
    """The cotangent of x for a cotangent g of f(x), by a reverse run of its own: for a
    rule that pulls back through a function made of nestad's primitives."""
    tag = perturbation.fresh()
    try:
        cell = make_cell(tag, x, ())
        sens = backpropagate((f(cell),), (g,), tag)
        return sens[cell.id] if cell.id in sens else np.zeros(np.shape(x))
    finally:
        perturbation.retire(tag)


def _extract(tag, y, part, op, strict=True):
    """(``strict=False``: leaves that are not numbers or functions are passed on, as
    ``stop_gradient`` passes them)"""
    if isinstance(y, Bundle) and y.tag == tag:      # the common case: one number or array
        return _checked(y.tangent if part else y.primal, op)
    leaves, treedef = flatten(y, "output", op)
    memo = _Memo()
    out = []
    for k, x in enumerate(leaves):
        if not isinstance(x, (Perturbed, Real, np.ndarray, ArrayTracer)) and not callable(x):
            if not strict:
                out.append(x)
                continue
            raise InvalidInputError(
                f"{op}: output{leaf_paths(y)[k]} is a {type(x).__name__} ({x!r:.60}); a "
                "differentiated function must return numbers, functions, or structures of them.")
        # (a leaked value of an older, finished run would read as a constant: check the
        # leaf itself, not only what is read out of it)
        out.append(_checked(_part(tag, _checked(x, op), part, memo), op))
    return treedef.build(out)


def _checked(x, op):
    if isinstance(x, Perturbed) and x.tag and not perturbation.is_live(x.tag):   # (tag 0: Compact)
        raise EscapedPerturbationError(
            f"{op}: met a perturbed value whose derivative call has already returned; it "
            "escaped through a side effect (a global, a list, an attribute) and its derivative "
            "can no longer be read correctly. Return such values from the differentiated "
            "function instead.")
    return x


def check_output_leaf(op, k, y, tag):
    """Refuse output leaf ``k`` of a function mapped or expanded by ``op`` (run ``tag``): a
    function, a perturbation of a derivative call made inside it (newer than ``tag``), or
    one whose call has returned (it escaped through a side effect)."""
    if callable(y) and not isinstance(y, Perturbed):
        raise InvalidInputError(f"{op}: output leaf {k} is a function; {op} takes functions "
                                "returning numbers, arrays or structures of them")
    if isinstance(y, Perturbed):
        if y.tag > tag:
            raise InvalidInputError(
                f"{op}: output leaf {k} carries a perturbation of a derivative call made "
                "inside the function that has already returned; return derivatives, not "
                "perturbed values")
        _checked(y, op)


def _is_zero(x):
    """A plain zero (number or all-zero array): a part that contributes nothing."""
    cls = x.__class__
    if cls is float or cls is int:
        return x == 0
    return cls is np.ndarray and not x.any()


class _PartOfMap(LinearMap):
    """One part (along ``tag``) of a linear map's results: the partial of a split cell
    when the original partial is a linear map.  ``L g = L0 g + (L1 g) eps`` for g free
    of eps."""
    __slots__ = ('tag', 'linear_map', 'part')

    def __init__(self, tag, linear_map, part):
        self.tag, self.linear_map, self.part = tag, linear_map, part

    def __mul__(self, g):
        # Applied by the reverse phase, after the application that split the tape has
        # returned: the map computes on values perturbed by ``tag``, so ``tag``'s run is
        # revived for the time of the computation (it ends inside it).
        perturbation.revive(self.tag)
        try:
            return _part(self.tag, self.linear_map * g, self.part, _Memo())
        finally:
            perturbation.retire(self.tag)

    def renamed(self, value, tag):
        inner = self.linear_map.renamed(value, tag)
        t = tag(self.tag)
        return self if inner is self.linear_map and t == self.tag else _PartOfMap(t, inner, self.part)


class _Memo:
    """Per-extraction memo of split tape cells: id -> (c0, c1), plus visited ids."""
    __slots__ = ('pairs', 'seen')

    def __init__(self):
        self.pairs = {}
        self.seen = set()


def _part(tag, x, part, memo):
    if isinstance(x, Perturbed):
        t = x.tag
        if t == tag:
            if not part:
                return x.primal
            # (a reverse run cut by stop_gradient: only its primal part is read, and
            # _split asks for the other, which contributes nothing to it)
            return x.tangent if isinstance(x, Bundle) else 0.0
        if t < tag:                       # carries no eps_tag (ordering invariant)
            return 0.0 if part else x
        if isinstance(x, TapeCell):
            return _split(tag, x, memo)[part]
        if x.__class__ is Batched:        # a newer vmap's members: each read alike
            p = _part(tag, x.primal, part, memo)
            return 0.0 if part and _is_zero(p) else x if p is x.primal else Batched(t, p)
        p = _part(tag, x.primal, part, memo)
        d = _part(tag, x.tangent, part, memo)
        if part:
            return 0.0 if _is_zero(p) and _is_zero(d) else rebuild_bundle(t, p, d)
        return x if p is x.primal and d is x.tangent else rebuild_bundle(t, p, d)
    if isinstance(x, Real):
        if not part:
            return x
        # (a float32 or float16 scalar's zero tangent keeps its dtype)
        return x.dtype.type(0) if isinstance(x, np.floating) and x.dtype.itemsize < 8 else 0.0
    if isinstance(x, (np.ndarray, ArrayTracer)):
        if not part:
            return x
        return np.zeros(x.shape, x.dtype if x.dtype.kind == 'f' else float)
    if callable(x):
        return ExtractedFunction(tag, x, part)
    raise InvalidInputError(f"cannot read a perturbation out of a {type(x).__name__}")


def _split(tag, root, memo):
    """(c0, c1) with root == c0 + c1 eps_tag, for a cell of a run later than ``tag``."""
    pairs = memo.pairs
    if root.id in pairs:
        return pairs[root.id]
    for cell in topological_order((root,), root.tag, memo.seen):     # inputs first
        p = cell.primal
        p0, p1 = _part(tag, p, PRIMAL, memo), _part(tag, p, TANGENT, memo)
        if not cell.partials:
            if not _is_zero(p1):
                raise NestadError(
                    "an input of a gradient_r call carries the perturbation of a "
                    "derivative-valued function that is being applied inside that call; "
                    "nestad cannot split that input. Apply the function outside the "
                    "gradient_r call, or use forward mode for the outer derivative.")
            pairs[cell.id] = (cell, 0.0)
            continue
        changed = p0 is not p or not _is_zero(p1)
        parts = []
        for inp, d in cell.partials:
            i0, i1 = pairs[inp.id]
            if isinstance(d, LinearMap):
                d0, d1 = _PartOfMap(tag, d, PRIMAL), _PartOfMap(tag, d, TANGENT)
            else:
                d0, d1 = _part(tag, d, PRIMAL, memo), _part(tag, d, TANGENT, memo)
            changed = changed or i0 is not inp or isinstance(i1, TapeCell) or d0 is not d \
                or not _is_zero(d1)
            parts.append((i0, i1, d0, d1))
        if not changed:
            pairs[cell.id] = (cell, 0.0)
            continue
        partials0 = tuple((i0, d0) for i0, _, d0, _ in parts)
        partials1 = tuple([(i1, d0) for _, i1, d0, _ in parts if isinstance(i1, TapeCell)]
                          + [(i0, d1) for i0, _, _, d1 in parts if not _is_zero(d1)])
        c0 = rebuild_cell(cell.tag, p0, partials0)
        c1 = rebuild_cell(cell.tag, p1, partials1) if partials1 else p1
        pairs[cell.id] = (c0, c1)
    return pairs[root.id]


class ExtractedFunction:
    """The tangent (or primal) along ``tag`` of a function-valued result.

    Applying it renames ``tag`` in the arguments to a fresh adjacent tag, applies the
    function, extracts ``tag`` from the result, and renames the fresh tag back.
    """
    __slots__ = ('tag', 'fn', 'part', '__weakref__')
    op, strict = "derivative", True      # (see _extract)

    def __init__(self, tag, fn, part):
        self.tag, self.fn, self.part = tag, fn, part

    def __call__(self, *args, **kwargs):
        tag = self.tag
        perturbation.revive(tag)
        new = perturbation.adjacent(tag)
        try:
            args, kwargs = rename(tag, new, (args, kwargs))
            out = _extract(tag, self.fn(*args, **kwargs), self.part, self.op, self.strict)
            return rename(tag, new, out)
        finally:
            perturbation.retire(new)
            perturbation.retire(tag)

    def __repr__(self):
        return f"<{'tangent' if self.part else 'primal'} of {self.fn!r}>"


class RenamedFunction:
    """``f`` conjugated by the swap of tags ``a`` and ``b`` (a swap is its own inverse)."""
    __slots__ = ('a', 'b', 'fn', '__weakref__')

    def __init__(self, a, b, fn):
        self.a, self.b, self.fn = a, b, fn

    def __call__(self, *args, **kwargs):
        a, b = self.a, self.b
        perturbation.revive(a)
        perturbation.revive(b)
        try:
            args, kwargs = rename(a, b, (args, kwargs))
            return rename(a, b, self.fn(*args, **kwargs))
        finally:
            perturbation.retire(b)
            perturbation.retire(a)

    def __repr__(self):
        return repr(self.fn)


def rename(a, b, y):
    """Swap perturbations ``a`` < ``b`` (adjacent tags of one run) throughout ``y``."""
    leaves, treedef = flatten(y)
    memo = {}
    new = [_rename(a, b, x, memo) for x in leaves]
    if all(n is x for n, x in zip(new, leaves)):
        return y
    return treedef.build(new)


def _rename(a, b, x, memo):
    if isinstance(x, Bundle):
        t = x.tag
        if t < a:
            return x
        p, d = _rename(a, b, x.primal, memo), _rename(a, b, x.tangent, memo)
        if t == a or t == b:
            return _bundle(b if t == a else a, p, d)
        return x if p is x.primal and d is x.tangent else _bundle(t, p, d)
    if isinstance(x, TapeCell):
        return x if x.tag < a else _rename_cell(a, b, x, memo)
    if isinstance(x, LinearMap):
        return x.renamed(lambda v: _rename(a, b, v, memo),
                         lambda t: b if t == a else (a if t == b else t))
    if callable(x) and not isinstance(x, Real):
        return RenamedFunction(a, b, x)
    return x


def _bundle(t, p, d):
    """The value p + d eps_t, nested so that the outermost tag is the largest.

    After a swap, a tag adjacent to ``t`` may sit inside it; only such forward tags
    can, so re-nesting is a transposition of Bundle layers, with no arithmetic.
    """
    tp = p.tag if isinstance(p, Perturbed) else -1
    td = d.tag if isinstance(d, Perturbed) else -1
    u = tp if tp > td else td
    if u < t:
        return rebuild_bundle(t, p, d)
    p0, p1 = (p.primal, p.tangent) if tp == u else (p, 0.0)
    d0, d1 = (d.primal, d.tangent) if td == u else (d, 0.0)
    return rebuild_bundle(u, _bundle(t, p0, d0), _bundle(t, p1, d1))


def _rename_cell(a, b, root, memo):
    """A copy of the part of ``root``'s tape that carries ``a`` or ``b``, swapped."""
    if root.id in memo:
        return memo[root.id]
    seen = set(memo)
    for cell in topological_order((root,), root.tag, seen):
        p = _rename(a, b, cell.primal, memo)
        if not cell.partials:
            if p is not cell.primal:
                raise NestadError(
                    "an input of a gradient_r call carries the perturbation of a "
                    "derivative-valued function that is being applied inside that call; "
                    "nestad cannot rename it. Apply the function outside the gradient_r call.")
            memo[cell.id] = cell
            continue
        partials = tuple((memo[inp.id], _rename(a, b, d, memo)) for inp, d in cell.partials)
        same = p is cell.primal and all(n[0] is o[0] and n[1] is o[1]
                                        for n, o in zip(partials, cell.partials))
        memo[cell.id] = cell if same else rebuild_cell(cell.tag, p, partials)
    return memo[root.id]
