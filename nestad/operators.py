"""The AD operators: forward mode (``derivative``, ``jvp``, ...) and reverse mode
(``gradient_r``, ``vjp``, ...), and the Jacobians and Hessians built from them.

Each call of an operator makes a fresh perturbation tag, wraps the inputs in
Bundles or TapeCells of that tag, runs the user's function, and reads the answer
for that tag only.  Values of enclosing runs pass through untouched (they are
constants here and keep their own perturbations), which is why all operators nest
inside each other in any order and to any depth.

Inputs and outputs are numbers, ndarrays, or structures of them.  ``jacobian_f``
(and so ``hessian``) and ``gradient_f`` push every basis direction through one
forward pass at once: the tangents carry a leading batch axis.
"""
import functools
import types
from numbers import Real

import numpy as np

from . import numpy as anp
from . import perturbation
from .arrays import make_bundle, make_cell, subclass_error
from .errors import InvalidInputError, NestadError, NonScalarOutputError
from .extraction import _checked, primal_of, tangent_of
from .pickling import check_picklable
from .reverse import backpropagate, young_collections_only
from .structures import describe, flatten, leaf_paths, registered_base
from .tracer import ArrayTracer, Tracer, active as tracing, is_tracer
from .values import Bundle, Perturbed, primal_value


# ---------------------------------------------------------------- checking values

def _check_number(x, op, what):
    if isinstance(x, Perturbed):
        return _checked(x, op)
    if isinstance(x, (bool, np.bool_)) or (x.__class__ is np.ndarray and x.dtype.kind == 'b'):
        raise InvalidInputError(
            f"{op}: {what} is "
            f"{'an ndarray of dtype bool' if isinstance(x, np.ndarray) else 'a bool'}"
            ", which has no derivative (True is not a real number here). " +
            ("Give 0.0 (zeros) as the tangent or cotangent of a bool." if 'tangent' in what else
             "Pass a mask or flag as an argument that is not differentiated (see argnums), or "
             "convert it with float() / .astype(float) if you mean a number."))
    if isinstance(x, (Real, ArrayTracer)) or (x.__class__ is np.ndarray and x.dtype.kind in 'iuf'):
        return x
    if isinstance(x, np.ndarray):
        if x.__class__ is not np.ndarray:
            raise subclass_error(x, f"{op}: {what}")
        described = f"an ndarray of dtype {x.dtype}, not of real numbers"
    else:
        described = f"{_a(type(x).__name__)} ({x!r:.60}), not a real number or array"
    base = registered_base(x)
    if base is not None:                        # a subclass nestad cannot rebuild
        hint = (f"{type(x).__name__} is a subclass of {base.__name__}, which nestad does not "
                "know how to rebuild (structures match by exact type): register it with "
                "nestad.register_structure, or pass a plain " + base.__name__)
    else:
        hint = ("nestad differentiates with respect to numbers, ndarrays of real numbers, and "
                "tuples, lists, dicts, namedtuples and dataclasses of them; register other "
                "containers with nestad.register_structure")
    raise InvalidInputError(f"{op}: {what} is {described}. {hint}.")


def _a(noun):
    return ("an " if noun[:1].lower() in "aeiou" or noun.startswith("nd") else "a ") + noun


def _leaves_of(tree, op, name):
    leaves, treedef = flatten(tree, name, op)
    for k, x in enumerate(leaves):
        if not _is_number(x):
            _check_number(x, op, f"{name}{leaf_paths(tree)[k]}")   # raises, naming the path
        elif isinstance(x, Perturbed):
            _checked(x, op)
    return leaves, treedef


def _is_number(x):
    if x.__class__ is Tracer:           # (a Real by registration: the ABC's test costs a
        return True                     # microsecond per argument when tracing)
    return ((isinstance(x, (Real, Perturbed, ArrayTracer)) and not isinstance(x, (bool, np.bool_)))
            or (x.__class__ is np.ndarray and x.dtype.kind in 'iuf'))    # subclasses refused


