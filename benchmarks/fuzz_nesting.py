"""Fuzzing nested derivatives against exact answers (sympy): perturbation confusion.

Each case nests k = 1..4 levels of differentiation.  Level i binds a variable v_i, at a point
that depends on the enclosing variables (so an inner run sees outer perturbations in its
point, its closure and its function), and differentiates

    R_i(v_1..v_i) = h_i(v_1..v_i) * R_{i+1}(v_1..v_i, p_{i+1}(v_1..v_i))

with respect to v_i, where R_k = f(v_1..v_k) and h_i, p_i, f are random smooth expressions.
The exact answer is the same recursion done symbolically by sympy.  Each level's operator
is drawn from derivative, gradient_r, gradient_f, jvp, vjp, jacobian_f, jacobian_r,
value_and_gradient_r, a derivative-valued function (``derivative(lambda v: lambda u: ...)``
applied later) and a staged operator (``nd.stage``), so every pairing of modes meets every
other.  Elementary functions are applied as nestad scalars, or through one-element
nestad.numpy arrays (the array rules nested inside scalar ones and vice versa).

Also: the 'amazing bug' family fh(fh(g)) with fh = derivative(lambda x: lambda h: lambda y:
h(x + y))(a) (exact: g''(2a + y)), and a derivative-valued function built in one run and
applied inside another run of either mode.
"""
import math
import warnings

import numpy as np
import sympy as sp

import nestad as nd
import nestad.numpy as anp

X = sp.symbols('v1:6')

# (sympy function, nestad scalar function, numpy name) of smooth functions of any real
UNARY = [
    (sp.sin, nd.sin, 'sin'), (sp.cos, nd.cos, 'cos'), (sp.tanh, nd.tanh, 'tanh'),
    (sp.atan, nd.atan, 'arctan'), (lambda u: sp.exp(u / 2), lambda u: nd.exp(u / 2), None),
    (lambda u: sp.log(1 + u * u), lambda u: nd.log(1 + u * u), None),
    (lambda u: sp.sqrt(1 + u * u), lambda u: nd.sqrt(1 + u * u), None),
    (sp.asinh, nd.asinh, 'arcsinh'),
]


def via_array(name, u):
    """name(u) computed on a one-element nestad.numpy array."""
    return getattr(anp, name)(anp.reshape(u, (1,)))[0]


def random_expr(rng, nvars, depth):
    """(sympy expression, nestad function of the variables' values)."""
    r = rng.random()
    if depth == 0 or r < 0.25:
        if rng.random() < 0.75:
            i = int(rng.integers(nvars))
            return X[i], (lambda vs, i=i: vs[i])
        c = float(rng.choice([0.5, 2.0, -1.5, 3.0]))
        return sp.Float(c), (lambda vs, c=c: c)
    if r < 0.6:
        (a, fa), (b, fb) = random_expr(rng, nvars, depth - 1), random_expr(rng, nvars, depth - 1)
        op = rng.choice(['+', '-', '*', '/', 'pow'])
        if op == '+':
            return a + b, (lambda vs: fa(vs) + fb(vs))
        if op == '-':
            return a - b, (lambda vs: fa(vs) - fb(vs))
        if op == '*':
            return a * b, (lambda vs: fa(vs) * fb(vs))
        if op == '/':
            return a / (2 + b * b), (lambda vs: fa(vs) / (2 + fb(vs) * fb(vs)))
        k = int(rng.choice([2, 3]))
        return a ** k, (lambda vs: fa(vs) ** k)
    a, fa = random_expr(rng, nvars, depth - 1)
    s, f, name = UNARY[int(rng.integers(len(UNARY)))]
    if name is not None and rng.random() < 0.3:
        return s(a), (lambda vs: via_array(name, fa(vs)))
    return s(a), (lambda vs: f(fa(vs)))


