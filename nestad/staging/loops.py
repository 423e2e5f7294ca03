"""Reverse mode through a staged loop by its adjoint: stored iterates, a backward loop.

``while_loop``'s forward-direction reverse rule (``control._reverse``) carries one
tangent per input scalar through the loop: cheap for a few slots, ``d`` times the
forward loop for ``d`` input scalars.  The adjoint rule here costs a constant times the
forward loop whatever ``d``:

* forward: the loop runs once as a ``STASH`` equation, a ``while`` that also keeps
  every iterate of the state slots the body changes (``vary``) and returns them
  stacked (one array per slot, its first axis the iteration) with the trip count;
  slots the body returns unchanged (loop invariants, captured values) are not kept.
  With ``checkpoints=N`` it keeps none (or, for a trip count known in advance, the
  states the schedule's first sweep stores), and the backward loop recomputes the
  iterates from at most N stored states by ``nestad.revolve``'s binomial schedule
  (``_Revolve``; notes/staging.md);
* backward: when the reverse phase reaches the loop's results, one ``nestad.while_loop``
  runs from the last iterate to the first, mapping the state's cotangent by the vjp
  of one body step at the stored iterate (the body recomputed once per step).  The
  cotangent of an invariant slot is carried along and summed, as it is for any slot
  the body returns unchanged.

The results are tape cells of the run whose single partial goes to one shared *hub*
cell; the hub's partials call the backward loop, so it runs once for all results
together, not once per result.  The backward loop is an ordinary ``while_loop``, so a
cotangent that carries a perturbation is differentiated through it like any loop.

Rule choice (``use_adjoint``): the forward-direction rule costs about ``1 + d``
forward loops for ``d`` input scalars (less for array states, whose directions are
one batched numpy pass), and its loop is shared with the primal loop when the
function also computes its value; the adjoint costs about 3 to 4 (forward with
storage, then the body's recomputation and reverse sweep per step) plus the primal
loop it does not share.  Measured (benchmarks/loops.py): a 200-step loop on an
n-vector 3.4x (directions) against 3.5x (adjoint) at n = 1, 4.1x against 3.2x at
n = 10, 120x against 3x at n = 100; GradBench particle with five scalar slots (d = 5)
is faster with directions.  So the adjoint is chosen from ``ADJOINT_MIN_DIRECTIONS``
= 8 input scalars on, and only where the primals carry no other run (its stored
iterates are plain values) and the body does not run under a forward run's own tag
(reverse over forward: the vjp's newer tag would sit inside that older run's values).
Memory: one copy of the changing state per iteration, or about 4N with ``checkpoints=N``.

``closure_converted`` (at the end) lets a body read perturbed values from its closure
without unrolling: ``while_loop`` calls it where it would otherwise unroll.
"""
import types

import numpy as np

from ..arrays import VJP, ArrayPrimitive, apply, make_cell
from ..errors import InvalidInputError
from ..interpret import REVERSE, outermost, split
from ..revolve import plan_arrays
from ..structures import flatten
from ..tracer import Eqn, StagingError, Var, active, is_tracer, resolve
from ..values import Batched, Perturbed, primal_value
from .. import numpy as anp
from ..numpy import sum_to
from .codegen import compile_python
from .program import Program
from .control import (LOOP_TRANSFORMS, _Unroll, _active, _check_step, _constant_int,
                      _float_dtype, _in_dtype_of, _is_float, _is_state_leaf, _like, _loop,
                      _quick_key, _sub_program, traced_loop, with_options)
from ..operators import vjp

# The forward-direction rule below this many input scalars (see the module docstring;
# measured in benchmarks/loops.py).
ADJOINT_MIN_DIRECTIONS = 8


def use_adjoint(primals, carried, slots, body_f):
    """Is the adjoint rule the cheaper one here (and applicable)?"""
    if any(isinstance(p, Perturbed) for p in primals):
        return False               # nested: the forward-direction rule peels the other runs
    if getattr(body_f, 'reuses_tag', False):
        return False               # the body runs under a forward run's tag (see _loop_jvp)
    d = sum(int(np.prod(np.shape(primal_value(primals[k])))) for k in slots if carried[k])
    if d < ADJOINT_MIN_DIRECTIONS:
        return False
    # the body reads a value of this run from its closure: keep the old rule's handling
    return not any(isinstance(o, Perturbed) for o in body_f(list(primals)))