def _argnums_spec(argnums, op):
    """``argnums`` as a tuple of ints and whether a tuple was asked for; checked once,
    when the operator is made.  A repeated position would be differentiated twice and
    give a silently wrong gradient, so it is refused."""
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)
    for a in nums:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise InvalidInputError(f"{op}: argnums={argnums!r}: {a!r} is not a position; argnums "
                                    "is an int or a tuple of ints (positions of positional arguments)")
    nums = tuple(int(a) for a in nums)
    _no_repeats(nums, argnums, op)
    return nums, many


def _no_repeats(nums, argnums, op):
    if len(set(nums)) != len(nums):
        raise InvalidInputError(f"{op}: argnums={argnums!r} names an argument more than once; "
                                "give each position once")


def _argnums(spec, nargs, op, kwargs=None):
    """The positions of ``spec`` in a call with ``nargs`` positional arguments."""
    nums, many = spec
    if any(not -nargs <= a < nargs for a in nums):
        hint = ("; keyword arguments are passed to the function undifferentiated, so pass the "
                "arguments to differentiate positionally" if kwargs else "")
        raise InvalidInputError(f"{op}: argnums={_shown(spec)!r} does not name an argument of a "
                                f"call with {nargs} positional argument(s){hint}")
    if any(a < 0 for a in nums):
        nums = tuple(a % nargs for a in nums)
        _no_repeats(nums, _shown(spec), op)        # (0, -1) with one argument
    return nums, many


def _shown(spec):
    nums, many = spec
    return nums if many else nums[0]


def _replace(args, nums, chosen):
    args = list(args)
    for i, v in zip(nums, chosen):
        args[i] = v
    return args


def _shape_of(x):
    """The shape of x's value; () for plain real scalars without asking numpy."""
    v = primal_value(x)
    return () if v.__class__ is Tracer or isinstance(v, Real) else np.shape(v)


_F64 = np.dtype(np.float64)


def _narrow_float(x):
    """x's dtype if it is a float narrower than float64 (float32, float16), else None.
    Derivatives of such an argument keep its dtype, as in JAX and PyTorch."""
    v = primal_value(x)
    if v.__class__ is float:
        return None
    dt = getattr(v, 'dtype', None)
    return dt if dt is not None and dt.kind == 'f' and dt.itemsize < 8 else None


def _zero_like(x):
    """The sensitivity of an input nothing depended on."""
    shape = _shape_of(x)
    dt = _narrow_float(x)
    if dt is not None:
        return np.zeros(shape, dt) if shape else dt.type(0)
    return np.zeros(shape) if shape else 0.0


def _unit(out):
    """The seed of a reverse pass from a scalar output: 1 in the output's narrow float
    dtype (a Python 1.0 would make every sensitivity float64), of the output's shape
    (a one-element array's is (1,), (1, 1)...)."""
    dt = _narrow_float(out)
    shape = _shape_of(out)
    if shape:
        return np.ones(shape, dt or np.float64)
    return 1.0 if dt is None else dt.type(1)


def _in_dtype(g, x):
    """The derivative g of argument x in x's float dtype: float64 arithmetic with a float64
    constant promotes a float32 one, and a float32 factor narrows a float64 one's (the
    derivative lives in x's own space; a Python float's is float64)."""
    v = primal_value(x)
    if v.__class__ is float:
        if primal_value(g).__class__ is float:          # (the common case, kept cheap)
            return g
        dt = _F64
    else:
        dt = getattr(v, 'dtype', None)
    gv = primal_value(g)
    # (a traced g knows its dtype: numpy's result_type would record a call, 100 us each)
    if dt is None or dt.kind != 'f' or (gv.dtype if is_tracer(gv) else np.result_type(gv)) == dt:
        return g
    if isinstance(g, Perturbed) or is_tracer(g):     # (a staged gradient: the cast is recorded)
        return anp.astype(g, dt)
    return np.asarray(g).astype(dt)[()]


# ---------------------------------------------------------------- the operators' results

class _Operator(functools.partial):
    """What an operator returns: its implementation with ``f`` and the operator's own
    parameters bound, named and documented as ``f``.  A partial rather than a closure,
    so that it pickles whenever ``f`` does (derivative functions are shipped to worker
    processes); a method when it is a class attribute, as a function would be."""

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    def __reduce__(self):
        check_picklable(self.args[0], "derivative operator's result")
        return super().__reduce__()

    def __copy__(self):               # copied as a function is: itself
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        op = next((a for a in self.args if isinstance(a, str)), self.func.__name__.strip('_'))
        return f"<{op} of {self.args[0]!r}>"


