"""``while_loop``: a loop that stages as a loop, whatever its trip count.

``while_loop(cond, body, state)`` is ``while cond(state): state = body(state)``.
Eagerly it is exactly that Python loop, differentiated by overloading like any other.
Traced, a Python loop would be unrolled and its trip count fixed by guards (one
program per trip count); ``while_loop`` records one equation holding the condition
and the body as sub-programs, and staged code runs a real ``while``.

Derivatives peel the outermost perturbation among the state's leaves, as lifting
does, and end in a plain loop once no perturbation is left:

* forward (a Bundle of run ``t``): the loop runs on ``(state, tangent)``: the
  condition reads the primal state, the body maps the tangent by its own jvp;
* reverse (a TapeCell of run ``t``): the loop runs on the state and one tangent per
  scalar it is differentiated with respect to (a batched tangent for arrays), which
  gives the Jacobian of the final state; each final leaf is a tape cell whose partials
  are its blocks.  This costs a forward pass per input direction, so it suits the small
  states of solvers and simulations; it keeps no per-iteration tape.  With many input
  scalars the adjoint rule runs instead (``loops``: the body's vjp backward over stored
  iterates, a constant times the forward loop).

The state is a structure of numbers and arrays whose shapes and dtypes the body
keeps.  Everything differentiated must be in the state: the body and the condition
may read constants and traced values from their closure, but not values that carry a
perturbation (the error says so).  Inside the body and the condition, choose values
with ``nestad.where``; a Python ``if`` on a traced value is refused there, since the
branch could differ from one iteration to the next.
"""
import numpy as np

from .. import perturbation
from ..arrays import VJP, make_bundle, make_cell
from ..errors import InvalidInputError
from ..extraction import primal_of, tangent_of
from ..interpret import FunctionOp, bind
from ..structures import flatten
from ..tracer import Eqn, StagingError, Trace, active, is_tracer, recording, resolve
from .. import batching
from ..batching import while_batched
from ..values import Batched, Bundle, Perturbed, primal_value
from .program import Program, depends, simplify


# The options of a loop's reverse rule, carried as attributes of its body function (and
# of the bodies of the loops derived from it) and as parameters of its WHILE equation.
OPTIONS = ('checkpoints', 'known_trips')


def options(body_f):
    return {k: getattr(body_f, k) for k in OPTIONS if getattr(body_f, k, None) is not None}


def with_options(fn, opts):
    for k, v in opts.items():
        if v is not None:
            setattr(fn, k, v)
    return fn


# The loop transforms of loops.py, which is built on this module (it runs loops with
# ``_loop``), filled at its import: 'use_adjoint' and 'reverse' (the adjoint rule of
# reverse mode), 'eager_checkpointed', 'closure_converted'.
LOOP_TRANSFORMS = {}


