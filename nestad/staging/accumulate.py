"""Sums of scatters written into one buffer: a rewrite applied when code is generated.

The adjoint of indexing ``x[i]`` is ``scatter_add(g, i)``, zeros of ``x``'s shape with
``g`` at ``i``; a variable indexed several times gets the sum of its scatters.  Spelled
as recorded, each scatter allocates and fills a full array and each ``add`` makes
another.  This pass replaces a left-to-right sum of scatters with basic indices
(``((s1 + s2) + s3) ...``, each scatter and each partial sum read only there) by one
``scatter_sum`` equation that writes every term into one zeroed buffer::

    r = np.zeros(shape)
    r[i1] = g1
    r[i2] += g2
    r[:1] += 0.0          # only where needed: see below

It gives the recorded sum's bits exactly.  A basic index selects each entry once, so
where ``s_k`` writes, the sum adds ``g_k``'s entry, as ``+=`` does; entries no scatter
writes stay 0.0.  Where ``s_k`` does not write, the sum adds ``s_k``'s 0.0, which
changes nothing but a -0.0, which it turns into 0.0: so after the k-th term the entries
written so far but not by it get ``+= 0.0`` (a box of them as a slice, other sets with
a mask), and only those.  A lone scatter with a basic index is written the same way,
inline, instead of a call of its plain implementation.

Programs as traced keep their scatters and adds (transforms read the primitives' rules);
``accumulate_scatters(program)`` returns the rewritten program, for tests and reading.
"""
import numpy as np

from ..tracer import Eqn, Var
from ..registry import PRIMITIVES
from .program import Program


class ScatterSum:
    """``scatter_add(g1, i1) + scatter_add(g2, i2) + ...``, summed left to right, in one
    buffer; ``fixups[k]`` is the index (or boolean mask) of the entries that adding
    term k's zeros turns -0.0 into 0.0 (None: no entry)."""
    name = 'scatter_sum'

    def plain(self, *gs, indices, shape, dtype, fixups):
        r = np.zeros(shape, dtype=dtype)
        for k, (g, index, fix) in enumerate(zip(gs, indices, fixups)):
            if k == 0:
                r[index] = g
            else:
                r[index] += g
            if fix is not None:
                _add_zero(r, fix)
        return r

    def emit_lines(self, em, eqn, indent):
        pad = " " * indent
        p = eqn.params
        gs = [em.arg(a) for a in eqn.args]
        out = em.names[id(eqn.outs[0])] = em.fresh()
        dtype = "" if p['dtype'] == np.dtype(float) else f", dtype={em.bind(p['dtype'], 'dtype')}"
        em.lines.append(f"{pad}{out} = np.zeros({em.const(tuple(p['shape']))}{dtype})")
        for k, (g, index, fix) in enumerate(zip(gs, p['indices'], p['fixups'])):
            em.lines.append(f"{pad}{out}[{subscript(index, em)}] {'+=' if k else '='} {g}")
            if isinstance(fix, np.ndarray) and em.backend == 'numba':
                # (numba's ufuncs take no ``where``: adding -0.0 leaves every number as it
                # is, adding 0.0 turns -0.0 into 0.0, so one sum with a constant does it)
                zeros = np.where(fix, 0.0, -0.0).astype(p['dtype'])
                em.lines.append(f"{pad}{out} += {em.bind(zeros, 'zeros')}")
            elif isinstance(fix, np.ndarray):
                em.lines.append(f"{pad}np.add({out}, 0.0, out={out}, where={em.bind(fix, 'mask')})")
            elif fix is not None:
                em.lines.append(f"{pad}{out}[{subscript(fix, em)}] += 0.0")

    def __reduce__(self):
        return 'SCATTER_SUM'

    def __repr__(self):
        return '<scatter_sum>'


SCATTER_SUM = ScatterSum()


def _add_zero(r, fix):
    if isinstance(fix, np.ndarray):
        np.add(r, 0.0, out=r, where=fix)
    else:
        r[fix] += 0.0


def subscript(index, em):
    """Source for a basic index inside brackets: ``1:``, ``:, 0``, ``..., None``."""
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for p in parts:
        if isinstance(p, slice):
            start, stop, step = (("" if v is None else em.const(v, index=True)) for v in
                                 (p.start, p.stop, p.step))
            out.append(f"{start}:{stop}" + (f":{step}" if step else ""))
        else:
            out.append(em.const(p, index=True))
    if not out:
        return "()"
    return ", ".join(out) + ("," if isinstance(index, tuple) and len(out) == 1 else "")


