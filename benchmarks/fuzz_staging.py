"""Differential fuzzing of staging: staged against eager on random programs with
``nd.while_loop`` (counted and data-dependent trip counts, dead state slots, loops written
twice, a loop whose first slots are another loop), ``nd.where``, guards (a Python ``if``
on a traced value), closures over traced values, derivatives nested inside loop bodies,
scalars and arrays.

A program is generated as Python source (printed by ``--show``) and run eagerly and
staged.  Compared, at the point the program is traced, again at the same point (the
compiled code, not the trace) and at a second point (the same program if its guards
hold, a new trace if not):

* ``nd.stage(f)`` against ``f``: the value bit for bit;
* ``nd.stage(gradient_r(F))``, ``gradient_r(nd.stage(F))``, ``gradient_f(nd.stage(F))``
  and ``jvp`` of the staged function against eager ``gradient_r(F)`` (1e-12 relative), and
  eager gradient_r against gradient_f and central differences (the eager while_loop is
  Python's own loop, so this also checks the staged loop's rules indirectly);
* the Hessian: eager ``jacobian_f(gradient_r(F))`` against staged pairings;
* the fast call path (positional floats and float arrays) against the general one
  (keyword arguments).

    python benchmarks/fuzz_staging.py --programs 2000 --seed 0 --log /tmp/fs.jsonl
    python benchmarks/fuzz_staging.py --programs 1 --seed 0 --first 17 --show
"""
import argparse
import collections
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import nestad as nd  # noqa: E402
import nestad.numpy as anp  # noqa: E402

warnings.filterwarnings('ignore')

V = 3          # the length of vector registers


# ================================================================ generating programs

