"""Solvers whose derivatives are exact to any order: ``linear_solve``, ``root``,
``minimize``, ``odeint``.

A solver's answer ``x(p)`` is differentiated without looking inside the solver.  For
the outermost perturbation among the parameters (found by ``bind``: a solver is a
``FunctionOp``, ``IMPLICIT`` or ``ODEINT``), ``x`` is first found from the primals (which
may carry older perturbations: the same function handles those, one run at a time), and
then

* ``linear_solve``, ``root`` and ``minimize`` are one implicit function
  (``_implicit``): ``F(x, p) = 0`` with ``F`` the residual ``A(p) x - b``, ``f(x, p)``
  or the gradient of the objective.  Forward mode solves ``J_x dx = -J_p dp``, reverse
  mode ``J_x^T w = ct`` and returns ``-w J_p``; both solves are ``linear_solve`` calls
  on values carrying the older perturbations, so they are differentiated in turn by
  the same rule (second derivatives are solves with the same operator and its
  derivative, never differentiated iterations).
* ``odeint``'s forward mode integrates the sensitivity equations with the solution,
  reverse mode the adjoint equations backwards reading the solution from its forward
  steps; both are ``odeint`` (or ``_flow_vjp``) calls, differentiated by their rules.

The numerical work at the bottom runs on plain values (numpy); inside ``nd.stage`` it
is recorded as one call that runs the solver when the program runs.
"""
import bisect
import math

import numpy as np

from . import perturbation
from .arrays import make_bundle
from .batching import batched_top, call_per_member
from .custom import forward_result, recomputing_cells
from .interpret import FORWARD, FunctionOp, bind, outermost, split
from .errors import InvalidInputError, NestadError
from .extraction import primal_of, tangent_of
from .structures import flatten, tree_map
from .tracer import StagingError, any_tracer, apply_traced, is_tracer
from .values import Perturbed, primal_value
from . import numpy as anp
from .operators import gradient_r, hvp, value_and_gradient_r, vjp
from .staging import stage


# ---------------------------------------------------------------- plain vectors

_FLOAT64 = np.dtype(np.float64)      # (`is` against it: `==` with a type costs a conversion)

def _ravel(x, what):
    """A plain structure as one float64 vector, and the function rebuilding it."""
    if x.__class__ is np.ndarray and x.dtype is _FLOAT64:      # one array: no flattening
        shape = x.shape                   # (a solver's every step goes through here)

        def unravel_array(v):
            if v.__class__ is np.ndarray:
                return v.reshape(shape)
            from . import numpy as anp
            return anp.reshape(v, shape)
        return x.flatten(), unravel_array     # (a copy: a solver may update its vector in place)
    leaves, tree = flatten(x)
    for k, a in enumerate(leaves):
        if isinstance(a, Perturbed):
            raise InvalidInputError(
                f"{what} returned a value carrying a perturbation although its arguments "
                "carried none: the function reads a value being differentiated from its "
                "closure (or a global). Pass that value as one of the solver's params, so "
                "that its derivative is the implicit one")
    arrays = [np.asarray(a, dtype=float) for a in leaves]
    shapes = [a.shape for a in arrays]
    numbers = [not isinstance(a, (np.ndarray, np.generic)) for a in leaves]
    sizes = [a.size for a in arrays]
    vec = np.concatenate([a.ravel() for a in arrays]) if arrays else np.zeros(0)

    def unravel(v):                       # (v may be traced, inside nd.stage)
        plain, out, at = v.__class__ is np.ndarray, [], 0
        for shape, size, number in zip(shapes, sizes, numbers):
            part = v[at:at + size]
            at += size
            if number:
                out.append(float(part[0]) if plain else part[0])
            else:
                out.append(part.reshape(shape) if plain else anp.reshape(part, shape))
        return tree.build(out)
    return vec, unravel


def _max_abs(v):
    return float(np.max(np.abs(v))) if v.size else 0.0


def _plain_call(name, fn, params, example, solver):
    """``fn(params)`` on plain params; inside a trace, recorded as one call that runs
    ``fn`` when the program runs (``example`` gives the output's structure).  A program's
    own transformations (``Program.jvp``, ``vjp``) run the call on perturbed values as
    ``solver(params)``, the solver with its derivative rule."""
    leaves, tree = flatten(tuple(params))
    if not any_tracer(leaves):
        return fn(params)
    op = _SolverCall(name, lambda *vals: _ravel(fn(tree.build(list(vals))), name)[0],
                     lambda *vals: _flat(solver(tree.build(list(vals)))))
    flat = apply_traced(op, leaves, {})
    _, unravel = _ravel(primal_tree(example), name)
    return unravel(flat)


def _flat(x):
    """A structure of nestad values as one vector."""
    leaves = flatten(x)[0]
    if len(leaves) == 1:                  # (no copy: staged, one operation less a call)
        a = leaves[0]
        return a if anp._shape(a) and len(anp._shape(a)) == 1 else anp.reshape(a, (-1,))
    return anp.concatenate([anp.reshape(a, (-1,)) for a in leaves])


class _SolverCall:
    """A solver run on plain values, as staged code calls it; ``lifted`` is the solver
    with its derivative rule, for the program transformations."""
    __slots__ = ('name', 'plain', 'lifted', 'jvps', 'vjps', 'jvp_joint', 'user')

    def __init__(self, name, plain, lifted):
        self.name, self.plain, self.lifted, self.user = f"nestad.{name}", plain, lifted, True
        self.jvps = self.vjps = self.jvp_joint = None

    def __repr__(self):
        return f"<solver {self.name}>"


# ---------------------------------------------------------------- implicit functions

def _implicit(solve, residual, solve_jx, params, what):
    """``x(params)`` with ``residual(x, *params) = 0``, ``solve(params)`` computing it
    from params without a perturbation; ``solve_jx(x, params, rhs, transpose)`` solves
    ``J_x z = rhs`` (``J_x^T z = rhs``) differentiably in ``x`` and ``params``."""
    leaves, tree = flatten(tuple(params))
    if not any(isinstance(a, Perturbed) for a in leaves):
        return solve(tuple(params))
    return bind(IMPLICIT, leaves, dict(solve=solve, residual=residual, solve_jx=solve_jx,
                                       tree=tree, what=what))


def _implicit_rule(top, leaves, carried, primals, params):
    from .operators import vjp
    solve, residual, solve_jx, tree, what = (
        params[k] for k in ('solve', 'residual', 'solve_jx', 'tree', 'what'))
    forward, primals = leaves[carried.index(True)].interpretation is FORWARD, list(primals)
    p = tree.build(primals)
    x = _implicit(solve, residual, solve_jx, p, what)
    chosen = [a for a, c in zip(primals, carried) if c]

    def residual_of_chosen(*ch):          # residual(x, p) as a function of run top's leaves
        it = iter(ch)
        return residual(x, *tree.build([next(it) if c else a for a, c in zip(primals, carried)]))
    if forward:
        def tangent(tangents):            # dx = -J_x^-1 J_p dp for one direction dp
            r = _push(residual_of_chosen, chosen, tangents, what)[1]
            return tree_map(lambda d: -d, solve_jx(x, p, r, False))
        tangents = [a.tangent for a, c in zip(leaves, carried) if c]
        return forward_result(top, x, _each_direction(tangent, tangents, chosen, x))

    def pullback(prims, ct):
        w = solve_jx(x, p, ct, True)
        _, pb = vjp(residual_of_chosen, *chosen)
        return [tree_map(lambda c: -c, c) for c in pb(w)]
    return recomputing_cells(top, leaves, carried, primals, x, pullback, what)


def _implicit_jet(solve, residual, solve_jx, leaves, tree, what):
    """``_implicit`` under Taylor mode (params' outermost run a jet of order K): the
    coefficients of ``x(p(t))`` order by order.  With ``x_1..x_{k-1}`` known, coefficient
    ``k`` of ``F(x(t), p(t)) = 0`` is ``J_x x_k + r_k`` where ``r_k`` is coefficient ``k``
    of ``F`` at the jet ``(x_0, .., x_{k-1}, 0)`` (``x_k`` enters coefficient ``k`` only
    through ``J_x``), so ``x_k = -J_x^-1 r_k``: K evaluations of ``F`` on jets and K
    solves with the one ``J_x`` (each a ``linear_solve``, differentiable in the older
    runs)."""
    from .taylor import coefficients, make_jet, _zero
    top, _ = outermost(leaves)
    carried, primals = split(leaves, top)
    p = tree.build(list(primals))
    x = _implicit(solve, residual, solve_jx, p, what)
    K = min(len(a.series) for a, c in zip(leaves, carried) if c)
    series = [coefficients(a, top, K) if c else None for a, c in zip(leaves, carried)]
    x_leaves, x_tree = flatten(x)
    C = [[a] for a in x_leaves]
    for k in range(1, K + 1):
        xs = x_tree.build([make_jet(top, c + [_zero(a)]) for c, a in zip(C, x_leaves)])
        ps = tree.build([make_jet(top, s[:k + 1]) if c else a
                         for a, c, s in zip(leaves, carried, series)])
        r_leaves, r_tree = flatten(residual(xs, *ps))
        r = r_tree.build([-coefficients(y, top, k)[k] for y in r_leaves])
        for c, d in zip(C, flatten(solve_jx(x, p, r, False))[0]):
            c.append(d)
    return x_tree.build([make_jet(top, c) for c in C])