def reverse(cond_f, body_f, leaves, primals, carried, slots, top):
    """Tape cells of run ``top`` for the loop's final state, by the adjoint rule: every
    iterate stored, or at most ``checkpoints`` of them (``checkpoints_of(body_f)``) and
    the rest recomputed by the binomial schedule (``_Revolve``)."""
    probe = body_f(list(primals))
    vary = [k for k, (o, p) in enumerate(zip(probe, primals)) if o is not p]
    n = len(primals)
    # Only the slots that can depend on the inputs need cotangents: a slot that cannot
    # is no function of them (its final value is a constant of the run), and no
    # cotangent flows from it to one that can (as the forward rule's ``_active``).
    seeds = [(np.ones if carried[k] else np.zeros)(np.shape(primal_value(primals[k])))
             for k in slots]
    slots = [slots[j] for j in _active(body_f, primals, slots, [seeds], None)]
    shapes = [np.shape(primal_value(primals[k])) for k in slots]
    checkpoints = checkpoints_of(body_f)
    if checkpoints is None:
        res = stash(cond_f, body_f, list(primals), vary)
        finals, trips, stacks = res[:n], res[n], dict(zip(vary, res[n + 1:]))
        pull = _Backward(body_f, primals, slots, shapes, trips, stacks)
    elif known_trips(body_f) is None:         # the forward loop only counts its trips
        res = stash(cond_f, body_f, list(primals), ())
        finals, trips = res[:n], res[n]
        pull = _Revolve(body_f, primals, slots, shapes, trips, vary, checkpoints)
    else:          # the forward loop stores the states of the schedule's first sweep
        first = first_sweep(known_trips(body_f), checkpoints)
        res = stash(cond_f, body_f, list(primals), vary, keep=first[0])  # (the steps)
        finals, trips = res[:n], res[n]
        pull = _Revolve(body_f, primals, slots, shapes, trips, vary, checkpoints,
                        (first, dict(zip(vary, res[n + 1:]))))
    return hub_cells(top, leaves, finals, primals, carried, slots, pull)


def hub_cells(top, leaves, finals, primals, carried, slots, pull):
    """The final leaves as cells of run ``top`` whose one partial goes to a hub cell, whose
    partials ask ``pull.cotangents(g)`` (the backward loop, run once for all leaves)."""
    inputs = [k for k in slots if carried[k]]
    sizes = [int(np.prod(np.shape(primal_value(primals[k])))) for k in slots]
    offsets = np.cumsum([0] + sizes)
    pull.offsets = offsets
    hub_value = np.zeros(int(offsets[-1]))
    hub = make_cell(top, hub_value, tuple(
        (leaves[k], VJP(_input_rule, (), hub_value, dict(pull=pull, j=slots.index(k))))
        for k in inputs))
    cells = list(finals)
    for j, k in enumerate(slots):
        cells[k] = make_cell(top, finals[k], ((hub, VJP(
            _place_rule, (), finals[k], dict(start=int(offsets[j]), size=sizes[j],
                                              total=int(offsets[-1])))),))
    return cells


def checkpoints_of(body_f):
    """The ``checkpoints`` a loop was given (None: keep every iterate); loops derived
    from it (the tangent loop, vmap's loop, the backward loop) carry it on their body."""
    return getattr(body_f, 'checkpoints', None)


def known_trips(body_f):
    """The loop's trip count if known before it runs (``scan``, ``fori_loop`` with int
    bounds: their body says so as ``known_trips``), else None."""
    return getattr(body_f, 'known_trips', None)


def first_sweep(trips, slots):
    """``(steps, where, plan)`` for a trip count known in advance: the steps before which
    the forward loop stores the state (the first sweep's stores, so that the backward
    loop need not advance to them), the slots they go to, and the plan's arrays without
    those stores.  The first sweep then restores the last of them and stores it again
    where it is (a store of 0 steps: the trace of the store loop's body on the example
    state reads that row, and must not advance past the last step)."""
    restore, first, count, final, gap, slot = plan_arrays(trips, slots)
    c = int(count[0]) if trips else 0
    steps = tuple(int(x) for x in np.cumsum(gap[:c]))
    where = tuple(int(x) for x in slot[:c])
    if c:
        restore, count = restore.copy(), count.copy()
        restore[0], count[0] = slot[c - 1], 1
        gap = np.concatenate([[0], gap[c:]])
        slot = np.concatenate([slot[c - 1:c], slot[c:]])
    return steps, where, (restore, first, count, final, gap, slot)


