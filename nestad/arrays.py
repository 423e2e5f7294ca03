"""Array-valued perturbed numbers and the lifting of array primitives.

``ArrayBundle`` and ``ArrayTapeCell`` are the Bundle and TapeCell of an ndarray
primal.  They are subclasses, so everything that reads tags works unchanged,
but the scalar hot paths (which test ``__class__ is Bundle``/``TapeCell``) never
see them: array arithmetic needs broadcasting rules the scalar paths skip.

An ``ArrayPrimitive`` carries, per argument, a JVP ``jvp(t, *primals, out, **params)``
and a VJP ``vjp(g, *primals, out, **params)``, written with ``nestad.numpy``'s own
lifted functions so that they nest like scalar rules do.  In a tape cell the
partial for an argument is a ``VJP`` object: ``vjp * g`` applies the rule, so the
reverse phase's ``sensitivity += partial * s`` is the same for arrays and scalars.

Tangents may carry leading *batch* axes (``tangent.shape == batch + primal.shape``):
``jacobian_f`` pushes all basis directions through one pass.  Rules therefore
address primal axes from the right (negative axes), and elementwise rules get
batching for free from broadcasting.
"""
from numbers import Real

import numpy as np

from .errors import InvalidInputError
from . import registry
from .interpret import Interpretation, split
from .tracer import ArrayTracer, _TracerBase, any_tracer, apply_traced
from .values import Bundle, Perturbed, TapeCell, next_id


class ArrayBundle(Bundle):
    """Forward-mode array: ``primal + tangent * eps_tag``, elementwise."""
    __slots__ = ()

    def __repr__(self):
        return f"ArrayBundle(shape={self.shape}, primal={self.primal!r})"


class ArrayTapeCell(TapeCell):
    """Reverse-mode array: a node of run ``tag``'s tape holding an ndarray."""
    __slots__ = ()

    def __repr__(self):
        return f"ArrayTapeCell(shape={self.shape}, id={self.id})"


class Compact(Perturbed):
    """A plain array (it carries no perturbation) kept in a compact form while it is
    structurally sparse: the basis directions ``jacobian_f`` and ``hessian`` push are an
    identity (``nestad.numpy._banded``).  Its tag, 0, is below every run's, so ``apply``
    meets it only where no run's value is among the arguments, and hands the application
    to ``COMPACT[0]``, which keeps the form where it can and else computes on the dense
    array (``primal``, exact).  Everything that reads tags sees a constant of every run."""
    __slots__ = ()
    tag = 0

    def dense(self):
        raise NotImplementedError

    @property
    def primal(self):
        return self.dense()

    def __array__(self, dtype=None, copy=None):
        d = self.dense()
        return d if dtype is None else d.astype(dtype)


class _Dense(Interpretation):
    """``bind``'s route for a compact argument (a function operator, a scalar primitive):
    the primitive on the dense arrays (``split`` put them in ``primals``)."""
    __slots__ = ()
    name = 'dense'

    def process(self, prim, top, args, carried, primals, params):
        return prim.evaluate(primals, params)


Compact.interpretation = _Dense()
# compact_apply(prim, args, params) for an application with a Compact and no run's value
# among its arguments: put here by nestad.numpy._banded.
COMPACT = [None]


def is_array(x):
    """True for an ndarray (or a traced one) or a perturbed value whose primal is one."""
    while isinstance(x, Perturbed):
        x = x.primal
    return x.__class__ is np.ndarray or x.__class__ is ArrayTracer


def subclass_error(x, where):
    """The error for an ndarray subclass given to ``where``.  nestad computes with plain
    ndarrays; a subclass may give operations another meaning (a mask, ``*`` as a matrix
    product, units) that the rules would not follow, so it is refused, never unwrapped."""
    cls = type(x)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if isinstance(x, np.ma.MaskedArray):
        why = ("nestad does not implement masked-array semantics: the masked entries would "
               "silently take part in the values or the derivatives. Use x.filled(value) to "
               "replace them, or numpy.asarray(x) for the raw data (and nestad.numpy.where "
               "to apply the mask yourself).")
    elif isinstance(x, np.matrix):
        why = ("numpy.matrix gives * the meaning of a matrix product and keeps every result "
               "2-D, which nestad's array rules do not follow. Use numpy.asarray(x), and @ "
               "for matrix products.")
    else:
        why = ("nestad differentiates plain numpy.ndarray only, since a subclass may change "
               "what operations mean. Use numpy.asarray(x) for its data as a plain array.")
    return InvalidInputError(f"{where} got a {name} (a subclass of numpy.ndarray): {why}")