IMPLICIT = FunctionOp(
    'implicit solver (linear_solve, root, minimize)',
    lambda leaves, q: _implicit(q['solve'], q['residual'], q['solve_jx'],
                                q['tree'].build(list(leaves)), q['what']),
    {'forward': _implicit_rule, 'reverse': _implicit_rule,
     'batch': lambda top, leaves, carried, primals, q: call_per_member(   # member by member
         lambda p: _implicit(q['solve'], q['residual'], q['solve_jx'], p, q['what']),
         leaves, q['tree'], top, q['what']),
     'taylor': lambda top, leaves, carried, primals, q: _implicit_jet(
         q['solve'], q['residual'], q['solve_jx'], leaves, q['tree'], q['what'])})


def _push(fn, primals, tangents, what):
    """``(fn(*primals), its tangent along tangents)`` in one forward pass (primals and
    tangents are lists of arguments: numbers, arrays or structures)."""
    leaves, tree = flatten(tuple(primals))
    t_leaves = flatten(tuple(tangents))[0]
    tag = perturbation.fresh()
    try:
        out = fn(*tree.build([make_bundle(tag, a, t) for a, t in zip(leaves, t_leaves)]))
        return primal_of(tag, out, what), tangent_of(tag, out, what)
    finally:
        perturbation.retire(tag)


def _each_direction(tangent, tangents, primals, out):
    """``tangent(tangents)`` for tangents that may carry leading batch axes (``jacobian_f``
    pushes many directions at once): one direction at a time, stacked back."""
    t_leaves, t_tree = flatten(tuple(tangents))
    p_leaves = flatten(tuple(primals))[0]
    nb = anp._nbatch(t_leaves[0], p_leaves[0])
    if nb == 0:
        return tangent(tangents)
    batch = anp._shape(t_leaves[0])[:nb]
    count = int(np.prod(batch))
    flat = [anp.reshape(t, (count,) + anp._shape(a)) for t, a in zip(t_leaves, p_leaves)]
    each = [flatten(tangent(t_tree.build([t[k] for t in flat])))[0] for k in range(count)]
    out_leaves, out_tree = flatten(out)
    return out_tree.build([
        anp.reshape(anp.stack([e[j] for e in each]) if count else np.zeros((0,) + anp._shape(o)),
                    batch + anp._shape(o))
        for j, o in enumerate(out_leaves)])


# ---------------------------------------------------------------- linear_solve

_LINEAR_METHODS = ("cg", "gmres", "direct")


def linear_solve(matvec, b, *params, method=None, symmetric=None, tol=1e-12, maxiter=None):
    """The ``x`` with ``matvec(x, *params) = b``, ``matvec`` linear in ``x`` (``x`` and
    ``b`` numbers, arrays or structures of the same shape).

    ``method``: ``"cg"`` (conjugate gradients: ``A`` symmetric positive definite),
    ``"gmres"`` (any nonsingular ``A``) or ``"direct"`` (``A``'s matrix built from
    ``n`` products, then LU); the default is ``"cg"`` when ``symmetric=True``, else
    ``"gmres"``.  ``symmetric`` says ``A^T = A`` (``"cg"`` implies it); otherwise ``A^T``
    is applied by nestad's vjp of ``matvec``.  ``tol`` bounds the residual relative to
    ``b``.  Derivatives with respect to ``b`` and ``params`` are solves with ``A^T``
    (reverse) or ``A`` (forward), in every mode and to any order."""
    if not callable(matvec):
        raise InvalidInputError(f"linear_solve(matvec, b, *params): matvec must be a function "
                                f"v -> A v, not {type(matvec).__name__}")
    if method is None:
        method = "cg" if symmetric else "gmres"
    if method not in _LINEAR_METHODS:
        raise InvalidInputError(f"linear_solve: method must be one of "
                                f"{', '.join(_LINEAR_METHODS)}; got {method!r}")
    if symmetric is None:
        symmetric = method == "cg"
    if method == "cg" and not symmetric:
        raise InvalidInputError("linear_solve: method='cg' needs a symmetric positive definite "
                                "operator, but symmetric=False was given; use method='gmres' "
                                "or method='direct'")
    return _linear_solve(matvec, None, b, tuple(params), method, bool(symmetric), tol, maxiter)


def _transposed(matvec, rmatvec, symmetric):
    """``v -> A^T v`` for ``A v = matvec(v, *p)``: given, ``A`` itself, or nestad's vjp."""
    if symmetric:
        return matvec
    if rmatvec is not None:
        return rmatvec

    def by_vjp(w, *p):
        zero = tree_map(lambda a: np.zeros(np.shape(primal_value(a))) if np.shape(primal_value(a))
                        else 0.0, w)
        return vjp(lambda v: matvec(v, *p), zero)[1](w)[0]
    return by_vjp


def _linear_solve(matvec, rmatvec, b, params, method, symmetric, tol, maxiter):
    def residual(x, b, *p):
        return _zip(lambda ax, bb: ax - bb, matvec(x, *p), b)

    def solve(bp):
        return _plain_call("linear_solve", lambda q: _solve_plain(matvec, q[0], q[1:], method,
                                                                  tol, maxiter), bp, bp[0],
                           lambda q: _linear_solve(matvec, rmatvec, q[0], tuple(q[1:]), method,
                                                   symmetric, tol, maxiter))

    def solve_jx(x, bp, rhs, transpose):
        mv, rmv = (_transposed(matvec, rmatvec, symmetric), matvec) if transpose \
            else (matvec, rmatvec)
        return _linear_solve(mv, rmv, rhs, tuple(bp[1:]), method, symmetric, tol, maxiter)
    return _implicit(solve, residual, solve_jx, (b,) + params, "linear_solve")


def _zip(fn, a, b):
    """``fn`` leaf by leaf over two structures of the same shape."""
    la, ta = flatten(a)
    lb, tb = flatten(b)
    if len(la) != len(lb) or ta.signature() != tb.signature():
        raise InvalidInputError("linear_solve: matvec(x) must return the structure of b (x and "
                                "b have the same structure)")
    return ta.build([fn(x, y) for x, y in zip(la, lb)])


def _solve_plain(matvec, b, params, method, tol, maxiter):
    bv, unravel = _ravel(b, "linear_solve's b")
    n = bv.size

    def A(v):
        out, _ = _ravel(matvec(unravel(v), *params), "linear_solve's matvec")
        if out.shape != v.shape:
            raise InvalidInputError(f"linear_solve: matvec returned {out.size} numbers for an x "
                                    f"of {n}; it must return the structure of b")
        return out
    if method == "direct":
        if isinstance(matvec, _JacobianProduct):
            M = matvec.matrix(*params)
        else:
            M = np.column_stack([A(e) for e in np.eye(n)]) if n else np.zeros((0, 0))
        try:
            x = np.linalg.solve(M, bv)
        except np.linalg.LinAlgError:
            raise NestadError(f"linear_solve (direct): the {n}x{n} operator is singular; "
                              "check matvec, or use method='gmres' for a least-squares "
                              "answer") from None
        if not np.all(np.isfinite(x)):
            raise NestadError("linear_solve (direct): the solution is not finite (the "
                              "operator or b holds inf or nan)")
        return unravel(x)
    maxiter = maxiter or max(10 * n, 100)
    x = (_cg if method == "cg" else _gmres)(A, bv, tol, maxiter)
    return unravel(x)


def _not_converged(method, k, r, b):
    return NestadError(f"linear_solve ({method}) did not converge in {k} iterations: the "
                       f"residual |A x - b| is {r:.3g} (|b| = {b:.3g}); check that the operator "
                       "is nonsingular" + (" and symmetric positive definite" if method == "cg"
                                           else "") + ", or raise maxiter or tol")


def _cg(A, b, tol, maxiter):
    x = np.zeros_like(b)
    bn = np.linalg.norm(b)
    if bn == 0:
        return x
    r = b.copy()
    p = r.copy()
    rr = r @ r
    for k in range(maxiter):
        if math.sqrt(rr) <= tol * bn:
            return x
        Ap = A(p)
        pAp = p @ Ap
        if not pAp > 0:
            raise NestadError(f"linear_solve (cg): the operator is not positive definite (p^T A p "
                              f"= {pAp:.3g} at iteration {k}); use method='gmres' or 'direct'")
        alpha = rr / pAp
        x = x + alpha * p
        r = r - alpha * Ap
        rr, rr_old = r @ r, rr
        p = r + (rr / rr_old) * p
    rn = np.linalg.norm(b - A(x))
    if rn <= tol * bn:
        return x
    raise _not_converged("cg", maxiter, rn, bn)


def _gmres(A, b, tol, maxiter, restart=60):
    n = b.size
    x = np.zeros_like(b)
    bn = np.linalg.norm(b)
    if bn == 0:
        return x
    m = min(restart, n)
    k = 0
    while k < maxiter:
        r = b - A(x)
        beta = np.linalg.norm(r)
        if beta <= tol * bn:
            return x
        V = np.zeros((m + 1, n))
        H = np.zeros((m + 1, m))
        V[0] = r / beta
        for j in range(m):
            w = A(V[j])
            k += 1
            for i in range(j + 1):            # modified Gram-Schmidt, twice for stability
                H[i, j] = V[i] @ w
                w = w - H[i, j] * V[i]
            for i in range(j + 1):
                c = V[i] @ w
                H[i, j] += c
                w = w - c * V[i]
            H[j + 1, j] = np.linalg.norm(w)
            e = np.zeros(j + 2)
            e[0] = beta
            y = np.linalg.lstsq(H[:j + 2, :j + 1], e, rcond=None)[0]
            res = np.linalg.norm(H[:j + 2, :j + 1] @ y - e)
            if H[j + 1, j] <= 1e-14 * beta or res <= tol * bn * 0.5 or j == m - 1 or k >= maxiter:
                x = x + V[:j + 1].T @ y
                break
            V[j + 1] = w / H[j + 1, j]
    rn = np.linalg.norm(b - A(x))
    if rn <= tol * bn:
        return x
    raise _not_converged("gmres", k, rn, bn)


