"""The AD operators: forward mode (``derivative``, ``jvp``, ...) and reverse mode
(``gradient_r``, ``vjp``, ...), and the Jacobians and Hessians built from them.

Each call of an operator makes a fresh perturbation tag, wraps the inputs in
Bundles or TapeCells of that tag, runs the user's function, and reads the answer
for that tag only.  Values of enclosing runs pass through untouched (they are
constants here and keep their own perturbations), which is why all operators nest
inside each other in any order and to any depth.
"""
import functools
from numbers import Real

from . import perturbation
from .errors import EscapedPerturbationError, InvalidInputError, NonScalarOutputError
from .extraction import _checked, primal_of, tangent_of
from .reverse import backpropagate
from .structures import flatten
from .values import Bundle, Perturbed, TapeCell, next_id


# ---------------------------------------------------------------- checking values

def _check_number(x, op, what):
    if isinstance(x, Perturbed):
        _check_live(x, op)
        return x
    if isinstance(x, Real):
        return x
    raise InvalidInputError(
        f"{op}: {what} is a {type(x).__name__} ({x!r:.60}), not a real number. nestad "
        "differentiates with respect to numbers, and to tuples, lists, dicts, namedtuples and "
        "dataclasses of numbers; register other containers with nestad.register_structure.")


def _check_live(x, op):
    if not perturbation.is_live(x.tag):
        raise EscapedPerturbationError(
            f"{op}: met a perturbed value whose derivative call has already returned; it escaped "
            "through a side effect (a global, a list, an attribute) and its derivative can no "
            "longer be read correctly. Return such values from the differentiated function instead.")


def _leaves_of(tree, op, name):
    leaves, treedef, paths = flatten(tree)
    for x, p in zip(leaves, paths):
        _check_number(x, op, f"{name}{p}")
    return leaves, treedef


def _argnums(argnums, nargs, op):
    many = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if many else (argnums,)
    for a in nums:
        if not isinstance(a, int) or not -nargs <= a < nargs:
            raise InvalidInputError(f"{op}: argnums={argnums!r} does not name an argument of a "
                                    f"call with {nargs} positional argument(s)")
    return nums, many


# ---------------------------------------------------------------- forward mode

def derivative(f):
    """``derivative(f)(x)``: df/dx at a real ``x`` by forward mode.

    ``f`` may return a number, a function, or any structure of them; the result has
    the same shape, and a function in it computes the derivative of what ``f``'s
    function computes (it may be applied any number of times, anywhere)."""
    @functools.wraps(f)
    def df(x):
        _check_number(x, "derivative", "the argument")
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
    tag = perturbation.fresh()
    try:
        args = p_def.build([Bundle(tag, p, t) for p, t in zip(p_leaves, t_leaves)])
        out = f(*args)
        return primal_of(tag, out, op), tangent_of(tag, out, op)
    finally:
        perturbation.retire(tag)



def directional_derivative(f, x, v):
    """Derivative of ``f`` at ``x`` in direction ``v`` (same structure as ``x``)."""
    return jvp(f, (x,), (v,))[1]


def gradient_f(f, argnums=0):
    """The gradient of a real-valued ``f`` by forward mode: one pass per input leaf."""
    op = "gradient_f"

    @functools.wraps(f)
    def grad_f(*args):
        nums, many = _argnums(argnums, len(args), op)
        chosen = tuple(args[i] for i in nums)
        leaves, treedef = _leaves_of(chosen, op, "argument")
        grads = []
        for j in range(len(leaves)):
            tag = perturbation.fresh()
            try:
                seeded = list(leaves)
                seeded[j] = Bundle(tag, leaves[j], 1.0)
                out = f(*_replace(args, nums, treedef.build(seeded)))
                _check_scalar(out, op)
                grads.append(tangent_of(tag, out, op))
            finally:
                perturbation.retire(tag)
        result = treedef.build(grads)
        return result if many else result[0]
    return grad_f


def _replace(args, nums, chosen):
    args = list(args)
    for i, v in zip(nums, chosen):
        args[i] = v
    return args


# ---------------------------------------------------------------- reverse mode