def _place_rule(g, out, start, size, total):
    """Output leaf's cotangent ``g`` placed at its segment of the hub's."""
    return anp.at(np.zeros(total))[start:start + size].set(anp.reshape(g, (size,)))


def _input_rule(g, out, pull, j):
    return pull.cotangents(g)[j]


class _Backward:
    """The backward loop over every stored iterate, run once per hub cotangent (the
    reverse phase asks each input's partial in turn).  Its body, one step back through
    the loop, is traced as a program now, while the runs the loop's body makes (a forward
    run peeled before this one, in reverse over forward) are alive; the reverse phase
    comes after they end."""

    def __init__(self, body_f, primals, slots, shapes, trips, stacks):
        self.primals, self.slots, self.shapes = primals, slots, shapes
        self.trips, self.last, self.checkpoints = trips, None, checkpoints_of(body_f)

        def step(state):
            i = state[0] - 1
            args = [row(stacks[k], i) if k in stacks else p for k, p in enumerate(primals)]
            return [i] + _step_back(body_f, args, slots, state[1:])
        examples = [_example(trips)] + _cotangent_examples(primals, slots, shapes)
        self.step, self.captures = _traced(step, examples, "the adjoint of a while_loop's body")

    def cotangents(self, g):
        if self.last is not None and self.last[0] is g:
            return self.last[1]
        g0 = _segments(g, self)
        m, prog = 1 + len(g0), self.step

        def body(ls):           # the captured values ride along, unchanged (see WhileLoop.lifted)
            return list(prog.run_flat(list(ls), lifted=True)) + list(ls[m:])
        final = _loop(lambda ls: ls[0] > 0, with_options(body, dict(checkpoints=self.checkpoints)),
                      [self.trips] + g0 + list(self.captures))
        self.last = (g, final[1:m])
        return self.last[1]


class _Revolve:
    """The backward loop with at most ``checkpoints`` stored states (``nestad.revolve``'s
    binomial schedule): one iteration per step reversed, last first, each restoring a
    stored state, advancing and storing as the plan says (inner loops), then stepping
    back through the body at the state reached.  The states are those of the slots the
    body changes (``vary``), in one buffer per slot of ``checkpoints`` rows, row 0 the
    initial state.  The stepping back and the advance are traced as programs now, as in
    ``_Backward``; the plan is computed from the trip count when the loop runs (``PLAN``)."""

    def __init__(self, body_f, primals, slots, shapes, trips, vary, checkpoints, stored=None):
        self.primals, self.slots, self.shapes = primals, slots, shapes
        self.trips, self.vary, self.checkpoints, self.last = trips, vary, checkpoints, None
        self.stored = stored          # (first_sweep's answer, the states the forward loop kept)

        def state(xs):
            args = list(primals)
            for k, x in zip(vary, xs):
                args[k] = x
            return args

        def back(ins):
            return _step_back(body_f, state(ins[:len(vary)]), slots, ins[len(vary):])

        def advance(xs):
            out = body_f(state(xs))
            return [out[k] for k in vary]
        xs = [_example(primals[k]) for k in vary]
        self.back, self.back_caps = _traced(
            back, xs + _cotangent_examples(primals, slots, shapes),
            "the adjoint of a while_loop's body")
        self.advance, self.advance_caps = _traced(advance, xs, "a while_loop's body")

    def cotangents(self, g):
        if self.last is not None and self.last[0] is g:
            return self.last[1]
        g0 = _segments(g, self)
        nv, ng = len(self.vary), len(g0)
        where, kept = (), {}
        if self.stored is None:
            plan = list(revolve_plan(self.trips, self.checkpoints))
        else:
            (_, where, plan), kept = self.stored
            plan = list(plan)
        bufs = []
        for k in self.vary:
            p = self.primals[k]
            ex = _example(p)
            buf = row_set(np.zeros((self.checkpoints,) + np.shape(ex), np.result_type(ex)), 0, p)
            for c, at in enumerate(where):          # the first sweep's, kept by the forward loop
                buf = row_set(buf, at, row(kept[k], c))
            bufs.append(buf)
        back, advance = self.back, self.advance
        nb, na = len(self.back_caps), len(self.advance_caps)
        fixed = plan + list(self.back_caps) + list(self.advance_caps)

        def body(ls):
            j, k, gs, bs = ls[0], ls[1], ls[2:2 + ng], ls[2 + ng:2 + ng + nv]
            rest = ls[2 + ng + nv:]
            restore, _, count, final, gap, slot = rest[:6]
            back_caps, advance_caps = rest[6:6 + nb], rest[6 + nb:6 + nb + na]
            xs = [row(b, row(restore, j)) for b in bs]
            end = k + row(count, j)

            def store(s):
                xs = _advance(advance, advance_caps, s[1:1 + nv], row(gap, s[0]))
                at = row(slot, s[0])
                return [s[0] + 1] + xs + [row_set(b, at, x) for b, x in zip(s[1 + nv:], xs)]
            s = _loop(lambda s: s[0] < end, store, [k] + xs + bs)
            k, xs, bs = s[0], s[1:1 + nv], s[1 + nv:]
            xs = _advance(advance, advance_caps, xs, row(final, j))
            gs = back.run_flat(list(xs) + list(gs) + list(back_caps), lifted=True)
            return [j + 1, k] + list(gs) + list(bs) + list(rest)
        trips = self.trips
        out = _loop(lambda ls: ls[0] < trips, with_options(body, dict(checkpoints=self.checkpoints)),
                    [0, 0] + g0 + bufs + fixed)
        self.last = (g, out[2:2 + ng])
        return self.last[1]


