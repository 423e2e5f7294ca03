"""Staged nestad (``nestad.stage``): per-call cost against plain Python and hand-written
numpy, GradBench solves end to end against hand-written Python and JAX jit, and the numba
backend against JAX jit's steady state.

What is measured
----------------
1. Per call, the staged forward derivative of overhead.py's 1,000-operation chain
   (``x = sin(x) * 1.0001 + 0.1 * x`` 250 times, at 0.5):
   ``nestad.stage(nestad.derivative(chain))``, against the chain on Python floats.
   Target <= 3x.
2. Per call, the staged reverse gradient of overhead.py's 100-input, 10,000-operation
   ``mix`` (``nestad.stage(nestad.gradient_r(mix))`` on a list of 100 floats), against
   ``mix`` on floats.  Target <= 4x.
3. Per call, the staged second derivatives of the chain in the four pairings ff, fr,
   rf, rr (``stage(derivative(derivative(chain)))``, ...; first letter the outer
   mode), against the chain on floats.  Target <= 10x each.
4. GradBench ``saddle`` and ``particle`` (see nested.py) in the four pairings, staged
   whole: a fresh ``nestad.stage`` object per measured solve, so every solve pays all
   of its tracing and compiling.  The solver is GradBench's gradient descent written
   with ``nestad.while_loop`` and ``nestad.where`` (``argmin`` below), the same
   arithmetic as nested.py's, so the answers are exact: saddle
   ``[8.246324826140356e-06] * 4`` bit for bit, particle ``0.2071918746486116`` (its
   relative error is shown; tolerance 1e-10, as in nested.py).  Targets: <= 3x the
   hand-written Python solve of nested.py (``saddle_plain``, ``particle_plain``, timed
   in the same process, each staged solve paired with a plain one), and faster than
   JAX jit end to end: the same solver in JAX (``jax.lax.while_loop``, ``jnp.where``,
   inner and outer gradients by ``jax.jacfwd`` (forward) or ``jax.grad`` (reverse)),
   the whole solve under one ``jax.jit``, timed on its first call (tracing, compiling
   and running) with a fresh jitted function and ``jax.clear_caches()`` before each
   measured solve.  JAX cannot reverse-differentiate ``lax.while_loop`` in general:
   where it raises, the table says so with the exception's type.
5. The MLP gradient and the Rosenbrock HVP of arrays.py, staged
   (``stage(gradient_r(mlp_loss))``, ``stage(lambda x, v: hvp(rosen, x, v))``), per
   call, against arrays.py's hand-written numpy; CPU time (``time.process_time``), one
   BLAS thread, glibc's mmap threshold raised as arrays.py does (freed memory reused).
   Target <= 1.5x.
6. ``backend="numba"``: per call, after compiling, the staged chain derivative (1) and
   the staged saddle solve (4), against JAX jit's steady state (its second and later
   calls) of the same computations.  Target: nestad-numba / JAX jit <= 2.  numba's
   compile time (the second call, which compiles, less a steady call) and JAX's (its
   first call) are reported.  Here the two run in one process, their samples
   alternating: both are compiled native code, which sharing a process does not slow
   (checked: the numba solve takes the same time with JAX imported and used), while a
   comparison across processes would go through the plain-Python baselines, whose
   single-call samples drift by up to 2x on a loaded machine.
7. Dense Hessians at n = 1000 (benchmarks/hessians.py: Rosenbrock, a quadratic form plus
   ``sum(log(1 + x^2))``, a small network's loss in its weights): ``nd.hessian(f)`` eager
   and ``nd.stage(nd.hessian(f))``, against ``jax.jit(jax.hessian(f))``'s steady state,
   their samples alternating in one process (CPU time, one BLAS and XLA thread, glibc's
   mmap threshold raised).  Target: <= 1.5x JAX jit, eager and staged.

8. Staging at scale: the reverse gradient of a straight-line ``mix`` (overhead.py's, with
   ``size / 5`` steps: 1e3, 1e4, 1e5 and 1e6 equations), each size in fresh processes.
   Trace (the first call of a fresh ``nestad.stage``) and compile (the second call: code
   generation, ``compile()``, one run) per equation, their sum against one eager
   evaluation of the same gradient (target <= 10x), and, in another process under
   ``tracemalloc``, the peak memory per equation of each of the two calls (target <= 600
   bytes), the peak RSS of the timing process (eager gradient and staging; the 1e6 case
   under 1 GB) and the memory still held
   after the second call, next to what the Program alone holds (``nestad.trace``).
   ``--scale`` runs this part only.

Conventions, as in the other scripts: each part runs in its own fresh Python process
(nestad's Python backend, its numba backend, JAX, and the array workloads), so that one
library's imports, caches and threads cannot slow another; every sample of a workload
alternates with a sample of its plain baseline in the same process, and ratios are
medians of the per-sample ratios (this damps the drifts of a shared machine); times
across processes (nestad against JAX) are compared as quotients of these
plain-normalised ratios (except part 6).  Staged functions are called twice before per-call timing
(the first call traces and returns its result directly, the second compiles).  Every
answer is checked before anything is timed: staged results against eager nestad (to
1e-12 relative), GradBench answers against the known ones, JAX's against nestad's.
The garbage collector stays on, with the objects made by the imports frozen.  JAX
runs on the CPU, in float64, with one intra-op thread.

Usage::

    PYTHONPATH=. python benchmarks/staging.py           # full run (about 2 minutes)
    PYTHONPATH=. python benchmarks/staging.py --quick   # smoke run (under a minute)

(``PYTHONPATH=.`` from the repository root makes sure that the nestad next to this
script is measured, not another installed copy; the header warns if it is not.)  The
peers are optional (``pip install -e ".[bench]"``; numba also as ``nestad[numba]``); a
missing one is shown as "not installed".
"""
import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings

# One thread for BLAS, XLA CPU only, no accelerator probing or preallocation, no log noise.
for _var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_var, '1')
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('XLA_FLAGS',
                      '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1')
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import nestad as nd  # noqa: E402
from _report import fmt_time, max_rel_diff, print_table  # noqa: E402
from nested import (DT, PARTICLE_EXPECTED, PARTICLE_TOLERANCE, SADDLE_EXPECTED,  # noqa: E402
                    SADDLE_START, SADDLE_TOLERANCE, V_START, W_START, X_START, charges_at,
                    particle_plain, saddle_objective, saddle_plain)
from overhead import X0, XS, chain, mix  # noqa: E402

MODES = ('ff', 'fr', 'rf', 'rr')
CHECK_TOLERANCE = 1e-12         # staged against eager nestad, relative
PEER_TOLERANCE = 1e-9           # JAX's chain derivative against nestad's, relative

TARGET_FORWARD = 3              # 1: staged / plain
TARGET_REVERSE = 4              # 2
TARGET_SECOND = 10              # 3
TARGET_SOLVE = 3                # 4: staged end to end / hand-written Python
TARGET_ARRAYS = 1.5             # 5: staged / hand-written numpy
TARGET_NUMBA = 2                # 6: nestad-numba / JAX jit, per call
TARGET_STAGING = 10             # 7: trace + compile / one eager evaluation
TARGET_BYTES = 600              # 7: peak bytes per equation while staging
SCALE_SIZES = (1_000, 10_000, 100_000, 1_000_000)

# Glibc's allocator as arrays.py sets it for every library (freed memory is reused).
MALLOC_ENV = {'MALLOC_MMAP_THRESHOLD_': str(1 << 30), 'MALLOC_TRIM_THRESHOLD_': str(1 << 30)}


# ---------------------------------------------------------------- GradBench, written once
# A "tool" gives the solver its sqrt, where, while_loop and gradient operators: nestad's
# (staged when the solve runs under nestad.stage) or JAX's.  The solver's own arithmetic
# is nested.py's, operation for operation (so nestad's staged answers equal its eager
# ones bit for bit); JAX's derivative rules and XLA's rewrites may change the last bits.

class Tool:
    def __init__(self, name, gradient, sqrt, where, while_loop):
        self.name, self.gradient, self.sqrt = name, gradient, sqrt
        self.where, self.while_loop = where, while_loop


NESTAD = Tool('nestad', {'f': nd.gradient_f, 'r': nd.gradient_r}, nd.sqrt, nd.where,
              nd.while_loop)


def jax_tool():
    import jax
    import jax.numpy as jnp
    return Tool('jax', {'f': jax.jacfwd, 'r': jax.grad}, jnp.sqrt, jnp.where,
                jax.lax.while_loop)


def argmin(tool, f, gradient, x, *params):
    """GradBench's gradient descent (nested.py's ``argmin``) as one structured loop:
    minimise ``f(x, *params)`` from the list ``x``; ``gradient(x, *params)`` is its
    gradient as a list.

    Each iteration evaluates what every branch of the eager solver would and chooses
    with ``where``, so the values are the eager solver's.  The parameters travel in the
    loop's state: reverse mode keeps a staged loop only for values in its state."""
    sqrt, where = tool.sqrt, tool.where
    state = (list(x), f(x, *params), list(gradient(x, *params)), 0, 1e-5, False,
             list(params))

    def cond(s):
        return ~s[5]

    def body(s):
        x, fx, g, i, eta, done, ps = s
        converged = sqrt(sum(gi * gi for gi in g)) <= 1e-5
        doubling = i == 10
        x_new = [xi - eta * gi for xi, gi in zip(x, g)]
        small_step = sqrt(sum((a - b) * (a - b) for a, b in zip(x, x_new))) <= 1e-5
        fx_new = f(x_new, *ps)
        g_new = gradient(x_new, *ps)
        step = ~converged & ~doubling                   # the eager solver tries a step
        better = fx_new < fx
        take = step & ~small_step & better
        reject = step & ~small_step & ~better
        double = ~converged & doubling
        x = [where(take, a, b) for a, b in zip(x_new, x)]
        g = [where(take, a, b) for a, b in zip(g_new, g)]
        fx = where(take, fx_new, fx)
        i = where(take, i + 1, where(double | reject, 0, i))
        eta = where(double, eta * 2.0, where(reject, eta / 2.0, eta))
        done = converged | (step & small_step)
        return (x, fx, g, i, eta, done, ps)

    return tool.while_loop(cond, body, state)[0]


