"""Random numbers in staged code.

A program is what one run of ``f`` computed, so a number ``f`` draws while it is traced
is a constant of the program: every later call would reuse it.  Two things follow.

* A ``numpy.random.Generator`` passed to a staged (or traced) function as an argument
  is not a constant: while tracing, ``f`` sees a ``TracingGenerator`` in its place,
  whose draws (``rng.normal(size=3)``, ``rng.uniform()``, ...) are made from the real
  generator (so the tracing call returns eager code's numbers) and recorded as extra
  *inputs* of the program, with the call that made them (``Program.draws``).  Each call
  of the program makes those calls again on the generator it is given, in the same
  order, before it runs: fresh numbers, the generator advanced as eager code would.
* Draws from anything else (numpy's global ``np.random.*``, Python's ``random``, a
  generator in ``f``'s closure or globals) are frozen into the program: ``watch``
  notices that one of these changed state while ``f`` was traced, and warns.
"""
import array
import functools
import hashlib
import random
import types
import warnings

import numpy as np

from ..structures import flatten
from ..tracer import StagingError, StagingWarning, active, is_tracer, user_stacklevel
from ..values import Perturbed

# Generator methods that do not draw, or change state otherwise than by drawing.
_REFUSED = {'bit_generator', 'spawn', 'shuffle', '__getstate__', '__setstate__', '__reduce__'}


class TracingGenerator:
    """What a traced function sees in place of a ``numpy.random.Generator`` argument:
    each draw is made from the real generator and recorded as a program input."""
    __slots__ = ('generator', 'slot', 'trace', 'made', 'cursor')

    def __init__(self, generator, slot, trace):
        self.generator, self.slot, self.trace = generator, slot, trace
        self.made = []            # (method, args, kwargs, tracer) of each draw, in order
        self.cursor = 0           # draws made so far (rewound to replay: see ``restore``)

    def __getattr__(self, name):
        if name.startswith('_') or name in _REFUSED or not callable(
                getattr(self.generator, name, None)):
            raise StagingError(
                f"a numpy.random.Generator passed to a staged function can only draw "
                f"(rng.normal(...), rng.uniform(...), ...) while it is traced; rng.{name} is "
                "not a draw. Do it outside the staged function.")
        return functools.partial(self._draw, name)

    def _draw(self, method, *args, **kwargs):
        t = active()
        if t is not self.trace:
            raise StagingError(
                f"rng.{method}(...) inside {t.purpose}: it would be drawn once, when the "
                "loop is traced, not in each iteration. Draw all the numbers the loop needs "
                "before it (size=...) and pass them in its state."
                if t is not None and t.purpose is not None else
                "a generator argument of a traced function was used after its trace ended "
                "(it escaped through a side effect)")
        for x in flatten((args, kwargs))[0]:
            if is_tracer(x) or isinstance(x, Perturbed):
                raise StagingError(
                    f"rng.{method}(...) got a traced or differentiated argument: the "
                    "parameters of a draw must be concrete numbers. Draw standard numbers "
                    "and transform them (loc + scale * rng.standard_normal(shape)), and "
                    "name a size that comes from an argument in static_argnums.")
        if self.cursor < len(self.made):  # rewound (a vjp recomputing f): the same draw
            m, a, kw, tracer = self.made[self.cursor]
            if m == method and _same((a, kw), (args, kwargs)):
                self.cursor += 1
                return tracer
            del self.made[self.cursor:]
        value = getattr(self.generator, method)(*args, **kwargs)
        if not isinstance(value, (float, int, np.ndarray, np.floating, np.integer)) or \
                isinstance(value, np.ndarray) and value.dtype.kind not in 'fiu':
            raise StagingError(f"rng.{method}(...) gave a {type(value).__name__}; a staged "
                               "program can only take draws of real numbers")
        tracer = self.trace.new_tracer(value)
        self.trace.draws.append((self.slot, method, args, kwargs, tracer.var, value))
        self.made.append((method, args, kwargs, tracer))
        self.cursor += 1
        return tracer

    def __repr__(self):
        return f"TracingGenerator({self.generator!r})"


def is_generator(x):
    """A generator whose draws are program inputs (a tracing one stands for one)."""
    return isinstance(x, (np.random.Generator, TracingGenerator))


def draw(generators, draws):
    """The numbers a program's ``draws`` give on these generators, drawn anew."""
    return [getattr(generators[slot], method)(*args, **kwargs)
            for slot, method, args, kwargs in draws]


