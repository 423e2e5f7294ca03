"""``stage(f)``: trace on first use, compile to Python (or numba), replay.

A staged function keeps a cache keyed on the structure of its arguments, the shapes
and dtypes of their traced leaves (floats, ints, float arrays: as in JAX, numbers are
traced as values) and the values of their static leaves (bools, strings, integer
arrays, and the arguments named in ``static_argnums``/``static_argnames``).  Under one
key it keeps the programs traced so far (at most ``max_traces``, most recently used
first); a call runs them in turn until one's guards hold, and traces anew when none
does.  So a function with ``if x > 0`` has two programs after it has been called on
both sides, and a loop whose trip count depends on the data has one per trip count:
use ``nestad.while_loop`` for such loops.  The whole cache keeps at most
``cache_size`` programs, least recently used dropped, and a function that traces
often (its last ``RETRACE_WARN`` traces took most of the time since they began) or
whose trace is huge (a Python loop unrolled) says so once, with a ``StagingWarning``
naming the cause.

Called with perturbed arguments (inside ``derivative``, ``gradient_r``, ...), a
staged function is a primitive whose rules are staged too: forward mode runs the
staged ``jvp`` of ``f``, reverse mode records one tape cell per output whose partial
runs the staged ``vjp``.  Called with tracers (inside another trace), it is traced
through, so the enclosing program contains it inline.
"""
import collections
import functools
import time
import warnings

import numpy as np

from .. import series
from ..errors import InvalidInputError
from ..pickling import check_picklable
from ..reverse import young_collections_only
from ..structures import _LEAF, _class_kind as structures_kind, flatten, leaf_paths
from ..tracer import GUARD, StagingError, StagingWarning, is_tracer, user_stacklevel
from ..values import Perturbed
from .codegen import PIECE_LINES, compile_python, python_source
from .differentiate import call_perturbed
from .program import GuardFailure, _argument_path, positional_names
from .randomness import TracingGenerator, draw, is_generator, restore, states
from .tracing import is_traced_leaf, static_arguments, static_mask, trace_leaves
from .lowering import BACKENDS      # (python, numba and any registered backend)
from .numba_backend import compile_numba
from .tiered import Tier

CACHE_SIZE = 64           # programs a staged function keeps in all (least recently used go)
RETRACE_WARN = 10         # warn when this many traces take most of the time since they began
UNROLL_WARN = 20_000      # warn when one trace records more equations than this


def stage(f=None, *, backend="python", static_argnums=(), static_argnames=(), max_traces=16,
          cache_size=CACHE_SIZE):
    """Stage ``f``: ``stage(f)`` or ``@stage(backend="numba")``.  See the module doc.

    ``static_argnums``/``static_argnames``: arguments that are never traced, even if
    they are numbers (the cache is keyed on their values, which must be hashable or
    arrays); Python floats and ints are otherwise traced as values, as in JAX.
    ``max_traces``: programs kept per argument signature (tried in turn when guards
    fail); ``cache_size``: programs kept in all, least recently used dropped."""
    if f is None:
        return lambda g: stage(g, backend=backend, static_argnums=static_argnums,
                               static_argnames=static_argnames, max_traces=max_traces,
                               cache_size=cache_size)
    if backend not in BACKENDS and backend != "tiered":
        raise InvalidInputError(f"stage: backend must be one of {(*BACKENDS, 'tiered')}, "
                                f"not {backend!r}")
    if not callable(f):
        raise InvalidInputError(f"stage(f): f must be callable, not {f!r:.60}")
    for name, n in (('max_traces', max_traces), ('cache_size', cache_size)):
        if n.__class__ is not int or n < 1:
            raise InvalidInputError(f"stage: {name} must be a positive int, not {n!r}")
    nums, names = static_arguments(f, static_argnums, static_argnames, "stage")
    return Staged(f, backend, max_traces, nums, names, cache_size)


jit = stage