# ---------------------------------------------------------------- root and minimize

def _linear_method(x, method):
    if method is not None:
        return method
    size = sum(int(np.prod(np.shape(a))) for a in flatten(primal_tree(x))[0])  # (a member's)
    return "direct" if size <= 200 else "gmres"


def primal_tree(x):
    """``x`` with every perturbation and trace removed (an example of its shape)."""
    def plain(a):
        a = primal_value(a)
        return a.val if is_tracer(a) else a
    return tree_map(plain, x)


def _jacobian_solver(F, symmetric, method, tol):
    """``solve_jx`` for ``_implicit``: solves with ``J_x`` of ``F(x, *p)``, its products
    by nestad's jvp (and vjp for ``J_x^T``), as a ``linear_solve`` in ``x`` and ``p`` so
    that it is differentiated in turn."""
    mv, rmv = _JacobianProduct(F, False), _JacobianProduct(F, True)

    def solve_jx(x, p, rhs, transpose):
        a, b = (rmv, mv) if transpose and not symmetric else (mv, rmv)
        return _linear_solve(a, b, rhs, (x,) + tuple(p), _linear_method(x, method), symmetric,
                             tol, None)
    return solve_jx


class _JacobianProduct:
    """``(v, x, *p) -> J_x v`` (by a jvp) or ``J_x^T v`` (by a vjp) of ``F(x, *p)``; on
    plain values ``linear_solve``'s direct method asks it for the whole matrix, which
    one forward pass with all unit directions gives."""
    __slots__ = ('F', 'transposed')

    def __init__(self, F, transposed):
        self.F, self.transposed = F, transposed

    def __call__(self, v, x, *p):
        if self.transposed:
            return vjp(lambda x: self.F(x, *p), x)[1](v)[0]
        return _push(lambda x: self.F(x, *p), [x], [v], "root")[1]

    def matrix(self, x, *p):
        xv, unravel = _ravel(x, "root")
        J = _jacobian(self.F, xv, p, unravel, xv.size)
        return J.T if self.transposed else J


def _check_function(f, name):
    if not callable(f):
        raise InvalidInputError(f"{name}(f, x0, *params): f must be a function, not "
                                f"{type(f).__name__}")


def root(f, x0, *params, tol=1e-12, maxiter=100, solver=None, linear_method=None):
    """The ``x`` near ``x0`` with ``f(x, *params) = 0`` (``x`` and ``f``'s value numbers,
    arrays or structures with as many entries).

    The default solver is Newton's method with a backtracking line search on
    ``|f|^2``, its Jacobian by nestad's forward mode; it stops when a step changes no
    entry by more than ``tol`` relative to the largest entry (near 0: by more than
    ``tol`` once ``|f|`` stops falling), and raises if it has not after ``maxiter`` steps.  ``solver(fun, x0) -> x`` replaces it: any
    function on plain values (a wrapper of ``scipy.optimize.root``, say); its answer is
    checked (``|f(x)|`` small).  Derivatives with respect to ``params`` are implicit,
    ``dx = -J_x^-1 J_p dp``, by ``linear_solve`` with ``J_x`` (``linear_method``: default
    ``"direct"`` up to 200 unknowns, else ``"gmres"``), in every mode, to any order;
    ``x0`` carries no derivative."""
    _check_function(f, "root")
    if solver is not None and not callable(solver):
        raise InvalidInputError("root: solver must be a function solver(fun, x0) -> x on plain "
                                f"values, not {type(solver).__name__}")
    per_member = _per_start_member(
        x0, params, 'root', lambda q: root(f, q[0], *q[1], tol=tol, maxiter=maxiter,
                                           solver=solver, linear_method=linear_method))
    if per_member is not None:
        return per_member[0]
    x0 = primal_tree(x0)
    _check_limits("root", tol, maxiter)

    def solve(p):
        return _plain_call("root", lambda q: _newton_root(f, x0, q, tol, maxiter, solver),
                           p, x0, implicit)

    def implicit(p):
        return _implicit(solve, f, _jacobian_solver(f, False, linear_method, tol), p, "root")
    return implicit(params)


def _per_start_member(x0, params, name, solve):
    """Under a vmap whose run ``x0`` carries (a start point per member): ``(its result,)``,
    ``solve((x0, params))`` member by member; else None."""
    every, every_tree = flatten((x0, params))
    top = batched_top(every)
    if top is None or not any(isinstance(a, Perturbed) and a.tag == top
                              for a in flatten(x0)[0]):
        return None
    return (call_per_member(solve, every, every_tree, top, name),)


def _check_limits(name, tol, maxiter):
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise InvalidInputError(f"{name}: tol must be a positive number, not {tol!r}")
    if not (isinstance(maxiter, int) and maxiter >= 1):
        raise InvalidInputError(f"{name}: maxiter must be an int >= 1, not {maxiter!r}")


def _vector_function(f, x0, params, name):
    """``f(x, *params)`` as a function of a plain vector, and x0 as a vector."""
    x0v, unravel = _ravel(x0, name)

    def F(v):
        out, _ = _ravel(f(unravel(v), *params), f"{name}'s function")
        return out
    return F, x0v, unravel


def _jacobian(f, x, params, unravel, n):
    """The Jacobian of the raveled ``f`` at the plain vector ``x``: one forward pass with
    all unit directions as a batch."""
    leaves, tree = flatten(unravel(x))
    eye, at, tangents = np.eye(n), 0, []
    for a in leaves:
        shape = np.shape(a)
        size = int(np.prod(shape))
        tangents.append(eye[:, at:at + size].reshape((n,) + shape))
        at += size
    tag = perturbation.fresh()
    try:
        args = [make_bundle(tag, a, t) for a, t in zip(leaves, tangents)]
        y = f(tree.build(args), *params)
        values = flatten(primal_of(tag, y, "root"))[0]
        out = flatten(tangent_of(tag, y, "root"))[0]
    finally:
        perturbation.retire(tag)
    cols = [np.broadcast_to(np.asarray(t, float), (n,) + np.shape(v)).reshape(n, -1)
            for t, v in zip(out, values)]
    return np.concatenate(cols, axis=1).T if cols else np.zeros((0, n))


def _newton_root(f, x0, params, tol, maxiter, solver):
    F, x, unravel = _vector_function(f, x0, params, "root")
    Fx = F(x)
    if Fx.size != x.size:
        raise InvalidInputError(f"root: f(x) has {Fx.size} entries for an x of {x.size}; a root "
                                "needs as many equations as unknowns (use minimize for least "
                                "squares)")
    start = max(1.0, _max_abs(Fx))
    if solver is not None:
        x = _ravel(solver(lambda v: unravel(F(_ravel(v, "root's solver")[0])), unravel(x)),
                   "root's solver")[0]
        _check_residual(F(x), start, "the given solver")
        return unravel(x)
    n = x.size
    for k in range(maxiter):
        if not np.all(np.isfinite(Fx)):
            raise NestadError(f"root: f(x) is not finite after {k} Newton iterations; start "
                              "closer to the root")
        if not Fx.any():
            return unravel(x)
        J = _jacobian(f, x, params, unravel, n)
        try:
            dx = np.linalg.solve(J, -Fx)
        except np.linalg.LinAlgError:
            dx = np.linalg.lstsq(J, -Fx, rcond=None)[0]
        scale = max(1.0, _max_abs(x))
        small = _max_abs(dx) <= tol * scale
        unit = _max_abs(Fx)                  # |F|^2 in units of max |F|: no over/underflow
        phi0, t = _squared(Fx, unit), 1.0
        while True:                          # backtracking on |F|^2 (Armijo)
            xn = x + t * dx
            Fn = F(xn)
            phi = _squared(Fn, unit)
            if small or phi <= (1 - 1e-4 * t) * phi0:
                break
            t *= 0.5
            if t < 1e-12:
                raise NestadError(
                    f"root: the line search found no decrease of |f| after {k} Newton "
                    f"iterations (max |f(x)| = {_max_abs(Fx):.3g}): x is near a minimum of "
                    "|f| that is not a root, or the Jacobian is singular there; start "
                    "elsewhere or pass solver=")
        x, Fx, step = xn, Fn, _max_abs(t * dx)
        # converged: a step below tol relative to x's largest entry; near x = 0, below tol
        # once |f| no longer falls fast (x is exact to rounding: a root of size 1e-15
        # needs the first, which an absolute tol alone would stop 25% away from)
        if step <= tol * _max_abs(x) or step <= tol and not phi < 0.25 * phi0:
            _check_residual(Fx, start, "Newton's method")
            return unravel(x)
    raise NestadError(f"root: Newton's method did not converge in {maxiter} iterations (the "
                      f"last step changed an entry by {step:.3g}, max |f(x)| = "
                      f"{_max_abs(Fx):.3g}); start closer to the root, or raise maxiter")


def _squared(F, unit):
    """``|F / unit|^2``, inf where ``F`` is not finite or much larger than ``unit``."""
    with np.errstate(over='ignore', invalid='ignore'):
        r = F / unit
        phi = r @ r
    return phi if math.isfinite(phi) else math.inf


def _check_residual(Fx, start, who):
    r = _max_abs(Fx)
    if not r <= 1e-8 * start:
        raise NestadError(f"root: {who} returned an x where max |f(x)| = {r:.3g} (at x0 it "
                          f"was {start:.3g}), not a root: it did not converge")


