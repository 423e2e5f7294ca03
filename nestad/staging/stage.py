"""``stage(f)``: trace on first use, compile to Python (or numba), replay.

A staged function keeps a cache keyed on the structure of its arguments, the shapes
and dtypes of their traced leaves and the values of their static leaves.  Under one
key it keeps the programs traced so far (at most ``max_traces``, most recently used
first); a call runs them in turn until one's guards hold, and traces anew when none
does.  So a function with ``if x > 0`` has two programs after it has been called on
both sides, and a loop whose trip count depends on the data has one per trip count:
use ``nestad.while_loop`` for such loops.

Called with perturbed arguments (inside ``derivative``, ``gradient_r``, ...), a
staged function is a primitive whose rules are staged too: forward mode runs the
staged ``jvp`` of ``f``, reverse mode records one tape cell per output whose partial
runs the staged ``vjp``.  Called with tracers (inside another trace), it is traced
through, so the enclosing program contains it inline.
"""
import functools

import numpy as np

from ..errors import InvalidInputError
from ..pickling import check_picklable
from ..structures import flatten
from ..tracer import StagingError, is_tracer
from ..values import Perturbed
from .codegen import compile_python
from .program import GuardFailure
from .tracing import is_traced_leaf, static_mask, trace_leaves

BACKENDS = ('python', 'numba')


def stage(f=None, *, backend="python", static_argnums=(), max_traces=16):
    """Stage ``f``: ``stage(f)`` or ``@stage(backend="numba")``.  See the module doc.

    ``static_argnums``: positional arguments that are never traced, even if they are
    floats (the cache is keyed on their values, which must be hashable or arrays)."""
    if f is None:
        return lambda g: stage(g, backend=backend, static_argnums=static_argnums,
                               max_traces=max_traces)
    if backend not in BACKENDS:
        raise InvalidInputError(f"stage: backend must be one of {BACKENDS}, not {backend!r}")
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if not isinstance(max_traces, int) or max_traces < 1:
        raise InvalidInputError(f"stage: max_traces must be a positive int, not {max_traces!r}")
    return Staged(f, backend, max_traces, tuple(static_argnums))


jit = stage


class Compiled:
    """A program and the function that computes it, compiled when first called (the
    call that traced the program already has its result)."""
    __slots__ = ('program', 'backend', 'fn', 'source', 'single', 'safe')

    def __init__(self, program, backend):
        self.program, self.backend = program, backend
        self.fn = self.source = self.safe = None
        self.single = program.out_tree.children is None

    def compile(self):
        self.fn, self.source = compile_python(self.program, "staged")
        if self.backend == "numba":
            from .numba_backend import compile_numba
            self.fn = compile_numba(self.fn, self.source, self.program)

    def __call__(self, dyn):
        if self.fn is None:
            self.compile()
        try:
            out = self.fn(*dyn)
        except GuardFailure:
            raise
        except (ArithmeticError, ValueError):
            # math raised where IEEE 754 has an answer (log(0), sqrt(-1)...): run the
            # program spelled with nestad's IEEE implementations (which raise only where
            # eager code raises too).
            if self.safe is None:
                self.safe = compile_python(self.program, "staged_ieee", safe=True)[0]
            out = self.safe(*dyn)
        return out if self.single else self.program.out_tree.build(out)


