"""The two kinds of perturbed number.

``Bundle(tag, primal, tangent)`` is a forward-mode number: primal + tangent*eps_tag.
``TapeCell(tag, id, primal, partials)`` is a reverse-mode number: ``partials`` is a
tuple of ``(input_cell, d_self/d_input)`` pairs read by the reverse phase.

Invariant (what makes nesting correct): ``primal``, ``tangent`` and every partial
hold plain numbers or perturbed values whose tag is strictly smaller than ``tag``.
So the outermost tag of a value is always its own ``tag``, and a value whose tag
is smaller than ``t`` carries no perturbation ``t`` at all (it is a constant for
run ``t``).

Arithmetic is installed on these classes by ``nestad.primitives``, next to each
primitive's derivative rule.  Comparisons look at primal values and return plain
bools, so ordinary control flow works on perturbed numbers.
"""
import itertools
import math

import numpy as np

from . import perturbation
from .errors import (BatchedConversionError, EscapedPerturbationError, PerturbedConversionError,
                     UnhashableValueError)

# Cell ids: unique, increasing in creation order (an input cell is always older
# than the cells computed from it).  ``next`` on a count is atomic under the GIL.
_cell_ids = itertools.count()
next_id = _cell_ids.__next__


# Every operation on a perturbed value builds its result through these constructors,
# with the operand's tag: checking there that the tag's run is still going catches a
# value that escaped its derivative call (through a global, a list, an attribute)
# whatever operation it meets, for one dict lookup.
_live = perturbation._live


def escaped(tag):
    raise EscapedPerturbationError(
        "a nestad operation met a perturbed value whose derivative call has already "
        "returned: it escaped through a side effect (a global, a list, an attribute), and "
        "its derivative can no longer be computed correctly. Return such values from the "
        "differentiated function instead.")


_STORING = (" If this came from storing a nestad value into a numpy array (out[i] = x), build "
            "the array with nestad.numpy.array or stack instead, or update it functionally: "
            "out = nestad.numpy.at(out)[i].set(x) (x.at[i].set(v) on nestad arrays).")


class Perturbed:
    """Common base of Bundle and TapeCell: conversions, comparisons, repr."""

    __slots__ = ()
    # numpy's protocols (__array_ufunc__, __array_function__) are installed by
    # nestad.numpy, so numpy calls on nestad values differentiate or refuse.

    def _refuse(self, what, hint=""):
        if not perturbation.is_live(self.tag):
            raise EscapedPerturbationError(
                f"{what} on a perturbed value whose derivative call has already returned: it "
                "escaped through a side effect (a global, a list, an attribute). Return values "
                "out of the function being differentiated instead.")
        raise PerturbedConversionError(
            f"{what} on a value that carries a perturbation would drop its derivative. "
            "Use nestad's functions (nestad.sin, nestad.floor, ...) instead of math's, "
            "and nestad.isnan / isfinite / isinf instead of math.isnan / isfinite / isinf; "
            "keep the value a nestad number, or call nestad.primal_value(x) if you "
            "really want the number without its derivative." + hint)

    def __float__(self):
        self._refuse("float()", _STORING)

    def __int__(self):
        self._refuse("int()")

    def __index__(self):
        self._refuse("using as an index (operator.index)")

    def __complex__(self):
        self._refuse("complex()")

    def __round__(self, ndigits=None):
        self._refuse("round()")

    def __trunc__(self):
        self._refuse("math.trunc()")

    def __floor__(self):
        self._refuse("math.floor() (use nestad.floor)")

    def __ceil__(self):
        self._refuse("math.ceil() (use nestad.ceil)")

    def as_integer_ratio(self):
        # statistics.mean, variance, ... compute with exact integer ratios.
        if not perturbation.is_live(self.tag):
            self._refuse("as_integer_ratio()")
        raise PerturbedConversionError(
            "as_integer_ratio() on a value that carries a perturbation: exact rational "
            "arithmetic (the statistics module computes with it) would drop its derivative. "
            "Compute a mean as sum(xs) / len(xs), or use nestad.numpy.mean.")

    def __divmod__(self, other):
        # x // y is piecewise constant (no derivative), x % y = x - y * (x // y) is not.
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    # The value is real: .real is itself, .imag zero (as for Python's float).
    @property
    def real(self):
        return self

    @property
    def imag(self):
        v = primal_value(self)
        return np.zeros(v.shape) if isinstance(v, np.ndarray) else 0.0

    def conjugate(self):
        return self

    conj = conjugate

    def __format__(self, spec):
        # Formatting is output, not arithmetic: a format spec formats the value (each
        # element of an array).  An empty spec is str(), which shows the perturbation.
        if not spec:
            return str(self)
        v = primal_value(self)
        if isinstance(v, np.ndarray) and v.ndim:
            return np.array2string(v, formatter={'all': lambda e: format(e, spec)})
        return format(v, spec)

    # Comparisons: on primal values, plain bools.
    def __lt__(self, other):
        return primal_value(self) < primal_value(other)

    def __le__(self, other):
        return primal_value(self) <= primal_value(other)

    def __gt__(self, other):
        return primal_value(self) > primal_value(other)

    def __ge__(self, other):
        return primal_value(self) >= primal_value(other)

    def __eq__(self, other):
        return primal_value(self) == primal_value(other)

    def __ne__(self, other):
        return primal_value(self) != primal_value(other)

    def __hash__(self):
        # Hashing by value would let `x in cache` find the entry of the plain number x
        # (equal, by __eq__), and a memoised function would return it: derivative 0.
        raise UnhashableValueError(
            "nestad values are unhashable: a cache keyed by value (a dict, a set, "
            "functools.lru_cache) would return a result computed without this value's "
            "derivative. Key the cache on nestad.primal_value(x) only if the cached result "
            "needs no derivative; otherwise do not memoise across derivative calls.")

    def __bool__(self):
        return bool(primal_value(self))

    # Array-like introspection (of the primal value; a scalar has shape ()).
    @property
    def shape(self):
        return np.shape(primal_value(self))

    @property
    def ndim(self):
        return np.ndim(primal_value(self))

    @property
    def size(self):
        return np.size(primal_value(self))

    @property
    def dtype(self):
        return np.result_type(primal_value(self))