def saddle(tool, mode, start):
    """``[x*, y*]`` (nested.py's ``saddle``): the outer gradient differentiates through
    the inner gradient ascent; the final argmax over q uses the outer mode."""
    outer, inner = (tool.gradient[m] for m in mode)

    def minus_f(q, p0, p1):
        return -saddle_objective([p0, p1], q)

    def q_gradient(grad_op):
        return lambda q, p0, p1: grad_op(lambda q: minus_f(q, p0, p1))(q)

    def max_over_q(p):
        q_star = argmin(tool, minus_f, q_gradient(inner), list(start), p[0], p[1])
        return saddle_objective(p, q_star)

    x_star = argmin(tool, max_over_q, outer(max_over_q), list(start))
    y_star = argmin(tool, minus_f, q_gradient(outer), list(start), x_star[0], x_star[1])
    return list(x_star) + list(y_star)


def particle_objective(tool, inner, w):
    """``x_f[0]^2`` (nested.py's ``naive_euler``): Euler steps while the next position
    is above the x axis, the potential's gradient by ``inner``; ``w`` travels in the
    loop's state."""
    sqrt = tool.sqrt

    def potential(x, w):
        total = 0.0
        for c in charges_at(w):
            d0, d1 = x[0] - c[0], x[1] - c[1]
            total = total + 1.0 / sqrt(d0 * d0 + d1 * d1)
        return total

    def cond(s):
        x, v, w = s
        return x[1] + DT * v[1] > 0                  # the eager loop's x_new[1] > 0

    def body(s):
        x, v, w = s
        g = inner(lambda x: potential(x, w))(x)
        acc = [-g[0], -g[1]]
        x_new = [x[0] + DT * v[0], x[1] + DT * v[1]]
        return (x_new, [v[0] + DT * acc[0], v[1] + DT * acc[1]], w)

    x, v, _ = tool.while_loop(cond, body, (list(X_START), list(V_START), w))
    dt_f = -x[1] / v[1]
    x_f = x[0] + dt_f * v[0]
    return x_f * x_f


def particle(tool, mode, start):
    """The optimal ``w`` (nested.py's ``particle``)."""
    outer, inner = (tool.gradient[m] for m in mode)

    def objective(w):
        return particle_objective(tool, inner, w[0])

    return argmin(tool, objective, outer(objective), list(start))[0]


WORKLOADS = {'saddle': (saddle, SADDLE_START, saddle_plain),
             'particle': (particle, W_START, particle_plain)}


def solve_error(name, out):
    """(error, exact?, within nested.py's tolerance?) of a solve's answer: saddle's largest
    absolute difference from the expected list (exact: equal bit for bit), particle's
    relative error (exact: within the tolerance, 1e-10)."""
    if name == 'saddle':
        out = [float(v) for v in out]
        err = max(abs(a - b) for a, b in zip(out, SADDLE_EXPECTED))
        return err, out == SADDLE_EXPECTED, err <= SADDLE_TOLERANCE
    err = abs(float(out) - PARTICLE_EXPECTED) / PARTICLE_EXPECTED
    return err, err <= PARTICLE_TOLERANCE, err <= PARTICLE_TOLERANCE


def summarise(errors):
    """The largest error of several solves, and whether all were exact, all within tolerance."""
    return dict(err=max(e[0] for e in errors), exact=all(e[1] for e in errors),
                ok=all(e[2] for e in errors), solves=len(errors))


def staged_solve(name, mode, backend='python'):
    """A fresh staged solver (nothing traced or compiled yet)."""
    solve, _, _ = WORKLOADS[name]
    return nd.stage(lambda start: solve(NESTAD, mode, start), backend=backend)


# ---------------------------------------------------------------- the scalar workloads

GRADIENT = {'f': nd.derivative, 'r': nd.gradient_r}


def chain_nd(x):
    return chain(x, nd.sin)


def mix_nd(xs):
    return mix(xs, nd.sin)


def scalar_tasks():
    """key: (label, eager operator, its argument, plain baseline, target)."""
    plain_chain = lambda: chain(X0, math.sin)      # noqa: E731
    tasks = {
        'fwd': ('1. d/dx chain, forward', nd.derivative(chain_nd), X0, plain_chain,
                TARGET_FORWARD),
        'rev': ('2. gradient of mix, reverse', nd.gradient_r(mix_nd), XS,
                lambda: mix(XS, math.sin), TARGET_REVERSE),
    }
    for m in MODES:
        tasks[m] = (f'3. d2/dx2 chain, {m}', GRADIENT[m[0]](GRADIENT[m[1]](chain_nd)), X0,
                    plain_chain, TARGET_SECOND)
    return tasks


# ---------------------------------------------------------------- measuring

def _calibrate(fn, min_sample, clock):
    t0 = clock()
    fn()
    once = clock() - t0
    return max(1, math.ceil(min_sample / max(once, 1e-9))), once


def _sample(fn, calls, clock):
    t0 = clock()
    for _ in range(calls):
        fn()
    return (clock() - t0) / calls