class Compiled:
    """A program and the function that computes it, compiled when first called (the
    call that traced the program already has its result)."""
    __slots__ = ('program', 'backend', 'fn', '_source', 'single', 'safe', 'draws', 'guarded',
                 'flat', 'tier')

    def __init__(self, program, backend):
        self.program, self.backend = program, backend
        self.fn = self._source = self.safe = self.tier = None
        tree = program.out_tree
        self.single = tree.children is None
        # (a list or tuple of leaves, a gradient's usual result, is made in one step)
        self.flat = not self.single and tree.unflatten in _FLAT and \
            all(c is _LEAF for c in tree.children)
        self.draws = program.draws or None
        self.guarded = any(e.op is GUARD for e in program.eqns)

    def compile(self):
        # (numba compiles its own spelling, cut into pieces of its own size,
        # numba_backend.PIECE_LINES; this Python spelling, one function, is what runs
        # where numba cannot)
        with young_collections_only():       # (the program is large and lives on)
            self.fn, self._source = compile_python(
                self.program, "staged", backend=self.source_backend,
                piece=None if self.backend == "numba" else PIECE_LINES)
        if self.backend == "numba":
            self.fn = compile_numba(self.fn, self.program)
        elif self.backend == "tiered":     # (Python now; numba's code once a child compiled it)
            self.tier = Tier(self, self.fn)
            if self.tier.job is not None:
                self.fn = self.tier

    def __call__(self, dyn):
        if self.fn is None:
            self.compile()
        if self.draws is not None:
            return self.call_drawing(dyn)
        try:
            out = self.fn(*dyn)
        except GuardFailure:
            raise
        except (ArithmeticError, ValueError):
            out = self.ieee(dyn)
        if self.single:
            return out
        tree = self.program.out_tree
        return tree.unflatten(None, out) if self.flat else tree.build(out)

    @property
    def source(self):
        """The Python source of the function that runs (spelled when asked, where it was
        assembled as bytecode), or None before the first call."""
        if self._source is None and self.fn is not None:
            self._source = python_source(self.program, "staged", backend=self.source_backend)[0]
        return self._source

    @property
    def source_backend(self):
        return 'python' if self.backend in ('numba', 'tiered') else self.backend

    def ieee(self, dyn):
        """The call again, after ``math`` raised where IEEE 754 has an answer (log(0),
        sqrt(-1)...): the program spelled with nestad's IEEE implementations (which raise
        only where eager code raises too)."""
        if self.safe is None:
            self.safe = compile_python(self.program, "staged_ieee", safe=True,
                                       backend=self.source_backend, piece=PIECE_LINES)[0]
        return self.safe(*dyn)

    def call_drawing(self, dyn):
        """A call of a program with draws: the generators among ``dyn`` draw its inputs
        anew (and are put back as they were if a guard fails, so that the program tried
        or traced next draws the numbers eager code would)."""
        generators = [x for x in dyn if is_generator(x)]
        saved = states(generators) if self.guarded else None
        numbers = [x for x in dyn if not is_generator(x)] + draw(generators, self.draws)
        try:
            try:
                out = self.fn(*numbers)
            except GuardFailure:
                raise
            except (ArithmeticError, ValueError):
                out = self.ieee(numbers)
        except GuardFailure:
            if saved is not None:
                restore(generators, saved)
            raise
        return out if self.single else self.program.out_tree.build(out)