def while_loop(cond, body, state, checkpoints=None):
    """Repeat ``state = body(state)`` while ``cond(state)``; return the final state.
    ``checkpoints=N``: reverse mode keeps at most N states of the loop and recomputes the
    others (``nestad.revolve``'s binomial schedule); None keeps every iterate."""
    from ..revolve import check_checkpoints
    checkpoints = check_checkpoints("while_loop", checkpoints)
    for name, fn in (('cond', cond), ('body', body)):
        if not callable(fn):
            raise InvalidInputError(f"while_loop(cond, body, state): {name} must be a function "
                                    f"of the state, not {type(fn).__name__} ({fn!r:.40})")
    leaves, tree = flatten(state)
    for k, x in enumerate(leaves):
        if not _is_state_leaf(x):
            raise InvalidInputError(
                f"while_loop: state leaf {k} is a {type(x).__name__}; the state must be "
                "numbers, arrays, or structures of them")
    if active() is None and not any(is_tracer(_value(x)) for x in leaves):
        if checkpoints is not None:                 # eager reverse mode, checkpointed
            out = LOOP_TRANSFORMS['eager_checkpointed'](cond, body, state, checkpoints,
                                                        getattr(body, 'known_trips', None))
            if out is not None:
                return out
        return _python_loop(cond, body, state, InvalidInputError)   # eager: Python's loop

    def cond_flat(ls):
        return cond(tree.build(ls))

    def body_flat(ls):
        new = body(tree.build(ls))
        out, out_tree = flatten(new)
        if out_tree.signature() != tree.signature():
            raise StagingError(_structure_changed(state, new))
        return out
    with_options(body_flat, dict(checkpoints=checkpoints,
                                 known_trips=getattr(body, 'known_trips', None)))
    try:
        return tree.build(_loop(cond_flat, body_flat, leaves))
    except _Unroll:
        # The body reads, from its closure, a value that an enclosing gradient_r
        # differentiates: found in its closure cells, the value becomes loop state
        # (loops.closure_converted); else its tape cells cannot become loop state, so
        # the loop runs as Python's (unrolled, the program fixed to this trip count).
        out = LOOP_TRANSFORMS['closure_converted'](cond, body, state, options(body_flat))
        if out is not None:
            return out
        return _python_loop(cond, body, state, StagingError)


def _python_loop(cond, body, state, error):
    """Python's loop, checking after each step that the body kept the state's structure,
    shapes and dtypes (as a staged loop must: the same code behaves the same staged)."""
    first, quick = state, _quick_key(state)
    while True:
        c = cond(state)
        if primal_value(c).__class__ is Batched:         # vmap: until every member is done
            return while_batched(cond, body, state, c)
        if not c:
            return state
        new = body(state)
        if quick is None or _quick_key(new) != quick:     # (the full check when not sure)
            _check_step(first, new, error)
        state = new


def _check_step(first, new, error):
    leaves, tree = flatten(first)
    out, out_tree = flatten(new)
    if out_tree.signature() != tree.signature():
        raise error(_structure_changed(first, new))
    for k, (x, y) in enumerate(zip(leaves, out)):
        (shape, dtype), got = _leaf_aval(x), _leaf_aval(y)
        if got != (shape, dtype):
            raise error(_leaf_changed(k, shape, dtype, *got))


def _quick_key(state):
    """A cheap summary of a state that is one leaf or a flat tuple or list of leaves
    (equal summaries: the same structure, shapes and dtypes), else None.  The check of
    each eager step costs a fraction of the step, not fifteen times it."""
    if state.__class__ is tuple or state.__class__ is list:
        key = [state.__class__, len(state)]
        for x in state:
            k = _quick_leaf(x)
            if k is None:
                return None
            key.append(k)
        return key
    k = _quick_leaf(state)
    return None if k is None else [k]


def _quick_leaf(x):
    while isinstance(x, Perturbed):
        x = x.primal
    cls = x.__class__
    if cls is float or cls is int or cls is bool:
        return cls
    if cls is np.ndarray:
        return (x.shape, x.dtype)
    return x.dtype if isinstance(x, np.generic) else None


def _leaf_aval(x):
    v = primal_value(x)
    if v.__class__ is Batched:      # a member's (a leaf may become batched as vmap's loop runs)
        return tuple(v.shape), np.dtype(v.dtype)
    return _aval(v.var if is_tracer(v) else v)


def _structure_changed(before, after):
    from ..structures import describe
    return (f"while_loop: the body must return a state of the same structure as it was "
            f"given, {describe(before)}, but it returned {describe(after)} (* marks a leaf)")


def _leaf_changed(k, shape, dtype, new_shape, new_dtype):
    return (f"while_loop: the body turns state leaf {k} from {dtype}{list(shape)} into "
            f"{new_dtype}{list(new_shape)}; a loop's state keeps its shapes and dtypes (start a "
            "float as 0.0, not 0)")


class _Unroll(Exception):
    """A loop body's closure carries a reverse-mode perturbation (see while_loop)."""