def paired(fn, baseline, quick, clock=time.perf_counter, one_call=False):
    """(median time per call of ``fn``, of ``baseline``, median per-sample ratio).

    Samples of ``fn`` and of the baseline alternate; a sample repeats its callable until
    it takes at least a minimum time (one call each if ``one_call``: end-to-end solves,
    which must not be repeated on a warm object).  Rounds stop at the repeat count or
    once the time budget is spent."""
    min_sample, repeats, budget = (0.01, 3, 2.0) if quick else (0.05, 9, 8.0)
    if one_call:
        calls = base_calls = 1
        repeats = 1 if quick else repeats
    else:
        calls, _ = _calibrate(fn, min_sample, clock)
        base_calls, _ = _calibrate(baseline, min_sample, clock)
    times, base_times = [], []
    start = time.perf_counter()
    for _ in range(repeats):
        times.append(_sample(fn, calls, clock))
        base_times.append(_sample(baseline, base_calls, clock))
        if time.perf_counter() - start > budget and len(times) >= (1 if quick else 3):
            break
    ratios = [a / b for a, b in zip(times, base_times)]
    return statistics.median(times), statistics.median(base_times), statistics.median(ratios)


def first_calls(staged, *args):
    """Call a fresh staged function twice: (result of the first call, seconds of the first
    call (tracing), seconds of the second (compiling, then running))."""
    t0 = time.perf_counter()
    first = staged(*args)
    t1 = time.perf_counter()
    staged(*args)
    return first, t1 - t0, time.perf_counter() - t1


def as_floats(x):
    if isinstance(x, (list, tuple)):
        return [float(v) for v in x]
    return [float(x)]


# ---------------------------------------------------------------- workers

def worker_scalar(quick):
    """Parts 1-3: nestad's Python backend per call against plain floats."""
    out = {}
    for key, (label, op, arg, plain, target) in scalar_tasks().items():
        want = as_floats(op(arg))                   # eager nestad
        staged = nd.stage(op)
        first, t_trace, t_compile = first_calls(staged, arg)
        got = as_floats(staged(arg))
        diff = max(max_rel_diff(want, as_floats(first)), max_rel_diff(want, got))
        if diff > CHECK_TOLERANCE:
            raise AssertionError(f'{label}: staged differs from eager nestad by {diff:.1e}')
        t, t_plain, ratio = paired(lambda: staged(arg), plain, quick)
        out[key] = dict(time=t, plain=t_plain, ratio=ratio, diff=diff, trace=t_trace,
                        compile=t_compile - t, eqns=len(staged.programs()[0].eqns))
    return out


def worker_gradbench(quick):
    """Part 4, nestad: staged solves end to end (a fresh stage object each) against the
    hand-written Python solve; also the per-call time of a compiled solver."""
    out = {}
    for name, (_, start, plain) in WORKLOADS.items():
        for mode in MODES:
            errors = []

            def solve():
                answer = staged_solve(name, mode)(start)
                errors.append(solve_error(name, answer))
                return answer

            solve()                                 # untimed: first-use costs of the process
            t, t_plain, ratio = paired(solve, plain, quick, one_call=True)
            staged = staged_solve(name, mode)
            staged(start)
            staged(start)                           # compiled
            steady, _, steady_ratio = paired(lambda: staged(start), plain, True, one_call=True)
            errors.append(solve_error(name, staged(start)))
            out[f'{name} {mode}'] = dict(time=t, plain=t_plain, ratio=ratio, steady=steady,
                                         steady_ratio=steady_ratio, **summarise(errors))
    return out


def worker_jax(quick):
    """Part 4, JAX jit: end to end (the first call of a freshly jitted solver, after clearing
    JAX's caches), paired with the plain baseline."""
    import jax
    jax.config.update('jax_enable_x64', True)
    tool = jax_tool()
    block = jax.block_until_ready
    out = {'version': jax.__version__}
    block(jax.jit(lambda x: x + 1.0)(1.0))          # initialise the runtime, untimed
    for name, (solve, start, plain) in WORKLOADS.items():
        for mode in MODES:
            key = f'{name} {mode}'
            errors = []

            def end_to_end():
                jax.clear_caches()
                answer = block(jax.jit(lambda s: solve(tool, mode, s))(start))
                errors.append(solve_error(name, answer))
                return answer

            try:
                end_to_end()            # untimed; raises where JAX cannot do the pairing
            except Exception as e:                  # noqa: BLE001 (reported, not hidden)
                out[key] = dict(error=type(e).__name__, message=str(e).splitlines()[0][:200])
                continue
            t, t_plain, ratio = paired(end_to_end, plain, quick, one_call=True)
            out[key] = dict(time=t, plain=t_plain, ratio=ratio, **summarise(errors))
    return out