def _advance(prog, caps, xs, steps):
    """``steps`` steps of the body (``prog``, on the changing slots) from ``xs``."""
    nv = len(xs)
    out = _loop(lambda s: s[0] < steps,
                lambda s: [s[0] + 1] + list(prog.run_flat(list(s[1:1 + nv]) + list(caps),
                                                          lifted=True)),
                [0] + list(xs))
    return out[1:]


def _step_back(body_f, args, slots, gs):
    """The slots' cotangents before one body step at state ``args``, given ``gs`` after."""

    def f(*xs):
        a = list(args)
        for k, x in zip(slots, xs):
            a[k] = x
        out = body_f(a)
        return [out[k] for k in slots]
    _, pullback = vjp(f, *[args[k] for k in slots])
    return [_like(c, g_) for c, g_ in zip(pullback(list(gs)), gs)]


def _example(x):
    return x.val if is_tracer(x) else primal_value(x)


def _cotangent_examples(primals, slots, shapes):
    return [np.zeros(s, _float_dtype(primals[k])) if s else _float_dtype(primals[k]).type(0)
            for k, s in zip(slots, shapes)]


def _traced(fn, examples, purpose):
    return _sub_program(active(), fn, examples, purpose)


def _segments(g, pull):
    """The hub's cotangent ``g`` cut into the slots' cotangents."""
    from .. import numpy as anp
    out = []
    for j, k in enumerate(pull.slots):
        a, b = int(pull.offsets[j]), int(pull.offsets[j + 1])
        seg = anp.reshape(anp.getitem(g, slice(a, b)), pull.shapes[j]) if pull.shapes[j] \
            else anp.getitem(g, a)
        out.append(_in_dtype_of(seg, pull.primals[k]))
    return out


# ---------------------------------------------------------------- the plan as a value

class RevolvePlan:
    """``nestad.revolve``'s plan for a trip count known when the program runs: its six
    integer arrays (their lengths follow the trip count; the program only reads rows)."""
    name = 'revolve_plan'
    emit = None

    plain = staticmethod(plan_arrays)

    def lifted(self, trips, slots):
        return revolve_plan(trips, slots)

    def __reduce__(self):
        return 'PLAN'

    def __repr__(self):
        return '<revolve plan>'


PLAN = RevolvePlan()


def revolve_plan(trips, slots):
    """The plan's arrays for ``trips`` steps and ``slots`` states; recorded if traced."""
    if not is_tracer(trips):
        return list(plan_arrays(trips, slots))
    outer, args = resolve([trips])
    res = list(plan_arrays(trips.val, slots))
    return outer.record(PLAN, args, dict(slots=slots), None, tree=(res, flatten(res)[1]))


# ---------------------------------------------------------------- rows of a stack

def _index(axis, i):
    return (slice(None),) * axis + (i,)


def _row_plain(stack, i, axis=0):
    return stack[_index(axis, i)]