def _value(x):
    """The plain value (or tracer) under every perturbation and batch of ``x``."""
    while isinstance(x, Perturbed):
        x = x.primal
    return x


def _is_state_leaf(x):
    v = _value(x)
    return isinstance(v, (int, float, bool, np.number, np.bool_, np.ndarray)) or is_tracer(v)


def _is_float(x):
    v = _value(x)
    return is_tracer(v) and v.dtype.kind == 'f' or \
        isinstance(v, (float, np.floating)) or (isinstance(v, np.ndarray) and v.dtype.kind == 'f')


# ---------------------------------------------------------------- peeling perturbations

def _constant_int(k, x):
    """State leaf x as a plain integer if it is an integer carrying only zero derivatives
    (``where(c, 1, x)`` choosing the 1); an integer with a derivative is refused: its
    tangent cannot be loop state of its own dtype."""
    if not isinstance(x, Perturbed) or _is_float(x):
        return x
    y = x
    while isinstance(y, Perturbed):
        parts = [y.tangent] if isinstance(y, Bundle) else [d for _, d in y.partials]
        if not all(_zero_const(d) for d in parts):
            raise InvalidInputError(
                f"while_loop: state leaf {k} is an integer that carries a derivative (as "
                "where(c, 1, x) gives); start it as a float (1.0, not 1): a loop's state keeps "
                "its dtypes")
        y = y.primal
    return y


def _loop(cond_f, body_f, leaves):
    """The final state's leaves, for flat leaves that may carry perturbations."""
    leaves = [_constant_int(k, x) for k, x in enumerate(leaves)]
    top = max((x.tag for x in leaves if isinstance(x, Perturbed)), default=-1)
    # The body may read values of later runs from its closure: the dispatch must start
    # with the outermost run of all, so one body step (traced, then dropped as dead code)
    # shows which runs its results carry.
    outer = max((o for o in body_f(list(leaves)) if isinstance(o, Perturbed)),
                key=lambda o: o.tag, default=None)
    if outer is not None and outer.tag > top:
        return _loop(cond_f, body_f, _carry(outer, leaves))
    return bind(LOOP, leaves, dict(cond=cond_f, body=body_f))


def _forward(top, leaves, carried, primals, params):
    """The loop on the state and its tangents."""
    cond_f, body_f, primals = params['cond'], params['body'], list(primals)
    slots = [k for k, x in enumerate(leaves) if _is_float(x)]
    tangents = _instantiate([leaves[k].tangent if carried[k] else None for k in slots],
                            [primals[k] for k in slots])
    # The body runs on Bundles of ``top`` itself: a value of run ``top`` it reads
    # from its closure then adds its own tangent, by the chain rule.
    outs, (touts,) = _loop_jvp(cond_f, body_f, primals, slots, [tangents], tags=[top])
    tout = dict(zip(slots, touts))
    return [make_bundle(top, o, tout[k]) if k in tout else o for k, o in enumerate(outs)]


def _taylor(top, leaves, carried, primals, params):
    """Taylor mode: the loop on the state and its K normalised coefficients per float leaf.
    The body runs on jets of run ``top`` itself (a value of that run it reads from its
    closure joins by the body's own Taylor arithmetic), the condition on the primal state.
    (Unrolled into the trace instead, the program grew with the trip count: quadratically
    in K for the particle's 100 steps.)"""
    from ..taylor import coefficients, make_jet
    cond_f, body_f, primals = params['cond'], params['body'], list(primals)
    n = len(primals)
    K = min(len(x.series) for x, c in zip(leaves, carried) if c)
    slots = [k for k, x in enumerate(leaves) if _is_float(x)]
    coefs = []
    for k in slots:
        like = primals[k]
        coefs += [_like(c, like) for c in leaves[k].series[:K]] if carried[k] else [_like(0.0, like)] * K

    def cond_aug(ls):
        return cond_f(ls[:n])

    def body_aug(ls):
        state = list(ls[:n])
        for j, k in enumerate(slots):
            state[k] = make_jet(top, [ls[k], *ls[n + j * K:n + (j + 1) * K]])
        res = body_f(state)
        out, new = [primal_of(top, r, "while_loop") for r in res], []
        for j, k in enumerate(slots):
            c = coefficients(res[k], top, K)
            new += [_like(cj, ls[n + j * K + i]) for i, cj in enumerate(c[1:])]
        return out + new
    body_aug.reuses_tag = True          # (as _loop_jvp's with tags: no adjoint rule inside)
    with_options(body_aug, options(body_f))
    res = _loop(cond_aug, body_aug, primals + coefs)
    outs = list(res[:n])
    for j, k in enumerate(slots):
        outs[k] = make_jet(top, [outs[k], *res[n + j * K:n + (j + 1) * K]])
    return outs