def is_basic(index):
    """Ints, slices, None and Ellipsis only: each entry is selected at most once."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) and
               not isinstance(p, bool) for p in parts)


def _ops():
    return PRIMITIVES.get('numpy.scatter_add'), PRIMITIVES.get('numpy.add')


def _var_uses(eqns, keep):
    """id(var) -> how many times equations (their sub-programs included) and ``keep``
    read it."""
    uses = {}
    for eqn in eqns:
        for a in eqn.args:
            if isinstance(a, Var):
                uses[id(a)] = uses.get(id(a), 0) + 1
        for v in getattr(eqn.op, 'free_vars', lambda e: ())(eqn):
            uses[id(v)] = uses.get(id(v), 0) + 1
    for v in keep:
        uses[id(v)] = uses.get(id(v), 0) + 1
    return uses


def rewrite(eqns, keep, ops=None):
    """``eqns`` with sums of scatters (and lone scatters) as ``scatter_sum`` equations;
    ``keep``: variables read after ``eqns`` (outputs); ``ops``: the set of their ops, if
    the caller has it."""
    scatter, add = _ops()
    if scatter is None or scatter not in (ops if ops is not None else
                                          {e.op for e in eqns}):
        return eqns
    uses = _var_uses(eqns, keep)
    terms = {}        # id(var) -> ([(g, index)...], dtype, shape, position of its equation)
    gone = set()      # positions of equations folded into a later one
    for k, eqn in enumerate(eqns):
        if eqn.op is scatter and is_basic(eqn.params['index']):
            v = eqn.outs[0]
            if v.dtype.kind == 'f':
                terms[id(v)] = ([(eqn.args[0], eqn.params['index'])], v.dtype,
                                tuple(eqn.params['shape']), k)
        elif eqn.op is add and len(eqn.args) == 2:
            a, b = eqn.args
            ta, tb = terms.get(id(a)), terms.get(id(b))
            if ta is None or tb is None or a is b or uses.get(id(a)) != 1 or \
                    uses.get(id(b)) != 1:
                continue
            v = eqn.outs[0]
            if not (ta[1] == tb[1] == v.dtype and ta[2] == tb[2] == tuple(v.shape)):
                continue
            if len(tb[0]) > 1:            # addition commutes exactly: the sum on the left
                ta, tb = tb, ta
            if len(tb[0]) > 1:            # (s1 + s2) + (s3 + s4): not a left-to-right sum
                continue
            if len(ta[0]) == 1 and _first_fixup(tb, ta) < _first_fixup(ta, tb):
                ta, tb = tb, ta           # two scatters: start with the one that leaves less
            terms[id(v)] = (ta[0] + tb[0], v.dtype, ta[2], k)
            gone.update((ta[3], tb[3]))
            del terms[id(a)], terms[id(b)]
    final = {t[3]: (vid, t) for vid, t in terms.items()}
    out = []
    for k, eqn in enumerate(eqns):
        if k in gone:
            continue
        if k in final:
            (gs, dtype, shape, _) = final[k][1]
            params = dict(indices=tuple(i for _, i in gs), shape=shape, dtype=dtype,
                          fixups=_fixups([i for _, i in gs], shape))
            eqn = Eqn(SCATTER_SUM, tuple(g for g, _ in gs), params, eqn.outs)
        out.append(eqn)
    return out


def _mask(index, shape):
    m = np.zeros(shape, dtype=bool)
    m[index] = True
    return m


def _first_fixup(ta, tb):
    """How many entries need ``+= 0.0`` if ``ta``'s scatter is written first."""
    return int(np.count_nonzero(_mask(ta[0][0][1], ta[2]) & ~_mask(tb[0][0][1], tb[2])))


def _fixups(indices, shape):
    """For each term, the entries written before it but not by it (None, a basic index
    of their box if they fill it, else a boolean mask)."""
    written = _mask(indices[0], shape)
    fixups = [None]
    for index in indices[1:]:
        m = _mask(index, shape)
        fixups.append(_as_index(written & ~m))
        written |= m
    return fixups


def _as_index(region):
    if not region.any():
        return None
    if region.ndim == 0:
        return ()
    nz = np.nonzero(region)
    box = tuple(slice(int(i.min()), int(i.max()) + 1) for i in nz)
    if not region[box].all():
        return region
    full = [s.start == 0 and s.stop == n for s, n in zip(box, region.shape)]
    while full and full[-1]:              # trailing whole axes need no slice
        full.pop()
        box = box[:-1]
    box = tuple(slice(None) if f else s for s, f in zip(box, full))
    box = tuple(slice(None, s.stop) if s.start == 0 else s for s in box)
    return box[0] if len(box) == 1 else box if box else Ellipsis


def accumulate_scatters(program):
    """A copy of ``program`` with the rewrite applied (the code generator applies it to
    every program and loop body it writes)."""
    keep = [o for o in program.outputs if isinstance(o, Var)]
    p = Program(program.inputs, rewrite(program.eqns, keep), program.outputs,
                program.in_tree, program.out_tree, program.static, program.names,
                program.example)
    p.example_out = getattr(program, 'example_out', None)
    return p