_MINIMIZE_METHODS = ("newton", "bfgs", "l-bfgs")


def minimize(f, x0, *params, method="bfgs", tol=1e-10, maxiter=1000, linear_method=None):
    """The ``x`` near ``x0`` where the real ``f(x, *params)`` is least (a local minimum;
    ``x`` a number, array or structure).

    ``method``: ``"bfgs"``, ``"l-bfgs"`` (limited memory) or ``"newton"`` (the exact
    Hessian, by nestad, with a line search), all with nestad's exact gradient; or
    ``"scipy:NAME"`` for ``scipy.optimize.minimize(method=NAME)`` fed the exact gradient
    and Hessian-vector products; or a function ``method(value_and_grad, x0) -> x`` on
    plain values (the derivative never looks inside it).  Converged when the largest
    gradient entry is at most ``tol`` (times ``max(1, |f|)``); raises otherwise after
    ``maxiter`` iterations.
    Derivatives with respect to ``params`` go through the optimality condition
    ``grad_x f(x, p) = 0``: ``dx = -H^-1 d(grad_x f)/dp dp``, in every mode, to any
    order; ``x0`` carries no derivative."""
    _check_function(f, "minimize")
    _check_limits("minimize", tol, maxiter)
    if not (callable(method) or method in _MINIMIZE_METHODS
            or isinstance(method, str) and method.startswith("scipy:")):
        raise InvalidInputError(f"minimize: method must be one of {', '.join(_MINIMIZE_METHODS)}, "
                                "'scipy:NAME' (a scipy.optimize.minimize method) or a function "
                                f"method(value_and_grad, x0) -> x; got {method!r}")
    per_member = _per_start_member(
        x0, params, 'minimize', lambda q: minimize(f, q[0], *q[1], method=method, tol=tol,
                                                   maxiter=maxiter, linear_method=linear_method))
    if per_member is not None:
        return per_member[0]
    x0 = primal_tree(x0)

    def gradient(x, *p):
        return gradient_r(f)(x, *p)

    def solve(p):
        return _plain_call("minimize", lambda q: _minimize_plain(f, x0, q, method, tol, maxiter),
                           p, x0, implicit)

    def implicit(p):
        return _implicit(solve, gradient, _jacobian_solver(gradient, True, linear_method, tol),
                         p, "minimize")
    return implicit(params)


def _staged_or_eager(traced, eager, leaves, after=8):
    """``eager`` for the first ``after`` calls, then ``traced`` through ``nd.stage``: a
    solver's many iterations pay a gradient's eager overhead (many times its arithmetic)
    once, and a solver done in a few pays no tracing.  Eager throughout where staging
    cannot hold the function or its arguments are not all real numbers and arrays."""
    if not all(isinstance(a, (float, int, np.floating, np.integer)) and not isinstance(a, bool)
               or isinstance(a, np.ndarray) and a.dtype.kind in 'fi' for a in leaves):
        return eager
    state = {'calls': 0, 'staged': None}

    def call(*args):
        state['calls'] += 1
        if state['calls'] > after and state['staged'] is not False:
            try:
                state['staged'] = state['staged'] or stage(traced)
                return state['staged'](*args)
            except StagingError:
                state['staged'] = False
        return eager(*args)
    return call


def _minimize_plain(f, x0, params, method, tol, maxiter):
    x, unravel = _ravel(x0, "minimize")

    p_leaves = flatten(tuple(params))[0]

    def fg_eager(v):
        value, g = value_and_gradient_r(f)(unravel(v), *params)
        if np.size(primal_value(value)) != 1 or isinstance(value, Perturbed):
            _ravel(value, "minimize's function")
            raise InvalidInputError("minimize: f(x, *params) must return one real number")
        return value, _ravel(g, "minimize's gradient")[0]

    def fg_traced(v):                 # the params are this solve's constants (the staged
        value, g = value_and_gradient_r(f)(unravel(v), *params)   # function is per solve):
        return value, _flat(g)        # what depends on them alone is computed when tracing
    fg_flat = _staged_or_eager(fg_traced, fg_eager, p_leaves)

    def fg(v):
        value, g = fg_flat(v)
        if value.__class__ is not float and value.__class__ is not np.float64:
            value = np.reshape(value, ())
        return float(value), g if g.__class__ is np.ndarray and g.dtype is _FLOAT64 \
            else np.asarray(g, float)

    def hessian(v):                  # the Jacobian of the gradient: one batched pass
        return _jacobian(lambda u, *p: gradient_r(f)(u, *p), v, params, unravel, v.size)
    if callable(method):                     # the user's solver, on plain values
        def value_and_grad(v):
            value, g = fg(_ravel(v, "minimize's method")[0])
            return value, unravel(g)
        x = _ravel(method(value_and_grad, unravel(x)), "minimize's method")[0]
        value, g = fg(x)
        if not _max_abs(g) <= tol * max(1.0, abs(value)):
            raise NestadError(f"minimize: the given method returned an x where max |grad f| = "
                              f"{_max_abs(g):.3g}, not a minimum to tol={tol:g}: it did not "
                              "converge (or raise tol)")
        return unravel(x)
    if method.startswith("scipy:"):
        from scipy.optimize import minimize as scipy_minimize
        name = method[len("scipy:"):]
        hessp = (lambda v, d: _ravel(hvp(lambda u: f(u, *params), unravel(v), unravel(d)),
                                     "minimize's Hessian")[0])
        takes_hessp = name.lower() in ("newton-cg", "trust-ncg", "trust-krylov", "trust-constr")
        r = scipy_minimize(fg, x, jac=True, method=name, hessp=hessp if takes_hessp else None,
                           tol=tol * max(1.0, abs(fg(x)[0])),
                           options={"maxiter": maxiter})
        value, g = fg(r.x)
        if not _max_abs(g) <= tol * max(1.0, abs(value)):
            raise NestadError(f"minimize: scipy's {name} stopped after {r.nit} iterations with "
                              f"max |grad f| = {_max_abs(g):.3g} ({r.message}); not a minimum "
                              f"to tol={tol:g}: raise maxiter or use another method")
        return unravel(r.x)
    value, g = fg(x)
    n, Hinv, memory = x.size, None, []
    for k in range(maxiter):
        if not (math.isfinite(value) and np.all(np.isfinite(g))):
            raise NestadError(f"minimize ({method}): f or its gradient is not finite after {k} "
                              "iterations; start elsewhere")
        if _max_abs(g) <= tol * max(1.0, abs(value)):
            return unravel(x)
        if method == "newton":
            H = hessian(x)
            try:
                np.linalg.cholesky(H)
                d = np.linalg.solve(H, -g)
            except np.linalg.LinAlgError:          # not convex here: shift to a descent direction
                shift = max(0.0, -np.linalg.eigvalsh(H)[0]) + 1e-6 * max(1.0, np.abs(H).max())
                d = np.linalg.solve(H + shift * np.eye(n), -g)
        elif method == "bfgs":
            d = -g if Hinv is None else -(Hinv @ g)
        else:
            d = _two_loop(g, memory)
        if not d @ g < 0:
            d = -g
        t, slope = 1.0, d @ g
        if k == 0 and method != "newton":
            t = min(1.0, 1.0 / max(1e-300, math.sqrt(g @ g)))
        while True:                                 # backtracking (Armijo)
            xn = x + t * d
            vn, gn = fg(xn)
            if math.isfinite(vn) and vn <= value + 1e-4 * t * slope:
                break
            # near the minimum f's decrease is below its rounding: a smaller gradient
            # still shows progress (Hager and Zhang's approximate Wolfe condition)
            if vn <= value + 1e-14 * abs(value) and gn @ gn < g @ g:
                break
            t *= 0.5
            if t * _max_abs(d) <= 1e-16 * max(1.0, _max_abs(x)):
                raise NestadError(
                    f"minimize ({method}): the line search found no decrease after {k} "
                    f"iterations (max |grad f| = {_max_abs(g):.3g}, f = {value:.6g}): the "
                    f"gradient is not f's, or the minimum is reached to rounding but not to "
                    f"tol={tol:g}; raise tol")
        s, y = xn - x, gn - g
        if s @ y > 1e-12 * math.sqrt((s @ s) * (y @ y)):
            if method == "bfgs":
                rho = 1.0 / (s @ y)
                if Hinv is None:
                    Hinv = np.eye(n) * ((s @ y) / (y @ y))
                V = np.eye(n) - rho * np.outer(s, y)
                Hinv = V @ Hinv @ V.T + rho * np.outer(s, s)
            else:
                memory = (memory + [(s, y)])[-10:]
        x, value, g = xn, vn, gn
    raise NestadError(f"minimize ({method}) did not converge in {maxiter} iterations (max "
                      f"|grad f| = {_max_abs(g):.3g}, f = {value:.6g}); raise maxiter or tol, or "
                      "try method='newton'")


def _two_loop(g, memory):
    """L-BFGS's direction ``-H g`` from the last pairs ``(s, y)``."""
    q, alphas = g.copy(), []
    for s, y in reversed(memory):
        a = (s @ q) / (s @ y)
        alphas.append(a)
        q = q - a * y
    if memory:
        s, y = memory[-1]
        q = q * ((s @ y) / (y @ y))
    for (s, y), a in zip(memory, reversed(alphas)):
        q = q + s * (a - (y @ q) / (s @ y))
    return -q


# ---------------------------------------------------------------- odeint

