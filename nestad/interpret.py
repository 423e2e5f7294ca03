"""One dispatch for every primitive application: interpretations.

A primitive application ``prim(*args, **params)`` is handed to one *interpretation*:

* the outermost one among the arguments, found by the tag order (the largest tag;
  by the ordering invariant a value's own tag is its outermost one).  Each kind of
  perturbed value names its interpretation as a class attribute: ``Bundle`` forward
  (``FORWARD``), ``TapeCell`` reverse (``REVERSE``), ``Batched`` batching
  (``nestad.batching.BATCH``);
* with no perturbed argument, the bottom: the primitive's ``evaluate`` (plain
  evaluation, or recording when an argument is a tracer of a program being staged).

``bind`` splits every argument that carries the outermost tag ``top`` into its primal
(``carried[i]`` says which did) and calls ``interpretation.process(prim, top, args,
carried, primals, params)``.  The interpretation applies its rule for ``prim`` and
builds a value of run ``top`` from results computed on the primals, which carry only
smaller tags, so the invariant holds.  Its rule computes through the primitives' public
(lifted) functions, which dispatch again: that is how the next tag down is handled.

Rules are tables keyed by primitive: forward reads a primitive's JVP rules
(``prim.forward``), reverse its VJP rules (``prim.reverse``), batching its batch rule
(``nestad.batching.BATCH_RULES``).  A new transform is a value class (a ``Perturbed``
with ``tag``, ``primal`` and ``interpretation``), an interpretation with ``process``,
and its table (notes/design.md, "Adding a transform").

Operators that take functions and have rules of their own (checkpoint, fixed_point, a
staged while_loop, a staged function, stop_gradient of a function, the solvers) are
``FunctionOp``s applied through the same ``bind``: their arguments' flat leaves are the
arguments, and their rule for an interpretation is an entry of their table keyed by
the interpretation's name (JAX's higher-order primitives).

The arithmetic operators of Bundle and TapeCell keep hand-written fast paths (the
same rules specialised to one tag or a float operand, in ``nestad/primitives.py``), and
``lifting.lift1`` inlines ``FORWARD``/``REVERSE`` for one argument: they are this
dispatch with its generic steps removed, tested against it (tests/test_interpret.py).
"""
from .errors import MissingRuleError
from .values import Batched, Bundle, Perturbed, TapeCell

EMPTY = {}


class Interpretation:
    """What a transform does with a primitive application whose outermost tag is its own.

    ``process(prim, top, args, carried, primals, params)`` returns the application's
    result as a value of run ``top`` (or a structure of them)."""
    __slots__ = ()
    name = None

    def process(self, prim, top, args, carried, primals, params):
        raise NotImplementedError

    def __repr__(self):
        return f"<interpretation {self.name}>"


class Forward(Interpretation):
    """Forward mode: ``out + tangent * eps_top``, the tangent from the JVP rules."""
    __slots__ = ()
    name = 'forward'

    def process(self, prim, top, args, carried, primals, params):
        return prim.forward(top, args, carried, primals, params)


class Reverse(Interpretation):
    """Reverse mode: a tape cell of ``top`` whose partials come from the VJP rules."""
    __slots__ = ()
    name = 'reverse'

    def process(self, prim, top, args, carried, primals, params):
        return prim.reverse(top, args, carried, primals, params)


FORWARD = Forward()
REVERSE = Reverse()
Bundle.interpretation = FORWARD
TapeCell.interpretation = REVERSE


def outermost(args):
    """``(top, interpretation)`` of the largest tag among ``args`` (``(-1, None)`` if
    none carries one)."""
    top, interp = -1, None
    for a in args:
        if isinstance(a, Perturbed) and a.tag > top:
            top, interp = a.tag, a.interpretation
    return top, interp


def split(args, top):
    """``(carried, primals)``: which arguments carry ``top``, and the arguments with it
    removed."""
    carried = tuple([isinstance(a, Perturbed) and a.tag == top for a in args])
    return carried, tuple([a.primal if c else a for a, c in zip(args, carried)])


def bind(prim, args, params=EMPTY):
    """Apply ``prim`` to ``args``: by the outermost interpretation, or evaluate it."""
    top, interp = outermost(args)
    if interp is None:
        return prim.evaluate(args, params)
    carried, primals = split(args, top)
    return interp.process(prim, top, args, carried, primals, params)


class FunctionOp:
    """An operator that takes functions and has a rule of its own for each interpretation
    (JAX's higher-order primitives): it is applied as ``bind(op, leaves, params)``, with
    ``leaves`` the flat leaves of its numeric arguments (which may carry perturbations)
    and ``params`` the rest (the functions, the arguments' structure, options).

    * with no perturbation among the leaves, ``bind`` calls ``evaluate(leaves, params)``
      (plain evaluation, or recording inside ``nd.stage``);
    * else the outermost interpretation's rule: ``rules[interp.name](top, leaves, carried,
      primals, params)``, a value of run ``top``.  Forward and reverse reach it through
      ``prim.forward``/``prim.reverse`` (as for every primitive), batching and Taylor mode
      by testing for this class first.  A rule computes on ``primals`` with ``lifted``,
      which dispatches again for the next run down.

    An interpretation with no entry raises ``MissingRuleError`` naming the operator and
    the interpretation (``missing[name]`` says why and what to do instead); an
    interpretation that knows nothing of these operators (a user's, as in the recipe of
    notes/design.md) applies them as any primitive, ``prim.lifted(*primals, **params)``."""
    __slots__ = ('name', 'qualname', '_evaluate', 'rules', 'missing')

    def __init__(self, name, evaluate, rules, missing=None):
        self.name = self.qualname = name
        self._evaluate, self.rules, self.missing = evaluate, rules, missing or {}

    def evaluate(self, leaves, params):
        return self._evaluate(leaves, params)

    def lifted(self, *leaves, **params):
        return bind(self, leaves, params)

    def apply(self, interp, top, leaves, carried, primals, params):
        rule = self.rules.get(interp.name)
        if rule is None:
            raise MissingRuleError(self.missing.get(interp.name) or (
                f"{self.name} has no rule for the {interp.name} interpretation"))
        return rule(top, leaves, carried, primals, params)

    def forward(self, top, leaves, carried, primals, params):
        return self.apply(FORWARD, top, leaves, carried, primals, params)

    def reverse(self, top, leaves, carried, primals, params):
        return self.apply(REVERSE, top, leaves, carried, primals, params)

    def __repr__(self):
        return f"<function operator {self.name}>"


def is_batched(x):
    return x.__class__ is Batched