def worker_numba(quick):
    """Part 6: nestad's numba backend (compile time, per call against plain) and, in the
    same process, JAX jit's steady state of the same computations, samples of the two
    alternating (compiled native code: sharing a process does not slow either, while the
    machine's drifts would blur a comparison across processes)."""
    try:
        import numba
    except ImportError as e:
        return {'missing': str(e)}
    from nestad.staging.numba_backend import NumbaFallbackWarning
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update('jax_enable_x64', True)
        tool = jax_tool()
        block = jax.block_until_ready
        block(jax.jit(lambda x: x + 1.0)(1.0))      # initialise the runtime, untimed
    except ImportError:
        jax = None
    out = {'version': numba.__version__, 'jax': jax is not None}

    def compiled(staged, *args):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always', NumbaFallbackWarning)
            first, t_trace, t_second = first_calls(staged, *args)
        fell_back = [str(w.message) for w in caught if issubclass(w.category, NumbaFallbackWarning)]
        return first, t_trace, t_second, fell_back

    def against_jax(r, fn, jitted):
        """Compile ``jitted`` (timed: its first call), then pair ``fn`` with it."""
        if jax is None:
            return
        t0 = time.perf_counter()
        jax_first = block(jitted())
        r['jax_compile'] = time.perf_counter() - t0
        _, r['jax_time'], r['vs_jax'] = paired(fn, lambda: block(jitted()), quick)
        return jax_first

    # the chain's forward derivative
    staged = nd.stage(nd.derivative(chain_nd), backend='numba')
    first, t_trace, t_second, fell_back = compiled(staged, X0)
    want = nd.derivative(chain_nd)(X0)
    diff = max_rel_diff([want], [first, staged(X0)])
    fn = lambda: staged(X0)                         # noqa: E731
    t, t_plain, ratio = paired(fn, lambda: chain(X0, math.sin), quick)
    r = out['chain'] = dict(time=t, plain=t_plain, ratio=ratio, diff=diff, trace=t_trace,
                            compile=t_second - t, fell_back=fell_back)
    if jax is not None:
        d = jax.jit(lambda x: jax.jvp(lambda y: chain(y, jnp.sin), (x,), (jnp.ones_like(x),))[1])
        value = float(against_jax(r, fn, lambda: d(X0)))
        r['jax_diff'] = max_rel_diff([want], [value])
    # the saddle solve
    for mode in (('ff',) if quick else MODES):
        staged = staged_solve('saddle', mode, backend='numba')
        first, t_trace, t_second, fell_back = compiled(staged, SADDLE_START)
        errors = [solve_error('saddle', first), solve_error('saddle', staged(SADDLE_START))]
        fn = lambda: staged(SADDLE_START)           # noqa: E731
        t, t_plain, ratio = paired(fn, saddle_plain, quick)
        r = out[f'saddle {mode}'] = dict(time=t, plain=t_plain, ratio=ratio, trace=t_trace,
                                         compile=t_second - t, fell_back=fell_back,
                                         **summarise(errors))
        if jax is not None:
            jitted = jax.jit(lambda s: saddle(tool, mode, s))
            answer = against_jax(r, fn, lambda: jitted(SADDLE_START))
            r['jax'] = summarise([solve_error('saddle', answer)])
    return out


def worker_arrays(quick):
    """Part 5: staged MLP gradient and Rosenbrock HVP against arrays.py's hand-written
    numpy, CPU time, paired; eager nestad for reference."""
    import arrays
    work = {
        'mlp': ('5. MLP gradient (batch 256, 784-256-10)', nd.stage(nd.gradient_r(arrays.mlp_loss)),
                (arrays.PARAMS,), nd.gradient_r(arrays.mlp_loss)),
        'hvp': ('5. Rosenbrock HVP n=1000', nd.stage(lambda x, v: nd.hvp(arrays.rosen, x, v)),
                (arrays.XR, arrays.VR), lambda x, v: nd.hvp(arrays.rosen, x, v)),
    }
    out = {}
    for key, (label, staged, args, eager) in work.items():
        first, t_trace, t_second = first_calls(staged, *args)
        for result in (first, staged(*args)):
            arrays.check(key, 'staged nestad', result)
        floor = arrays.FLOORS[key]
        t, t_floor, ratio = paired(lambda: staged(*args), floor, quick, clock=time.process_time)
        t_eager, _, eager_ratio = paired(lambda: eager(*args), floor, quick,
                                         clock=time.process_time)
        out[key] = dict(label=label, time=t, floor=t_floor, ratio=ratio, eager=t_eager,
                        eager_ratio=eager_ratio, trace=t_trace, compile=t_second - t)
    return out


def worker_hessian(quick):
    """Part 7: dense Hessians at n = 1000 against JAX jit (benchmarks/hessians.py)."""
    import hessians
    return hessians.measure(quick)

# ---------------------------------------------------------------- 8. staging at scale