def apply_level(op, g, v, rng):
    """d/dv g(v) at v by operator ``op`` (g: a function of one real)."""
    if op == 'derivative':
        return nd.derivative(g)(v)
    if op == 'gradient_r':
        return nd.gradient_r(g)(v)
    if op == 'gradient_f':
        return nd.gradient_f(g)(v)
    if op == 'jvp':
        return nd.jvp(g, (v,), (1.0,))[1]
    if op == 'vjp':
        return nd.vjp(g, v)[1](1.0)[0]
    if op == 'jacobian_f':
        return nd.jacobian_f(g)(v)
    if op == 'jacobian_r':
        return nd.jacobian_r(g)(v)
    if op == 'value_and_grad':
        return nd.value_and_gradient_r(g)(v)[1]
    if op == 'hessian-diag':          # d/dv of g: half the second derivative of the integral
        return nd.gradient_r(lambda w: g(w))(v)
    if op == 'function-valued':       # derivative of a curried function, applied afterwards
        dg = nd.derivative(lambda w: (lambda unused: g(w)))(v)
        return dg(0.0)
    if op == 'checkpoint':           # reverse mode recomputing g (closures: taped, warned)
        return nd.gradient_r(nd.checkpoint(g))(v)
    if op == 'array':                # through a one-element array argument, batched forward
        return nd.gradient_f(lambda w: g(w[0]))(np.array([v]) if isinstance(v, float)
                                                else anp.reshape(v, (1,)))[0]
    if op == 'stop_gradient':        # g plus a term whose derivative is stopped
        return nd.gradient_r(lambda w: g(w) + nd.stop_gradient(w * w))(v)
    if op.startswith('stage'):        # 'stage:<operator>', chosen when the case is made, so
        inner = getattr(nd, op.split(':')[1])          # that a rerun (checkpoint) is the same
        return nd.stage(inner(g))(v)
    raise ValueError(op)


def _plain(v):
    return not isinstance(v, nd.Bundle) and not isinstance(v, nd.TapeCell)


OPS = ['derivative', 'gradient_r', 'gradient_f', 'jvp', 'vjp', 'jacobian_f', 'jacobian_r',
       'value_and_grad', 'function-valued', 'stage', 'checkpoint', 'array', 'stop_gradient']


def nested_case(rng):
    """(description, nestad's value, exact value) of one random nesting."""
    k = int(rng.integers(1, 5))
    f_s, f_n = random_expr(rng, k, int(rng.integers(1, 4)))
    hs = [random_expr(rng, i + 1, 1) if rng.random() < 0.6 else (sp.Integer(1), lambda vs: 1.0)
          for i in range(k)]
    ps = [None] + [random_expr(rng, i, 1) if rng.random() < 0.6 else
                   (sp.Float(c := float(rng.uniform(-1, 1))), lambda vs, c=c: c) for i in range(1, k)]
    ops = [str(rng.choice(OPS)) for _ in range(k)]
    ops = [op + ':' + str(rng.choice(['derivative', 'gradient_r', 'gradient_f', 'jacobian_r']))
           if op == 'stage' else op for op in ops]
    a = float(rng.uniform(-1, 1))

    # exact: R_k = f; R_i = d/dv_i [h_i * R_{i+1} with v_{i+1} = p_{i+1}]
    R = f_s
    for i in range(k - 1, -1, -1):
        if i + 1 < k:
            R = R.subs(X[i + 1], ps[i + 1][0])
        R = sp.diff(hs[i][0] * R, X[i])
    exact = float(R.subs(X[0], a).evalf(30))

    # nestad: level i is a function of the enclosing values vs (a list)
    def level(i, vs):
        if i == k:
            return f_n(vs)
        h = hs[i][1]
        if i == 0:
            point = a
        else:
            point = ps[i][1](vs)
        return apply_level(ops[i], lambda v: h(vs + [v]) * level(i + 1, vs + [v]), point, rng)

    desc = f"k={k} ops={ops} f={f_s} h={[str(h[0]) for h in hs]} p={[str(p[0]) for p in ps[1:]]} a={a!r}"
    try:
        value = level(0, [])
    except Exception as e:
        e.args = (f"{e.args[0] if e.args else ''} [in {desc}]",) + e.args[1:]
        raise
    return desc, value, exact


