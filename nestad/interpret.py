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

The arithmetic operators of Bundle and TapeCell keep hand-written fast paths (the
same rules specialised to one tag or a float operand, in ``nestad/primitives.py``), and
``lifting.lift1`` inlines ``FORWARD``/``REVERSE`` for one argument: they are this
dispatch with its generic steps removed, tested against it (tests/test_interpret.py).
"""
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


def is_batched(x):
    return x.__class__ is Batched