# Dormand and Prince's RK5(4)7M with its free 4th-order interpolant, as scipy's RK45.
_C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1])
_A = [np.array(a) for a in ([], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
                            [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
                            [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656])]
_B = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
_E = np.array([-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
_P = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]])


def odeint(f, y0, t, *params, rtol=1.4e-8, atol=1.4e-8, mxstep=50_000, checkpoints=None):
    """The solution of ``dy/dt = f(y, t, *params)``, ``y(t[0]) = y0``, at every time in
    ``t`` (increasing or decreasing), as scipy's and JAX's ``odeint``: an array with a
    leading axis of ``len(t)`` (for a structure ``y0``, the same structure of such
    arrays).

    Adaptive Dormand-Prince RK45 with scipy's step control and interpolant, so the values
    are ``scipy.integrate.solve_ivp(method='RK45', t_eval=t)``'s at the same ``rtol``
    and ``atol``.  Derivatives with respect to ``y0`` and ``params`` are those of the
    exact solution, to the tolerances: forward mode integrates the sensitivity
    equations with the solution, reverse mode the adjoint equations backwards over
    each interval between two times, reading the solution from its forward steps
    (recomputed from the solution at the interval's start and kept with their
    interpolants).  ``checkpoints=N`` bounds what is kept to ``N`` steps at a time: an
    interval of more steps keeps at most ``N`` step starts and recomputes the steps
    between them when the adjoint reaches them (recursively), so memory does not grow
    with the number of steps (the cost: one more forward pass per level).  Both modes
    are ``odeint`` calls themselves, so derivatives nest to any order; no derivative, of
    any order or pairing, integrates ``y`` backwards (JAX's method, unstable on
    dissipative problems; notes/solvers.md).  Raises if an interval between two times
    needs more than ``mxstep`` steps."""
    if not callable(f):
        raise InvalidInputError(f"odeint(f, y0, t, *params): f must be a function f(y, t, "
                                f"*params), not {type(f).__name__}")
    if any(isinstance(a, Perturbed) for a in flatten(t)[0]):
        raise InvalidInputError("odeint: the times t carry a derivative; odeint differentiates "
                                "with respect to y0 and params only. Pass the times as plain "
                                "numbers (or make a time scale one of the params and multiply "
                                "f by it)")
    tv = t if is_tracer(t) else np.asarray(t, dtype=float)
    if np.ndim(tv) != 1 or np.shape(tv)[0] < 1:
        raise InvalidInputError(f"odeint: t must be a 1-d array of at least one time, not shape "
                                f"{np.shape(tv)}")
    if not is_tracer(tv):
        d = np.diff(tv)
        if not (np.all(d > 0) or np.all(d < 0)) or not np.all(np.isfinite(tv)):
            raise InvalidInputError("odeint: the times t must be finite and strictly increasing "
                                    "(or strictly decreasing)")
    for name, v in (("rtol", rtol), ("atol", atol)):
        if not (isinstance(v, (int, float)) and v > 0):
            raise InvalidInputError(f"odeint: {name} must be a positive number, not {v!r}")
    if checkpoints is not None and (isinstance(checkpoints, bool) or not isinstance(
            checkpoints, int) or checkpoints < 2):
        raise InvalidInputError(f"odeint: checkpoints must be an int >= 2 (the most forward steps "
                                f"kept at a time in reverse mode) or None (keep every step), not "
                                f"{checkpoints!r}")
    return _odeint(f, y0, tv, tuple(params), (rtol, atol, mxstep, {}, checkpoints))


def _index(tree, i):
    return tree_map(lambda a: a[i], tree)


def _odeint(f, y0, t, params, opts):
    leaves, tree = flatten((y0, params))
    n_y = len(flatten(y0)[0])
    if not any(isinstance(a, Perturbed) for a in leaves):
        example = tree_map(lambda a: np.zeros((np.shape(t)[0],) + np.shape(a)), primal_tree(y0))
        return _plain_call("odeint", lambda q: _rk45(f, q[0], q[1], q[2], opts),
                           (y0, t, params), example, lambda q: _odeint(f, q[0], q[1], q[2], opts))
    return bind(ODEINT, leaves, dict(f=f, t=t, opts=opts, tree=tree, n_y=n_y))


def _odeint_rule(top, leaves, carried, primals, params):
    f, t, opts, tree, n_y = (params[k] for k in ('f', 't', 'opts', 'tree', 'n_y'))
    forward, primals = leaves[carried.index(True)].interpretation is FORWARD, list(primals)
    y0p, pp = tree.build(primals)
    steps = starts = None
    if forward or any(isinstance(a, Perturbed) for a in primals):
        ys = _odeint(f, y0p, t, pp, opts)
    else:                                     # with the state where each interval's steps start
        steps = [] if opts[4] is None and not any_tracer(primals) and not is_tracer(t) else None
        ys, starts = _kept_forward(f, y0p, t, pp, opts, steps)
    p_leaves, p_tree = flatten(pp)
    chosen_p = [a for a, c in zip(p_leaves, carried[n_y:]) if c]
    if forward:                               # the sensitivity equations, with the solution
        tangents = [a.tangent for a, c in zip(leaves, carried) if c]
        chosen = [a for a, c in zip(primals, carried) if c]
        nb = anp._nbatch(tangents[0], chosen[0])
        batch = anp._shape(tangents[0])[:nb]          # all directions in one integration
        count = int(np.prod(batch))
        if nb:
            tangents = [anp.reshape(d, (count,) + anp._shape(a)) for d, a in zip(tangents, chosen)]
        it = iter(tangents)
        lead = (count,) if nb else ()
        dy0 = flatten(y0p)[1].build([next(it) if c else np.zeros(lead + np.shape(primal_tree(a)))
                                     for a, c in zip(primals[:n_y], carried[:n_y])])
        dp = list(it)
        rhs = _field(_Sensitivity(f, carried[n_y:], p_tree), (y0p, dy0, pp, chosen_p, dp), opts)
        s = _odeint(rhs, (y0p, dy0), t, (pp, chosen_p, dp), opts)[1]
        if nb:                                # (times, count, ...) to (batch, times, ...)
            s = tree_map(lambda d: anp.reshape(anp.moveaxis(d, 0, 1),
                                               batch + anp._shape(d)[:1] + anp._shape(d)[2:]), s)
        return forward_result(top, ys, s)

    def pullback(prims, ct):                  # the adjoint equations, backwards
        adjoint = _Adjoint(f, carried[n_y:], p_tree)
        n = np.shape(primal_tree(t))[0]
        a = _index(ct, n - 1)
        gp = [_zeros(c) for c in chosen_p]
        for i in range(n - 1, 0, -1):
            start = _index(starts, i - 1) if starts is not None else (0.0, 0.0, 0.0, 0.0)
            args = (start, _index(ys, i - 1), a, gp, t[i - 1:i + 1], t[n - 1:], pp, chosen_p)
            if steps is not None and not any(isinstance(v, Perturbed) for v in flatten(args)[0]):
                a, gp = _adjoint_plain(adjoint, args, opts, True, steps)
            else:
                a, gp = _adjoint_interval(adjoint, args, opts)
            a = _zip(lambda u, v: u + v, a, _index(ct, i - 1))
        a_leaves = flatten(a)[0]
        return [c for c, k in zip(a_leaves, carried[:n_y]) if k] + list(gp)
    return recomputing_cells(top, leaves, carried, primals, ys, pullback, "odeint")


def _odeint_jet(f, leaves, tree, n_y, t, opts):
    """``odeint`` under Taylor mode (``y0`` or params' outermost run a jet of order K):
    the coefficients ``y_0..y_K`` of ``y(t; s)`` in the jet's variable ``s`` solve the
    ODE of the coefficients, ``y_j' = coefficient j of f(y_0 + y_1 s + .., t, p(s))``, a
    system of K+1 copies of ``y`` integrated as one (``_JetField``, by Taylor mode at a
    fresh tag per evaluation, so that the rules of the older runs can differentiate it)."""
    from .taylor import coefficients, make_jet
    top, _ = outermost(leaves)
    carried, _ = split(leaves, top)
    K = min(len(a.series) for a, c in zip(leaves, carried) if c)
    y0, params = tree.build(list(leaves))
    y_leaves, y_tree = flatten(y0)
    p_leaves, p_tree = flatten(params)
    columns = [coefficients(a, top, K) for a in y_leaves]
    Z0 = [[c[j] for c in columns] for j in range(K + 1)]
    p_carried = tuple(carried[n_y:])
    Q = [v for a, c in zip(p_leaves, p_carried) for v in (coefficients(a, top, K) if c else [a])]
    rhs = _JetField(f, y_tree, p_tree, p_carried, K)
    Z = _odeint(_field(rhs, (Z0, Q), opts), Z0, t, tuple(Q), opts)
    return y_tree.build([make_jet(top, [Z[j][i] for j in range(K + 1)])
                         for i in range(len(y_leaves))])