def _operator(impl, f, *params):
    # (f's __dict__ is not copied: a staged f's holds its compiled code)
    return functools.update_wrapper(_Operator(impl, f, *params), f, updated=())


# ---------------------------------------------------------------- forward mode

_MISSING = object()


def derivative(f):
    """``derivative(f)(x)``: df/dx at a real ``x`` by forward mode.

    ``f`` may return a number, an array, a function, or any structure of them; the
    result has the same shape, and a function in it computes the derivative of what
    ``f``'s function computes (it may be applied any number of times, anywhere).
    Keyword arguments are passed to ``f`` and not differentiated."""
    return _operator(_derivative, f)


def _derivative(f, x=_MISSING, /, *more, **kwargs):
    if more or x is _MISSING:
        raise InvalidInputError(
            f"derivative(f)(x) takes one positional argument, the real number x to "
            f"differentiate at, but got {len(more) + (x is not _MISSING)}; keyword arguments "
            "are passed to f undifferentiated. For several arguments use gradient_f, jvp "
            "or jacobian_f.")
    if x.__class__ is not float:            # (a float needs no checks: the common case)
        _check_number(x, "derivative", "the argument")
        if _shape_of(x) != ():
            raise InvalidInputError("derivative(f)(x) takes a real number; for an array x "
                                    "use jvp, directional_derivative or jacobian_f")
    tag = perturbation.fresh()
    try:
        return tangent_of(tag, f(Bundle(tag, x, 1.0), **kwargs), "derivative")
    finally:
        perturbation.retire(tag)


def jvp(f, primals, tangents, /, **kwargs):
    """``(f(*primals, **kwargs), J_f(primals) @ tangents)`` by one forward pass.

    ``primals`` and ``tangents`` are tuples of arguments with matching structures;
    keyword arguments are passed to ``f`` and not differentiated.
    """
    return _jvp(f, primals, tangents, kwargs, "jvp")


def _jvp(f, primals, tangents, kwargs, op):
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise InvalidInputError("jvp(f, primals, tangents): primals and tangents must be tuples "
                                "of positional arguments, e.g. jvp(f, (x,), (v,))")
    p_leaves, p_def = _leaves_of(tuple(primals), op, "primals")
    t_leaves, t_def = _leaves_of(tuple(tangents), op, "tangents")
    if len(p_leaves) != len(t_leaves) or p_def.signature() != t_def.signature():
        raise InvalidInputError(f"{op}: tangents must have the same structure as primals, "
                                f"{describe(tuple(primals))}, but they are "
                                f"{describe(tuple(tangents))} (* marks a leaf)")
    for k, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if _shape_of(p) != _shape_of(t):
            path = leaf_paths(tuple(primals))[k]
            raise InvalidInputError(f"{op}: tangents{path} has shape {_shape_of(t)} but "
                                    f"primals{path} has shape {_shape_of(p)}; each tangent "
                                    "must have the shape of its primal (nothing is broadcast)")
    return _push(f, p_leaves, p_def, t_leaves, op, kwargs)


def _push(f, leaves, treedef, tangents, op, kwargs, aux=None):
    """One forward pass: leaves perturbed by ``tangents``; (primal out, tangent out)."""
    tag = perturbation.fresh()
    try:
        args = treedef.build([make_bundle(tag, p, t) for p, t in zip(leaves, tangents)])
        out = f(*args, **kwargs)
        if aux is not None:
            aux.read(tag)
        return primal_of(tag, out, op), tangent_of(tag, out, op)
    finally:
        perturbation.retire(tag)


def directional_derivative(f, x, v, /, **kwargs):
    """Derivative of ``f`` at ``x`` in direction ``v`` (same structure as ``x``)."""
    return _jvp(f, (x,), (v,), kwargs, "directional_derivative")[1]


# From this many directions on, the basis of vector inputs is banded (nestad/numpy/_banded):
# below it, passes over the small dense blocks cost less than the banded form's bookkeeping.
BANDED_MIN = 64


