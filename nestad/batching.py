"""Batching: ``nestad.vmap`` as an interpretation.

``vmap(f)`` takes a fresh tag ``t`` and gives ``f`` each mapped argument as
``Batched(t, stacked)``: the members' values stacked along a leading axis (mapped
axes are moved to the front on the way in, and the output's to ``out_axes`` on the
way out).  A ``Batched`` value obeys the ordering invariant like Bundle and TapeCell
(``stacked`` holds only smaller tags), so vmap nests with itself and with every
derivative operator by the same rule: the outermost tag's interpretation handles an
application, on primals that carry only smaller tags.

``BATCH.process`` applies the primitive's batch rule to the stacked values:
``rule(prim, values, batched, params)`` returns the stacked result, where
``batched[i]`` says whether ``values[i]`` has the leading batch axis (an argument that
does not carry ``t`` is the same for every member).  Rules are in ``BATCH_RULES``,
keyed by the primitive's qualified name; nestad.numpy's are in
``nestad/numpy/_batch.py`` (defaults by kind: elementwise, reductions, shape functions,
products, stacked linear algebra).  A primitive without one is applied member by member
and the results stacked (``per_member``): always correct, slower, and counted in
``FALLBACKS`` so that it is visible (``fallbacks()``).

The batch axis is always the leading axis of ``stacked`` (JAX moves it lazily;
nestad moves it on entry, which keeps every rule to one case).
"""
import collections

import numpy as np

from . import perturbation
from .arrays import ArrayPrimitive
from .errors import InvalidInputError
from .extraction import check_output_leaf
from .interpret import FunctionOp, Interpretation
from .structures import flatten
from .tracer import is_tracer
from .values import Batched, Perturbed, primal_value

BATCH_RULES = {}                      # qualified primitive name -> rule
FALLBACKS = collections.Counter()     # qualified name -> applications member by member
ops = None                            # nestad.numpy (set by it): the functions rules use
LIVE = set()                          # the tags of the vmaps going on (not derivative runs)


def fallbacks():
    """{primitive name: how many applications ran member by member} since start."""
    return dict(FALLBACKS)


def batch_size(values, batched):
    for v, b in zip(values, batched):
        if b:
            return np.shape(v)[0]
    raise AssertionError("a batch rule applied without a batched argument")


class Batching(Interpretation):
    """vmap: each primitive application is applied once to the stacked members."""
    __slots__ = ()
    name = 'batch'

    def process(self, prim, top, args, carried, primals, params):
        if prim.__class__ is FunctionOp:
            return prim.apply(self, top, args, carried, primals, params)
        rule = BATCH_RULES.get(prim_key(prim))
        if rule is None:
            rule = per_member
        out = rule(prim, primals, carried, params)
        if isinstance(out, tuple):
            return tuple(Batched(top, o) for o in out)
        return Batched(top, out)


BATCH = Batching()
Batched.interpretation = BATCH


def prim_key(prim):
    """The key of ``prim`` in rule tables: its registered name."""
    return getattr(prim, 'qualname', None) or prim.name


def ndim(v):
    """``np.ndim(v)`` of a stacked value (a perturbed one without numpy's protocol)."""
    c = v.__class__
    if c is np.ndarray:
        return v.ndim
    return 0 if c is float or c is int else ops.ndim(v)


_PLAIN = (np.ndarray, float, int)


def on_stacked(prim, values, params):
    """``prim`` applied to stacked values: plain arrays (the members carry no other tag)
    are evaluated at once, skipping the dispatch that would find no tag among them."""
    for v in values:
        if v.__class__ not in _PLAIN:
            return prim.lifted(*values, **params)
    if prim.__class__ is ArrayPrimitive:
        return prim.evaluate(values, params)
    return prim.lifted(*values, **params)


def member_ndim(v, b):
    return ndim(v) - 1 if b else ndim(v)


def pad(v, b, n):
    """Stacked ``v`` with its member's shape padded with leading 1s to ``n`` axes (an
    unbatched value is left alone: numpy's broadcasting aligns it from the right)."""
    if not b:
        return v
    k = ndim(v) - 1
    if k >= n:
        return v
    s = v.shape if v.__class__ is np.ndarray else ops.shape(v)
    return ops.reshape(v, (s[0],) + (1,) * (n - k) + s[1:])


def elementwise(prim, values, batched, params):
    """The batch rule of a broadcasting elementwise primitive: the members' axes aligned
    from the right, the batch axis leading.  Only a batched value with fewer member axes
    than another's is reshaped (an unbatched one broadcasts from the right as it is)."""
    if len(values) > 1:
        ks = [ndim(v) - b for v, b in zip(values, batched)]
        n = max(ks)
        values = [pad(v, True, n) if b and k < n else v for v, b, k in zip(values, batched, ks)]
    return on_stacked(prim, values, params)


def per_member(prim, values, batched, params):
    """The fallback rule: ``prim`` applied to each member, the results stacked."""
    FALLBACKS[prim_key(prim)] += 1
    return stack_members([prim.lifted(*[ops.getitem(v, i) if b else v
                                         for v, b in zip(values, batched)], **params)
                          for i in range(batch_size(values, batched))])