def amazing_case(rng):
    a = float(rng.uniform(-1, 1))
    y = float(rng.uniform(-1, 1))
    s, f, name = UNARY[int(rng.integers(len(UNARY)))]
    u = sp.Symbol('u')
    exact = float(sp.diff(s(u), u, 2).subs(u, 2 * a + y).evalf(30))
    fh = nd.derivative(lambda x: lambda h: lambda z: h(x + z))(a)
    outer = str(rng.choice(['plain', 'derivative', 'gradient_r']))
    if outer == 'plain':
        value = fh(fh(f))(y)
        return f"fh(fh({name or s}))({y}) a={a}", value, exact
    # d/dy of fh(fh(g))(y) = g'''(2a + y)
    exact = float(sp.diff(s(u), u, 3).subs(u, 2 * a + y).evalf(30))
    op = nd.derivative if outer == 'derivative' else nd.gradient_r
    value = op(lambda z: fh(fh(f))(z))(y)
    return f"{outer} of fh(fh({name or s}))({y}) a={a}", value, exact


def closure_case(rng):
    """A derivative-valued function made in one run and applied inside another run of
    either mode, over the outer variable: d/dx [x * D(g)(x * c)] with D(g) = derivative of
    a curried g."""
    s, f, name = UNARY[int(rng.integers(len(UNARY)))]
    c = float(rng.choice([0.5, 2.0, -1.0]))
    b = float(rng.uniform(-1, 1))
    a = float(rng.uniform(-1, 1))
    x, y = sp.symbols('x y')
    # dg(y) = d/db [f(b * y)] = y f'(b y); value: d/dx [x * dg(x c)] at a
    dg = nd.derivative(lambda bb: lambda yy: f(bb * yy))(b)
    expr = x * (sp.diff(s(sp.Symbol('bb') * y), sp.Symbol('bb')).subs(sp.Symbol('bb'), b)).subs(y, x * c)
    exact = float(sp.diff(expr, x).subs(x, a).evalf(30))
    op = str(rng.choice(['derivative', 'gradient_r', 'gradient_f', 'jvp']))
    value = apply_level(op, lambda xx: xx * dg(xx * c), a, rng)
    return f"closure {op} {name or s} c={c} b={b} a={a}", value, exact


def run_nesting(opts):
    warnings.simplefilter('ignore')           # checkpoint's "reads a value from its closure"
    rng_base = opts.seed
    counts = {'cases': 0, 'mismatches': 0, 'errors': 0}
    kinds = {'nested': nested_case, 'amazing': amazing_case, 'closure': closure_case}
    failures = []
    for i in range(opts.first, opts.first + opts.programs):
        rng = np.random.default_rng([rng_base, i, 7])
        kind = str(rng.choice(['nested', 'nested', 'nested', 'amazing', 'closure']))
        counts['cases'] += 1
        try:
            desc, value, exact = kinds[kind](rng)
            value = float(nd.primal_value(value))
        except nd.StagingError as e:
            # documented: a staged function may not close over a value being differentiated
            # by an enclosing run, nor over another trace's values; it says so
            if 'closes over' in str(e) or 'used inside another' in str(e):
                counts['staging refusals (documented)'] = counts.get('staging refusals (documented)', 0) + 1
                continue
            counts['errors'] += 1
            failures.append((i, kind, f"{type(e).__name__}: {e}"[:300]))
            continue
        except Exception as e:            # noqa: BLE001
            counts['errors'] += 1
            failures.append((i, kind, f"{type(e).__name__}: {e}"[:300]))
            continue
        if not (math.isfinite(exact) and abs(value - exact) <= 1e-8 * (1 + abs(exact))):
            if not math.isfinite(exact) and not math.isfinite(value):
                continue
            counts['mismatches'] += 1
            failures.append((i, kind, f"{desc}: nestad {value!r}, exact {exact!r}"))
    print(f"nesting: {counts['cases']} cases, {counts['mismatches']} mismatches, "
          f"{counts['errors']} errors, "
          f"{counts.get('staging refusals (documented)', 0)} staging refusals (documented)")
    for f in failures[:20]:
        print("  ", f)
    return counts, failures