class Bundle(Perturbed):
    """Forward-mode number: ``primal + tangent * eps_tag``."""

    __slots__ = ('tag', 'primal', 'tangent')

    def __init__(self, tag, primal, tangent):
        if tag not in _live:
            escaped(tag)
        self.tag = tag
        self.primal = primal
        self.tangent = tangent

    def __repr__(self):
        return f"Bundle({self.tag // perturbation.STRIDE}, {self.primal!r}, {self.tangent!r})"


class TapeCell(Perturbed):
    """Reverse-mode number: a node of run ``tag``'s tape."""

    __slots__ = ('tag', 'id', 'primal', 'partials', '__weakref__')

    def __init__(self, tag, id, primal, partials):
        if tag not in _live:
            escaped(tag)
        self.tag = tag
        self.id = id
        self.primal = primal
        self.partials = partials

    def __repr__(self):
        return (f"TapeCell({self.tag // perturbation.STRIDE}, id={self.id}, {self.primal!r}, "
                f"<{len(self.partials)} inputs>)")


class Batched(Perturbed):
    """A value of ``nestad.vmap``'s run ``tag``: one value per member of the batch,
    stacked along a leading axis of ``primal`` (``primal.shape == (size,) + shape``).

    It obeys the ordering invariant like Bundle and TapeCell: ``primal`` holds only
    smaller tags.  Seen from the function being mapped it is one member: ``shape``,
    ``ndim`` and ``dtype`` are a member's, comparisons are elementwise per member (a
    batched bool), and Python control flow on it (``bool``, ``float``) is refused,
    since the members may disagree."""

    __slots__ = ('tag', 'primal')

    def __init__(self, tag, primal):
        if tag not in _live:
            escaped(tag)
        self.tag = tag
        self.primal = primal

    def __repr__(self):
        return f"Batched({self.tag // perturbation.STRIDE}, {self.primal!r})"

    @property
    def shape(self):
        return np.shape(self.primal)[1:]

    @property
    def ndim(self):
        return np.ndim(self.primal) - 1

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def dtype(self):
        v = self.primal
        return v.dtype if hasattr(v, 'dtype') else np.result_type(v)

    def _refuse(self, what, hint=""):
        if not perturbation.is_live(self.tag):
            super()._refuse(what, hint)
        raise BatchedConversionError(
            f"{what} on a value batched by nestad.vmap: it has one value per member of the "
            "batch, which may disagree, so Python control flow or a conversion cannot use it. "
            "Choose with nestad.numpy.where (or nestad.where), loop with nestad.while_loop "
            "(it runs until every member is done), or move the computation out of the "
            "mapped function.")

    def __bool__(self):
        self._refuse("bool() (an if, while, and, or, not)")

    # Comparisons: elementwise, a batched bool (the protocol methods come from nestad.numpy).
    def __lt__(self, other):
        return np.less(self, other)

    def __le__(self, other):
        return np.less_equal(self, other)

    def __gt__(self, other):
        return np.greater(self, other)

    def __ge__(self, other):
        return np.greater_equal(self, other)

    def __eq__(self, other):
        return np.equal(self, other)

    def __ne__(self, other):
        return np.not_equal(self, other)

    __hash__ = Perturbed.__hash__


def primal_value(x):
    """The plain number underneath every perturbation of ``x``.  A value batched by
    ``vmap`` is not a perturbation but many values: it is kept (batched)."""
    while isinstance(x, Perturbed):
        if x.__class__ is Batched:
            return x
        x = x.primal
    return x


def modular_pow_error():
    return PerturbedConversionError(
        "pow(x, y, mod) with a perturbed value: modular exponentiation is integer "
        "arithmetic and has no derivative. Write (x ** y) % mod, which nestad "
        "differentiates, or use nestad.primal_value(x) for integer work.")


def _value_test(scalar_test, array_test):
    def test(x):
        v = primal_value(x)
        if v.__class__ is float:
            return scalar_test(v)
        r = array_test(v)
        return bool(r) if r.ndim == 0 and r.__class__ is not Batched else r
    test.__name__ = scalar_test.__name__
    test.__doc__ = (f"``math.{scalar_test.__name__}`` of the value of ``x``, perturbed or not: a "
                    "plain bool, or an ndarray of bools for an array.  A test of the value needs "
                    "no derivative (math's version would refuse a perturbed value).")
    return test


isnan = _value_test(math.isnan, np.isnan)
isfinite = _value_test(math.isfinite, np.isfinite)
isinf = _value_test(math.isinf, np.isinf)