def stack_members(outs):
    """Stacked results of each member: arrays, or tuples of them."""
    if isinstance(outs[0], tuple):
        return tuple(ops.stack(list(col)) for col in zip(*outs))
    return ops.stack(outs)


# ---------------------------------------------------------------- functions with rules of their own

def batched_top(leaves):
    """The tag of the outermost leaf if it is batched (its vmap's), else None."""
    top, x = -1, None
    for a in leaves:
        if isinstance(a, Perturbed) and a.tag > top:
            top, x = a.tag, a
    return top if x is not None and x.__class__ is Batched else None


def call_per_member(fn, leaves, tree, top, what):
    """``fn(tree.build(leaves))`` for leaves of which some are batched by run ``top``: one
    call per member, the outputs stacked (the fallback for functions with rules of their
    own that have no batch rule; counted under ``what``)."""
    FALLBACKS[what] += 1
    carried = [isinstance(x, Perturbed) and x.tag == top for x in leaves]
    size = next(np.shape(x.primal)[0] for x, c in zip(leaves, carried) if c)
    outs = []
    for i in range(size):
        outs.append(fn(tree.build([ops.getitem(x.primal, i) if c else x
                                   for x, c in zip(leaves, carried)])))
    flat = [flatten(o)[0] for o in outs]
    if any(isinstance(y, Perturbed) and y.tag >= top for ys in flat for y in ys):
        # A member's result batched by this vmap: the function read a mapped value from
        # its closure, which one member's call cannot see apart (stacking would mix them).
        raise InvalidInputError(
            f"vmap: {what} runs member by member, and its function reads a value mapped by "
            "this vmap from its closure; pass that value as an argument")
    out_tree = flatten(outs[0])[1]
    return out_tree.build([Batched(top, ops.stack(list(col))) for col in zip(*flat)])


def any_member(c):
    """For a loop's condition: True while some member's condition holds."""
    v = c
    while isinstance(v, Perturbed):
        v = v.primal
    return bool(np.any(v))


def all_members(c):
    """``c`` itself, or for a batched bool whether it holds for every member."""
    if primal_value(c).__class__ is not Batched:
        return c
    while isinstance(c, Perturbed):
        c = c.primal
    return bool(np.all(c))


def while_batched(cond, body, state, c):
    """``while_loop`` with a batched condition ``c = cond(state)``: the loop runs until no
    member's condition holds; a member whose condition is false keeps its state while the
    others go on (JAX's semantics)."""
    while any_member(c):
        new = body(state)
        old_leaves, tree = flatten(state)
        state = tree.build([ops.where(c, n, o) for n, o in zip(flatten(new)[0], old_leaves)])
        c = cond(state)
    return state


def batch_of(f, tree, carried):
    """``stacked leaves -> stacked outputs`` of ``f`` applied to ``tree``'s (args, kwargs),
    the ``carried`` leaves mapped over their leading axis: what a staged function stages
    for a vmap (as it stages its jvp and vjp)."""
    def batched_f(leaves):
        def on_leaves(*ls):
            args, kwargs = tree.build(list(ls))
            return f(*args, **kwargs)
        return vmap(on_leaves, in_axes=tuple(0 if c else None for c in carried))(*leaves)
    return batched_f


# ---------------------------------------------------------------- vmap

def vmap(f, in_axes=0, out_axes=0, axis_size=None):
    """``f`` mapped over an axis of its arguments (JAX's ``vmap``).

    ``in_axes``: an int (the mapped axis of every array argument), None (not mapped),
    or a tuple/list with one entry per positional argument, each an int, None or a
    structure prefix of that argument (a dict of ints for a dict argument...).  Keyword
    arguments are not mapped.  ``out_axes``: where the mapped axis goes in the output,
    an int, None (for outputs that do not depend on the mapped arguments) or a
    structure prefix of the output.  ``axis_size`` gives the size when no argument is
    mapped (and must agree with the mapped ones otherwise).  Every mapped argument must
    have the same size along its mapped axis.  Nests with itself and with every
    derivative operator, in any order."""
    _check_axes_spec(in_axes, 'in_axes')
    _check_axes_spec(out_axes, 'out_axes')
    if axis_size is not None and (not isinstance(axis_size, (int, np.integer)) or axis_size < 0):
        raise InvalidInputError(f"vmap: axis_size must be an int >= 0, not {axis_size!r}")

    def mapped(*args, **kwargs):
        if isinstance(in_axes, (tuple, list)) and len(in_axes) != len(args):
            raise InvalidInputError(
                f"vmap: in_axes has {len(in_axes)} entries but the function was called with "
                f"{len(args)} positional arguments; give one entry (an int, None or a "
                "structure prefix) per positional argument")
        axes = in_axes if isinstance(in_axes, (tuple, list)) else [in_axes] * len(args)
        leaves, tree = flatten(list(args), "argument", "vmap")
        leaf_axes = []
        for k, (a, spec) in enumerate(zip(args, axes)):
            leaf_axes += _prefix_leaves(spec, a, f"in_axes[{k}]" if isinstance(
                in_axes, (tuple, list)) else "in_axes")
        size = _mapped_size(leaves, leaf_axes, axis_size)
        tag = perturbation.fresh()
        LIVE.add(tag)
        try:
            inputs = [x if ax is None else Batched(tag, _leading(x, ax)) for x, ax in
                      zip(leaves, leaf_axes)]
            out = f(*tree.build(inputs), **kwargs)
            out_leaves, out_tree = flatten(out, "output", "vmap")
            specs = _prefix_leaves(out_axes, out, "out_axes")
            return out_tree.build([_unbatched(tag, y, ax, size, k)
                                   for k, (y, ax) in enumerate(zip(out_leaves, specs))])
        finally:
            LIVE.discard(tag)
            perturbation.retire(tag)
    mapped.__name__ = f"vmap({getattr(f, '__name__', 'f')})"
    mapped.__doc__ = getattr(f, '__doc__', None)
    return mapped