def _loop_batched(top, leaves, carried, primals, params):
    """vmap of a loop: one loop on the stacked members, while some member's condition
    holds; a member whose condition is false keeps its state (JAX's semantics).  Every
    leaf is stacked, since the body may make any of them differ between members."""
    cond_f, body_f, anp = params['cond'], params['body'], batching.ops
    size = next(np.shape(x.primal)[0] for x, c in zip(leaves, carried) if c)
    stacked = [x.primal if c else anp.broadcast_to(anp.expand_dims(x, 0), (size,) + np.shape(x))
               for x, c in zip(leaves, carried)]

    def batched(ls):
        return [Batched(top, x) for x in ls]

    def members(c):             # a condition as the stacked bools of run ``top``
        c = primal_value(c)
        return c.primal if c.__class__ is Batched and c.tag == top else c

    def cond_any(ls):
        c = members(cond_f(batched(ls)))
        return anp.max(anp.where(c, 1.0, 0.0)) > 0.5 if np.ndim(c) else c

    def body_masked(ls):
        state = batched(ls)
        c = cond_f(state)
        return [anp.where(c, new, old).primal for new, old in zip(body_f(state), state)]
    with_options(body_masked, options(body_f))
    return batched(_loop(cond_any, body_masked, stacked))


def _carry(x, leaves):
    """``leaves`` made to carry the run of ``x``, a value the body reads from its
    closure: for a forward run, with zero tangents (the forward rule then takes in the
    closure's tangent by the chain rule), for a jet with zero coefficients (likewise);
    a reverse run's tape cells cannot be made
    loop state, so the loop is unrolled instead (see while_loop)."""
    from ..taylor import Jet, make_jet
    if isinstance(x, Jet):          # zero coefficients of its order
        return [make_jet(x.tag, [leaf] + [_like(0.0, leaf)] * len(x.series)) if _is_float(leaf) else leaf
                for leaf in leaves]
    if not isinstance(x, Bundle):
        raise _Unroll()
    p, d = primal_value(x.primal), primal_value(x.tangent)
    batch = np.shape(d)[:np.ndim(d) - np.ndim(p)]

    def zero(leaf):
        shape = batch + np.shape(primal_value(leaf))
        return np.zeros(shape, _float_dtype(leaf)) if shape else 0.0
    return [make_bundle(x.tag, leaf, zero(leaf)) if _is_float(leaf) else leaf for leaf in leaves]


def _float_dtype(p):
    """The dtype of a float leaf's tangents: its own (float32 stays float32)."""
    return getattr(primal_value(p), 'dtype', None) or np.dtype(float)


def _in_dtype_of(t, p):
    """Tangent t of leaf p in p's dtype: the loop's state keeps its dtypes, and the body
    gives each tangent its primal's dtype (a float64 tangent of a float32 leaf would
    change dtype in the first iteration)."""
    dt = getattr(primal_value(p), 'dtype', None)
    td = getattr(primal_value(t), 'dtype', None)
    if dt is None or td is None or td == dt:
        return t
    if t.__class__ is np.ndarray:
        return t.astype(dt)
    from .. import numpy as anp
    return anp.astype(t, dt)


