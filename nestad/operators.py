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
from numbers import Real

import numpy as np

from . import numpy as anp
from . import perturbation
from .arrays import make_bundle, make_cell
from .errors import InvalidInputError, NestadError, NonScalarOutputError
from .extraction import _checked, primal_of, tangent_of
from .reverse import backpropagate, gc_paused
from .structures import flatten, leaf_paths
from .tracer import ArrayTracer
from .values import Bundle, Perturbed, primal_value


# ---------------------------------------------------------------- checking values

def _check_number(x, op, what):
    if isinstance(x, Perturbed):
        return _checked(x, op)
    if isinstance(x, (Real, ArrayTracer)) or (isinstance(x, np.ndarray) and x.dtype.kind in 'biuf'):
        return x
    raise InvalidInputError(
        f"{op}: {what} is a {type(x).__name__} ({x!r:.60}), not a real number or array. "
        "nestad differentiates with respect to numbers, ndarrays of real numbers, and tuples, "
        "lists, dicts, namedtuples and dataclasses of them; register other containers with "
        "nestad.register_structure.")


def _leaves_of(tree, op, name):
    leaves, treedef = flatten(tree)
    for k, x in enumerate(leaves):
        if not _is_number(x):
            _check_number(x, op, f"{name}{leaf_paths(tree)[k]}")   # raises, naming the path
        elif isinstance(x, Perturbed):
            _checked(x, op)
    return leaves, treedef


def _is_number(x):
    return (isinstance(x, (Real, Perturbed, ArrayTracer))
            or (isinstance(x, np.ndarray) and x.dtype.kind in 'biuf'))


def _argnums(argnums, nargs, op):
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)
    for a in nums:
        if not isinstance(a, int) or not -nargs <= a < nargs:
            raise InvalidInputError(f"{op}: argnums={argnums!r} does not name an argument of a "
                                    f"call with {nargs} positional argument(s)")
    return nums, many


def _replace(args, nums, chosen):
    args = list(args)
    for i, v in zip(nums, chosen):
        args[i] = v
    return args


def _shape_of(x):
    """The shape of x's value; () for plain real scalars without asking numpy."""
    v = primal_value(x)
    return () if isinstance(v, Real) else np.shape(v)


def _zero_like(x):
    """The sensitivity of an input nothing depended on."""
    shape = _shape_of(x)
    return np.zeros(shape) if shape else 0.0


# ---------------------------------------------------------------- forward mode

def derivative(f):
    """``derivative(f)(x)``: df/dx at a real ``x`` by forward mode.

    ``f`` may return a number, an array, a function, or any structure of them; the
    result has the same shape, and a function in it computes the derivative of what
    ``f``'s function computes (it may be applied any number of times, anywhere)."""
    @functools.wraps(f)
    def df(x):
        _check_number(x, "derivative", "the argument")
        if _shape_of(x) != ():
            raise InvalidInputError("derivative(f)(x) takes a real number; for an array x use "
                                    "jvp, directional_derivative or jacobian_f")
        tag = perturbation.fresh()
        try:
            return tangent_of(tag, f(Bundle(tag, x, 1.0)), "derivative")
        finally:
            perturbation.retire(tag)
    return df


def jvp(f, primals, tangents):
    """``(f(*primals), J_f(primals) @ tangents)`` by one forward pass.

    ``primals`` and ``tangents`` are tuples of arguments with matching structures.
    """
    op = "jvp"
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise InvalidInputError("jvp(f, primals, tangents): primals and tangents must be tuples "
                                "of positional arguments, e.g. jvp(f, (x,), (v,))")
    p_leaves, p_def = _leaves_of(tuple(primals), op, "primals")
    t_leaves, t_def = _leaves_of(tuple(tangents), op, "tangents")
    if len(p_leaves) != len(t_leaves) or p_def.signature() != t_def.signature():
        raise InvalidInputError("jvp: tangents must have the same structure as primals")
    for p, t in zip(p_leaves, t_leaves):
        if _shape_of(p) != _shape_of(t):
            raise InvalidInputError(f"jvp: a tangent of shape {_shape_of(t)} was given "
                                    f"for a primal of shape {_shape_of(p)}")
    return _push(f, p_leaves, p_def, t_leaves, op)


def _push(f, leaves, treedef, tangents, op):
    """One forward pass: leaves perturbed by ``tangents``; (primal out, tangent out)."""
    tag = perturbation.fresh()
    try:
        args = treedef.build([make_bundle(tag, p, t) for p, t in zip(leaves, tangents)])
        out = f(*args)
        return primal_of(tag, out, op), tangent_of(tag, out, op)
    finally:
        perturbation.retire(tag)


def directional_derivative(f, x, v):
    """Derivative of ``f`` at ``x`` in direction ``v`` (same structure as ``x``)."""
    return jvp(f, (x,), (v,))[1]


