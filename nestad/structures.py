"""Structures of numbers: tuples, lists, dicts (also ``OrderedDict`` and ``defaultdict``),
namedtuples, dataclasses, and whatever a user registers.  Operators flatten an argument
to its leaves, wrap or read each leaf, and rebuild the same structure.

Register another container with::

    nestad.register_structure(MyType, flatten, unflatten)

* ``flatten(obj)`` returns a pair ``(children, aux)``: ``children`` a list (or tuple) of
  the parts to look inside (numbers, arrays, other structures), ``aux`` anything else
  needed to rebuild ``obj``; ``aux`` is not differentiated and should compare equal (by
  ``repr``) for objects of the same shape.
* ``unflatten(aux, children)`` takes that ``aux`` and a list of new children, in the same
  order, and returns the new object.

Matching is by exact type: a subclass of a registered class (or of list, tuple, dict) is
a leaf until it is registered itself, and nestad says so rather than guessing how to
rebuild it.  A structure that contains itself (``a = [1.0]; a.append(a)``) is refused,
naming the path of the cycle.
"""
import collections
import dataclasses
import inspect
import sys

from .errors import InvalidInputError
from .tracer import _TracerBase
from .values import Perturbed

_registry = {}
_kinds = {}     # class -> (flatten, unflatten), or None for a leaf class: a cache
_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


def register_structure(cls, flatten, unflatten):
    """Teach nestad to look inside instances of ``cls`` (exact type match).

    ``flatten(obj) -> (children, aux)`` and ``unflatten(aux, children) -> obj``; see the
    module docstring."""
    if not isinstance(cls, type):
        raise InvalidInputError(f"register_structure(cls, flatten, unflatten): cls must be a "
                                f"class, not {cls!r:.60}")
    for name, fn, args in (("flatten", flatten, "(obj)"), ("unflatten", unflatten, "(aux, children)")):
        if not callable(fn) or not _takes(fn, len(args.split(","))):
            raise InvalidInputError(
                f"register_structure({cls.__name__}): {name} must be a function callable as "
                f"{name}{args}; got {fn!r:.60}")
    flatten = _checked_flatten(cls, flatten)
    _register(cls, flatten, _checked_unflatten(cls, flatten, unflatten))


def _takes(fn, n):
    """False only when ``fn`` certainly cannot be called with n positional arguments."""
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    except ValueError:          # no signature available (some builtins): do not guess
        pass
    return True


def _checked_flatten(cls, flatten):
    def checked(obj):
        out = flatten(obj)
        if out.__class__ is tuple and len(out) == 2 and isinstance(out[0], (list, tuple)):
            if _holds_variable(out[1]):
                raise InvalidInputError(
                    f"register_structure({cls.__name__}): flatten(obj) put a value being "
                    "differentiated or staged in aux, which is not differentiated: it would be "
                    "returned as it is, carrying its perturbation (or a traced value) out of "
                    "the call. Put every number that may depend on the inputs among the "
                    "children, and only what does not (names, shapes, options) in aux.")
            return out
        raise InvalidInputError(
            f"register_structure({cls.__name__}): flatten(obj) must return a pair "
            "(children, aux): children a list of the parts to differentiate, aux anything "
            f"unflatten(aux, children) needs to rebuild the object; it returned "
            f"{type(out).__name__} {out!r:.60}")
    return checked


def _holds_variable(aux):
    """Is ``aux``, or an item of it if it is a tuple, list or dict, a perturbed or traced
    value?  (Not deeper: aux may be the object itself, which unflatten copies and fills.)"""
    items = aux.values() if aux.__class__ is dict else aux if aux.__class__ in (tuple, list) \
        else (aux,)
    return any(isinstance(x, (Perturbed, _TracerBase)) for x in items)


def _checked_unflatten(cls, flatten, unflatten):
    """``unflatten``, checked: it must rebuild a ``cls`` (anything else would reach the
    user's function, or be returned, in its place), and, on the first call that can tell
    (children holding perturbed values), one that flattens back to those values in their
    order: a child dropped or put in another's place would be differentiated wrongly."""
    verified = []

    def checked(aux, children):
        obj = unflatten(aux, children)
        if obj.__class__ is not cls:
            raise _unflatten_error(cls, f"returned a {type(obj).__qualname__}, not a "
                                        f"{cls.__qualname__}")
        if not verified:
            _check_round_trip(cls, flatten, obj, children, verified)
        return obj
    return checked