def _instantiate(tangents, primals):
    """Zero tangents (with the batch axes of the given ones) for float leaves that do
    not carry the run: the body may make them depend on it.  Every tangent in its leaf's
    dtype."""
    t0, p0 = next((t, p) for t, p in zip(tangents, primals) if t is not None)
    batch = np.shape(primal_value(t0))[:np.ndim(primal_value(t0)) - np.ndim(primal_value(p0))]

    def zero(p):
        shape = batch + np.shape(primal_value(p))
        return np.zeros(shape, _float_dtype(p)) if shape else 0.0
    return [_in_dtype_of(t, p) if t is not None else zero(p) for t, p in zip(tangents, primals)]


def _loop_jvp(cond_f, body_f, primals, slots, directions, tags=None):
    """Run the loop on ``primals`` and, for each direction, the tangents of the float
    leaves ``slots``.  Each direction gets its own tag inside the body (a fresh one
    unless ``tags`` are given), so the body's primal arithmetic, the same in every
    direction, is recorded once (shared by CSE).  Only the slots whose tangent can be
    nonzero (``_active``) are carried through the loop; the others stay zero."""
    n = len(primals)
    active = _active(body_f, primals, slots, directions, None if tags is None else tags[0])
    m = len(active)

    def cond_aug(ls):
        return cond_f(ls[:n])

    def body_aug(ls):
        state = ls[:n]
        out = None
        new_dirs = []
        for d in range(len(directions)):
            tag = perturbation.fresh() if tags is None else tags[d]
            try:
                ts = ls[n + d * m:n + (d + 1) * m]
                args = list(state)
                for j, t in zip(active, ts):
                    args[slots[j]] = make_bundle(tag, state[slots[j]], t)
                res = body_f(args)
                if out is None:
                    out = [primal_of(tag, r, "while_loop") for r in res]
                new_dirs.extend(_like(tangent_of(tag, res[slots[j]], "while_loop"), t)
                                for j, t in zip(active, ts))
            finally:
                if tags is None:
                    perturbation.retire(tag)
        return out + new_dirs

    # A body run under an older run's own tag (``tags``) cannot take the adjoint rule
    # (loops.use_adjoint): its vjp's newer tag would sit inside that run's Bundles.
    body_aug.reuses_tag = tags is not None or getattr(body_f, 'reuses_tag', False)
    with_options(body_aug, options(body_f))
    flat = list(primals) + [ts[j] for ts in directions for j in active]
    res = _loop(cond_aug, body_aug, flat)
    touts = []
    for d, ts in enumerate(directions):
        got = dict(zip(active, res[n + d * m:n + (d + 1) * m]))
        touts.append([got[j] if j in got else t for j, t in enumerate(ts)])
    return res[:n], touts


def _active(body_f, primals, slots, directions, tag):
    """The slots whose tangent can become nonzero in some iteration: those seeded
    nonzero, closed under one body step (a fixed point; each step is traced with
    tracers as tangents, so dependence is structural, and dropped as dead code)."""
    trace = active()
    active_set = {j for ts in directions for j, t in enumerate(ts) if not _zero_const(t)}
    while True:
        t = perturbation.fresh() if tag is None else tag
        try:
            args = list(primals)
            for j in active_set:
                k = slots[j]
                args[k] = make_bundle(t, primals[k], trace.new_tracer(
                    np.ones(np.shape(primal_value(directions[0][j])))
                    if np.ndim(primal_value(directions[0][j])) else 1.0))
            res = body_f(args)
            grown = {j for j, k in enumerate(slots)
                     if not _zero_const(tangent_of(t, res[k], "while_loop"))}
        finally:
            if tag is None:
                perturbation.retire(t)
        if grown <= active_set:
            return sorted(active_set)
        active_set |= grown


def _zero_const(t):
    """A tangent that is a plain zero (a number or array, not traced or perturbed)."""
    if isinstance(t, Perturbed) or is_tracer(t):
        return False
    return not np.any(t)