class Gen:
    """Source of a random function ``f(x0, ..., xk)``; registers are (name, shape) with
    shape () or (V,)."""

    def __init__(self, rng, n_in):
        self.rng = rng
        self.lines = []
        self.regs = []
        self.n_loops = 0
        self.kinks = False
        shapes = [(), (V,)] + [pick(rng, [(), (V,)]) for _ in range(n_in - 2)]
        rng.shuffle(shapes)
        self.in_shapes = shapes[:n_in]
        self.regs = [(f"x{i}", s) for i, s in enumerate(self.in_shapes)]

    # ------------------------------------------------------------ expressions

    def leaf(self, regs):
        r = self.rng.random()
        if r < 0.12:
            return repr(float(pick(self.rng, [0.5, -1.5, 2.0, 0.25, -0.0]))), ()
        if r < 0.17:             # numpy constants (they promote float32 values)
            c = float(pick(self.rng, [0.5, -1.5, 2.0]))
            return pick(self.rng, [f"np.float64({c})", f"np.float32({c})", f"np.array({c})",
                                   f"np.int64({int(c * 2)})", f"{int(c * 2)}"]), ()
        code, s = pick(self.rng, regs)
        if s == (V,) and self.rng.random() < 0.25:     # basic indices (scatters in reverse)
            form = pick(self.rng, ["{}[::-1]", "anp.concatenate([{0}[1:], {0}[:1]])",
                                   "anp.concatenate([{0}[:1] * 2.0, {0}[1:]])"])
            return form.format(code), (V,)
        if s == (V,) and self.rng.random() < 0.1:
            return pick(self.rng, ["{}[0]", "{}[-1]", "anp.sum({0}[1:] * {0}[:-1])"]).format(code), ()
        return code, s

    def expr(self, regs, depth, want=None):
        """(source, shape); ``want``: a required shape (() or (V,)), else any."""
        rng = self.rng
        r = rng.random()
        if depth <= 0 or r < 0.25:
            code, s = self.leaf(regs)
            return self.fit(code, s, want)
        if r < 0.5:
            a, s = self.expr(regs, depth - 1, want)
            fn = pick(rng, ['sin', 'cos', 'tanh', 'exp', 'log', 'sqrt', 'square', 'neg', 'atan'])
            sp = pick(rng, ['anp', 'anp', 'np', 'nd']) if s == () else pick(rng, ['anp', 'np'])
            if sp == 'nd' and fn in ('square', 'neg'):
                sp = 'anp'
            mod = {'anp': 'anp', 'np': 'np', 'nd': 'nd'}[sp]
            name = {'atan': 'arctan' if sp != 'nd' else 'atan'}.get(fn, fn)
            if fn == 'exp':
                return f"{mod}.exp(0.3 * ({a}))", s
            if fn == 'log':
                return f"{mod}.log(1.0 + ({a}) * ({a}))", s
            if fn == 'sqrt':
                return f"{mod}.sqrt(1.0 + ({a}) * ({a}))", s
            if fn == 'square':
                return f"(({a}) * ({a}))", s
            if fn == 'neg':
                return f"(-({a}))", s
            return f"{mod}.{name}({a})", s
        if r < 0.78:
            a, sa = self.expr(regs, depth - 1, want)
            b, sb = self.expr(regs, depth - 1, want if want == () else None)
            s = (V,) if (V,) in (sa, sb) else ()
            if want is not None and s != want:
                b, sb = self.fit(b, sb, ()), ()
                s = sa
            op = pick(rng, ['+', '-', '*', '/'])
            if op == '/':
                return f"(({a}) / (1.0 + ({b}) * ({b})))", s
            return f"(({a}) {op} ({b}))", s
        if r < 0.88:
            c1, s1 = self.expr(regs, depth - 1, want)
            c2, s2 = self.expr(regs, depth - 1, want)
            t1, st1 = self.expr(regs, depth - 1, want)
            t2, st2 = self.expr(regs, depth - 1, want)
            s = (V,) if (V,) in (s1, s2, st1, st2) else ()
            if want is not None and s != want:
                return self.fit(t1, st1, want)
            wh = pick(self.rng, ['nd.where', 'anp.where'])
            return f"{wh}(({c1}) > ({c2}), {t1}, {t2})", s
        a, s = self.expr(regs, depth - 1, None)
        if s == (V,):
            red = pick(rng, ['anp.sum({})', 'anp.mean({})', '({})[1]', 'anp.max({})', 'np.sum({})'])
            if 'max' in red:
                self.kinks = True
            return self.fit(red.format(a), (), want)
        return self.fit(a, s, want)

    def fit(self, code, s, want):
        if want is None or s == want:
            return code, s
        if want == ():
            return f"anp.sum({code})", ()
        return f"(({code}) * np.ones({V}))", (V,)

    # ------------------------------------------------------------ statements

    def new_reg(self, shape):
        name = f"r{len(self.regs)}"
        self.regs.append((name, shape))
        return name

    def stmt_assign(self, indent):
        code, s = self.expr(self.regs, int(self.rng.integers(1, 4)))
        name = self.new_reg(s)
        self.lines.append(" " * indent + f"{name} = {code}")

    def stmt_if(self, indent):
        cond, _ = self.expr(self.regs, 2, ())
        t = float(pick(self.rng, [0.0, 0.5, -0.3]))
        want = pick(self.rng, [(), (V,)])
        a, _ = self.expr(self.regs, 2, want)
        b, _ = self.expr(self.regs, 2, want)
        name = self.new_reg(want)
        pad = " " * indent
        self.lines += [f"{pad}if {cond} > {t}:", f"{pad}    {name} = {a}",
                       f"{pad}else:", f"{pad}    {name} = {b}"]

    def loop_parts(self, n_slots, captured):
        """(init exprs, shapes, cond source, update sources) of a loop over n_slots state
        slots after a counter (slot 0)."""
        rng = self.rng
        shapes = [pick(rng, [(), (V,)]) for _ in range(n_slots)]
        inits = [self.expr(self.regs, 1, s)[0] for s in shapes]
        N = int(rng.integers(0, 6))
        slot_regs = [(f"s[{j + 1}]", s) for j, s in enumerate(shapes)]
        cond = f"s[0] < {float(N)}"
        scalars = [j for j, s in enumerate(shapes) if s == ()]
        if scalars and rng.random() < 0.35:
            j = pick(rng, scalars)
            cond = f"(s[0] < {float(N + 3)}) & (s[{j + 1}] < {float(pick(rng, [0.5, 1.0, 2.0]))})"
        updates = []
        for j, s in enumerate(shapes):
            pool = slot_regs + captured
            kind = rng.random()
            if kind < 0.15 and s == () and len(scalars) >= 1:
                a = pick(rng, [f"s[{k + 1}]" for k in scalars])
                e, _ = self.expr(pool, 1, ())
                nested = f"nd.derivative(lambda t: anp.sin(t * ({e})) + 0.5 * t * t)({a})"
                updates.append(f"0.6 * s[{j + 1}] + 0.3 * anp.tanh({nested})")
                continue
            if kind < 0.25:          # a slot that only grows along the loop (the condition's)
                e, _ = self.expr(pool, 1, s)
                updates.append(f"s[{j + 1}] + 0.3 + 0.2 * anp.tanh({e}) ** 2")
                continue
            e, _ = self.expr(pool, 2, s)
            updates.append(f"0.6 * s[{j + 1}] + 0.3 * anp.tanh({e})")
        return inits, shapes, cond, updates

    def stmt_loop(self, indent):
        rng = self.rng
        pad = " " * indent
        k = self.n_loops
        self.n_loops += 1
        n_slots = int(rng.integers(1, 4))
        captured = [r for r in self.regs if rng.random() < 0.4]
        inits, shapes, cond, updates = self.loop_parts(n_slots, captured)
        init = "(0.0, " + ", ".join(inits) + ",)"
        self.lines += [f"{pad}def c{k}(s):", f"{pad}    return {cond}",
                       f"{pad}def b{k}(s):",
                       f"{pad}    return (s[0] + 1.0, " + ", ".join(updates) + ",)"]
        form = pick(rng, ['one', 'one', 'twice', 'prefix_after', 'prefix_before', 'small_big_small'])
        results = []

        def emit(name, c, b, ini):
            self.lines.append(f"{pad}{name} = nd.while_loop({c}, {b}, {ini})")
            results.append(name)
        if form == 'one':
            emit(f"L{k}", f"c{k}", f"b{k}", init)
        elif form == 'twice':
            emit(f"L{k}", f"c{k}", f"b{k}", init)
            emit(f"L{k}b", f"c{k}", f"b{k}", init)
        else:
            # a bigger loop: the same first slots (same condition and updates), more after
            extra_inits, extra_shapes, _, extra_updates = self.loop_parts(int(rng.integers(1, 3)), captured)
            extra_updates = [u.replace("s[", "S[") for u in extra_updates]
            # the extra slots may read the first ones; the first ones never read the extra
            shift = len(shapes) + 1
            extra_updates = [_shift_slots(u, shift) for u in extra_updates]
            big_init = "(0.0, " + ", ".join(inits + extra_inits) + ",)"
            self.lines += [f"{pad}def B{k}(s):",
                           f"{pad}    S = s",
                           f"{pad}    return (s[0] + 1.0, " + ", ".join(updates + extra_updates) + ",)"]
            if form == 'prefix_after':
                emit(f"L{k}", f"c{k}", f"b{k}", init)
                emit(f"L{k}big", f"c{k}", f"B{k}", big_init)
            elif form == 'prefix_before':
                emit(f"L{k}big", f"c{k}", f"B{k}", big_init)
                emit(f"L{k}", f"c{k}", f"b{k}", init)
            else:
                emit(f"L{k}", f"c{k}", f"b{k}", init)
                emit(f"L{k}big", f"c{k}", f"B{k}", big_init)
                emit(f"L{k}c", f"c{k}", f"b{k}", init)
            shapes = shapes + extra_shapes
        # registers from the loops' results (some slots stay dead)
        for name in results:
            nslots = len(shapes) if name.endswith('big') else len(inits)
            for j in range(nslots + 1):
                if rng.random() < 0.5:
                    s = () if j == 0 else shapes[j - 1]
                    reg = self.new_reg(s)
                    self.lines.append(f"{pad}{reg} = {name}[{j}]")

    def program(self, n_stmts):
        rng = self.rng
        for _ in range(n_stmts):
            kind = pick(rng, ['assign', 'assign', 'loop', 'loop', 'if'])
            getattr(self, 'stmt_' + kind)(4)
        n_out = int(rng.integers(1, 3))
        outs = [self.regs[-1][0]] + [pick(rng, self.regs)[0] for _ in range(n_out - 1)]
        args = ", ".join(n for n, _ in self.regs[:len(self.in_shapes)])
        src = [f"def f({args}):"] + self.lines + [f"    return ({', '.join(outs)},)"]
        return "\n".join(src)