def _check_round_trip(cls, flatten, obj, children, verified):
    try:
        again = flatten(obj)[0]
        given, back = _leaves(children), _leaves(again)
    except Exception:           # flatten cannot read what was rebuilt: nothing to compare
        verified.append(True)
        return
    if len(again) != len(children):
        raise _unflatten_error(cls, f"built a {cls.__name__} whose flatten gives "
                                    f"{len(again)} children, not the {len(children)} it was given")
    position = {id(x): k for k, x in enumerate(back)}
    perturbed = [(j, position.get(id(x))) for j, x in enumerate(given) if isinstance(x, Perturbed)]
    for j, k in perturbed:
        if k != j:
            fate = "is lost" if k is None else f"comes back at position {k}"
            raise _unflatten_error(cls, f"built a {cls.__name__} that flatten does not take "
                                        "apart into the children it was given: the number at "
                                        f"position {j} among the children's numbers {fate}")
    if len(perturbed) == len(given):    # plain numbers may be shared or converted: only
        verified.append(True)           # a call with every number perturbed checks all


def _leaves(children):
    leaves = []
    _flatten(list(children), leaves)
    return leaves


def _unflatten_error(cls, what):
    return InvalidInputError(
        f"register_structure({cls.__name__}): unflatten(aux, children) {what}. Fix the "
        f"unflatten given to nestad.register_structure({cls.__name__}, flatten, unflatten): "
        "it must return the object flatten took apart, rebuilt from aux and the children "
        "in flatten's order.")


def _register(cls, flatten, unflatten):
    _registry[cls] = (flatten, unflatten)
    _kinds.pop(cls, None)


def _dataclass_flatten(obj):
    names = [f.name for f in dataclasses.fields(obj)]
    return [getattr(obj, n) for n in names], names


def _dataclass_unflatten(cls, names, children):
    # Bypass __init__ (fields with init=False, frozen classes) and copy fields back.
    obj = object.__new__(cls)
    for n, v in zip(names, children):
        object.__setattr__(obj, n, v)
    return obj


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


_register(tuple, lambda t: (list(t), None), lambda aux, ch: tuple(ch))
_register(list, lambda l: (list(l), None), lambda aux, ch: list(ch))
_register(dict, _dict_flatten, lambda keys, ch: dict(zip(keys, ch)))
_register(collections.OrderedDict, _dict_flatten,
          lambda keys, ch: collections.OrderedDict(zip(keys, ch)))
_register(collections.defaultdict,
          lambda d: (list(d.values()), (d.default_factory, list(d.keys()))),
          lambda aux, ch: collections.defaultdict(aux[0], zip(aux[1], ch)))


def registered_base(x):
    """The registered container class that ``x``'s class derives from without being
    registered itself (a list subclass, say), or None: for error messages."""
    for base in type(x).__mro__[1:]:
        if base in _registry:
            return base
    return None


def _node_kind(x):
    """(flatten, unflatten) for a container, or None for a leaf.  Decided once per class."""
    cls = type(x)
    try:
        return _kinds[cls]
    except KeyError:
        return _class_kind(cls)


def _class_kind(cls):
    kind = _kinds.get(cls)
    if kind is not None or cls in _kinds:
        return kind
    kind = _registry.get(cls)
    if kind is None and issubclass(cls, tuple) and hasattr(cls, '_fields'):     # namedtuple
        kind = (lambda t: (list(t), None), lambda aux, ch, _c=cls: _c(*ch))
    elif kind is None and dataclasses.is_dataclass(cls):
        kind = (_dataclass_flatten, lambda names, ch, _c=cls: _dataclass_unflatten(_c, names, ch))
    _kinds[cls] = kind
    if kind is not None:
        _classes[kind[1]] = cls
    return kind


_classes = {}       # unflatten -> its class: a TreeDef pickles its class, by reference


class TreeDef:
    """How to rebuild a structure from its leaves (leaves in depth-first order)."""
    __slots__ = ('unflatten', 'aux', 'children', 'n_leaves')

    def __init__(self, unflatten, aux, children):
        self.unflatten = unflatten
        self.aux = aux
        self.children = children
        self.n_leaves = 1 if children is None else sum(c.n_leaves for c in children)

    def signature(self):
        """A comparable description of the structure (two trees with equal signatures
        have the same containers, keys and leaf positions)."""
        if self.children is None:
            return None
        return (self.unflatten, repr(self.aux), tuple(c.signature() for c in self.children))

    def __reduce__(self):
        # The class rather than its unflatten (a lambda): the unflatten of the class in
        # the process that loads it, so that signatures compare there.
        if self is _LEAF:
            return '_LEAF'
        return _treedef, (_classes[self.unflatten], self.aux, self.children)

    def build(self, leaves):
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        if self.children is None:
            return next(it)
        return self.unflatten(self.aux, [c._build(it) for c in self.children])