def closure_error(prim, params):
    """A primitive's plain function returned a nestad value from plain arguments: it was
    given one as a keyword parameter (not differentiated), or it read one from its
    closure; its rules see neither."""
    keywords = [k for k, v in params.items() if isinstance(v, Perturbed)]
    if keywords:
        return InvalidInputError(
            f"primitive {prim.name} was given a value being differentiated as the keyword "
            f"argument {keywords[0]}: keyword arguments of a primitive are parameters, which "
            "are not differentiated. Pass it positionally, as an argument with a rule.")
    return InvalidInputError(
        f"the function of primitive {prim.name} returned a value carrying a perturbation "
        "although its arguments carried none: it uses a value being differentiated from its "
        "closure (or a global), which its rules cannot see. Pass that value to the primitive "
        "as an argument (with a rule for it).")


def operand_error(prim, k, a):
    """The error for operand k of array primitive ``prim``, next to a perturbed value, that is
    not a real number or an array of them: numpy would compute complex or object values,
    and the derivative of those is not nestad's."""
    if isinstance(a, np.ndarray):
        what, is_complex = f"an ndarray of dtype {a.dtype}", a.dtype.kind == 'c'
    elif isinstance(a, np.generic):
        what, is_complex = f"a numpy {a.dtype} ({a!r:.40})", a.dtype.kind == 'c'
    else:
        what, is_complex = f"a {type(a).__name__} ({a!r:.40})", isinstance(a, complex)
    hint = ("nestad differentiates real-valued functions: complex numbers are not supported "
            "(compute with the real and imaginary parts as real numbers)" if is_complex else
            "pass real numbers or arrays of them (lists of them work where numpy takes an array)")
    return InvalidInputError(f"nestad.numpy.{prim.name}: operand {k} is {what}, not a real number "
                             f"or array, in a computation being differentiated; {hint}.")


def make_bundle(tag, primal, tangent):
    return (ArrayBundle if is_array(primal) else Bundle)(tag, primal, tangent)


def make_cell(tag, primal, partials):
    return (ArrayTapeCell if is_array(primal) else TapeCell)(tag, next_id(), primal, partials)


def rebuild_bundle(tag, primal, tangent):
    """``make_bundle`` without the liveness check: for rewriting values that already
    exist (renaming and splitting tapes), whose tags may belong to runs that have
    returned (inside linear maps the reverse phase will apply later)."""
    b = object.__new__(ArrayBundle if is_array(primal) else Bundle)
    b.tag, b.primal, b.tangent = tag, primal, tangent
    return b


def rebuild_cell(tag, primal, partials):
    """``make_cell`` without the liveness check (see ``rebuild_bundle``)."""
    c = object.__new__(ArrayTapeCell if is_array(primal) else TapeCell)
    c.tag, c.id, c.primal, c.partials = tag, next_id(), primal, partials
    return c


class LinearMap:
    """A tape partial that is a linear map (``partial * g`` applies it) rather than a
    number.  The tape walks of ``nestad.extraction`` rewrite perturbations inside
    partials; they reach a linear map's values only through ``renamed``, so every kind
    of linear map is split and renamed alike."""
    __slots__ = ()

    def renamed(self, value, tag):
        """This map with ``value`` applied to the values it holds and ``tag`` to the tags."""
        raise NotImplementedError


class VJP(LinearMap):
    """A linear map from an output sensitivity to one argument's sensitivity."""
    __slots__ = ('rule', 'primals', 'out', 'params')

    def __init__(self, rule, primals, out, params):
        self.rule, self.primals, self.out, self.params = rule, primals, out, params

    def __mul__(self, g):
        return self.rule(g, *self.primals, out=self.out, **self.params)

    def renamed(self, value, tag):
        primals = tuple(value(p) for p in self.primals)
        out = value(self.out)
        if out is self.out and all(n is o for n, o in zip(primals, self.primals)):
            return self
        return VJP(self.rule, primals, out, self.params)


class PerArgument:
    """``rules[i]``: the rule for argument i, made on demand (for a primitive whose rules
    are one function of the argument's index, or that takes any number of arguments)."""
    __slots__ = ('make',)

    def __init__(self, make):
        self.make = make

    def __getitem__(self, i):
        return self.make(i)


