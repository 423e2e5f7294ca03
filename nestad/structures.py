"""Structures of numbers: tuples, lists, dicts, namedtuples, dataclasses, and
whatever a user registers.  Operators flatten an argument to its leaves, wrap or
read each leaf, and rebuild the same structure.

Register another container with::

    nestad.register_structure(MyType,
                              flatten=lambda obj: (children_list, aux),
                              unflatten=lambda aux, children: MyType(...))

``aux`` is anything needed to rebuild (it is not differentiated).
"""
import dataclasses

_registry = {}
_kinds = {}     # class -> (flatten, unflatten), or None for a leaf class: a cache


def register_structure(cls, flatten, unflatten):
    """Teach nestad to look inside instances of ``cls`` (exact type match)."""
    _registry[cls] = (flatten, unflatten)
    _kinds.pop(cls, None)


def _namedtuple_unflatten(cls, children):
    return cls(*children)


def _dataclass_flatten(obj):
    names = [f.name for f in dataclasses.fields(obj)]
    return [getattr(obj, n) for n in names], names


def _dataclass_unflatten(cls, names, children):
    # Bypass __init__ (fields with init=False, frozen classes) and copy fields back.
    obj = object.__new__(cls)
    for n, v in zip(names, children):
        object.__setattr__(obj, n, v)
    return obj


register_structure(tuple, lambda t: (list(t), None), lambda aux, ch: tuple(ch))
register_structure(list, lambda l: (list(l), None), lambda aux, ch: list(ch))
register_structure(dict, lambda d: (list(d.values()), list(d.keys())),
                   lambda keys, ch: dict(zip(keys, ch)))


def _node_kind(x):
    """(flatten, unflatten) for a container, or None for a leaf.  Decided once per class."""
    cls = type(x)
    try:
        return _kinds[cls]
    except KeyError:
        pass
    kind = _registry.get(cls)
    if kind is None and issubclass(cls, tuple) and hasattr(cls, '_fields'):     # namedtuple
        kind = (lambda t: (list(t), None), lambda aux, ch, _c=cls: _c(*ch))
    elif kind is None and dataclasses.is_dataclass(cls):
        kind = (_dataclass_flatten, lambda names, ch, _c=cls: _dataclass_unflatten(_c, names, ch))
    _kinds[cls] = kind
    return kind


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

    def build(self, leaves):
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        if self.children is None:
            return next(it)
        return self.unflatten(self.aux, [c._build(it) for c in self.children])


_LEAF = TreeDef(None, None, None)


def _child_label(x, aux, i):
    if isinstance(x, dict):
        return f"[{aux[i]!r}]"
    if dataclasses.is_dataclass(x):
        return f".{aux[i]}"
    if isinstance(x, tuple) and hasattr(type(x), '_fields'):
        return f".{type(x)._fields[i]}"
    return f"[{i}]"


def flatten(tree):
    """The leaves of ``tree`` (depth-first) and the TreeDef that rebuilds it."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves):
    kind = _node_kind(tree)
    if kind is None:
        leaves.append(tree)
        return _LEAF
    children, aux = kind[0](tree)
    return TreeDef(kind[1], aux, [_flatten(child, leaves) for child in children])


def leaf_paths(tree, path=""):
    """Each leaf's path (``[0]['b'].x``), in flatten's order: for error messages only."""
    kind = _node_kind(tree)
    if kind is None:
        return [path]
    children, aux = kind[0](tree)
    return [p for i, child in enumerate(children)
            for p in leaf_paths(child, path + _child_label(tree, aux, i))]


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
    if isinstance(tree, dict):
        body = "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(aux, inner)) + "}"
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