def _like(t, like):
    """A tangent the body left as a plain zero, given the shape and dtype its slot has."""
    shape = np.shape(primal_value(like))
    if shape and not np.shape(primal_value(t)):
        return np.zeros(shape, _float_dtype(like)) + t
    return _in_dtype_of(t, like)


def _reverse(top, leaves, carried, primals, params):
    """Reverse mode: the Jacobian of the final state by forward directions, then one
    tape cell per float output leaf with the Jacobian's blocks as partials; or the
    adjoint rule where it is cheaper (``loops``: many input scalars)."""
    cond_f, body_f, primals = params['cond'], params['body'], list(primals)
    slots = [k for k, x in enumerate(leaves) if _is_float(x)]
    if LOOP_TRANSFORMS['use_adjoint'](primals, carried, slots, body_f):
        return LOOP_TRANSFORMS['reverse'](cond_f, body_f, leaves, primals, carried, slots, top)
    inputs = [k for k in slots if carried[k]]
    if all(np.ndim(primal_value(primals[k])) == 0 for k in slots):
        directions = [[1.0 if k == i else 0.0 for k in slots] for i in inputs]
        outs, touts = _loop_jvp(cond_f, body_f, primals, slots, directions)
        cells = list(outs)
        for j, k in enumerate(slots):
            partials = tuple((leaves[i], touts[d][j]) for d, i in enumerate(inputs))
            cells[k] = make_cell(top, outs[k], partials)
        return cells
    # Arrays: one batched direction set (the identity over every input element).
    sizes = [int(np.prod(np.shape(primal_value(primals[i])))) for i in inputs]
    total = sum(sizes)
    eye = np.eye(total)
    seeds, start = {}, 0
    for i, s in zip(inputs, sizes):
        seeds[i] = eye[:, start:start + s].reshape((total,) + np.shape(primal_value(primals[i]))) \
            .astype(_float_dtype(primals[i]))
        start += s
    tangents = [seeds.get(k) for k in slots]
    tangents = [t if t is not None else
                np.zeros((total,) + np.shape(primal_value(primals[k])), _float_dtype(primals[k]))
                for t, k in zip(tangents, slots)]
    outs, (touts,) = _loop_jvp(cond_f, body_f, primals, slots, [tangents])
    cells = list(outs)
    for j, k in enumerate(slots):
        partials, start = [], 0
        for i, s in zip(inputs, sizes):
            block = touts[j][start:start + s]            # (size_i,) + out shape
            partials.append((leaves[i], VJP(_block_vjp, (block,), outs[k],
                                            dict(in_shape=np.shape(primal_value(primals[i]))))))
            start += s
        cells[k] = make_cell(top, outs[k], tuple(partials))
    return cells


def _block_vjp(g, block, out, in_shape):
    """sum over the output's axes of block * g, shaped like the input."""
    from .. import numpy as anp
    nout = np.ndim(primal_value(out))
    axes = tuple(range(-nout, 0))
    r = anp.sum(block * g, axis=axes) if nout else block * g
    return anp.reshape(r, in_shape)


# ---------------------------------------------------------------- recording