def scale_gradient(size):
    """The eager reverse gradient of overhead.py's mix with ``size // 5`` steps (about
    ``size`` equations staged) and its argument."""
    steps = max(1, size // 5)

    def long_mix(xs):             # overhead.py's mix, ``steps`` long
        n = len(xs)
        acc = 0.0
        for k in range(steps):
            acc = acc * 0.999 + nd.sin(xs[k % n] * xs[(7 * k + 3) % n])
        return acc

    return nd.gradient_r(long_mix), list(XS)


def worker_scale(size, quick):
    """Part 8, times: eager gradient, then a fresh staged one's first (trace) and second
    (compile and run) calls and a third (run)."""
    grad, xs = scale_gradient(size)
    eager = []
    for _ in range(1 if size >= 1_000_000 else 3):
        t0 = time.perf_counter()
        want = grad(xs)
        eager.append(time.perf_counter() - t0)
    staged = nd.stage(grad)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', nd.StagingWarning)      # (the huge-trace warning)
        first, t_trace, t_second = first_calls(staged, xs)
    t0 = time.perf_counter()
    got = staged(xs)
    t_run = time.perf_counter() - t0
    if first != want or got != want:
        raise AssertionError(f'scale {size}: staged differs from eager nestad')
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return dict(eqns=len(staged.programs()[0].eqns), eager=min(eager), trace=t_trace,
                compile=t_second - t_run, second=t_second, run=t_run, rss=rss)


def worker_scale_memory(size, quick):
    """Part 8, memory under tracemalloc: peak of the first and second calls, what stays
    after them, what the Program alone holds (and the process's peak RSS, which
    tracemalloc's own records inflate: the RSS reported is the time worker's)."""
    import resource
    import tracemalloc
    grad, xs = scale_gradient(size)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    program = nd.trace(grad, xs)
    eqns = len(program.eqns)
    gc.collect()
    program_bytes = tracemalloc.get_traced_memory()[0] - base
    del program
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    staged = nd.stage(grad)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', nd.StagingWarning)
        staged(xs)
        peak_trace = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        staged(xs)
    kept_now, peak_second = tracemalloc.get_traced_memory()
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - base
    del staged
    gc.collect()
    left = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return dict(eqns=eqns, peak_trace=peak_trace, peak_second=peak_second - base, kept=kept,
                program=program_bytes, left=left, rss_traced=rss)


def run_scale(quick):
    sizes = SCALE_SIZES[:3] if quick else SCALE_SIZES
    return {size: dict(run_worker('scale', quick, size), **run_worker('scale_memory', quick, size))
            for size in sizes}


def print_scale(runs, misses):
    rows = []
    for size, r in runs.items():
        n = r['eqns']
        ratio = (r['trace'] + r['second']) / r['eager']
        peak = max(r['peak_trace'], r['peak_second']) / n
        ok = ratio <= TARGET_STAGING and peak <= TARGET_BYTES and \
            (size < 1_000_000 or r['rss'] < 1 << 30)
        rows.append([f'{n:,}', fmt_time(r['eager']), f'{r["trace"] / n * 1e6:.1f} us',
                     f'{r["compile"] / n * 1e6:.1f} us', fmt_time(r['run']), fmt_ratio(ratio),
                     f'{r["peak_trace"] / n:.0f} B', f'{r["peak_second"] / n:.0f} B',
                     f'{r["rss"] / 2**20:.0f} MB', f'{r["kept"] / n:.0f} B',
                     f'{r["program"] / n:.0f} B', f'{r["left"]:.0f} B', verdict(ok)])
        if not ok:
            misses.append(f'8. {n:,} equations: staging {fmt_ratio(ratio)} eager (target <= '
                          f'{TARGET_STAGING}x), peak {peak:.0f} B per equation (target <= '
                          f'{TARGET_BYTES})' + (f', peak RSS {r["rss"] / 2**20:.0f} MB'
                                                 if size >= 1_000_000 else ''))
    print(f'8. Staging at scale: reverse gradient of a straight-line mix, fresh processes per '
          f'size (targets: trace + compile <= {TARGET_STAGING}x one eager gradient, <= '
          f'{TARGET_BYTES} B peak per equation, the 1e6 case under 1 GB)')
    print_table(['equations', 'eager', 'trace/eqn', 'compile/eqn', 'run', '1st+2nd/eager',
                 'peak 1st/eqn', 'peak 2nd/eqn', 'peak RSS', 'kept/eqn', 'program/eqn',
                 'after del', 'result'], rows)
    print('   trace: the first call; compile: the second call less a third (a run); peaks and '
          'kept memory under tracemalloc (another process), kept: held after the second call '
          '(the program, its compiled code, the cache), program: what nestad.trace\'s Program '
          'alone holds, after del: what stays once the staged function is deleted; peak RSS: '
          'of the timing process (the eager gradient, then staging).')
    print()


WORKERS = {'scalar': worker_scalar, 'gradbench': worker_gradbench, 'jax': worker_jax,
           'numba': worker_numba, 'arrays': worker_arrays, 'hessian': worker_hessian,
           'scale': worker_scale, 'scale_memory': worker_scale_memory}
MAIN_WORKERS = ('scalar', 'gradbench', 'jax', 'numba', 'arrays', 'hessian')


def run_worker(name, quick, size=None):
    """A worker in a fresh interpreter (the arrays one with arrays.py's allocator setting)."""
    env = dict(os.environ)
    if name in ('arrays', 'hessian'):
        env.update(MALLOC_ENV)
    cmd = [sys.executable, os.path.abspath(__file__), '--worker', name] + (['--quick'] * quick)
    if size is not None:
        cmd += ['--size', str(size)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f'measuring {name} failed:\n{proc.stderr}')
    return json.loads(proc.stdout.splitlines()[-1])


def worker_main(name, quick, size=None):
    if name == 'jax':
        try:
            import jax  # noqa: F401
        except ImportError as e:
            print(json.dumps({'missing': str(e)}))
            return 0
    # The garbage collector stays on; what the imports made is frozen.
    gc.collect()
    gc.freeze()
    print(json.dumps(WORKERS[name](quick) if size is None else WORKERS[name](size, quick)))
    return 0


# ---------------------------------------------------------------- report

def fmt_ratio(r):
    return f'{r:.0f}x' if r >= 100 else f'{r:.1f}x' if r >= 10 else f'{r:.3g}x'


def verdict(ok):
    return 'PASS' if ok else 'MISS'


def _version(dist):
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return 'not installed'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='a fast smoke run (rough figures)')
    parser.add_argument('--scale', action='store_true', help='part 8 (staging at scale) only')
    parser.add_argument('--worker', choices=WORKERS, help=argparse.SUPPRESS)
    parser.add_argument('--size', type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args.worker, args.quick, args.size)
    if args.scale:
        load_start = os.getloadavg()
        misses = []
        runs = run_scale(args.quick)
        print(f'load average {load_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end')
        print_scale(runs, misses)
        print('All targets met.' if not misses else 'Targets missed:\n  ' + '\n  '.join(misses))
        return 0

    import numpy
    load_start = os.getloadavg()
    started = time.perf_counter()
    runs = {name: run_worker(name, args.quick) for name in MAIN_WORKERS}
    scale = run_scale(args.quick)
    load_end = os.getloadavg()
    jx, nb = runs['jax'], runs['numba']
    has_jax, has_numba = 'missing' not in jx, 'missing' not in nb

    print('Staged nestad: per call against plain Python and hand-written numpy, GradBench end '
          'to end against hand-written Python and JAX jit, numba against JAX jit')
    print(f'Python {platform.python_version()}, nestad {nd.__version__}, '
          f'numpy {numpy.__version__}, '
          f'jax {jx["version"] if has_jax else "not installed"}, '
          f'numba {nb["version"] if has_numba else "not installed"}; {os.cpu_count()} CPU(s), '
          f'load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end '
          f'(1-minute); {time.perf_counter() - started:.0f} s'
          + ('; --quick (rough figures)' if args.quick else ''))
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.dirname(os.path.dirname(os.path.abspath(nd.__file__))) != here:
        print('  WARNING: the nestad imported is not the one next to this script '
              '(run with PYTHONPATH set to the repository root)')
    print('  Each part runs in its own fresh process; each sample alternates with a sample of '
          'its plain baseline, and ratios are medians of per-sample ratios; across processes '
          '(nestad against JAX in part 4b) ratios of these plain-normalised times (part 6 pairs '
          'numba with JAX in one process).  Garbage collector on, '
          'imports frozen (gc.freeze).  JAX: CPU, float64, one intra-op thread.')
    print()
    misses, problems = [], []

    # ------------------------------------------------ 1-3
    sc = runs['scalar']
    rows = []
    for key, (label, _, _, _, target) in scalar_tasks().items():
        r = sc[key]
        ok = r['ratio'] <= target
        rows.append([label, fmt_time(r['plain']), fmt_time(r['time']), fmt_ratio(r['ratio']),
                     f'<= {target}x', verdict(ok), f'{r["eqns"]}', fmt_time(r['trace']),
                     fmt_time(r['compile']), f'{r["diff"]:.0e}'])
        if not ok:
            misses.append(f'{label}: staged {fmt_ratio(r["ratio"])} plain (target <= {target}x)')
    print('1-3. Staged scalar derivatives (Python backend), median time per call after compiling')
    print_table(['workload', 'plain', 'staged', 'staged/plain', 'target', 'result', 'equations',
                 'trace (1st call)', 'compile (2nd)', 'vs eager'], rows)
    print()

    # ------------------------------------------------ 4
    gb = runs['gradbench']

    def answer(key, r):
        if not r['ok']:
            problems.append(f'{key}: answer off ({r["err"]:.1e})')
        if key.startswith('saddle'):
            return 'exact' if r['exact'] else f'{r["err"]:.1e}'
        return f'{r["err"]:.1e}'

    rows = []
    for key, r in gb.items():
        ok = r['ratio'] <= TARGET_SOLVE
        if not r['exact']:
            problems.append(f'{key}: staged answer not exact ({r["err"]:.1e})')
        rows.append([key, fmt_time(r['plain']), fmt_time(r['time']), fmt_ratio(r['ratio']),
                     f'<= {TARGET_SOLVE}x', verdict(ok), answer(key, r), fmt_time(r['steady']),
                     fmt_ratio(r['steady_ratio'])])
        if not ok:
            misses.append(f'4. {key}: staged end to end {fmt_ratio(r["ratio"])} the hand-written '
                          f'solve (target <= {TARGET_SOLVE}x)')
    print('4a. GradBench end to end with nestad.stage (a fresh stage object per solve: '
          'tracing, compiling, running), against the hand-written Python solve')
    print_table(['workload', 'plain solve', 'staged e2e', 'staged/plain', 'target', 'result',
                 'answer', 'staged, compiled', 'vs plain'], rows)
    print('   answer: saddle "exact" = [8.246324826140356e-06] * 4 bit for bit (else the largest '
          f'absolute error), particle the relative error (tolerance {PARTICLE_TOLERANCE:.0e}); '
          'every timed solve is checked.  "staged, compiled": later calls of one staged solver '
          '(for reference).')
    print()
    rows = []
    for key, r in gb.items():
        if not has_jax:
            rows.append([key, fmt_time(r['time']), 'not installed', '', '', '', ''])
            continue
        j = jx[key]
        if 'error' in j:
            rows.append([key, fmt_time(r['time']),
                         f'JAX cannot (reverse-mode through while_loop): {j["error"]}',
                         '', '', '', ''])
            continue
        speedup = j['ratio'] / r['ratio']
        ok = speedup > 1
        rows.append([key, fmt_time(r['time']), fmt_time(j['time']), answer(key, j),
                     fmt_ratio(j['ratio'] / r['ratio']), fmt_ratio(j['time'] / r['time']),
                     verdict(ok)])
        if not ok:
            misses.append(f'4. {key}: JAX jit end to end is {fmt_ratio(1 / speedup)} faster '
                          'than staged nestad')
    print('4b. GradBench end to end: staged nestad against JAX jit including its compile (a fresh '
          'jax.jit after jax.clear_caches(), first call); target: nestad faster')
    print_table(['workload', 'nestad e2e', 'JAX jit e2e', 'JAX answer', 'JAX/nestad',
                 '(raw times)', 'result'], rows)
    print('   JAX/nestad: quotient of the plain-normalised times of the two processes; '
          '"(raw times)": of the median times as measured.')
    if has_jax:
        messages = {j['message'] for j in jx.values() if isinstance(j, dict) and 'error' in j}
        for m in sorted(messages):
            print(f'   JAX says: "{m}"')
    print()

    # ------------------------------------------------ 5
    ar = runs['arrays']
    rows = []
    for key, r in ar.items():
        ok = r['ratio'] <= TARGET_ARRAYS
        rows.append([r['label'], fmt_time(r['floor']), fmt_time(r['time']), fmt_ratio(r['ratio']),
                     f'<= {TARGET_ARRAYS}x', verdict(ok), fmt_time(r['eager']),
                     fmt_ratio(r['eager_ratio']), fmt_time(r['trace']), fmt_time(r['compile'])])
        if not ok:
            misses.append(f'{r["label"]}: staged {fmt_ratio(r["ratio"])} hand-written numpy '
                          f'(target <= {TARGET_ARRAYS}x)')
    print('5. Staged array workloads per call against hand-written numpy (CPU-time medians, one '
          'BLAS thread, glibc mmap threshold raised as in arrays.py)')
    print_table(['workload', 'hand numpy', 'staged', 'staged/hand', 'target', 'result',
                 'eager nestad', 'eager/hand', 'trace (1st call)', 'compile (2nd)'], rows)
    print()

    # ------------------------------------------------ 6
    print(f'6. backend="numba", per call after compiling, against JAX jit\'s steady state '
          f'(target: nestad-numba / JAX jit <= {TARGET_NUMBA})')
    if not has_numba:
        print(f'   numba not installed ({nb["missing"]}): skipped')
    else:
        rows = []
        for key in ['chain'] + [k for k in nb if k.startswith('saddle')]:
            r = nb[key]
            label = '1. d/dx chain, forward' if key == 'chain' else f'4. {key} solve'
            row = [label, fmt_time(r['plain']), fmt_time(r['time']), fmt_ratio(r['ratio']),
                   fmt_time(r['trace']), fmt_time(r['compile'])]
            if r['fell_back']:
                problems.append(f'numba {key}: fell back to Python: {r["fell_back"][0]}')
            if key == 'chain':
                if r['diff'] > CHECK_TOLERANCE:
                    problems.append(f'numba chain: differs from eager by {r["diff"]:.1e}')
            elif not r['exact']:
                problems.append(f'numba {key}: answer not exact ({r["err"]:.1e})')
            if not nb['jax']:
                row += ['not installed', '', '', '']
            else:
                ok = r['vs_jax'] <= TARGET_NUMBA
                row += [fmt_time(r['jax_time']), fmt_time(r['jax_compile']), f'{r["vs_jax"]:.2f}',
                        verdict(ok)]
                if not ok:
                    misses.append(f'6. numba {key}: {r["vs_jax"]:.2f}x JAX jit per call '
                                  f'(target <= {TARGET_NUMBA})')
                if key == 'chain' and r['jax_diff'] > PEER_TOLERANCE:
                    problems.append(f'JAX chain derivative differs from nestad\'s by '
                                    f'{r["jax_diff"]:.1e}')
                if key != 'chain' and not r['jax']['ok']:
                    problems.append(f'JAX {key}: answer off ({r["jax"]["err"]:.1e})')
            rows.append(row)
        print_table(['workload', 'plain', 'nestad-numba', 'numba/plain', 'trace (1st call)',
                     'numba compile', 'JAX jit', 'JAX compile', 'numba/JAX', 'result'], rows)
        print('   plain: the chain on floats, or the hand-written saddle solve.  numba '
              'compile: the second call (which compiles) less a steady call.  JAX compile: its first call.  '
              'numba/JAX: median ratio of alternating samples in one process.')
        if args.quick:
            print('   --quick: numba saddle in pairing ff only.')
    print()

    # ------------------------------------------------ 7
    import hessians
    misses += hessians.report(runs['hessian'], fmt_time, print_table)
    print()

    # ------------------------------------------------ 8
    print_scale(scale, misses)

    if problems:
        print('ANSWER CHECKS FAILED:\n  ' + '\n  '.join(problems))
    else:
        print('Answers: staged = eager nestad within 1e-12; GradBench answers as expected '
              '(saddle bit for bit)' + ("; JAX's within nested.py's tolerances." if has_jax
                                         else '; JAX not installed.'))
    print('All targets met.' if not misses else 'Targets missed:\n  ' + '\n  '.join(misses))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