class Staged:
    """A staged function (see ``stage``)."""

    def __init__(self, f, backend, max_traces, static_argnums=()):
        functools.update_wrapper(self, f)
        self.f, self.backend, self.max_traces = f, backend, max_traces
        self.static_argnums = static_argnums
        self.cache = {}
        self.trace_count = 0
        self.derived = {}         # staged jvp/vjp of f, per argument structure

    def derive(self, g):
        """A staged function of ``g`` with this one's backend and cache bound."""
        return Staged(g, self.backend, self.max_traces)

    def __get__(self, obj, objtype=None):
        """As a method: the instance is the first (static) argument."""
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        if not kwargs and not self.static_argnums:
            for a in args:
                if a.__class__ is not float:
                    break
            else:                             # all plain floats: the key is their number
                return self._run(len(args), args, args, kwargs, None)
            key = _plain_key(args)
            if key is not None:               # plain floats and float arrays, no flattening
                return self._run(key, args, args, kwargs, None)
        leaves, tree = flatten((args, kwargs))
        mask = static_mask(args, self.static_argnums)
        for k, x in enumerate(leaves):
            if isinstance(x, Perturbed):
                if mask is not None and k < len(mask) and mask[k]:
                    raise InvalidInputError("a static argument of a staged function carries a "
                                            "perturbation: it would be differentiated as a "
                                            "constant. Do not mark it static.")
                from .differentiate import call_perturbed
                return call_perturbed(self, leaves, tree)
            if is_tracer(x):
                return self.f(*args, **kwargs)   # inside another trace: trace through
        static = [mask is not None and k < len(mask) and mask[k] for k in range(len(leaves))]
        key = (tree.signature(), tuple(_leaf_key(x, s) for x, s in zip(leaves, static)))
        dyn = [x for x, s in zip(leaves, static) if not s and is_traced_leaf(x)]
        return self._run(key, dyn, args, kwargs, mask)

    def _run(self, key, dyn, args, kwargs, mask):
        entries = self.cache.get(key)
        if entries is not None:
            for k, c in enumerate(entries):
                try:
                    out = c(dyn)
                except GuardFailure:
                    continue
                if k:                         # most recently used first
                    entries.insert(0, entries.pop(k))
                return out
        else:
            entries = self.cache[key] = []
        c = self._trace(args, kwargs, mask)
        entries.insert(0, c)
        del entries[self.max_traces:]
        return c.program.out_tree.build(c.program.example_out)

    def _trace(self, args, kwargs, mask):
        self.trace_count += 1
        leaves, tree = flatten((args, kwargs))
        return Compiled(trace_leaves(self.f, leaves, tree, mask), self.backend)

    def __reduce__(self):
        """Pickled as the function it stages and its options: the copy traces and compiles
        again when first called (compiled code does not pickle; a Program does)."""
        check_picklable(self.f, "staged function")
        return _unpickle, (self.f, self.backend, self.max_traces, self.static_argnums)

    def __copy__(self):              # a function is copied as itself; a copy of a staged
        return _unpickle(self.f, self.backend, self.max_traces, self.static_argnums)

    def __deepcopy__(self, memo):    # one stages it anew (its own cache)
        return self.__copy__()

    def programs(self):
        """Every program traced so far (most recently used first under each key)."""
        return [c.program for entries in self.cache.values() for c in entries]

    def __repr__(self):
        return f"<staged {getattr(self.f, '__name__', self.f)!r} ({self.backend})>"


def _unpickle(f, backend, max_traces, static_argnums):
    return stage(f, backend=backend, static_argnums=static_argnums, max_traces=max_traces)


_PLAIN = object()       # marks the keys of _plain_key apart from flattened ones


def _plain_key(args):
    """The cache key of positional arguments that are all plain floats or float ndarrays
    (each a traced leaf of its own), from their shapes and dtypes alone; None for any
    other argument.  Such calls skip flattening: measured, that is most of the cost of a
    call of a small staged array function."""
    key = [_PLAIN]
    for a in args:
        c = a.__class__
        if c is float:
            key.append(float)
        elif c is np.ndarray and a.dtype.kind == 'f':
            key.append((a.shape, a.dtype))
        else:
            return None
    return tuple(key)


def _leaf_key(x, static=False):
    """What a leaf contributes to the cache key: shape and dtype of a traced leaf,
    the value of a static one."""
    if is_traced_leaf(x) and not static:
        if isinstance(x, np.ndarray):
            return ('a', x.shape, x.dtype.str)
        return ('s', type(x))
    if isinstance(x, np.ndarray):
        return ('c', x.shape, x.dtype.str, x.tobytes())
    try:
        hash(x)
        return ('v', type(x), x)
    except TypeError:
        raise StagingError(f"a static argument of a staged function must be hashable (or an "
                           f"array); got a {type(x).__name__}") from None