def _row_set_plain(buf, i, v, axis=0):
    out = buf.copy()
    out[_index(axis, i)] = v
    return out


def _no_index_derivative(*args, **kwargs):
    raise InvalidInputError("a loop index carries a derivative; loop indices are integers")


def _nb(t, x):
    return np.ndim(primal_value(t)) - np.ndim(primal_value(x))


def _zeros(shape, like):
    return np.zeros(shape, np.result_type(primal_value(like)))


# stack[i] along ``axis`` for a traced index i (nestad.numpy's indexing refuses traced
# indices, whose result shapes could vary; a row of a stack has one shape), and the
# functional update of that row: what scan reads its xs and writes its ys with, and the
# backward loop its stored iterates.  Tangents carry their batch axes first.
_ROW_RULES = dict(jvps=(lambda t, s, i, out, axis=0: row(t, i, axis + _nb(t, s)),
                        _no_index_derivative),
                  vjps=(lambda g, s, i, out, axis=0: row_set(
                      _zeros(np.shape(primal_value(s)), g), i, g, axis), _no_index_derivative))
ROW = ArrayPrimitive('loop_row', _row_plain, namespace='nestad.loops',
                     **_ROW_RULES)
ROW_AT = ArrayPrimitive('loop_row_at', _row_plain, namespace='nestad.loops', **_ROW_RULES)
ROW_SET = ArrayPrimitive('loop_row_set', _row_set_plain, jvps=(
    lambda t, b, i, v, out, axis=0: row_set(t, i, 0.0, axis + _nb(t, b)),
    _no_index_derivative,
    lambda t, b, i, v, out, axis=0: row_set(
        _zeros(np.shape(primal_value(t))[:_nb(t, v)] + np.shape(primal_value(b)), t), i, t,
        axis + _nb(t, v))), vjps=(
    lambda g, b, i, v, out, axis=0: row_set(g, i, 0.0, axis),
    _no_index_derivative,
    lambda g, b, i, v, out, axis=0: _sum_to(row(g, i, axis), np.shape(primal_value(v)))),
    namespace='nestad.loops')


def _sum_to(x, shape):
    return sum_to(x, shape)


def row(stack, i, axis=0):
    """``stack[i]`` (along ``axis``) for a loop index ``i``, traced or not."""
    return apply(ROW_AT, (stack, i), dict(axis=axis)) if axis else apply(ROW, (stack, i), {})


def row_set(buf, i, v, axis=0):
    """``buf`` with row ``i`` (along ``axis``) set to ``v``, as a new array."""
    return apply(ROW_SET, (buf, i, v), dict(axis=axis) if axis else {})


ROW.lifted = ROW_AT.lifted = row
ROW_SET.lifted = row_set


# ---------------------------------------------------------------- the stored iterates

def stash(cond_f, body_f, leaves, vary, keep=None):
    """The loop on plain (or traced) ``leaves``: the final state, the trip count, and
    for each slot in ``vary`` the stack of its iterates before each body step (only
    before the steps ``keep``, a tuple of step indices, if given)."""
    vals, cond_prog, cond_caps, body_prog, body_caps = traced_loop(cond_f, body_f, leaves)
    params = dict(cond=cond_prog, body=body_prog, n=len(leaves), nc=len(cond_caps),
                  vary=tuple(vary))
    if keep is not None:
        params['keep'] = tuple(keep)
    outer, args = resolve(list(leaves) + cond_caps + body_caps)
    res = STASH.plain(*[a.val if is_tracer(a) else a for a in args], **params)
    # (scalar slots' iterates come as lists: the trace sees arrays, see _stacked)
    n = len(leaves)
    res[n + 1:] = [np.array(r, dtype=np.result_type(vals[k])) if isinstance(r, list) else r
                   for k, r in zip(vary, res[n + 1:])]
    # (an example with no iterate gets a row of zeros: a loop body stepping back is traced
    # on the example, reading row trips - 1 = -1 of it; the program reads no row then)
    res[n + 1:] = [r if len(r) else np.zeros((1,) + r.shape[1:], r.dtype) for r in res[n + 1:]]
    return outer.record(STASH, args, params, None, tree=(res, flatten(list(res))[1]), cse=False)