_LEAF = TreeDef(None, None, None)


def _treedef(cls, aux, children):
    kind = _class_kind(cls)
    if kind is None:
        raise InvalidInputError(
            f"a pickled program's arguments or results contain a {cls.__name__}, which this "
            "process does not know as a structure: call nestad.register_structure for it at "
            "the top level of the module that defines it")
    return TreeDef(kind[1], aux, children)


def _child_labels(x, aux, n):
    """The path components of x's n children: ['a'], .field or [i]."""
    cls = type(x)
    if cls in _DICTS:
        return [f"[{k!r}]" for k in x]
    if cls not in _registry:
        if dataclasses.is_dataclass(cls):
            return [f".{name}" for name in aux]
        if issubclass(cls, tuple) and hasattr(cls, '_fields'):
            return [f".{name}" for name in cls._fields]
    return [f"[{i}]" for i in range(n)]


def flatten(tree, name="structure", op=None):
    """The leaves of ``tree`` (depth-first) and the TreeDef that rebuilds it.

    ``name`` and ``op`` only serve the message if ``tree`` contains itself."""
    leaves = []
    try:
        return leaves, _flatten(tree, leaves)
    except RecursionError:
        # Python's recursion limit: a cycle (found here, off the normal path), or a
        # structure nested too deep for the stack that is left.
        cycle = _find_cycle(tree)
    prefix = op + ': ' if op else ''
    if cycle is None:
        raise InvalidInputError(
            f"{prefix}{name} is nested too deeply for Python's recursion limit "
            f"({sys.getrecursionlimit()}) at this call depth: nestad flattens structures "
            "recursively. Use a flatter structure (an array, say) or raise the limit with "
            "sys.setrecursionlimit.")
    path, ancestor = cycle
    raise InvalidInputError(
        f"{prefix}{name}{path} is {name}{ancestor} itself: the structure "
        "contains itself, and nestad cannot differentiate through a cycle. Pass a structure "
        "without cycles (copy out the numbers you need).")


def _flatten(tree, leaves):
    kind = _node_kind(tree)
    if kind is None:
        leaves.append(tree)
        return _LEAF
    children, aux = kind[0](tree)
    return TreeDef(kind[1], aux, [_flatten(child, leaves) for child in children])


def _find_cycle(tree):
    """(path, path of the same object higher up) for a container inside itself, or None.
    Iterative, so it works where flatten ran out of stack."""
    on_path = {}                          # id -> path, for the containers being visited
    stack = [(tree, "", False)]
    while stack:
        node, path, leaving = stack.pop()
        if leaving:
            del on_path[id(node)]
            continue
        kind = _node_kind(node)
        if kind is None:
            continue
        if id(node) in on_path:
            return path, on_path[id(node)]
        on_path[id(node)] = path
        stack.append((node, path, True))
        children, aux = kind[0](node)
        labels = _child_labels(node, aux, len(children))
        stack.extend((c, path + l, False) for c, l in zip(reversed(children), reversed(labels)))
    return None


def leaf_paths(tree, path=""):
    """Each leaf's path (``[0]['b'].x``), in flatten's order: for error messages only."""
    kind = _node_kind(tree)
    if kind is None:
        return [path]
    children, aux = kind[0](tree)
    labels = _child_labels(tree, aux, len(children))
    return [p for child, label in zip(children, labels) for p in leaf_paths(child, path + label)]


def describe(tree, limit=200):
    """The structure of ``tree`` with each leaf shown as ``*`` (``{'a': [*, *]}``): for
    error messages only."""
    text = _describe(tree)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _describe(tree):
    kind = _node_kind(tree)
    if kind is None:
        return "*"
    children, aux = kind[0](tree)
    inner = [_describe(c) for c in children]
    cls = type(tree)
    if cls in _DICTS:
        body = "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(tree, inner)) + "}"
        return body if cls is dict else f"{cls.__name__}({body})"
    if cls is list:
        return "[" + ", ".join(inner) + "]"
    if cls is tuple:
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
    return f"{cls.__name__}(" + ", ".join(inner) + ")"


def tree_map(fn, tree):
    """Apply ``fn`` to every leaf, keeping the structure."""
    leaves, treedef = flatten(tree)
    return treedef.build([fn(x) for x in leaves])