def _check_scalar(out, op):
    if isinstance(out, Perturbed) or isinstance(out, Real):
        return
    shape = getattr(out, 'shape', None)
    described = f"{type(out).__name__}" + (f" of shape {shape}" if shape is not None else "")
    raise NonScalarOutputError(
        f"{op} needs a function that returns a real scalar, but it returned a {described}. "
        "Reduce it to a scalar (e.g. a sum or a norm), or use jacobian_r / vjp for "
        "vector-valued functions.")


def _value_and_gradient(f, argnums, args, op):
    nums, many = _argnums(argnums, len(args), op)
    chosen = tuple(args[i] for i in nums)
    leaves, treedef = _leaves_of(chosen, op, "argument")
    tag = perturbation.fresh()
    try:
        cells = [TapeCell(tag, next_id(), x, ()) for x in leaves]
        out = f(*_replace(args, nums, treedef.build(cells)))
        _check_scalar(out, op)
        value = primal_of(tag, out, op)
        sens = backpropagate((out,), (1.0,), tag)
        grads = [_checked(sens.get(c.id, 0.0), op) for c in cells]
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
        cells = [TapeCell(tag, next_id(), x, ()) for x in leaves]
        out = f(*treedef.build(cells))
        out_leaves, out_def, _ = flatten(out)
        value = primal_of(tag, out, op)
    finally:
        perturbation.retire(tag)

    def pullback(cotangent):
        ct_leaves, ct_def = _leaves_of(cotangent, "vjp pullback", "cotangent")
        if len(ct_leaves) != len(out_leaves) or ct_def.signature() != out_def.signature():
            raise InvalidInputError("vjp pullback: the cotangent must have the structure of f's output")
        sens = backpropagate(out_leaves, ct_leaves, tag)
        return treedef.build([sens.get(c.id, 0.0) for c in cells])

    return value, pullback


# ---------------------------------------------------------------- Jacobians and Hessians

def _basis(n, j):
    return [1.0 if i == j else 0.0 for i in range(n)]


def jacobian_f(f, argnums=0):
    """Jacobian by forward mode, one pass per input leaf.  The result has the output's
    structure, and each of its leaves has the (chosen) input's structure."""
    op = "jacobian_f"

    @functools.wraps(f)
    def jac(*args):
        nums, many = _argnums(argnums, len(args), op)
        chosen = tuple(args[i] for i in nums)
        leaves, treedef = _leaves_of(chosen, op, "argument")
        columns, out_def = [], None
        for j in range(len(leaves)):
            _, t = jvp(lambda *c: f(*_replace(args, nums, c)), treedef.build(leaves),
                       treedef.build(_basis(len(leaves), j)))
            col, out_def, _ = flatten(t)
            columns.append(col)
        if out_def is None:       # no input leaves: evaluate once for the output structure
            _, out_def, _ = flatten(f(*args))
        rows = []
        for i in range(out_def.n_leaves):
            row = treedef.build([columns[j][i] for j in range(len(leaves))])
            rows.append(row if many else row[0])
        return out_def.build(rows)
    return jac


def jacobian_r(f, argnums=0):
    """Jacobian by reverse mode, one reverse pass per output leaf over a single tape."""
    op = "jacobian_r"

    @functools.wraps(f)
    def jac(*args):
        nums, many = _argnums(argnums, len(args), op)
        chosen = tuple(args[i] for i in nums)
        value, pullback = vjp(lambda *c: f(*_replace(args, nums, c)), *chosen)
        _, out_def, _ = flatten(value)
        n = out_def.n_leaves
        rows = []
        for i in range(n):
            row = pullback(out_def.build(_basis(n, i)))
            rows.append(row if many else row[0])
        return out_def.build(rows)
    return jac


def hessian(f, argnums=0):
    """Hessian of a real-valued ``f``: forward mode over reverse mode."""
    return jacobian_f(gradient_r(f, argnums), argnums)


def hvp(f, x, v):
    """Hessian-vector product H_f(x) v, forward over reverse, without forming H."""
    return jvp(gradient_r(f), (x,), (v,))[1]


grad = gradient_r
value_and_grad = value_and_gradient_r
jacfwd = jacobian_f
jacrev = jacobian_r