class WhileLoop:
    """The staged loop: ``args`` are the initial state (``n`` leaves), then the values
    the condition (``nc`` of them) and the body capture from enclosing code."""
    name = 'while'

    def plain(self, *args, cond, body, n, nc, **options):
        loops = body._compiled
        fast = loops.get('loop')
        if fast is None:               # compiled once per loop
            fast = loops['loop'] = _compile_loop(cond, body, n, nc, len(args), False)
        try:
            return list(fast(*args))
        except (ArithmeticError, ValueError):
            # math raised where IEEE 754 answers: the IEEE-safe spelling, compiled the
            # first time it is needed (most loops never need it)
            safe = loops.get('safe')
            if safe is None:
                safe = loops['safe'] = _compile_loop(cond, body, n, nc, len(args), True)
            return list(safe(*args))

    def lifted(self, *args, cond, body, n, nc, **options):
        # Captured values become loop-invariant state, so that perturbations they carry
        # are peeled like the state's own.
        invariants = list(args[n:])

        def cond_f(ls):
            return cond.run_flat(list(ls[:n]) + list(ls[n:n + nc]), lifted=True)[0]

        def body_f(ls):
            return list(body.run_flat(list(ls[:n]) + list(ls[n + nc:]), lifted=True)) + list(ls[n:])
        with_options(body_f, options)
        return _loop(cond_f, body_f, list(args[:n]) + invariants)[:n]

    def prune(self, eqn, live):
        """The loop without the state slots that no live result needs.  A slot is kept
        if its final value is live, the condition reads it, or the body computes a kept
        slot from it (a fixed point); the others cannot change a kept slot, so the kept
        results are the same, bit for bit.  ``live``: per output, is it read?"""
        cond, body, n = eqn.params['cond'], eqn.params['body'], eqn.params['n']
        need = {k for k in range(n) if live[k]} | {k for k in depends(cond, cond.outputs)
                                                    if k < n}
        while True:
            more = {k for k in depends(body, [body.outputs[k] for k in need]) if k < n}
            if more <= need:
                break
            need |= more
        if len(need) == n:
            return eqn
        return _keep_slots(eqn, sorted(need))

    def restrict(self, eqn, m):
        """The loop on its first ``m`` state slots alone, if they are closed (the
        condition and their updates read no other slot), else None: a loop whose first
        slots compute the same as a smaller loop subsumes it (``program.share``)."""
        p = eqn.params
        cond, body, n = p['cond'], p['body'], p['n']
        if m >= n:
            return None
        reads = depends(cond, cond.outputs) | depends(body, body.outputs[:m])
        if any(k < n and k >= m for k in reads):
            return None
        return _keep_slots(eqn, list(range(m)))

    def emit_lines(self, em, eqn, indent):
        from .codegen import emit_while
        emit_while(em, eqn, indent)

    def __reduce__(self):            # the one WHILE, also in another process or a copy
        return 'WHILE'

    def __repr__(self):
        return '<while_loop>'


def _keep_slots(eqn, keep):
    """The loop equation on the state slots ``keep`` (closed: their updates and the
    condition read no other slot), without the captured values it no longer reads."""
    p = eqn.params
    cond, body, n, nc = p['cond'], p['body'], p['n'], p['nc']
    eqns, outputs = simplify(body.eqns, [body.outputs[k] for k in keep])
    read = depends(Program(body.inputs, eqns, outputs, None, None, None, None, None),
                   outputs)
    caps = [j for j in range(n, len(body.inputs)) if j in read]
    body = Program([body.inputs[k] for k in keep] + [body.inputs[j] for j in caps], eqns,
                   outputs, None, None, None, _names(len(keep), len(caps)), None)
    cond = Program([cond.inputs[k] for k in keep] + cond.inputs[n:], cond.eqns,
                   cond.outputs, None, None, None, _names(len(keep), nc), None)
    args = [eqn.args[k] for k in keep] + list(eqn.args[n:n + nc]) + \
        [eqn.args[nc + j] for j in caps]
    params = dict(cond=cond, body=body, n=len(keep), nc=nc)
    params.update((k, p[k]) for k in OPTIONS if k in p)
    return Eqn(WHILE, tuple(args), params, tuple(eqn.outs[k] for k in keep),
               flatten([0] * len(keep))[1])


WHILE = WhileLoop()

# The loop on state leaves that carry perturbations: applied through ``bind`` (by
# ``_loop``), the outermost run's rule; with none left, recorded (``_record``).
LOOP = FunctionOp('while_loop', lambda leaves, p: _record(p['cond'], p['body'], list(leaves)),
                  {'forward': _forward, 'reverse': _reverse, 'batch': _loop_batched,
                   'taylor': _taylor})