def _banded_basis(leaves, shapes, sizes, n):
    """The basis as banded columns of the identity, when every leaf is a plain float64
    vector (or a traced one) and no run is going on (so that no tangent rule meets another
    run's value together with a banded one, and nothing banded can leave this call but
    the tangent read out of it); else None."""
    if n < BANDED_MIN or perturbation._live:
        return None
    for x, s in zip(leaves, shapes):
        if len(s) != 1 or not (x.__class__ is np.ndarray or x.__class__ is ArrayTracer) \
                or x.dtype != np.float64:
            return None
    starts = np.cumsum([0] + sizes)
    return [anp._banded.identity_columns(n, int(a), k, np.float64) for a, k in zip(starts, sizes)]


def _dense(t):
    """A tangent read out of a pass with a banded basis, as an array."""
    return t.dense() if isinstance(t, anp._banded.Compact) else t


def _basis(leaves):
    """Tangents for all n input directions at once: leaf j gets shape (n,) + shape_j."""
    shapes = [_shape_of(x) for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    n = sum(sizes)
    banded = _banded_basis(leaves, shapes, sizes, n)
    if banded is not None:
        return banded, shapes, sizes, n
    eye = np.eye(n)
    tangents, start = [], 0
    for x, s, k in zip(leaves, shapes, sizes):
        t = eye[:, start:start + k].reshape((n,) + s)
        dt = _narrow_float(x)
        tangents.append(t if dt is None else t.astype(dt))
        start += k
    return tangents, shapes, sizes, n


def _columns(t, n, out_shape, out):
    """A batched output tangent as an (n,) + out_shape array.  An output that does not
    depend on the inputs has an unbatched zero tangent; it is spread over the batch (in
    the output's narrow float dtype, if it has one)."""
    if np.shape(primal_value(t)) == (n,) + out_shape:
        return t
    if is_tracer(primal_value(t)):          # (staged: a zero by construction, not checkable)
        return anp.broadcast_to(t, (n,) + out_shape)
    if np.any(np.asarray(primal_value(t)) != 0):
        raise NestadError(f"internal error: an output tangent of shape {np.shape(primal_value(t))} "
                          f"lost its batch axis of {n} directions; please report this")
    if isinstance(t, Perturbed):
        # a zero carrying an enclosing run (a staged function's tangent, zero because its
        # output does not depend on its arguments, under an enclosing derivative)
        return anp.broadcast_to(t, (n,) + out_shape)
    return np.zeros((n,) + out_shape, _narrow_float(out) or np.float64)


def gradient_f(f, argnums=0, has_aux=False):
    """The gradient of a real-valued ``f`` by forward mode: the Jacobian of a scalar
    function, whose blocks have the inputs' shapes (see jacobian_f for the passes).
    ``has_aux``: ``f`` returns ``(value, aux)``; the result is ``(gradient, aux)``."""
    return _jacobian_f(f, argnums, "gradient_f", gradient=True, has_aux=has_aux)


def _scalar_valued(f, op):
    def checked(*args, **kwargs):
        out = f(*args, **kwargs)
        _check_scalar(out, op)
        return _as_scalar(out)          # blocks of the inputs' shapes
    return checked


class _Aux:
    """The auxiliary data of one call of an operator with ``has_aux``: ``f`` returns
    ``(output, aux)``; the operator differentiates the output and returns aux read out
    of its run (without this run's derivative, keeping enclosing runs'), as JAX does."""

    def __init__(self, f, op):
        self.f, self.op, self.value = f, op, None

    def __call__(self, *args, **kwargs):
        out, self.value = _pair(self.f(*args, **kwargs), self.op)
        return out

    def read(self, tag):
        """aux without run ``tag``'s perturbation (called while the run is live)."""
        leaves, tree = flatten(self.value, "aux", self.op)
        self.value = tree.build([primal_of(tag, x, self.op) if isinstance(x, Perturbed) else x
                                 for x in leaves])


def _pair(out, op):
    if not (isinstance(out, tuple) and len(out) == 2):
        raise InvalidInputError(
            f"{op}(f, has_aux=True): f must return a pair (output, aux), but it returned "
            f"{_a(type(primal_value(out)).__name__)}{f' of {len(out)}' if isinstance(out, tuple) else ''}; return "
            "a tuple of the value to differentiate and the auxiliary data, or drop has_aux=True")
    return out


def _unwrap0d(x):
    """A plain 0-d block as a scalar, as _reshape gives in the batched path."""
    return x[()] if x.__class__ is np.ndarray and x.ndim == 0 else x


def _reshape(x, shape):
    """Reshape a (possibly perturbed) block; a 0-d block becomes a scalar."""
    if isinstance(x, Perturbed):
        return anp.reshape(x, shape)
    x = np.reshape(x, shape)
    return x[()] if shape == () else x


# ---------------------------------------------------------------- reverse mode

def _check_scalar(out, op):
    """A real scalar: a number (numpy scalars too) or a real array with exactly one
    element (0-d, or shape (1,), (1, 1)...), perturbed or not.  A one-element array is
    taken for its element, as autograd and PyTorch's backward() take it; a bool is refused."""
    v = primal_value(out)
    if v.__class__ is float:
        return
    dtype = getattr(v, 'dtype', None)
    if isinstance(v, (bool, np.bool_)) or (dtype is not None and dtype.kind == 'b'):
        what = f"{_a(type(v).__name__)} of bools" if getattr(v, 'shape', ()) else "a bool"
        raise NonScalarOutputError(
            f"{op} needs a function that returns a real scalar, but it returned {what} "
            f"({v!r:.60}). A comparison (==, <, numpy.allclose...) is "
            "piecewise constant and has no derivative to give: return the real number the "
            "comparison is made from, or make the comparison outside the function.")
    if ((isinstance(out, (Perturbed, Real, ArrayTracer))
         or (isinstance(out, np.ndarray) and out.dtype.kind in 'iuf'))
            and _size_one(_shape_of(out))):
        return
    if callable(out):
        raise NonScalarOutputError(
            f"{op} needs a function that returns a real scalar, but it returned a function. "
            "Reverse mode and gradients cannot differentiate function-valued outputs; use "
            "forward mode (derivative, jvp, jacobian_f), which returns a function that "
            "computes the derivative.")
    shape = getattr(primal_value(out), 'shape', None)
    # (an array, not nestad's ArrayTapeCell)
    kind = 'array' if isinstance(out, (np.ndarray, Perturbed)) else type(out).__name__
    described = _a(kind) + (f" of shape {shape}" if shape is not None else "")
    raise NonScalarOutputError(
        f"{op} needs a function that returns a real scalar, but it returned {described}. "
        "Reduce it to a scalar (e.g. a sum or a norm), or use jacobian_r / vjp for "
        "vector-valued functions.")


def _size_one(shape):
    return all(n == 1 for n in shape)


def _as_scalar(out):
    """A one-element output as a 0-d value (a scalar stays as it is)."""
    if _shape_of(out) == ():
        return out
    if out.__class__ is np.ndarray:
        return out.reshape(())[()]
    return anp.reshape(out, ())


def _value_and_gradient(f, spec, args, kwargs, op, aux=None):
    nums, many = _argnums(spec, len(args), op, kwargs)
    leaves, treedef = _leaves_of(tuple(args[i] for i in nums), op, "argument")
    tag = perturbation.fresh()
    try:
        with young_collections_only():
            cells = [make_cell(tag, x, ()) for x in leaves]
            out = f(*_replace(args, nums, treedef.build(cells)), **kwargs)
            if aux is not None:
                aux.read(tag)
            _check_scalar(out, op)
            value = primal_of(tag, out, op)
            # (while tracing, the tape's partials are recorded equations' tracers: the
            # sweep frees them as it goes, which lowers staging's peak memory)
            sens = backpropagate((out,), (_unit(out),), tag, consume=tracing() is not None)
            grads = [_in_dtype(_checked(sens.get(c.id), op), x) if c.id in sens else _zero_like(x)
                     for c, x in zip(cells, leaves)]
    finally:
        perturbation.retire(tag)
    result = treedef.build(grads)
    return value, (result if many else result[0])


def gradient_r(f, argnums=0, has_aux=False):
    """The gradient of a real-valued ``f`` by reverse mode, with the structure of the
    chosen argument (a tuple of them when ``argnums`` is a tuple).  ``has_aux``: ``f``
    returns ``(value, aux)``; the result is ``(gradient, aux)``."""
    return _gradient_r(f, argnums, "gradient_r", has_aux)


def _gradient_r(f, argnums, op, has_aux=False):
    return _operator(_gradient_aux if has_aux else _gradient, f, _argnums_spec(argnums, op), op)


def _gradient(f, spec, op, /, *args, **kwargs):
    return _value_and_gradient(f, spec, args, kwargs, op)[1]


def _gradient_aux(f, spec, op, /, *args, **kwargs):
    aux = _Aux(f, op)               # (one per call: calls may nest)
    return _value_and_gradient(aux, spec, args, kwargs, op, aux)[1], aux.value


def value_and_gradient_r(f, argnums=0, has_aux=False):
    """``(f(*args), gradient_r(f, argnums)(*args))`` from a single run; with ``has_aux``
    (``f`` returns ``(value, aux)``), ``((value, aux), gradient)`` as in JAX."""
    op = "value_and_gradient_r"
    return _operator(_value_and_gradient_aux if has_aux else _value_and_gradient_call, f,
                     _argnums_spec(argnums, op), op)


def _value_and_gradient_call(f, spec, op, /, *args, **kwargs):
    return _value_and_gradient(f, spec, args, kwargs, op)


def _value_and_gradient_aux(f, spec, op, /, *args, **kwargs):
    aux = _Aux(f, op)
    value, g = _value_and_gradient(aux, spec, args, kwargs, op, aux)
    return (value, aux.value), g


def vjp(f, /, *primals, **kwargs):
    """``(f(*primals, **kwargs), pullback)``; ``pullback(ct)`` returns a tuple, one
    cotangent per primal (keyword arguments are not differentiated).  The tape is kept by the pullback, which may be called any number of times.
    ``ct`` must have the structure of f's output and each leaf the shape of its output
    leaf: nothing is broadcast (a wrongly shaped cotangent is an error, not a guess)."""
    op = "vjp"
    value, treedef, out_def, out_shapes, pull = _vjp(f, primals, kwargs, op)

    def pullback(cotangent):
        where = f"{op} pullback"
        ct_leaves, ct_def = _leaves_of(cotangent, where, "cotangent")
        if ct_def.signature() != out_def.signature():
            raise InvalidInputError(
                f"{where}: the cotangent must have the structure of f's output, "
                f"{describe(value)}, but it is {describe(cotangent)} (* marks a leaf)")
        for k, (c, s) in enumerate(zip(ct_leaves, out_shapes)):
            if _shape_of(c) != s:
                path = leaf_paths(value)[k]
                raise InvalidInputError(
                    f"{where}: cotangent{path} has shape {_shape_of(c)} but output{path} has "
                    f"shape {s}; each cotangent leaf must have the shape of its output leaf "
                    "(nothing is broadcast)")
        return treedef.build(pull(ct_leaves))

    return value, pullback


def _vjp(f, primals, kwargs, op, name="primals", aux=None):
    """Run ``f`` on tape cells of a fresh tag.  (value, primals' TreeDef, output's
    TreeDef, output leaf shapes, pull) where ``pull(cotangent_leaves)`` returns the
    primal leaves' cotangents, unchecked."""
    leaves, treedef = _leaves_of(primals, op, name)
    tag = perturbation.fresh()
    try:
        with young_collections_only():
            cells = [make_cell(tag, x, ()) for x in leaves]
            out = f(*treedef.build(cells), **kwargs)
            if aux is not None:
                aux.read(tag)
        out_leaves, out_def = flatten(out, "output", op)
        for k, y in enumerate(out_leaves):
            if callable(y):
                raise InvalidInputError(
                    f"{op}: output{leaf_paths(out)[k]} is a function. Reverse mode (vjp, "
                    "jacobian_r, gradient_r) differentiates outputs made of numbers and arrays; "
                    "for a function-valued output use forward mode (derivative, jvp, "
                    "jacobian_f), which returns a function that computes the derivative.")
        value = primal_of(tag, out, op)
    finally:
        perturbation.retire(tag)
    out_shapes = [_shape_of(y) for y in out_leaves]

    def pull(ct_leaves):
        sens = backpropagate(out_leaves, ct_leaves, tag)
        return [_in_dtype(sens[c.id], x) if c.id in sens else _zero_like(x)
                for c, x in zip(cells, leaves)]

    return value, treedef, out_def, out_shapes, pull


# ---------------------------------------------------------------- Jacobians and Hessians

def _assemble(out_def, out_shapes, in_def, in_shapes, block, many):
    """The Jacobian as the output's structure of the (chosen) input's structure of
    blocks, block(i, j) of shape out_shapes[i] + in_shapes[j]."""
    rows = []
    for i in range(len(out_shapes)):
        row = in_def.build([block(i, j) for j in range(len(in_shapes))])
        rows.append(row if many else row[0])
    return out_def.build(rows)


def _scalar_columns(g, leaves, treedef, op, aux=None):
    """Jacobian columns of g at scalar inputs, one forward pass per input with a plain
    float tangent: for a few scalars this is several times cheaper than a batched pass
    with array tangents, and it keeps results plain floats.  (value, columns)."""
    if not leaves:
        return g(*treedef.build(leaves)), []
    value, columns = None, []
    for j in range(len(leaves)):
        tag = perturbation.fresh()
        try:
            seeded = list(leaves)
            seeded[j] = Bundle(tag, leaves[j], 1.0)
            out = g(*treedef.build(seeded))
            if aux is not None:
                aux.read(tag)
            if j == 0:
                value = primal_of(tag, out, op)
            columns.append(flatten(tangent_of(tag, out, op))[0])
        finally:
            perturbation.retire(tag)
    return value, columns


def jacobian_f(f, argnums=0, has_aux=False):
    """Jacobian by forward mode.  The result has the output's structure, each leaf the
    input's structure of blocks of shape ``out.shape + in.shape``.  When an input is an
    array, all input directions go through one batched pass; all-scalar inputs take one
    scalar pass each.  ``has_aux``: ``f`` returns ``(output, aux)``; the result is
    ``(jacobian, aux)``."""
    return _jacobian_f(f, argnums, "jacobian_f", has_aux=has_aux)


def _jacobian_f(f, argnums, op, gradient=False, has_aux=False):
    """jacobian_f; for ``gradient`` (a scalar f, checked) each block is the derivative of
    one argument, so it takes that argument's narrow float dtype, as gradient_r's does."""
    impl = _jacobian_forward_aux if has_aux else _jacobian_forward
    return _operator(impl, f, _argnums_spec(argnums, op), op, gradient)


def _jacobian_forward_aux(f, spec, op, gradient, /, *args, **kwargs):
    aux = _Aux(f, op)               # (one per call: calls may nest)
    return _forward_jacobian(aux, spec, op, gradient, args, kwargs, aux), aux.value


def _jacobian_forward(f, spec, op, gradient, /, *args, **kwargs):
    return _forward_jacobian(f, spec, op, gradient, args, kwargs, None)


def _forward_jacobian(f, spec, op, gradient, args, kwargs, aux):
    nums, many = _argnums(spec, len(args), op, kwargs)
    leaves, treedef = _leaves_of(tuple(args[i] for i in nums), op, "argument")
    g = lambda *c: f(*_replace(args, nums, c), **kwargs)   # noqa: E731
    if gradient:
        g = _scalar_valued(g, op)
    cast = _in_dtype if gradient else (lambda b, x: b)
    if all(_shape_of(x) == () for x in leaves):
        value, columns = _scalar_columns(g, leaves, treedef, op, aux)
        out_leaves, out_def = flatten(value)
        out_shapes = [_shape_of(y) for y in out_leaves]
        return _assemble(out_def, out_shapes, treedef, [()] * len(leaves),
                         lambda i, j: cast(_unwrap0d(columns[j][i]), leaves[j]), many)
    tangents, shapes, sizes, n = _basis(leaves)
    value, t = _push(g, leaves, treedef, tangents, op, {}, aux)
    out_leaves, out_def = flatten(value)
    out_shapes = [_shape_of(y) for y in out_leaves]
    t_leaves = [_columns(_dense(c), n, s, y)
                for c, s, y in zip(flatten(t)[0], out_shapes, out_leaves)]
    starts = np.cumsum([0] + sizes)

    def block(i, j):
        cols = t_leaves[i][starts[j]:starts[j + 1]]          # (size_j,) + out_shape_i
        moved = (anp.moveaxis(cols, 0, -1) if isinstance(cols, Perturbed)
                 else np.moveaxis(cols, 0, -1))
        return cast(_reshape(moved, out_shapes[i] + shapes[j]), leaves[j])
    return _assemble(out_def, out_shapes, treedef, shapes, block, many)


def jacobian_r(f, argnums=0, has_aux=False):
    """Jacobian by reverse mode: one tape, one reverse pass per output entry.
    ``has_aux``: ``f`` returns ``(output, aux)``; the result is ``(jacobian, aux)``."""
    op = "jacobian_r"
    return _operator(_jacobian_reverse_aux if has_aux else _jacobian_reverse, f,
                     _argnums_spec(argnums, op), op)


def _jacobian_reverse_aux(f, spec, op, /, *args, **kwargs):
    aux = _Aux(f, op)
    return _reverse_jacobian(aux, spec, op, args, kwargs, aux), aux.value


def _jacobian_reverse(f, spec, op, /, *args, **kwargs):
    return _reverse_jacobian(f, spec, op, args, kwargs, None)


def _reverse_jacobian(f, spec, op, args, kwargs, aux):
    nums, many = _argnums(spec, len(args), op, kwargs)
    chosen = tuple(args[i] for i in nums)
    value, in_def, out_def, out_shapes, pull = _vjp(
        lambda *c: f(*_replace(args, nums, c), **kwargs), chosen, {}, op, "argument", aux)
    out_sizes = [int(np.prod(s)) for s in out_shapes]
    in_leaves = flatten(chosen)[0]
    in_shapes = [_shape_of(x) for x in in_leaves]
    rows = [[] for _ in in_shapes]             # rows[j]: one input-shaped row per output entry
    for i, (s, k) in enumerate(zip(out_shapes, out_sizes)):
        for e in range(k):
            ct = [np.zeros(sh) if sh else 0.0 for sh in out_shapes]
            if s:
                ct[i][np.unravel_index(e, s)] = 1.0
            else:
                ct[i] = 1.0
            for j, g in enumerate(pull(ct)):
                rows[j].append(g)
    starts = np.cumsum([0] + out_sizes)

    def block(i, j):
        chunk = rows[j][starts[i]:starts[i + 1]]
        if not chunk:                  # an empty output: no pass, an empty block
            return np.zeros(out_shapes[i] + in_shapes[j],
                            _narrow_float(in_leaves[j]) or np.float64)
        if any(isinstance(g, Perturbed) or is_tracer(g) for g in chunk):   # (staged too)
            return _reshape(anp.stack(chunk), out_shapes[i] + in_shapes[j])
        return _reshape(np.array(chunk, dtype=np.result_type(chunk[0], 0.0)),
                        out_shapes[i] + in_shapes[j])
    return _assemble(out_def, out_shapes, in_def, in_shapes, block, many)


def elementwise_grad(f, argnums=0):
    """autograd's ``elementwise_grad``: the vector-Jacobian product of ``f`` with ones of
    its output's shape, so for an elementwise ``f`` the derivative of each output entry
    in its own input entry (for other ``f``, the gradient of the sum of its output)."""
    op = "elementwise_grad"
    return _operator(_elementwise_grad, f, _argnums_spec(argnums, op), op)


def _elementwise_grad(f, spec, op, /, *args, **kwargs):
    nums, many = _argnums(spec, len(args), op, kwargs)
    chosen = tuple(args[i] for i in nums)
    value, in_def, out_def, out_shapes, pull = _vjp(
        lambda *c: f(*_replace(args, nums, c), **kwargs), chosen, {}, op, "argument")
    result = in_def.build(pull([np.ones(s) if s else 1.0 for s in out_shapes]))
    return result if many else result[0]


def hessian(f, argnums=0):
    """Hessian of a real-valued ``f``: forward mode (batched) over reverse mode."""
    return _jacobian_f(_gradient_r(f, argnums, "hessian"), argnums, "hessian")


def hvp(f, x, v, /, **kwargs):
    """Hessian-vector product H_f(x) v, forward over reverse, without forming H."""
    return _jvp(_gradient_r(f, 0, "hvp"), (x,), (v,), kwargs, "hvp")[1]


grad = gradient_r
value_and_grad = value_and_gradient_r
jacfwd = jacobian_f
jacrev = jacobian_r