class StashLoop:
    """``while_loop`` that also returns its trip count and the stacked iterates of the
    slots ``vary``.  ``args``: the state (``n`` leaves), the condition's ``nc``
    captured values, the body's."""
    name = 'while_stash'

    def plain(self, *args, cond, body, n, nc, vary, keep=None):
        fast = body._compiled.get(('stash', vary, keep))
        if fast is None:
            fast = body._compiled[('stash', vary, keep)] = _compile(cond, body, n, nc, vary,
                                                                   len(args), keep)
        return list(fast(*args))

    def lifted(self, *args, cond, body, n, nc, vary, keep=None):
        if any(isinstance(a, Perturbed) for a in args):
            raise InvalidInputError(
                "a staged program holding a loop's reverse pass (its stored iterates) was "
                "differentiated again as a program; differentiate the function instead "
                "(nestad.stage of the nested derivative)")
        return stash(lambda ls: cond.run_flat(list(ls[:n]) + list(args[n:n + nc]), lifted=True)[0],
                     lambda ls: body.run_flat(list(ls[:n]) + list(args[n + nc:]), lifted=True),
                     list(args[:n]), vary, keep)

    def emit_lines(self, em, eqn, indent):
        emit_stash(em, eqn, indent)

    def __reduce__(self):
        return 'STASH'

    def __repr__(self):
        return '<while_loop with stored iterates>'


STASH = StashLoop()


def _stacked(rows, like):
    """The iterates of one slot as an array (iteration first); ``like``: its initial value.
    A Python number's iterates stay a list: indexing it gives Python numbers back, whose
    arithmetic is about three times numpy scalars' (``stash`` shows the trace an array)."""
    if like.__class__ in (float, int):
        return rows
    if rows:
        return np.array(rows, dtype=np.result_type(like))
    return np.zeros((0,) + np.shape(like), np.result_type(like))


def emit_stash(em, eqn, indent):
    """The loop as in ``codegen.emit_while``, appending the changing slots to lists."""
    p = eqn.params
    cond, body, n, nc, vary = p['cond'], p['body'], p['n'], p['nc'], p['vary']
    pad = " " * indent
    args = [em.arg(a) for a in eqn.args]
    state = [em.fresh() for _ in range(n)]
    first = [em.fresh() for _ in vary]
    rows = [em.fresh() for _ in vary]
    trips = em.fresh()
    em.lines.append(f"{pad}{', '.join(state)}, = {', '.join(args[:n])},")
    if vary:
        em.lines.append(f"{pad}{', '.join(first)}, = {', '.join(state[k] for k in vary)},")
        em.lines.append(f"{pad}{', '.join(rows)}, = {', '.join('[]' for _ in vary)},")
    em.lines.append(f"{pad}{trips} = 0")
    em.lines.append(f"{pad}while True:")
    for sub, names in ((cond, state + args[n:n + nc]), (body, state + args[n + nc:])):
        for v, name in zip(sub.inputs, names):
            em.names[id(v)] = name
        keep = list(sub.inputs) + [o for o in sub.outputs if isinstance(o, Var)]
        em.emit_eqns(sub.eqns, indent + 4, keep=keep)
        if sub is cond:
            em.lines.append(f"{pad}    if not {em.arg(cond.outputs[0])}: break")
            if vary and 'keep' in p:
                em.lines.append(f"{pad}    if {trips} in {em.const(p['keep'])}:")
            for r, k in zip(rows, vary):
                em.lines.append(f"{pad}    {'    ' if 'keep' in p else ''}{r}.append({state[k]})")
            em.lines.append(f"{pad}    {trips} += 1")
    moved = [(s, em.arg(o)) for s, o, v in zip(state, body.outputs, body.inputs) if o is not v]
    if moved:
        em.lines.append(f"{pad}    {', '.join(s for s, _ in moved)}, = "
                        f"{', '.join(o for _, o in moved)},")
    stacked = em.bind(_stacked, 'stacked')
    for r, f in zip(rows, first):
        em.lines.append(f"{pad}{r} = {stacked}({r}, {f})")
    for v, name in zip(eqn.outs, state + [trips] + rows):
        em.names[id(v)] = name



def _compile(cond, body, n, nc, vary, nargs, keep):
    """A Python function running the loop with stored iterates on plain values."""
    ins = [Var((), None, True) for _ in range(nargs)]
    nout = n + 1 + len(vary)
    outs = tuple(Var((), None, True) for _ in range(nout))
    tree = flatten([0] * nout)[1]
    params = dict(cond=cond, body=body, n=n, nc=nc, vary=vary)
    if keep is not None:
        params['keep'] = keep
    eqn = Eqn(STASH, tuple(ins), params, outs, tree)
    prog = Program(ins, [eqn], list(outs), None, tree, None, [f"a{k}" for k in range(nargs)], None)
    return compile_python(prog, "stash")[0]