class _JetField:
    """The right-hand side of the ODE of Taylor coefficients (``_odeint_jet``): the state
    ``Z[j]`` the leaves of ``y``'s coefficient ``j``; params ``K+1`` coefficients per
    leaf that ``p_carried`` marks, else the leaf."""
    __slots__ = ('f', 'y_tree', 'p_tree', 'p_carried', 'K', 'key')

    def __init__(self, f, y_tree, p_tree, p_carried, K):
        self.f, self.y_tree, self.p_tree, self.p_carried, self.K = f, y_tree, p_tree, p_carried, K
        self.key = (_JetField, f, y_tree.signature(), p_tree.signature(), p_carried, K)

    def __eq__(self, other):
        return isinstance(other, _JetField) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __call__(self, Z, tt, *Q):
        from .taylor import _run
        K, n = self.K, len(Z[0])
        primals = list(Z[0])
        normalised = [[Z[j][i] for j in range(1, K + 1)] for i in range(n)]
        at = 0
        for c in self.p_carried:
            primals.append(Q[at])
            normalised.append(list(Q[at + 1:at + K + 1]) if c else None)
            at += K + 1 if c else 1

        def on_leaves(*ls):
            return self.f(self.y_tree.build(list(ls[:n])), tt,
                          *self.p_tree.build(list(ls[n:])))
        _, coeffs = _run(on_leaves, primals, normalised, K, "odeint", {})
        if len(coeffs) != n:
            raise InvalidInputError(f"odeint: f(y, t, *params) returned {len(coeffs)} leaves for "
                                    f"a y of {n}; it must return dy/dt, shaped like y")
        return [[c[j] for c in coeffs] for j in range(K + 1)]


ODEINT = FunctionOp(
    'odeint',
    lambda leaves, q: _odeint(q['f'], q['tree'].build(list(leaves))[0], q['t'],
                              q['tree'].build(list(leaves))[1], q['opts']),
    {'forward': _odeint_rule, 'reverse': _odeint_rule,
     'batch': lambda top, leaves, carried, primals, q: call_per_member(   # member by member
         lambda yp: _odeint(q['f'], yp[0], q['t'], yp[1], q['opts']),
         leaves, q['tree'], top, 'odeint'),
     'taylor': lambda top, leaves, carried, primals, q: _odeint_jet(
         q['f'], leaves, q['tree'], q['n_y'], q['t'], q['opts'])})


class _Augmented:
    """A right-hand side made from ``f`` for the params whose leaves ``carried`` marks
    (given apart, as ``ch``).  Equal when made alike, so that one integration's nested
    rules stage each kind once (``_field``)."""
    __slots__ = ('f', 'carried', 'p_tree', 'key')

    def __init__(self, f, carried, p_tree):
        self.f, self.carried, self.p_tree = f, tuple(carried), p_tree
        self.key = (type(self), f.key if isinstance(f, _Augmented) else f, self.carried,
                    p_tree.signature())

    def __eq__(self, other):
        return isinstance(other, _Augmented) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def f_of_chosen(self, y, tt, p, ch):
        it = iter(ch)
        return self.f(y, tt, *self.p_tree.build([next(it) if c else a for a, c in
                                                 zip(flatten(p)[0], self.carried)]))


class _Sensitivity(_Augmented):
    """``(y, s)' = (f, J_y f s + J_p f dp)``."""
    __slots__ = ()

    def __call__(self, z, tt, p, ch, dch):
        y, s = z
        return _push(lambda y, *ch: self.f_of_chosen(y, tt, p, ch), [y, *ch], [s, *dch], "odeint")


class _Adjoint(_Augmented):
    """``(y, a, g)' = (f, -a J_y f, -a J_p f)``, integrated backwards."""
    __slots__ = ()

    def __call__(self, z, tt, p, ch):
        y, a, _ = z
        fy, pull = vjp(lambda y, *ch: self.f_of_chosen(y, tt, p, ch), y, *ch)
        cts = pull(tree_map(lambda c: -c, a))     # (one negation, not one per output)
        return fy, cts[0], list(cts[1:])


class _Reading:
    """``(a, g)' = (-a J_y f, -a J_p f)`` at the given ``y`` (a flat vector: the
    stored forward solution read at ``t``), from ``_Adjoint``."""
    __slots__ = ('adjoint', 'unravel', 'key')

    def __init__(self, adjoint, y):
        leaves, tree = flatten(y)
        self.adjoint, self.unravel = adjoint, _ravel(y, "odeint")[1]
        self.key = (adjoint.key, tree.signature(), tuple(np.shape(a) for a in leaves))

    def __eq__(self, other):
        return isinstance(other, _Reading) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __call__(self, z, tt, yv, p, ch):
        return self.adjoint((self.unravel(yv), *z), tt, p, ch)[1:]


def _adjoint_interval(adjoint, args, opts):
    """``(a, g)`` at ``span[0]`` from ``(a, g)`` at ``span[1]``, ``args = (start, y_s,
    a, g, span, t_last, p, ch)``: the adjoint equations integrated backwards over one
    interval between output times, reading ``y`` from the forward steps, recomputed from
    ``start`` (the forward integration's state where its step holding ``span[0]``
    began: the same steps, so traced and eager derivatives agree).  On perturbed values
    (second derivatives whose inner derivative is reverse mode) it is ``_flow_vjp`` from
    ``y_s``, the solution at ``span[0]``, which has rules of its own."""
    leaves = flatten(args)[0]
    if any(isinstance(v, Perturbed) for v in leaves):
        _, y_s, a, gp, span, _, pp, chosen_p = args
        it = iter(chosen_p)
        L = [next(it) if c else v for v, c in zip(flatten(pp)[0], adjoint.carried)]
        return _flow_vjp(_Flat(adjoint.f, adjoint.p_tree), adjoint.carried, y_s, a, gp, L,
                         span, opts)
    staged = not any_tracer(leaves)
    return _plain_call("odeint", lambda q: _adjoint_plain(adjoint, q, opts, staged), args,
                       (args[2], args[3]), lambda q: _adjoint_interval(adjoint, q, opts))


def _adjoint_plain(adjoint, args, opts, staged, steps=None):
    """``_adjoint_interval`` on plain values; ``steps``: all the forward steps, kept;
    ``start`` None: the forward steps begin at ``span[0]`` from ``y_s``."""
    start, y_s, a, gp, span, t_last, pp, chosen_p = args
    rtol, atol, mxstep, cache, limit = opts
    t_s, t_e = (float(v) for v in np.asarray(span, dtype=float))
    yv = _ravel(y_s, "odeint's y0")[0]
    zv, z_unravel = _ravel((a, gp), "odeint")
    if not yv.size:
        return a, gp
    reading, params = _Reading(adjoint, y_s), (yv, pp, chosen_p)
    back = _StagedField(reading, cache).vector_field((a, gp), params, t_e, True) if staged \
        else None
    if back is None:
        def back(tt, v, y):
            return _ravel(reading(z_unravel(v), tt, y, pp, chosen_p), "odeint's f")[0]
    if steps is not None:
        return z_unravel(_read_back(back, steps, zv, t_e, t_s, rtol, atol, mxstep))
    f = _StagedField(adjoint.f, cache) if staged and start is None else adjoint.f
    fun = _plain_fun(f, y_s, pp, t_s)
    if start is None:
        f0 = fun(t_s, yv)
        start = (t_s, yv, f0, _initial_step(fun, t_s, yv, f0, t_e, 1.0 if t_e > t_s else -1.0,
                                            rtol, atol))
        t_last = t_e
    t0, y0, f0, h0 = start
    start = (float(t0), np.asarray(y0, dtype=float), np.asarray(f0, dtype=float), float(h0))
    zv = _adjoint_segment(fun, back, start, float(np.asarray(t_last).ravel()[0]), t_s, t_e, zv,
                          rtol, atol, mxstep, limit)
    return z_unravel(zv)


def _flow_vjp(F, mask, y_s, a, gp, L, span, opts):
    """``(a, g)`` at ``span[0]`` from ``(a, g)`` at ``span[1]`` for ``y' = F(y, t, *L)``
    (``L`` a flat list of params, ``g`` for those ``mask`` marks), ``y`` integrated
    forward from ``y_s`` at ``span[0]`` and read from its steps: ``a J + (0, g)`` with
    ``J`` the Jacobian of the flow ``(y_s, L[mask]) -> y(span[1])``, the vjp of one
    interval.

    Its rules read no ``y`` backwards either: its tangent is the same vjp for the
    sensitivity system ``(y, s)' = (F, J_y F s + J_L F dL)`` from ``(y_s, dy_s)``
    with cotangent ``(da, a)``; its reverse rule, for cotangents ``(ab, gb)``, is the
    sensitivity ``s(span[1])`` from ``(ab, gb)`` (the cotangent of ``a``) and the vjp
    of that sensitivity system with cotangent ``(0, a)`` (those of ``y_s`` and ``L``).
    Both are calls of ``_flow_vjp`` and ``odeint`` one perturbation down."""
    args = (y_s, a, list(gp), list(L), span)
    leaves, tree = flatten(args)
    if not any(isinstance(v, Perturbed) for v in leaves):
        adjoint = _Adjoint(F, mask, flatten(tuple(L))[1])

        def plain(q):
            y_s, a, gp, L, span = q
            chosen = [v for v, m in zip(L, mask) if m]
            return _adjoint_plain(adjoint, (None, y_s, a, gp, span, span, tuple(L), chosen),
                                  opts, not any_tracer(leaves))
        return _plain_call("odeint", plain, args, (a, list(gp)),
                           lambda q: _flow_vjp(F, mask, q[0], q[1], q[2], q[3], span, opts))
    return bind(FLOW_VJP, leaves, dict(F=F, mask=mask, tree=tree, opts=opts))