def _shift_slots(code, shift):
    """S[j] (an extra slot's own numbering, 1-based) -> s[j + shift - 1]; s[...] captured
    registers are untouched."""
    import re
    return re.sub(r"S\[(\d+)\]", lambda m: f"s[{int(m.group(1)) + shift - 1}]", code)


def pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def generate(rng):
    n_in = int(rng.integers(2, 4))
    g = Gen(rng, n_in)
    src = g.program(int(rng.integers(2, 7)))
    ns = {'nd': nd, 'anp': anp, 'np': np}
    exec(compile(src, "<fuzz_staging program>", "exec"), ns)
    return src, ns['f'], g.in_shapes, g.kinks


def draw_point(rng, shapes, dtype=None):
    pt = [float(rng.uniform(-1.5, 1.5)) if s == () else rng.uniform(-1.5, 1.5, size=s) for s in shapes]
    if rng.random() < 0.15:                  # signed zeros
        k = int(rng.integers(len(pt)))
        if np.ndim(pt[k]):
            pt[k][int(rng.integers(V))] = -0.0
        else:
            pt[k] = -0.0
    if dtype is not None:
        pt = [np.asarray(x, dtype) if np.ndim(x) else x for x in pt]
    return pt


# ================================================================ checks

def run(fn):
    try:
        with np.errstate(all='ignore'):
            return ('ok', fn())
    except Exception as e:                     # noqa: BLE001
        return ('error', f"{type(e).__name__}: {str(e)[:300]}")