class Staged:
    """A staged function (see ``stage``)."""

    def __init__(self, f, backend, max_traces, static_argnums=frozenset(),
                 static_argnames=frozenset(), cache_size=CACHE_SIZE, leaf_mask=None, label=None):
        functools.update_wrapper(self, f)
        self.f, self.backend, self.max_traces = f, backend, max_traces
        self.static_argnums, self.static_argnames = static_argnums, static_argnames
        self.cache_size = cache_size
        self.leaf_mask = leaf_mask      # (derived ones) static flags of the first leaves
        self.label = label or getattr(f, '__name__', repr(f))
        self.cache = collections.OrderedDict()    # key -> programs; least recently used first
        self.size = 0                   # programs in the cache
        self.trace_count = 0
        self.recent = collections.deque(maxlen=RETRACE_WARN)   # (start, seconds) of traces
        self.reasons = collections.deque(maxlen=RETRACE_WARN)  # why each of them traced
        self.warned = set()
        self.derived = collections.OrderedDict()   # staged jvp/vjp of f, per argument structure

    def derive(self, g, kind, mask):
        """A staged function of ``g`` (``f``'s jvp or vjp) with this one's backend and
        bounds; ``mask`` marks the static leaves among the primals it gets first."""
        return Staged(g, self.backend, self.max_traces, cache_size=self.cache_size,
                      leaf_mask=mask, label=f"{kind} of {self.label}")

    def __get__(self, obj, objtype=None):
        """As a method: the instance is the first (static) argument."""
        return self if obj is None else functools.partial(self, obj)

    def _mask(self, args, kwargs):
        if self.leaf_mask is not None:
            return self.leaf_mask
        return static_mask(args, kwargs, self.static_argnums, self.static_argnames)

    def __call__(self, *args, **kwargs):
        if not kwargs and not self.static_argnums and self.leaf_mask is None:
            for a in args:
                if a.__class__ is not float:
                    break
            else:                             # all plain floats: the key is their number
                return self._run(len(args), args, args, kwargs, None)
            key = _plain_key(args)
            if key is not None:               # plain numbers and float arrays, no flattening
                return self._run(key, args, args, kwargs, None)
            if len(args) == 1 and (args[0].__class__ is list or args[0].__class__ is tuple):
                xs = args[0]                  # one list or tuple of floats: its floats
                for a in xs:
                    if a.__class__ is not float:
                        break
                else:
                    return self._run((_FLOATS, xs.__class__, len(xs)), xs, args, kwargs, None)
        leaves, tree = flatten((args, kwargs))
        mask = self._mask(args, kwargs)
        for k, x in enumerate(leaves):
            if isinstance(x, Perturbed):
                if mask is not None and k < len(mask) and mask[k]:
                    raise InvalidInputError("a static argument of a staged function carries a "
                                            "perturbation: it would be differentiated as a "
                                            "constant. Do not mark it static.")
                return call_perturbed(self, leaves, tree, mask)
            if is_tracer(x) or isinstance(x, TracingGenerator):
                return self.f(*args, **kwargs)   # inside another trace: trace through
        static = [mask is not None and k < len(mask) and mask[k] for k in range(len(leaves))]
        key = (tree.signature(), tuple(_leaf_key(x, s) for x, s in zip(leaves, static)))
        dyn = [x for x, s in zip(leaves, static)
               if not s and (is_traced_leaf(x) or isinstance(x, np.random.Generator))]
        return self._run(key, dyn, args, kwargs, mask)

    def _run(self, key, dyn, args, kwargs, mask):
        cache = self.cache
        entries = cache.get(key)
        failed = start = None
        if entries is not None:
            if entries[0].guarded:            # a miss also pays for the guards that fail
                start = time.perf_counter()
            for k, c in enumerate(entries):
                try:
                    out = c(dyn)
                except GuardFailure as e:
                    failed = e
                    continue
                if k:                         # most recently used first
                    entries.insert(0, entries.pop(k))
                if len(cache) > 1:            # (most functions have one key)
                    cache.move_to_end(key)
                return out
        else:
            entries = cache[key] = []
        try:
            c = self._trace(args, kwargs, mask, key, failed, start)
        except BaseException:
            if not entries:                   # (no key without a program)
                del cache[key]
            raise
        if c.backend == "tiered":     # (its child starts compiling now, not at the next call)
            c.compile()
        entries.insert(0, c)
        self.size += 1
        if len(entries) > self.max_traces:
            entries.pop()
            self.size -= 1
        while self.size > self.cache_size:    # the least recently used key's oldest program
            old_key, old = next(iter(cache.items()))
            old.pop()
            self.size -= 1
            if not old:
                del cache[old_key]
        return c.program.out_tree.build(c.program.example_out)

    def _trace(self, args, kwargs, mask, key, failed, start=None):
        # (``start``: when this call began trying programs whose guards then failed, else
        # now: a retrace costs their compiles and runs too, not the trace alone)
        if start is None:
            start = time.perf_counter()
        self.trace_count += 1
        if self.trace_count > 1:
            self.reasons.append(_retrace_reason(self, args, kwargs, key, failed))
        leaves, tree = flatten((args, kwargs))
        if self.backend in ('numba', 'tiered'):
            program = trace_leaves(self.f, leaves, tree, mask)
        else:       # (Taylor mode's recurrences spelled out: faster as straight-line code)
            with series.spelled_out():
                program = trace_leaves(self.f, leaves, tree, mask)
        self.recent.append((start, time.perf_counter() - start))
        if len(self.recent) == RETRACE_WARN and 'retrace' not in self.warned:
            self._warn_retracing()
        if len(program.eqns) > UNROLL_WARN and 'unroll' not in self.warned:
            self.warned.add('unroll')
            warnings.warn(
                f"staged function {self.label!r}: one trace recorded {len(program.eqns):,} "
                "equations. A Python loop over traced values is unrolled, one copy of its body "
                "per iteration, so tracing and compiling take time in proportion (and a trip "
                "count that depends on the data makes a program per trip count). Write the "
                "loop with nestad.while_loop (one equation for any trip count), or "
                "nestad.checkpoint_loop for a long loop under reverse mode.",
                StagingWarning, stacklevel=user_stacklevel())
        return Compiled(program, self.backend)

    def _warn_retracing(self):
        """Warn (once) if the last ``RETRACE_WARN`` traces (each with the programs whose
        guards failed before it) took more than half the time since the first of them
        began: staging dominates the function's running time.
        (Measured at trace time only: calls that hit the cache pay nothing for it.)"""
        first = self.recent[0][0]
        elapsed = self.recent[-1][0] + self.recent[-1][1] - first
        if sum(d for _, d in self.recent) <= 0.5 * elapsed or not self.reasons:
            return
        self.warned.add('retrace')
        (reason, _), n = collections.Counter((r, None) for r, _ in self.reasons).most_common(1)[0]
        seen = [v for r, v in self.reasons if r == reason and v is not None]
        values = f" (values seen: {', '.join(seen)})" if seen else ""
        warnings.warn(
            f"staged function {self.label!r} traced {self.trace_count} times, the last "
            f"{RETRACE_WARN} in {elapsed:.2g} s, most of which went to tracing. Cause of {n} "
            f"of the last {len(self.reasons)} retraces: {reason}{values}", StagingWarning,
            stacklevel=user_stacklevel())

    def __reduce__(self):
        """Pickled as the function it stages and its options: the copy traces and compiles
        again when first called (compiled code does not pickle; a Program does)."""
        check_picklable(self.f, "staged function")
        return Staged, self._options()

    def _options(self):
        return (self.f, self.backend, self.max_traces, self.static_argnums,
                self.static_argnames, self.cache_size, self.leaf_mask, self.label)

    def __copy__(self):              # a function is copied as itself; a copy of a staged
        return Staged(*self._options())

    def __deepcopy__(self, memo):    # one stages it anew (its own cache)
        return self.__copy__()

    def programs(self):
        """Every program traced so far and kept (most recently used first under each key)."""
        return [c.program for c in self._compiled()]

    def _compiled(self):
        return [c for entries in reversed(self.cache.values()) for c in entries]

    def tiers(self):
        """The tier each program of ``programs()`` runs on: 'numba' once a tiered program
        switched (``backend="tiered"``), else 'python' ('numba' throughout with
        ``backend="numba"`` unless it fell back)."""
        return [c.tier.name if c.tier is not None else
                'numba' if hasattr(c.fn, 'py_func') or hasattr(c.fn, 'dispatcher') else 'python'
                for c in self._compiled()]

    def wait(self, timeout=None):
        """(``backend="tiered"``) Block until the processes compiling this function's
        programs with numba are done, or ``timeout`` seconds passed; True if done.  The
        next call of each program then switches to numba's code."""
        end = None if timeout is None else time.monotonic() + timeout
        for c in self._compiled():
            if c.tier is not None and not c.tier.wait(
                    None if end is None else max(0.0, end - time.monotonic())):
                return False
        return True

    def __repr__(self):
        return f"<staged {self.label!r} ({self.backend})>"