def _flow_vjp_rule(top, leaves, carried, primals, params):
    F, mask, tree, opts = (params[k] for k in ('F', 'mask', 'tree', 'opts'))
    forward, primals = leaves[carried.index(True)].interpretation is FORWARD, list(primals)
    y_s, a, gp, L, span = tree.build(primals)
    sizes = [len(flatten(v)[0]) for v in (y_s, a, gp, L)]
    ends = np.cumsum(sizes)
    c_y, c_a, c_g, c_L = (carried[e - k:e] for e, k in zip(ends, sizes))
    moves = any(c_y) or any(c_L)              # else linear in (a, g)
    out = _flow_vjp(F, mask, y_s, a, gp, L, span, opts)
    if forward:
        def tangent(tangents):
            it = iter(tangents)
            full = [next(it) if c else _zeros(v) for v, c in zip(primals, carried)]
            dy, da, dg, dL, _ = tree.build(full)
            if not moves:
                return _flow_vjp(F, mask, y_s, da, dg, L, span, opts)
            idx = [i for i, c in enumerate(c_L) if c]
            F2 = _Tangent(F, tuple(c_L))
            (da_s, _), dg_s = _flow_vjp(F2, tuple(mask) + (False,) * len(idx), (y_s, dy),
                                        (da, a), dg, list(L) + [dL[i] for i in idx], span, opts)
            return da_s, dg_s
        tangents = [v.tangent for v, c in zip(leaves, carried) if c]
        chosen = [v for v, c in zip(primals, carried) if c]
        return forward_result(top, out, _each_direction(tangent, tangents, chosen, out))

    def pullback(prims, ct):
        y_s, a, gp, L, span = tree.build(list(prims))
        ab, gb = ct
        both = tuple(m or c for m, c in zip(mask, c_L))
        git, dirs = iter(gb), []
        for v, m, b in zip(L, mask, both):
            d = next(git) if m else None
            if b:
                dirs.append(d if m else _zeros(v))
        F2 = _Tangent(F, both)
        L2 = list(L) + dirs
        y_b, L_b = tree_map(_zeros, y_s), [None] * len(L)
        if moves:
            (y_b, _), g_b = _flow_vjp(F2, both + (False,) * len(dirs), (y_s, ab),
                                      (tree_map(_zeros, a), a), [_zeros(d) for d in dirs], L2,
                                      span, opts)
            it = iter(g_b)
            L_b = [next(it) if b else None for b in both]
        a_b = (_index(_odeint(_field(F2, (y_s, ab, L2), opts), (y_s, ab), span, tuple(L2), opts),
                      1)[1] if any(c_a) else tree_map(_zeros, a))
        groups = (flatten(y_b)[0], flatten(a_b)[0], list(gb), L_b)
        return [c for g, cs in zip(groups, (c_y, c_a, c_g, c_L)) for c, k in zip(g, cs) if k]
    return recomputing_cells(top, leaves, carried, primals, out, pullback, "odeint")


def _flow_vjp_of(leaves, q):
    y_s, a, gp, L, span = q['tree'].build(list(leaves))
    return _flow_vjp(q['F'], q['mask'], y_s, a, gp, L, span, q['opts'])


FLOW_VJP = FunctionOp(
    'odeint (the adjoint of one interval)', _flow_vjp_of,
    {'forward': _flow_vjp_rule, 'reverse': _flow_vjp_rule,
     'batch': lambda top, leaves, carried, primals, q: call_per_member(   # member by member
         lambda b: _flow_vjp(q['F'], q['mask'], *b, q['opts']), leaves, q['tree'], top,
         'odeint'),
     'taylor': lambda top, leaves, carried, primals, q: _flow_vjp_jet(
         q['F'], q['mask'], leaves, q['tree'], q['tree'].build(list(leaves))[4], q['opts'])})


def _flow_vjp_jet(F, mask, leaves, tree, span, opts):
    """``_flow_vjp`` under Taylor mode (order K): the same vjp for the ODE of the Taylor
    coefficients (``_JetField``).  Its Jacobian is block lower triangular Toeplitz
    (coefficient k of ``y'`` depends on ``y_m`` through ``J_{k-m}``), so its adjoint with
    the cotangents in reverse order, ``(a_K, .., a_0)``, is the jet of the adjoint:
    ``a_{K-m}`` at ``span[0]`` is the adjoint's block ``m``, and coefficient ``j`` of ``g``
    the output for the params' coefficient ``K-j``."""
    from .taylor import coefficients, make_jet
    top, _ = outermost(leaves)
    carried, _ = split(leaves, top)
    K = min(len(v.series) for v, c in zip(leaves, carried) if c)
    y_s, a, gp, L, _ = tree.build(list(leaves))
    y_leaves, y_tree = flatten(y_s)
    a_leaves, a_tree = flatten(a)
    L_carried = carried[len(y_leaves) + len(a_leaves) + len(gp):][:len(L)]
    moving = tuple(c or m for c, m in zip(L_carried, mask))   # all coefficients of these
    Q, Q_mask = [], []
    for v, mv, m in zip(L, moving, mask):
        Q.extend(coefficients(v, top, K) if mv else [v])
        Q_mask.extend([m] * (K + 1 if mv else 1))
    ys = [coefficients(v, top, K) for v in y_leaves]
    As = [coefficients(v, top, K) for v in a_leaves]
    Gs = [coefficients(v, top, K) for v in gp]
    Z0 = [[c[j] for c in ys] for j in range(K + 1)]
    A_e = [[c[K - j] for c in As] for j in range(K + 1)]
    G_e = [c[K - m] for c in Gs for m in range(K + 1)]   # the chosen leaves' K+1 entries
    rhs = _JetField(F, y_tree, flatten(tuple(L))[1], moving, K)
    A_s, G_s = _flow_vjp(rhs, tuple(Q_mask), Z0, A_e, G_e, Q, span, opts)
    a_s = a_tree.build([make_jet(top, [A_s[K - j][i] for j in range(K + 1)])
                        for i in range(len(a_leaves))])
    g_s = [make_jet(top, [G_s[i * (K + 1) + K - j] for j in range(K + 1)])
           for i in range(len(gp))]
    return a_s, g_s


class _Flat:
    """``f(y, t, *p)`` as ``F(y, t, *leaves)`` of ``p``'s leaves (equal when made alike,
    for ``_StagedField``'s cache)."""
    __slots__ = ('f', 'p_tree', 'key')

    def __init__(self, f, p_tree):
        self.f, self.p_tree, self.key = f, p_tree, (_Flat, f, p_tree.signature())

    def __eq__(self, other):
        return isinstance(other, _Flat) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __call__(self, y, tt, *leaves):
        return self.f(y, tt, *self.p_tree.build(list(leaves)))


class _Tangent:
    """``(y, s)' = (F, J_y F s + J_L F dL)`` for ``F(y, t, *L)``, the directions ``dL``
    (after ``L`` among the params) for the leaves ``mask`` marks."""
    __slots__ = ('F', 'mask', 'key')

    def __init__(self, F, mask):
        self.F, self.mask, self.key = F, tuple(mask), (_Tangent, F, tuple(mask))

    def __eq__(self, other):
        return isinstance(other, _Tangent) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __call__(self, z, tt, *leaves):
        y, s = z
        n = len(self.mask)
        L, idx = list(leaves[:n]), [i for i, m in enumerate(self.mask) if m]

        def g(y, *ch):
            M = list(L)
            for i, c in zip(idx, ch):
                M[i] = c
            return self.F(y, tt, *M)
        return _push(g, [y, *[L[i] for i in idx]], [s, *leaves[n:]], "odeint")


def _adjoint_segment(fun, back, start, t_last, t_lo, t_hi, z, rtol, atol, mxstep, limit):
    """``z`` at ``t_lo`` from ``z`` at ``t_hi``: the forward steps from ``start = (t, y,
    f(t, y), first step size)`` (towards ``t_last``) until one passes ``t_hi``, kept (at
    most ``limit`` of them; beyond, at most ``limit`` step starts, every ``stride``-th,
    to recompute from), then ``z' = back(t, z, y(t))`` integrated from ``t_hi`` back to
    ``t_lo``, ``y(t)`` by the steps' interpolants."""
    direction = 1.0 if t_last > start[0] else -1.0
    steps, marks, stride = [], [], 1
    for k, (t0, y0, f0, h0, t_new, _, h, K) in enumerate(_dopri(fun, *start, t_last, rtol,
                                                                 atol)):
        if limit is not None and k % stride == 0:
            marks.append((t0, y0, f0, h0))
            if len(marks) > limit:
                marks, stride = marks[::2], 2 * stride
        if steps is not None:
            steps.append((t0, h, y0, K.T @ _P))
            if limit is not None and len(steps) > limit:
                steps = None
        if direction * (t_new - t_hi) >= 0:
            break
    if steps is not None:
        return _read_back(back, steps, z, t_hi, t_lo, rtol, atol, mxstep)
    ends = [m[0] for m in marks[1:]] + [t_hi]  # recompute between checkpoints, the last first
    for k in range(len(marks) - 1, -1, -1):
        lo = t_lo if k == 0 else marks[k][0]
        if direction * (ends[k] - lo) > 0:
            z = _adjoint_segment(fun, back, marks[k], t_last, lo, ends[k], z, rtol, atol, mxstep,
                                 limit)
    return z


def _read_back(back, steps, z, t_end, t_start, rtol, atol, mxstep):
    """``z' = back(t, z, y(t))`` integrated from ``t_end`` to ``t_start``, ``y(t)`` by
    the interpolant of the step holding ``t`` (``steps``: ``(t, h, y, Q)``, in order)."""
    direction = 1.0 if steps[0][1] > 0 else -1.0
    starts = [direction * st[0] for st in steps]
    last = len(steps) - 1

    def y_at(tt):                             # (bisect and the powers by hand: this runs at
        k = min(max(bisect.bisect_right(starts, direction * tt) - 1, 0), last)   # each stage)
        t0, h, y0, Q = steps[k]
        x = (tt - t0) / h
        x2 = x * x
        x3 = x2 * x                           # (as cumprod: the same bits as before)
        return y0 + h * (Q @ np.array((x, x2, x3, x3 * x)))
    return _integrate(lambda tt, v: back(tt, v, y_at(tt)), z, np.array([t_end, t_start]),
                      rtol, atol, mxstep)[-1]