def dtypes(x):
    if isinstance(x, (list, tuple)):
        return [d for v in x for d in dtypes(v)]
    v = nd.primal_value(x)
    return [str(np.asarray(v).dtype) if not isinstance(v, float) else 'float']


def flat(x):
    if isinstance(x, (list, tuple)):
        parts = [flat(v) for v in x]
        return np.concatenate(parts) if parts else np.zeros(0)
    return np.ravel(np.asarray(nd.primal_value(x), float))


def close(a, b, rtol):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        return False
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    scale = 1.0 + np.max(np.abs(b[np.isfinite(b)]), initial=0.0)
    return bool(np.all(same | (np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b)) + rtol * 1e-3 * scale)))


def bits(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True)) and \
        bool(np.array_equal(np.signbit(a), np.signbit(b)))


class Result:
    def __init__(self, log):
        self.counts = collections.Counter()
        self.classes = collections.Counter()
        self.examples = collections.defaultdict(list)
        self.log = log

    def record(self, cls, check, pid, src, **info):
        self.counts['mismatches'] += 1
        key = f"{cls} [{check}]"
        self.classes[key] += 1
        if len(self.examples[key]) < 4:
            self.examples[key].append(pid)
        if self.log:
            self.log.write(json.dumps(dict(cls=cls, check=check, id=pid, src=src, **info), default=str) + "\n")
            self.log.flush()


# StagingErrors the documentation lists (notes/staging.md): the eager loop promotes a
# state leaf's dtype, a staged loop refuses to
DOCUMENTED = ("a loop's state keeps its shapes and dtypes", "integer that carries a derivative")