def states(generators):
    """The generators' states, to draw the same numbers again (``restore``): a
    recomputation (the vjp of a staged function) must see the draws the forward pass saw."""
    return [g.cursor if isinstance(g, TracingGenerator) else g.bit_generator.state
            for g in generators]


def restore(generators, saved):
    for g, s in zip(generators, saved):
        if isinstance(g, TracingGenerator):
            g.cursor = s
        else:
            g.bit_generator.state = s


# ---------------------------------------------------------------- frozen draws

def watch(f, leaves):
    """Snapshots of the random states a traced function could draw from without its
    draws becoming program inputs: numpy's global generator, Python's ``random``, and
    the generators in ``f``'s closure, globals and arguments (a static generator
    argument is a constant too).  ``frozen(snapshots)`` names those that changed."""
    found = {}
    _reachable(f, found, set(), 3)
    for x in leaves:
        if isinstance(x, (np.random.Generator, np.random.RandomState)):
            found[id(x)] = ("a static generator argument", x)
    watched = [("numpy's global generator (np.random.*)", np.random.mtrand._rand),
               ("Python's random module", random)] + list(found.values())
    return [(name, obj, _digest(_state(obj))) for name, obj in watched]


def frozen(snapshots):
    return [name for name, obj, before in snapshots if _digest(_state(obj)) != before]


def _digest(state):
    """A state kept as a digest: numpy's global state and Python's were 8 KB held through
    the trace, 8 bytes per equation of a 1,000-equation one."""
    h = hashlib.blake2b(digest_size=16)
    _feed(h, state)
    return h.digest()


def _feed(h, x):
    if isinstance(x, dict):
        for k, v in x.items():
            h.update(repr(k).encode())
            _feed(h, v)
    elif isinstance(x, (tuple, list)):
        h.update(b'(%d' % len(x))
        for v in x:
            _feed(h, v)
    elif isinstance(x, np.ndarray):
        h.update(repr((x.dtype.str, x.shape)).encode())
        h.update(x.tobytes())
    elif isinstance(x, bytes):
        h.update(b'b%d:' % len(x))
        h.update(x)
    else:
        h.update(repr(x).encode() + b';')


def warn_frozen(snapshots, label):
    changed = frozen(snapshots)
    if changed:
        warnings.warn(
            f"{label} drew random numbers from {', '.join(changed)} while it was traced: "
            "they are constants of the program, and every later call reuses them. Pass a "
            "numpy.random.Generator as an argument instead (f(x, rng) with rng = "
            "numpy.random.default_rng(seed)): its draws are inputs of the program, drawn "
            "anew on each call.", StagingWarning, stacklevel=user_stacklevel())


def _state(obj):
    if obj is random:
        # (its 625 words packed into bytes: the digest reads them in one call, not one
        # repr per word)
        version, words, gauss = random.getstate()
        return version, array.array('Q', words).tobytes(), gauss
    if isinstance(obj, np.random.RandomState):
        return obj.get_state(legacy=False)
    return obj.bit_generator.state


def _reachable(obj, found, seen, depth):
    """Generators reachable from ``obj`` through closures, referenced globals, partials,
    bound methods and their instance's attributes (a few levels deep)."""
    if id(obj) in seen or depth < 0:
        return
    seen.add(id(obj))
    if isinstance(obj, (np.random.Generator, np.random.RandomState)):
        found[id(obj)] = ("a generator in the function's closure or globals", obj)
        return
    if isinstance(obj, (types.ModuleType, type)):
        return
    if isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                _reachable(cell.cell_contents, found, seen, depth - 1)
            except ValueError:            # an empty cell
                pass
        g = obj.__globals__
        for name in _names(obj.__code__):
            if name in g:
                _reachable(g[name], found, seen, depth - 1)
        return
    if isinstance(obj, functools.partial):
        for x in (obj.func, *obj.args, *obj.keywords.values()):
            _reachable(x, found, seen, depth - 1)
        return
    if isinstance(obj, types.MethodType):
        _reachable(obj.__func__, found, seen, depth - 1)
        _reachable(obj.__self__, found, seen, depth - 1)
        return
    inner = getattr(obj, '__wrapped__', None)
    if inner is not None:
        _reachable(inner, found, seen, depth - 1)
    attrs = getattr(obj, '__dict__', None)
    if isinstance(attrs, dict):           # an instance: self.rng, self.f
        for v in list(attrs.values())[:50]:
            if isinstance(v, (np.random.Generator, np.random.RandomState, types.FunctionType,
                              types.MethodType, functools.partial)):
                _reachable(v, found, seen, depth - 1)


def _names(code):
    names = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names.extend(_names(c))
    return names