def _compile_loop(cond, body, n, nc, nargs, safe):
    """A Python function running the loop on plain values."""
    from ..tracer import Var
    from .codegen import compile_python
    ins = [Var((), None, True) for _ in range(nargs)]
    outs = tuple(Var((), None, True) for _ in range(n))
    eqn = Eqn(WHILE, tuple(ins), dict(cond=cond, body=body, n=n, nc=nc), outs,
              flatten([0] * n)[1])
    prog = Program(ins, [eqn], list(outs), None, flatten([0] * n)[1], None,
                   [f"a{k}" for k in range(nargs)], None)
    return compile_python(prog, "loop", safe=safe)[0]


def _names(n, ncaps):
    return [f"s{k}" for k in range(n)] + [f"c{k}" for k in range(ncaps)]


def traced_loop(cond_f, body_f, leaves):
    """The condition and the body traced as sub-programs of the active trace, on the
    values of ``leaves``: ``(vals, cond, cond captures, body, body captures)``; the body
    must keep every leaf's shape and dtype."""
    outer = active()
    if outer is None:
        raise StagingError("a traced value reached while_loop after its trace ended")
    vals = [x.val if is_tracer(x) else x for x in leaves]
    cond_prog, cond_caps = _sub_program(outer, cond_f, vals, "the condition of a while_loop",
                                        single=True)
    body_prog, body_caps = _sub_program(outer, body_f, vals, "the body of a while_loop")
    for k, (v, o) in enumerate(zip(body_prog.inputs, body_prog.outputs)):
        shape, dtype = _aval(o)
        if (shape, dtype) != (v.shape, v.dtype):
            raise StagingError(_leaf_changed(k, v.shape, v.dtype, shape, dtype))
    return vals, cond_prog, cond_caps, body_prog, body_caps


def _record(cond_f, body_f, leaves):
    """No perturbation left: record the loop in the active trace (or run it plainly)."""
    vals, cond_prog, cond_caps, body_prog, body_caps = traced_loop(cond_f, body_f, leaves)
    params = dict(cond=cond_prog, body=body_prog, n=len(leaves), nc=len(cond_caps))
    params.update(options(body_f))          # (for the loop's derivatives)
    outer, args = resolve(list(leaves) + cond_caps + body_caps)
    final = WHILE.plain(*[a.val if is_tracer(a) else a for a in args], **params)
    return outer.record(WHILE, args, params, None, tree=(final, flatten(list(final))[1]),
                        cse=False)


def _aval(o):
    from ..tracer import Var
    if isinstance(o, Var):
        return o.shape, o.dtype
    a = np.asarray(o)
    return a.shape, (np.dtype(float) if isinstance(o, float) else a.dtype)


def _sub_program(outer, fn, vals, purpose, single=False):
    """Trace ``fn`` on fresh tracers of ``vals`` as a sub-program of ``outer``; return it
    and the tracers of ``outer`` it captured (its extra inputs, after the state)."""
    t = Trace(parent=outer, purpose=purpose)
    ins = [t.new_tracer(v) for v in vals]
    with recording(t):
        out = fn(ins)
        outs = [out] if single else list(out)
        outs = [_own(t, o) for o in outs]
    if any(isinstance(o, Perturbed) for o in outs):      # _loop's probe rules this out
        raise StagingError(f"internal error: {purpose} returned a perturbed value")
    outputs = [o.var if is_tracer(o) else o for o in outs]
    inputs = [x.var for x in ins] + [v for _, v in t.captures]
    eqns, outputs = simplify(t.equations(), outputs)
    prog = Program(inputs, eqns, outputs, None, None, None, _names(len(ins), len(t.captures)),
                   None)
    return prog, [p for p, _ in t.captures]


def _own(t, o):
    """A traced output of a sub-trace as a tracer of it (capturing an outer one)."""
    from ..tracer import _capture
    return _capture(t, o) if is_tracer(o) and o.trace is not t else o