def compare(res, check, pid, src, got, want, rtol=1e-12, exact=False, **info):
    res.counts['comparisons'] += 1
    (sg, g), (sw, w) = got, want
    if sg == 'error' or sw == 'error':
        if sg != sw:
            msg = g if sg == 'error' else w
            cls = 'documented-refusal' if any(s in str(msg) for s in DOCUMENTED) else 'error-in-one'
            res.record(cls, check, pid, src, got=str(g)[:300], want=str(w)[:300], **info)
        elif sg == 'error' and g.split(':')[0] != w.split(':')[0]:
            res.record('different-errors', check, pid, src, got=g, want=w, **info)
        return
    if exact:
        if bits(g, w):
            return
        if close(g, w, rtol):
            ga, wa = np.asarray(g, float), np.asarray(w, float)
            same_vals = ga.shape == wa.shape and np.array_equal(ga, wa, equal_nan=True)
            # (a staged loop's reverse mode takes forward directions through the loop, a
            # different order of operations from the eager tape: last bits may differ)
            cls = 'signed-zero' if same_vals else \
                'ulp (a loop derivative)' if 'while_loop' in src else 'not-bitwise'
            res.record(cls, check, pid, src,
                       got=ga.tolist(), want=wa.tolist(), **info)
            return
    elif close(g, w, rtol):
        return
    res.record('MISMATCH', check, pid, src, got=np.asarray(g).tolist(), want=np.asarray(w).tolist(), **info)