def _kept_forward(f, y0, t, params, opts, steps):
    """``odeint``'s values on values without a perturbation, with, for each time, the
    state ``(t, y, f, first step size)`` where the step that reached it began (its
    steps appended to ``steps`` if given)."""
    def run(q):
        starts = (np.zeros(q[1].size), np.zeros((q[1].size, flat.size)),
                  np.zeros((q[1].size, flat.size)), np.zeros(q[1].size))
        return _rk45(f, q[0], q[1], q[2], opts, steps, starts), starts
    flat = _ravel(primal_tree(y0), "odeint's y0")[0]
    count = np.shape(primal_tree(t))[0]
    example = (tree_map(lambda a: np.zeros((count,) + np.shape(a)), primal_tree(y0)),
               (np.zeros(count), np.zeros((count, flat.size)), np.zeros((count, flat.size)),
                np.zeros(count)))
    return _plain_call("odeint", run, (y0, t, params), example,
                       lambda q: (_odeint(f, q[0], q[1], q[2], opts),
                                  run(tuple(primal_tree(v) for v in q))[1]))


def _field(fn, args, opts):
    """``fn``, to be integrated by the plain RK45 through ``nd.stage`` if ``args`` (what
    it will be integrated with) are plain: the sensitivity and adjoint equations'
    right-hand sides run at every stage of every step, and each is a jvp or vjp of
    ``f`` whose eager overhead is many times ``f``'s own cost."""
    leaves = flatten(args)[0]
    if any(isinstance(a, Perturbed) for a in leaves) or any_tracer(leaves):
        return fn
    return _StagedField(fn, opts[3])


class _StagedField:
    """A right-hand side ``fn(z, t, *params)`` that ``_rk45`` runs as one staged function
    of flat vectors (``vector_field``).  The staged functions are kept for the one
    ``odeint`` call that made them (``cache``: its nested rules reuse them, and values
    ``f`` reads from its closure are this call's); what staging cannot hold runs
    eagerly."""
    __slots__ = ('fn', 'cache')

    def __init__(self, fn, cache):
        self.fn, self.cache = fn, cache

    def __call__(self, *args):
        return self.fn(*args)

    def vector_field(self, y0, params, t0, varying=False):
        v0, unravel = _ravel(y0, "odeint")
        p_leaves, p_tree = flatten(tuple(params))
        y_leaves, y_tree = flatten(y0)
        key = (self.fn, y_tree.signature(), p_tree.signature(),
               tuple(np.shape(a) for a in y_leaves))
        staged = self.cache.get(key)
        if staged is None:
            fn = self.fn

            def flat(v, tt, *leaves):
                out = fn(unravel(v), tt, *p_tree.build(list(leaves)))
                return anp.concatenate([a if len(anp._shape(a)) == 1 else anp.reshape(a, (-1,))
                                        for a in flatten(out)[0]])
            staged = self.cache[key] = stage(flat)
        if staged is False:
            return None

        if varying:                           # fun(t, v, first leaf of params)
            def fun(tt, v, first):
                return staged(v, float(tt), first, *p_leaves[1:])
            check = (t0, v0, p_leaves[0])
        else:
            def fun(tt, v):
                return staged(v, float(tt), *p_leaves)
            check = (t0, v0)
        try:
            fun(*check)
        except StagingError:
            self.cache[key] = False
            return None
        return fun


def _zeros(a):
    shape = np.shape(primal_tree(a))
    return np.zeros(shape) if shape else 0.0


def _rms(x):
    return float(np.linalg.norm(x) / math.sqrt(x.size)) if x.size else 0.0


def _rk45(f, y0, t, params, opts, steps=None, starts=None):
    t = np.asarray(t, dtype=float)
    out = _integrate(_plain_fun(f, y0, params, t[0]), _ravel(y0, "odeint's y0")[0], t,
                     *opts[:3], steps, starts)
    leaves, tree = flatten(y0)
    parts, at = [], 0
    for a in leaves:
        shape = np.shape(a)
        size = int(np.prod(shape))
        parts.append(out[:, at:at + size].reshape((t.size,) + shape))
        at += size
    return tree.build(parts)


def _plain_fun(f, y0, params, t0):
    """``f`` as a function ``(t, v)`` of plain vectors (staged if ``f`` is a
    ``_StagedField``)."""
    y, unravel = _ravel(y0, "odeint's y0")
    n = y.size
    fun = f.vector_field(y0, params, t0) if isinstance(f, _StagedField) and n else None
    if fun is None:
        def fun(tt, v):
            out = _ravel(f(unravel(v), tt, *params), "odeint's f")[0]
            if out.shape != v.shape:
                raise InvalidInputError(f"odeint: f(y, t, *params) returned {out.size} numbers "
                                        f"for a y of {n}; it must return dy/dt, shaped like y")
            return out
    return fun


def _integrate(fun, y, t, rtol, atol, mxstep, steps=None, starts=None):
    """The solution at the times ``t`` (rows), interpolated in the steps (appended to
    ``steps`` as ``(t, h, y, Q)`` if given, ``Q`` the interpolant's coefficients; and
    in ``starts``, arrays of times, states, slopes and first step sizes, the state
    where the step that reached each time began)."""
    n, count = y.size, t.size
    out = np.empty((count, n))
    out[0] = y
    if count > 1 and n:
        fy = fun(t[0], y)
        h_abs = _initial_step(fun, t[0], y, fy, t[-1], 1.0 if t[-1] > t[0] else -1.0, rtol,
                              atol)
        direction = 1.0 if t[-1] > t[0] else -1.0
        j, count_steps = 1, 0
        if starts is not None:
            for part, v in zip(starts, (t[0], y, fy, h_abs)):
                part[0] = v
        for t_now, y, fy, h_first, t_new, _, h, K in _dopri(fun, t[0], y, fy, h_abs, t[-1],
                                                             rtol, atol):
            count_steps += 1
            Q = K.T @ _P if direction * (t[j] - t_new) <= 0 or steps is not None else None
            if steps is not None:
                steps.append((t_now, h, y, Q))
            while j < count and direction * (t[j] - t_new) <= 0:
                x = (t[j] - t_now) / h
                out[j] = y + h * (Q @ np.cumprod(np.full(4, x)))
                if starts is not None:
                    for part, v in zip(starts, (t_now, y, fy, h_first)):
                        part[j] = v
                j += 1
                count_steps = 0
            if count_steps > mxstep:
                raise NestadError(f"odeint: more than mxstep={mxstep} steps between t = "
                                  f"{t[j - 1]:.6g} and {t[j]:.6g} (reached t = {t_new:.6g}, step "
                                  f"{abs(h):.3g}); the equation may be stiff: loosen rtol/atol "
                                  "or raise mxstep")
    return out


def _dopri(fun, t_now, y, fy, h_abs, t_end, rtol, atol):
    """The accepted steps from ``t_now`` to ``t_end`` (scipy's RK45._step_impl), each
    ``(t, y, f(t, y), the step size tried first, t_new, y_new, h, K)``; ``K`` is
    overwritten by the next step."""
    direction = 1.0 if t_end > t_now else -1.0
    K = np.empty((7, y.size))
    while direction * (t_end - t_now) > 0:
        min_step = 10 * abs(np.nextafter(t_now, direction * np.inf) - t_now)
        h_abs = h_first = max(h_abs, min_step)
        rejected = False
        while True:
            if h_abs < min_step:
                raise NestadError(f"odeint: the step size fell below {min_step:.3g} at t = "
                                  f"{t_now:.6g}: the equation is stiff or its solution "
                                  "blows up there; loosen rtol/atol or check f")
            t_new = t_now + h_abs * direction
            if direction * (t_new - t_end) > 0:
                t_new = t_end
            h = t_new - t_now
            h_abs = abs(h)
            K[0] = fy
            for s in range(1, 6):
                K[s] = fun(t_now + _C[s] * h, y + h * (K[:s].T @ _A[s]))
            y_new = y + h * (K[:6].T @ _B)
            K[6] = f_new = fun(t_new, y_new)
            scale = atol + np.maximum(np.abs(y), np.abs(y_new)) * rtol
            err = _rms((K.T @ _E) * h / scale)
            if not math.isfinite(err):
                raise NestadError(f"odeint: f is not finite near t = {t_now:.6g}; check f "
                                  "and y0")
            if err < 1:
                factor = 10.0 if err == 0 else min(10.0, 0.9 * err ** -0.2)
                h_abs *= min(1.0, factor) if rejected else factor
                break
            h_abs *= max(0.2, 0.9 * err ** -0.2)
            rejected = True
        yield t_now, y, fy, h_first, t_new, y_new, h, K
        t_now, y, fy = t_new, y_new, f_new


def _initial_step(fun, t0, y0, f0, t_end, direction, rtol, atol):
    """scipy's select_initial_step (Hairer, Norsett and Wanner II.4) for order 4."""
    span = abs(t_end - t0)
    scale = atol + np.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = min(h0, span)
    f1 = fun(t0 + h0 * direction, y0 + h0 * direction * f0)
    d2 = _rms((f1 - f0) / scale) / h0
    h1 = max(1e-6, h0 * 1e-3) if d1 <= 1e-15 and d2 <= 1e-15 else (0.01 / max(d1, d2)) ** 0.2
    return min(100 * h0, h1, span)