# ---------------------------------------------------------------- eager, checkpointed

def eager_checkpointed(cond, body, state, checkpoints, known=None):
    """``while_loop`` run eagerly under a reverse run with at most ``checkpoints`` states
    kept: the loop runs on the primal values (no tape), counting its trips (and, if they
    are ``known``, storing the first sweep's states as it goes); the final leaves are hub
    cells (as in ``reverse``) whose backward pass follows the binomial schedule,
    stepping back through the body with ``vjp`` one step at a time.  None where Python's
    loop is the rule (no reverse run outermost: forward mode keeps no tape; vmap; Taylor
    mode; another run under this one; a body reading a value of the run from its
    closure)."""
    from ..custom import reads_closure
    leaves, tree = flatten(state)
    if not any(isinstance(x, Perturbed) for x in leaves):
        return None
    leaves = [_constant_int(k, x) for k, x in enumerate(leaves)]
    top, interp = outermost(leaves)
    if interp is not REVERSE:       # forward mode keeps no tape; vmap, Taylor: Python's loop
        return None
    carried, primals = split(leaves, top)
    if any(isinstance(p, Perturbed) for p in primals):
        # (nested in another run, whose tape would hold every recomputation: more memory
        # than Python's loop, whose tape both runs share; staged, use_adjoint says the same)
        return None
    steps, where, plan = first_sweep(known, checkpoints) if known is not None else \
        ((), (), None)
    stored = [None] * checkpoints
    stored[0] = list(primals)
    trips, x, quick = 0, list(primals), _quick_key(state)
    while True:
        c = cond(tree.build(x))
        if primal_value(c).__class__ is Batched:    # an older vmap: its loop (control.py)
            return None
        if not c:
            break
        if trips in steps:
            stored[where[steps.index(trips)]] = x
        new = body(tree.build(x))
        if quick is None or _quick_key(new) != quick:      # (as Python's loop checks)
            _check_step(state, new, InvalidInputError)
        if trips == 0:
            if reads_closure(new, top):
                import warnings
                warnings.warn("while_loop: the body reads a value being differentiated from "
                              "its closure, so the loop keeps its tape (checkpoints= is not "
                              "applied); pass that value in the state", stacklevel=3)
                return None
        x, trips = flatten(new)[0], trips + 1
    if known is None:
        plan = plan_arrays(trips, checkpoints)
    elif trips != known:
        raise StagingError(f"internal error: a loop said to run {known} times ran {trips} times")
    slots = [k for k, v in enumerate(leaves) if _is_float(v)]
    shapes = [np.shape(primal_value(primals[k])) for k in slots]

    def body_f(ls):
        return flatten(body(tree.build(ls)))[0]
    pull = _EagerRevolve(body_f, primals, slots, shapes, trips, stored, plan)
    return tree.build(hub_cells(top, leaves, x, primals, carried, slots, pull))


class _EagerRevolve:
    """The eager backward pass: the plan followed in Python, a state a list of leaves (a
    leaf the body leaves unchanged is shared, not copied)."""

    def __init__(self, body_f, primals, slots, shapes, trips, stored, plan):
        self.body_f, self.primals, self.slots, self.shapes = body_f, primals, slots, shapes
        self.trips, self.stored, self.plan, self.last = trips, stored, plan, None

    def cotangents(self, g):
        if self.last is not None and self.last[0] is g:
            return self.last[1]
        gs = _segments(g, self)
        restore, _, count, final, gap, slot = (a.tolist() for a in self.plan)
        stored, k = list(self.stored), 0
        for j in range(self.trips):
            x = stored[restore[j]]
            for _ in range(count[j]):
                x = self._advance(x, gap[k])
                stored[slot[k]] = x
                k += 1
            gs = _step_back(self.body_f, self._advance(x, final[j]), self.slots, gs)
        self.last = (g, gs)
        return gs

    def _advance(self, x, steps):
        for _ in range(steps):
            x = self.body_f(x)
        return x


# ---------------------------------------------------------------- closure conversion