def _basis(leaves):
    """Tangents for all n input directions at once: leaf j gets shape (n,) + shape_j."""
    shapes = [_shape_of(x) for x in leaves]
    sizes = [int(np.prod(s)) for s in shapes]
    n = sum(sizes)
    eye = np.eye(n)
    tangents, start = [], 0
    for s, k in zip(shapes, sizes):
        tangents.append(eye[:, start:start + k].reshape((n,) + s))
        start += k
    return tangents, shapes, sizes, n


def _columns(t, n, out_shape):
    """A batched output tangent as an (n,) + out_shape array.  An output that does not
    depend on the inputs has an unbatched zero tangent; it is spread over the batch."""
    if np.shape(primal_value(t)) == (n,) + out_shape:
        return t
    if isinstance(t, Perturbed) or np.any(np.asarray(t) != 0):
        raise NestadError(f"internal error: an output tangent of shape {np.shape(primal_value(t))} "
                          f"lost its batch axis of {n} directions; please report this")
    return np.zeros((n,) + out_shape)


def gradient_f(f, argnums=0):
    """The gradient of a real-valued ``f`` by forward mode: the Jacobian of a scalar
    function, whose blocks have the inputs' shapes (see jacobian_f for the passes)."""
    op = "gradient_f"

    def checked(*args):
        out = f(*args)
        _check_scalar(out, op)
        return out
    return functools.wraps(f)(jacobian_f(checked, argnums))


def _reshape(x, shape):
    """Reshape a (possibly perturbed) block; a 0-d block becomes a scalar."""
    if isinstance(x, Perturbed):
        return anp.reshape(x, shape)
    x = np.reshape(x, shape)
    return x[()] if shape == () else x


# ---------------------------------------------------------------- reverse mode

def _check_scalar(out, op):
    if isinstance(out, (Perturbed, Real)) and _shape_of(out) == ():
        return
    shape = getattr(primal_value(out), 'shape', None)
    described = f"{type(out).__name__}" + (f" of shape {shape}" if shape is not None else "")
    raise NonScalarOutputError(
        f"{op} needs a function that returns a real scalar, but it returned a {described}. "
        "Reduce it to a scalar (e.g. a sum or a norm), or use jacobian_r / vjp for "
        "vector-valued functions.")


def _value_and_gradient(f, argnums, args, op):
    nums, many = _argnums(argnums, len(args), op)
    leaves, treedef = _leaves_of(tuple(args[i] for i in nums), op, "argument")
    tag = perturbation.fresh()
    try:
        with gc_paused():
            cells = [make_cell(tag, x, ()) for x in leaves]
            out = f(*_replace(args, nums, treedef.build(cells)))
            _check_scalar(out, op)
            value = primal_of(tag, out, op)
            sens = backpropagate((out,), (1.0,), tag)
            grads = [_checked(sens.get(c.id), op) if c.id in sens else _zero_like(x)
                     for c, x in zip(cells, leaves)]
    finally:
        perturbation.retire(tag)
    result = treedef.build(grads)
    return value, (result if many else result[0])


def gradient_r(f, argnums=0):
    """The gradient of a real-valued ``f`` by reverse mode, with the structure of the
    chosen argument (a tuple of them when ``argnums`` is a tuple)."""
    @functools.wraps(f)
    def grad_r(*args):
        return _value_and_gradient(f, argnums, args, "gradient_r")[1]
    return grad_r


def value_and_gradient_r(f, argnums=0):
    """``(f(*args), gradient_r(f, argnums)(*args))`` from a single run."""
    @functools.wraps(f)
    def value_and_grad_r(*args):
        return _value_and_gradient(f, argnums, args, "value_and_gradient_r")
    return value_and_grad_r


def vjp(f, *primals):
    """``(f(*primals), pullback)``; ``pullback(ct)`` returns a tuple, one cotangent per
    primal.  The tape is kept by the pullback, which may be called any number of times."""
    op = "vjp"
    leaves, treedef = _leaves_of(primals, op, "primals")
    tag = perturbation.fresh()
    try:
        with gc_paused():
            cells = [make_cell(tag, x, ()) for x in leaves]
            out = f(*treedef.build(cells))
        out_leaves, out_def = flatten(out)
        value = primal_of(tag, out, op)
    finally:
        perturbation.retire(tag)

    def pullback(cotangent):
        ct_leaves, ct_def = _leaves_of(cotangent, "vjp pullback", "cotangent")
        if len(ct_leaves) != len(out_leaves) or ct_def.signature() != out_def.signature():
            raise InvalidInputError("vjp pullback: the cotangent must have the structure of f's output")
        sens = backpropagate(out_leaves, ct_leaves, tag)
        return treedef.build([sens[c.id] if c.id in sens else _zero_like(x)
                              for c, x in zip(cells, leaves)])

    return value, pullback