def run_program(res, seed, pid, opts):
    rng = np.random.default_rng([seed, pid])
    src, f, shapes, kinks = generate(rng)
    res.counts['programs'] += 1
    if 'while_loop' in src:
        res.counts['programs with loops'] += 1
    if 'if ' in src:
        res.counts['programs with guards'] += 1
    if 'derivative' in src:
        res.counts['programs with nested derivatives in loops'] += 1
    f32 = rng.random() < opts.f32
    pts = [draw_point(rng, shapes, np.float32 if f32 else None) for _ in range(2)]
    if f32:
        res.counts['programs in float32'] += 1
    ws = None
    if opts.show:
        print(src)
        print("points:", pts)

    ev = run(lambda: f(*pts[0]))
    if ev[0] == 'error':
        res.counts['eager errors'] += 1
        if opts.show:
            print("eager error:", ev[1])
        return
    ws = [rng.uniform(0.5, 1.5, size=np.shape(nd.primal_value(o))) for o in ev[1]]

    def F(*a):
        total = 0.0
        for w, o in zip(ws, f(*a)):
            total = total + anp.sum(w * o)
        return total
    argnums = tuple(range(len(shapes)))
    info = lambda k: dict(point=[np.asarray(x).tolist() for x in pts[k]], seed=seed)   # noqa: E731

    sf = nd.stage(f)
    sF = nd.stage(F)
    sG = nd.stage(nd.gradient_r(F, argnums=argnums))
    f32 = f32 or 'float32' in src          # (a float32 constant makes float32 values too)
    tol = 1e-5 if f32 else 1e-12
    for k, pt in enumerate([pts[0], pts[0], pts[1]]):
        which = ['trace', 'compiled', 'second point'][k]
        kp = 0 if k < 2 else 1
        e_out = run(lambda: f(*pt))
        s_out = run(lambda: sf(*pt))
        if e_out[0] == s_out[0] == 'ok' and dtypes(e_out[1]) != dtypes(s_out[1]):
            res.record('DTYPE', f'stage(f) value, {which}', pid, src, got=dtypes(s_out[1]),
                       want=dtypes(e_out[1]), **info(kp))
        compare(res, f'stage(f) value, {which}', pid, src, run(lambda: flat(s_out[1])) if s_out[0] == 'ok'
                else s_out, run(lambda: flat(e_out[1])) if e_out[0] == 'ok' else e_out,
                exact=True, **info(kp))
        e_g = run(lambda: flat(nd.gradient_r(F, argnums=argnums)(*pt)))
        compare(res, f'stage(gradient_r(F)), {which}', pid, src, run(lambda: flat(sG(*pt))), e_g,
                rtol=tol, exact=True, **info(kp))
        compare(res, f'gradient_r(stage(F)), {which}', pid, src,
                run(lambda: flat(nd.gradient_r(sF, argnums=argnums)(*pt))), e_g, rtol=tol, **info(kp))
        compare(res, f'gradient_f(stage(F)), {which}', pid, src,
                run(lambda: flat(nd.gradient_f(sF, argnums=argnums)(*pt))), e_g, rtol=max(tol, 1e-10),
                **info(kp))
    if rng.random() < opts.numba:
        res.counts['numba programs'] += 1
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            sn = nd.stage(f, backend='numba')
            for k, pt in enumerate([pts[0], pts[0], pts[1]]):
                compare(res, f'numba stage(f) value, {k}', pid, src, run(lambda: flat(sn(*pt))),
                        run(lambda: flat(f(*pt))), exact=True, **info(0 if k < 2 else 1))
    # the general call path (keyword arguments) against the fast one
    names = [f"x{i}" for i in range(len(shapes))]
    compare(res, 'stage(f) keyword call', pid, src,
            run(lambda: flat(sf(**dict(zip(names, pts[1]))))), run(lambda: flat(sf(*pts[1]))), exact=True,
            **info(1))

    # eager modes and central differences
    pt = pts[0]
    g_r = run(lambda: flat(nd.gradient_r(F, argnums=argnums)(*pt)))
    g_f = run(lambda: flat(nd.gradient_f(F, argnums=argnums)(*pt)))
    compare(res, 'eager gradient_r vs gradient_f', pid, src, g_f, g_r, rtol=1e-4 if f32 else 1e-9, **info(0))
    # (a zero input may sit on a where's threshold: a kink, where differences disagree)
    at_zero = any(np.any(np.asarray(x) == 0) for x in pt)
    if g_r[0] == 'ok' and not kinks and not at_zero and opts.fd:
        fd = []
        for h in (1e-6, 1e-5):
            v = flat(pt)
            g = np.zeros(v.size)
            for j in range(v.size):
                def at(d):
                    w = v.copy()
                    w[j] += d
                    parts, i = [], 0
                    for s in shapes:
                        m = int(np.prod(s))
                        parts.append(w[i:i + m].reshape(s) if s else float(w[i]))
                        i += m
                    return float(nd.primal_value(F(*parts)))
                g[j] = (at(h) - at(-h)) / (2 * h)
            fd.append(g)
        res.counts['comparisons'] += 1
        if close(fd[0], fd[1], 1e-4) and not close(g_r[1], fd[0], 1e-4):
            res.record('eager-vs-fd', 'gradient_r', pid, src, got=g_r[1].tolist(), fd=fd[0].tolist(), **info(0))
    # jvp through the staged function
    ts = [float(rng.uniform(-1, 1)) if s == () else rng.uniform(-1, 1, size=s) for s in shapes]
    e_j = run(lambda: flat(nd.jvp(f, tuple(pt), tuple(ts))[1]))
    compare(res, 'jvp(stage(f))', pid, src, run(lambda: flat(nd.jvp(sf, tuple(pt), tuple(ts))[1])), e_j,
            rtol=max(tol, 1e-10), **info(0))
    sJ = nd.stage(lambda *a: nd.jvp(f, a, tuple(ts))[1])
    compare(res, 'stage(jvp(f))', pid, src, run(lambda: flat(sJ(*pt))), e_j, rtol=tol, exact=True, **info(0))
    compare(res, 'stage(jvp(f)) compiled', pid, src, run(lambda: flat(sJ(*pt))), e_j, rtol=tol, exact=True,
            **info(0))
    # the program transforms (source to source) at the traced point
    prog = run(lambda: nd.trace(f, *pt))
    if prog[0] == 'ok':
        P = prog[1]
        n_out = len(P.outputs)
        jp = run(lambda: flat(list(P.jvp()(*pt, *ts))[n_out:]))
        compare(res, 'program.jvp()', pid, src, jp, e_j, rtol=max(tol, 1e-10), **info(0))
        outs = run(lambda: f(*pt))
        if outs[0] == 'ok':
            cts = [rng.uniform(-1, 1, size=np.shape(nd.primal_value(o))) if np.ndim(nd.primal_value(o))
                   else float(rng.uniform(-1, 1)) for o in outs[1]]
            e_v = run(lambda: flat(nd.vjp(f, *pt)[1](tuple(cts))))
            vp = run(lambda: flat(list(P.vjp()(*pt, *cts))[n_out:]))
            compare(res, 'program.vjp()', pid, src, vp, e_v, rtol=max(tol, 1e-10), **info(0))
    else:
        cls = 'documented-refusal' if any(s in prog[1] for s in DOCUMENTED) else 'error-in-one'
        res.record(cls, 'nd.trace', pid, src, got=prog[1], want='ok', **info(0))
    # Hessians
    if opts.hessian:
        size = sum(int(np.prod(s)) for s in shapes)
        if size <= 8:
            H = run(lambda: flat(nd.jacobian_f(nd.gradient_r(F, argnums=argnums), argnums=argnums)(*pt)))
            sH = nd.stage(nd.jacobian_f(nd.gradient_r(F, argnums=argnums), argnums=argnums))
            compare(res, 'stage(hessian fr)', pid, src, run(lambda: flat(sH(*pt))), H, rtol=max(tol, 1e-10), **info(0))
            compare(res, 'stage(hessian fr) compiled', pid, src, run(lambda: flat(sH(*pt))), H, rtol=max(tol, 1e-10),
                    **info(0))
            compare(res, 'jacobian_r(gradient_r(stage(F)))', pid, src, run(lambda: flat(
                nd.jacobian_r(nd.gradient_r(sF, argnums=argnums), argnums=argnums)(*pt))), H, rtol=1e-4 if f32 else 1e-9,
                **info(0))
            compare(res, 'jacobian_f(gradient_f(stage(F)))', pid, src, run(lambda: flat(
                nd.jacobian_f(nd.gradient_f(sF, argnums=argnums), argnums=argnums)(*pt))), H, rtol=1e-4 if f32 else 1e-9,
                **info(0))
            compare(res, 'eager hessian rr vs fr', pid, src, run(lambda: flat(
                nd.jacobian_r(nd.gradient_r(F, argnums=argnums), argnums=argnums)(*pt))), H, rtol=1e-4 if f32 else 1e-9,
                **info(0))