def _retrace_reason(staged, args, kwargs, key, failed):
    """(why a call traces again and what to do, in words; the value it was traced for,
    or None)."""
    if failed is not None:
        return (f"a comparison on traced values (the guard at {failed.site or 'an unknown line'}) "
                "came out differently from every program kept, and each outcome needs a "
                "program of its own. Choose values with nestad.where(cond, x, y) instead of "
                "an if, and write loops whose trip count depends on the data with "
                "nestad.while_loop.", None)
    # A new key: find the argument that differs from the most recent key of the same kind.
    for old in reversed(staged.cache.keys()):
        if old is key or type(old) is not type(key) or \
                not isinstance(key, int) and (key[0] is _FLOATS or old[0] is _FLOATS):
            continue                  # (a list of floats: by its length, a structure)
        if isinstance(key, int):
            return ("it was called with another number of arguments; each argument count "
                    "is traced separately.", None)
        if key[0] is _PLAIN and old[0] is _PLAIN:
            if len(key) != len(old):
                return ("it was called with another number of arguments; each argument count "
                        "is traced separately.", None)
            pairs = list(zip(key[1:], old[1:]))
        elif key[0] is not _PLAIN and old[0] is not _PLAIN and key[0] == old[0]:
            pairs = list(zip(key[1], old[1]))
        else:
            continue
        for k, (new, was) in enumerate(pairs):
            if new != was:
                path = argument_path(staged.f, args, kwargs, k)
                if isinstance(new, tuple) and new[0] in ('c', 'v'):
                    value = (f"{new[2]} array" if new[0] == 'c' else f"{new[2]!r:.20}")
                    return (f"argument {path} is static (bools, strings, integer arrays and "
                            "the arguments in static_argnums/static_argnames are) and took a "
                            "new value: the function is traced once per value. Pass it as a "
                            "number traced as a value (do not name it in static_argnums), or "
                            "keep the values it takes few.", value)
                return (f"argument {path} came with a new shape or dtype; each shape and "
                        "dtype is traced separately (keep them few: pad batches to a fixed "
                        "size).", None)
    return ("its arguments have a new structure (containers, their lengths or keys); each "
            "structure is traced separately.", None)