# ---------------------------------------------------------------- Jacobians and Hessians

def _assemble(out_def, out_shapes, in_def, in_shapes, block, many):
    """The Jacobian as the output's structure of the (chosen) input's structure of
    blocks, block(i, j) of shape out_shapes[i] + in_shapes[j]."""
    rows = []
    for i in range(len(out_shapes)):
        row = in_def.build([block(i, j) for j in range(len(in_shapes))])
        rows.append(row if many else row[0])
    return out_def.build(rows)


def _scalar_columns(g, leaves, treedef, op):
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
            if j == 0:
                value = primal_of(tag, out, op)
            columns.append(flatten(tangent_of(tag, out, op))[0])
        finally:
            perturbation.retire(tag)
    return value, columns


def jacobian_f(f, argnums=0):
    """Jacobian by forward mode.  The result has the output's structure, each leaf the
    input's structure of blocks of shape ``out.shape + in.shape``.  When an input is an
    array, all input directions go through one batched pass; all-scalar inputs take one
    scalar pass each."""
    op = "jacobian_f"

    @functools.wraps(f)
    def jac(*args):
        nums, many = _argnums(argnums, len(args), op)
        leaves, treedef = _leaves_of(tuple(args[i] for i in nums), op, "argument")
        g = lambda *c: f(*_replace(args, nums, c))   # noqa: E731
        if all(_shape_of(x) == () for x in leaves):
            value, columns = _scalar_columns(g, leaves, treedef, op)
            out_leaves, out_def = flatten(value)
            out_shapes = [_shape_of(y) for y in out_leaves]
            return _assemble(out_def, out_shapes, treedef, [()] * len(leaves),
                             lambda i, j: columns[j][i], many)
        tangents, shapes, sizes, n = _basis(leaves)
        value, t = _push(g, leaves, treedef, tangents, op)
        out_leaves, out_def = flatten(value)
        out_shapes = [_shape_of(y) for y in out_leaves]
        t_leaves = [_columns(c, n, s) for c, s in zip(flatten(t)[0], out_shapes)]
        starts = np.cumsum([0] + sizes)

        def block(i, j):
            cols = t_leaves[i][starts[j]:starts[j + 1]]          # (size_j,) + out_shape_i
            moved = anp.moveaxis(cols, 0, -1) if isinstance(cols, Perturbed) else np.moveaxis(cols, 0, -1)
            return _reshape(moved, out_shapes[i] + shapes[j])
        return _assemble(out_def, out_shapes, treedef, shapes, block, many)
    return jac


def jacobian_r(f, argnums=0):
    """Jacobian by reverse mode: one tape, one reverse pass per output entry."""
    op = "jacobian_r"

    @functools.wraps(f)
    def jac(*args):
        nums, many = _argnums(argnums, len(args), op)
        chosen = tuple(args[i] for i in nums)
        value, pullback = vjp(lambda *c: f(*_replace(args, nums, c)), *chosen)
        out_leaves, out_def = flatten(value)
        out_shapes = [_shape_of(y) for y in out_leaves]
        out_sizes = [int(np.prod(s)) for s in out_shapes]
        in_leaves, in_def = flatten(chosen)
        in_shapes = [_shape_of(x) for x in in_leaves]
        rows = [[] for _ in in_leaves]             # rows[j]: one input-shaped row per output entry
        for i, (s, k) in enumerate(zip(out_shapes, out_sizes)):
            for e in range(k):
                ct = [np.zeros(sh) if sh else 0.0 for sh in out_shapes]
                if s:
                    ct[i][np.unravel_index(e, s)] = 1.0
                else:
                    ct[i] = 1.0
                grads = flatten(pullback(out_def.build(ct)))[0]
                for j, g in enumerate(grads):
                    rows[j].append(g)
        starts = np.cumsum([0] + out_sizes)

        def block(i, j):
            chunk = rows[j][starts[i]:starts[i + 1]]
            if any(isinstance(g, Perturbed) for g in chunk):
                return _reshape(anp.stack([anp.array(g) for g in chunk]), out_shapes[i] + in_shapes[j])
            return _reshape(np.array(chunk, dtype=float), out_shapes[i] + in_shapes[j])
        return _assemble(out_def, out_shapes, in_def, in_shapes, block, many)
    return jac


def hessian(f, argnums=0):
    """Hessian of a real-valued ``f``: forward mode (batched) over reverse mode."""
    return jacobian_f(gradient_r(f, argnums), argnums)


def hvp(f, x, v):
    """Hessian-vector product H_f(x) v, forward over reverse, without forming H."""
    return jvp(gradient_r(f), (x,), (v,))[1]


grad = gradient_r
value_and_grad = value_and_gradient_r
jacfwd = jacobian_f
jacrev = jacobian_r