def closure_converted(cond, body, state, opts):
    """``while_loop(cond, body, state)`` with the perturbed values that ``cond`` and
    ``body`` read from their closures (found through closure cells, the functions those
    hold, and lists, tuples and dicts in them) made extra, unchanged, loop state: copies
    of the functions read them from the state instead.  Their runs, reverse ones
    included, are then peeled like the state's own, and the loop stays one loop.  None if
    none is found that way (a global, an attribute) or the loop still cannot stay one."""
    found = {}
    for f in (cond, body):
        _find(f, found, set())
    extra = list(found.values())
    if not extra or not all(_is_state_leaf(x) for x in extra):
        return None
    leaves, tree = flatten((state, extra))
    state_sig = flatten(state)[1].signature()

    def converted(f, ex):
        return _rebuild(f, {id(o): n for o, n in zip(extra, ex)}, {})

    def cond_flat(ls):
        st, ex = tree.build(ls)
        return converted(cond, ex)(st)

    def body_flat(ls):
        st, ex = tree.build(ls)
        out = converted(body, ex)(st)
        out_leaves, out_tree = flatten(out)
        if out_tree.signature() != state_sig:
            raise StagingError("while_loop: the body must return a state of the same "
                               "structure as it was given")
        return out_leaves + list(ls[len(ls) - len(extra):])
    with_options(body_flat, opts)
    try:
        return tree.build(_loop(cond_flat, body_flat, leaves))[0]
    except _Unroll:
        return None


def _find(v, found, seen):
    if isinstance(v, Perturbed):
        found.setdefault(id(v), v)
    elif id(v) in seen:
        return
    elif isinstance(v, types.FunctionType) and _user_code(v):
        seen.add(id(v))
        for cell in v.__closure__ or ():
            try:
                _find(cell.cell_contents, found, seen)
            except ValueError:           # an empty cell (a name not yet assigned)
                pass
    elif isinstance(v, (list, tuple)):
        seen.add(id(v))
        for x in v:
            _find(x, found, seen)
    elif isinstance(v, dict):
        seen.add(id(v))
        for x in v.values():
            _find(x, found, seen)


def _user_code(f):
    """Is ``f`` the user's (or one of scan's and fori_loop's wrappers of the user's)?
    nestad's own closures hold tape cells as the machinery's data (a pullback's tape),
    not as values the loop computes with: those are not converted (the loop unrolls)."""
    module = getattr(f, '__module__', None) or ''
    return module == 'nestad.scan' or not (module == 'nestad' or module.startswith('nestad.'))


def _rebuild(v, subst, memo):
    """``v`` with the values of ``subst`` (by identity) replaced; functions copied with new
    closure cells where anything under them changed, everything else shared."""
    if isinstance(v, Perturbed):
        return subst.get(id(v), v)
    if id(v) in memo:
        return memo[id(v)]
    if isinstance(v, types.FunctionType) and v.__closure__ and _user_code(v):
        memo[id(v)] = v                  # (a recursive function reaching itself: unchanged)
        cells = []
        for cell in v.__closure__:
            try:
                cells.append(types.CellType(_rebuild(cell.cell_contents, subst, memo)))
            except ValueError:
                cells.append(cell)
        if all(c is o or c.cell_contents is o.cell_contents for c, o in zip(cells, v.__closure__)):
            return v
        g = types.FunctionType(v.__code__, v.__globals__, v.__name__, v.__defaults__,
                               tuple(cells))
        g.__kwdefaults__ = v.__kwdefaults__
        memo[id(v)] = g
        return g
    if isinstance(v, (list, tuple)):
        memo[id(v)] = v
        new = [_rebuild(x, subst, memo) for x in v]
        if all(a is b for a, b in zip(new, v)):
            return v
        out = new if isinstance(v, list) else (type(v)(*new) if hasattr(v, '_fields')
                                               else tuple(new))
        memo[id(v)] = out
        return out
    if isinstance(v, dict):
        memo[id(v)] = v
        new = {k: _rebuild(x, subst, memo) for k, x in v.items()}
        if all(new[k] is v[k] for k in v):
            return v
        memo[id(v)] = new
        return new
    return v


# (staging/control.py's while_loop reaches these through its hook)
LOOP_TRANSFORMS.update(use_adjoint=use_adjoint, reverse=reverse,
                       eager_checkpointed=eager_checkpointed, closure_converted=closure_converted)