def argument_path(f, args, kwargs, k):
    """The path of leaf ``k`` of ``(args, kwargs)``, by parameter name: ``params['W']``."""
    return _argument_path(leaf_paths((tuple(args), kwargs))[k], positional_names(f))


_PLAIN = object()       # marks the keys of _plain_key apart from flattened ones
_FLOATS = object()      # marks the keys of one list or tuple of floats
_FLAT = (structures_kind(list)[1], structures_kind(tuple)[1])   # their unflattens


def _plain_key(args):
    """The cache key of positional arguments that are all plain floats, ints or float ndarrays
    (each a traced leaf of its own), from their shapes and dtypes alone; None for any
    other argument.  Such calls skip flattening: measured, that is most of the cost of a
    call of a small staged array function."""
    key = [_PLAIN]
    for a in args:
        c = a.__class__
        if c is float or c is int:
            key.append(c)
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
    if isinstance(x, np.random.Generator) and not static:
        return ('g',)                    # its draws are inputs: any generator will do
    if isinstance(x, np.ndarray):
        return ('c', x.shape, x.dtype.str, x.tobytes())
    try:
        hash(x)
        return ('v', type(x), x)
    except TypeError:
        raise StagingError(f"a static argument of a staged function must be hashable (or an "
                           f"array); got a {type(x).__name__}") from None