def _check_axes_spec(spec, what):
    leaves, _ = flatten(spec, what, "vmap") if isinstance(spec, (tuple, list, dict)) else ([spec], None)
    for a in leaves:
        if a is not None and not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise InvalidInputError(f"vmap: {what} entries must be ints or None, not "
                                    f"{type(a).__name__} {a!r:.40}")


def _prefix_leaves(spec, value, where):
    """The axis of each leaf of ``value`` from ``spec``, a structure prefix of it."""
    if spec is None or isinstance(spec, (int, np.integer)):
        return [spec] * len(flatten(value, "argument", "vmap")[0])
    if isinstance(spec, (tuple, list)) and type(value) in (tuple, list) and len(spec) == len(value):
        out = []
        for k, (s, v) in enumerate(zip(spec, value)):
            out += _prefix_leaves(s, v, f"{where}[{k}]")
        return out
    if isinstance(spec, dict) and type(value) is dict and set(spec) == set(value):
        out = []
        for key in value:             # a dict's leaves are flattened in its key order
            out += _prefix_leaves(spec[key], value[key], f"{where}[{key!r}]")
        return out
    raise InvalidInputError(
        f"vmap: {where} is {spec!r:.60}, which is not a prefix of the structure it maps "
        f"({type(value).__name__}{' of length %d' % len(value) if hasattr(value, '__len__') else ''}):"
        " give an int or None for all of it, or a tuple/list/dict of the same structure")


def _mapped_size(leaves, leaf_axes, axis_size):
    sizes = {}
    for k, (x, ax) in enumerate(zip(leaves, leaf_axes)):
        if ax is None:
            continue
        if not isinstance(x, (Perturbed, np.ndarray, np.generic, int, float)) and not is_tracer(x):
            raise InvalidInputError(f"vmap: argument leaf {k} is a {type(x).__name__}; mapped "
                                    "arguments must be arrays (or structures of them)")
        shape = np.shape(primal_value(x))
        if not -len(shape) <= ax < len(shape):
            raise InvalidInputError(
                f"vmap: in_axes maps axis {ax} of argument leaf {k}, which has shape {shape} "
                f"({len(shape)} axes); give an axis in [{-len(shape)}, {len(shape)}) or None "
                "to not map it")
        sizes.setdefault(shape[ax], []).append(k)
    if axis_size is not None:
        sizes.setdefault(int(axis_size), []).append('axis_size')
    if not sizes:
        raise InvalidInputError("vmap: no argument is mapped (every in_axes is None); give "
                                "axis_size to say how many members the batch has")
    if len(sizes) > 1:
        detail = "; ".join(f"size {s}: {', '.join(f'leaf {k}' if k != 'axis_size' else k for k in ks)}"
                           for s, ks in sizes.items())
        raise InvalidInputError(f"vmap: the mapped axes have different sizes ({detail}); every "
                                "mapped argument must have the same size along its mapped axis")
    return next(iter(sizes))


def _leading(x, ax):
    """``x`` with axis ``ax`` moved to the front."""
    n = np.ndim(primal_value(x))
    ax = ax % n
    return x if ax == 0 else ops.moveaxis(x, ax, 0)


def _unbatched(tag, y, ax, size, k):
    """Output leaf ``y`` of the mapped function as the stacked result, its batch axis at
    ``ax`` (a value that does not depend on the mapped arguments is broadcast)."""
    check_output_leaf("vmap", k, y, tag)
    batched = isinstance(y, Batched) and y.tag == tag
    if ax is None:
        if batched:
            raise InvalidInputError(
                f"vmap: out_axes is None for output leaf {k}, but it depends on the mapped "
                "arguments (it differs between members); give an int out_axes for it")
        return y
    if batched:
        v = y.primal
    else:
        v = ops.broadcast_to(ops.expand_dims(y, 0), (size,) + np.shape(y))
    n = np.ndim(v)
    if not -n <= ax < n:
        raise InvalidInputError(f"vmap: out_axes {ax} is out of range for output leaf {k}, "
                                f"which has {n - 1} axes besides the mapped one")
    ax = ax % n
    return v if ax == 0 else ops.moveaxis(v, 0, ax)