def summary(res, elapsed):
    lines = [f"{res.counts['programs']} programs, {res.counts['comparisons']} comparisons, "
             f"{res.counts['mismatches']} mismatches in {elapsed:.0f} s"]
    for k, v in sorted(res.counts.items()):
        if k not in ('programs', 'comparisons', 'mismatches'):
            lines.append(f"  {k}: {v}")
    lines.append("mismatches by class [check]: count (first program ids)")
    for k, v in sorted(res.classes.items()):
        lines.append(f"  {k}: {v} {res.examples[k]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument('--programs', type=int, default=200)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--first', type=int, default=0)
    ap.add_argument('--log', default=None)
    ap.add_argument('--show', action='store_true')
    ap.add_argument('--no-hessian', dest='hessian', action='store_false')
    ap.add_argument('--no-fd', dest='fd', action='store_false')
    ap.add_argument('--f32', type=float, default=0.2, help="share of programs run in float32")
    ap.add_argument('--numba', type=float, default=0.03, help="share also staged with numba")
    opts = ap.parse_args(argv)
    res = Result(open(opts.log, 'a') if opts.log else None)
    t0 = time.time()
    for pid in range(opts.first, opts.first + opts.programs):
        try:
            run_program(res, opts.seed, pid, opts)
        except Exception:                          # noqa: BLE001
            res.counts['fuzzer errors'] += 1
            if opts.show or res.counts['fuzzer errors'] <= 3:
                print(f"fuzzer error in program {pid}:")
                traceback.print_exc()
    print(summary(res, time.time() - t0))


if __name__ == '__main__':
    main()