class ArrayPrimitive:
    """A numpy operation and its derivative rules (staged code spells it as
    nestad.staging.lowering says)."""
    __slots__ = ('name', 'plain', 'jvps', 'vjps', 'jvp_joint', 'lifted', 'user', 'qualname')

    def __init__(self, name, plain, jvps=None, vjps=None, jvp_joint=None,
                 namespace='numpy', user=False):
        self.name = name
        self.plain = plain            # numpy implementation on plain values
        self.jvps = jvps              # per argument: jvp(t, *primals, out, **params)
        self.vjps = vjps              # per argument: vjp(g, *primals, out, **params)
        self.jvp_joint = jvp_joint    # or one jvp(tangents, *primals, out, **params), None = constant
        self.lifted = None
        self.user = user              # users' primitives may take any other arguments (labels...)
        self.qualname = name if namespace is None else f"{namespace}.{name}"
        registry.register(self, self.qualname, user)

    def __reduce__(self):             # (by name: rules are closures)
        return registry.reduce(self, self.qualname)

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        return f"<array primitive {self.name}>"

    # The rules of an array primitive for each interpretation (nestad.interpret).
    def evaluate(self, args, params):
        if any_tracer(args):
            return apply_traced(self, args, params)
        out = self.plain(*args, **params)
        if isinstance(out, Perturbed):
            raise closure_error(self, params)
        return out

    def forward(self, top, args, carried, primals, params):
        out = self.lifted(*primals, **params)
        if self.jvp_joint is not None:
            tangents = [a.tangent if c else None for a, c in zip(args, carried)]
            tangent = self.jvp_joint(tangents, *primals, out=out, **params)
        else:
            tangent = None
            for i, (a, c) in enumerate(zip(args, carried)):
                if c:
                    term = self.jvps[i](a.tangent, *primals, out=out, **params)
                    tangent = term if tangent is None else tangent + term
        return make_bundle(top, out, _in_out_dtype(tangent, out))

    def reverse(self, top, args, carried, primals, params):
        out = self.lifted(*primals, **params)
        return make_cell(top, out, tuple((a, VJP(self.vjps[i], primals, out, params))
                                         for i, (a, c) in enumerate(zip(args, carried)) if c))


def _dtype(x):
    while isinstance(x, Perturbed):
        if isinstance(x, Compact):
            return x.dtype
        x = x.primal
    return getattr(x, 'dtype', None)


def _in_out_dtype(t, out):
    """The tangent t in the dtype of the output it belongs to: a rule's float64 constant
    (a mask, an identity matrix) would make a float32 output's tangent float64, and a
    float32 tangent of a float64 output (numpy promoted a float64 constant) is float64."""
    od = _dtype(out)
    if od is None or od.kind != 'f':
        return t
    td = _dtype(t)
    if td is None or td == od or td.kind != 'f':
        return t
    if t.__class__ is np.ndarray:
        return t.astype(od)
    return CAST[0](t, od)


# nestad.numpy.astype, for a perturbed or traced tangent: put here by nestad.numpy._indexing,
# which defines it with this module's ArrayPrimitive.
CAST = [None]


def apply(prim, args, params):
    """Apply ``prim`` to ``args`` carrying any tags: ``nestad.interpret.bind`` with the
    checks of array operands (ndarray subclasses, complex or object operands)."""
    top = -1
    for a in args:
        if isinstance(a, Perturbed):
            if a.tag > top:
                top = a.tag
                interp = a.interpretation
        elif a.__class__ is not np.ndarray and isinstance(a, np.ndarray):
            raise subclass_error(a, f"nestad.numpy.{prim.name}")
    if top <= 0:
        return prim.evaluate(args, params) if top < 0 else COMPACT[0](prim, args, params)
    for k, a in enumerate(() if prim.user else args):   # numpy would make complex or object values
        if a.__class__ is np.ndarray or isinstance(a, (np.generic, _TracerBase)):
            if a.dtype.kind not in 'biuf':
                raise operand_error(prim, k, a)
        elif not isinstance(a, (Perturbed, Real)):     # (Real is an ABC: slower, so second)
            raise operand_error(prim, k, a)
    carried, primals = split(args, top)
    return interp.process(prim, top, args, carried, primals, params)
