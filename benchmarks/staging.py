"""Staged nestad (``nd.stage``): per-call ratios against plain Python and hand-written
numpy, and end-to-end times (tracing and compiling included) against JAX's jit.

What is measured
----------------
1. Per call, the staged forward derivative of overhead.py's 1,000-operation chain
   against the chain on plain floats (target <= 3x).
2. Per call, the staged reverse gradient of overhead.py's 100-input, 10,000-operation
   function against the function on plain floats (target <= 4x).
3. Per call, the staged second derivatives of the chain in the four pairings ff, fr,
   rf, rr against the plain chain (target <= 10x each).
4. GradBench's saddle and particle (benchmarks/nested.py) in the four pairings, staged
   end to end: a fresh ``nd.stage`` of the whole solve, so each measured call traces
   and compiles everything, against the hand-written Python solve (target <= 3x) and
   against JAX's jit of the same solve, compile included (target: faster).  Answers
   are checked: saddle exactly, particle to 1e-10 relative.  The staged solver is
   GradBench's gradient descent written with ``nd.while_loop`` and ``nd.where``, with
   the same arithmetic; JAX's is the same with ``lax.while_loop`` and ``jnp.where``.
   JAX cannot differentiate ``lax.while_loop`` in reverse mode: the pairings with an
   outer reverse gradient say so.
5. Per call, the staged MLP gradient and Rosenbrock Hessian-vector product of
   benchmarks/arrays.py against its hand-written numpy (target <= 1.5x).  The
   allocator is set as arrays.py sets it (freed memory reused, for every library).
6. With ``backend="numba"``: per call, after compiling, the staged chain derivative
   and the staged saddle solve (ff and fr) against JAX jit's steady state (target:
   nestad-numba's time <= 2x JAX's).

Per-call ratios pair each sample with a sample of the baseline in the same process
(as overhead.py does) and report the median ratio; end-to-end times are medians of
fresh runs.  The machine's speed drifts: take single ratios as +-30%.

Usage::

    python benchmarks/staging.py            # about 5 minutes
    python benchmarks/staging.py --quick    # a smoke run
    pip install -e ".[bench]"               # jax, numba (optional: missing ones are skipped)
"""
import os
import sys

# The allocator setting of arrays.py (workload 5), for every library alike.
if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(1 << 30)
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    os.execv(sys.executable, [sys.executable] + sys.argv)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('XLA_FLAGS', '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1')
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import nestad as nd  # noqa: E402
from _report import fmt_time, print_table  # noqa: E402
import overhead  # noqa: E402
import nested  # noqa: E402

QUICK = "--quick" in sys.argv
SADDLE_EXPECTED = nested.SADDLE_EXPECTED
PARTICLE_EXPECTED = nested.PARTICLE_EXPECTED
MODES = ('ff', 'fr', 'rf', 'rr')
D = {'f': nd.derivative, 'r': nd.gradient_r}
GRAD = {'f': nd.gradient_f, 'r': nd.gradient_r}


# ---------------------------------------------------------------- measuring

def paired_ratio(fn, baseline, repeats=None):
    """Median over repeats of (time per call of fn) / (time per call of baseline), the
    two sampled alternately; and fn's median time per call."""
    repeats = repeats or (3 if QUICK else 9)
    fn(), baseline()                      # warm up (the first staged call traces)
    fn()                                  # and the second compiles

    def calls_for(g):
        t = time.perf_counter()
        g()
        once = time.perf_counter() - t
        return max(1, int((0.01 if QUICK else 0.05) / max(once, 1e-9)))

    nf, nb = calls_for(fn), calls_for(baseline)
    ratios, times = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(nf):
            fn()
        tf = (time.perf_counter() - t) / nf
        t = time.perf_counter()
        for _ in range(nb):
            baseline()
        tb = (time.perf_counter() - t) / nb
        ratios.append(tf / tb)
        times.append(tf)
    return statistics.median(ratios), statistics.median(times)


def cpu_median(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def verdict(ok):
    return "PASS" if ok else "MISS"


# ---------------------------------------------------------------- 1-3: scalar programs

def scalar_rows():
    chain = lambda x: overhead.chain(x, nd.sin)                 # noqa: E731
    mix = lambda xs: overhead.mix(xs, nd.sin)                   # noqa: E731
    plain_chain = lambda: overhead.chain(overhead.X0, math.sin)  # noqa: E731
    plain_mix = lambda: overhead.mix(overhead.XS, math.sin)      # noqa: E731
    tasks = [('(1) d/dx chain, forward', nd.stage(nd.derivative(chain)), overhead.X0,
              nd.derivative(chain), plain_chain, 3),
             ('(2) gradient, reverse', nd.stage(nd.gradient_r(mix)), overhead.XS,
              nd.gradient_r(mix), plain_mix, 4)]
    for m in MODES:
        op = D[m[0]](D[m[1]](chain))
        tasks.append((f'(3) d2/dx2 chain, {m}', nd.stage(op), overhead.X0, op, plain_chain, 10))
    rows, ok = [], True
    for label, staged, x, eager, plain, target in tasks:
        got, want = staged(x), eager(x)
        same = np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                           rtol=1e-12, atol=0)
        ratio, t = paired_ratio(lambda: staged(x), plain)
        passed = same and ratio <= target
        ok &= passed
        rows.append([label, fmt_time(t), f"{ratio:.2f}x", f"<= {target}x",
                     "equal" if same else "DIFFERENT", verdict(passed)])
    print_table(["workload", "staged", "staged/plain", "target", "vs eager", "result"], rows)
    return ok


# ---------------------------------------------------------------- 4: GradBench, staged

def argmin(f, grad, x, *params):
    """GradBench's gradient descent (nested.argmin) as a while_loop, with the same
    arithmetic; its branches become nd.where.  The objective's parameters travel in the
    loop's state, so that reverse mode keeps a staged loop for them."""
    state = (list(x), f(x, *params), list(grad(x, *params)), 0, 1e-5, False, list(params))

    def cond(s):
        return s[5] == False                   # noqa: E712  (a traced bool: no `not`)

    def body(s):
        x, fx, g, i, eta, done, ps = s
        stop = nd.sqrt(sum(gi * gi for gi in g)) <= 1e-5
        double = i == 10
        x_new = [xi - eta * gi for xi, gi in zip(x, g)]
        small = nd.sqrt(sum((a - b) * (a - b) for a, b in zip(x, x_new))) <= 1e-5
        fx_new = f(x_new, *ps)
        g_new = grad(x_new, *ps)
        step = (stop == False) & (double == False)                   # noqa: E712
        better = fx_new < fx
        take = step & (small == False) & better                      # noqa: E712
        halve = step & (small == False) & (better == False)          # noqa: E712
        grow = (stop == False) & double                              # noqa: E712
        x = [nd.where(take, a, b) for a, b in zip(x_new, x)]
        g = [nd.where(take, a, b) for a, b in zip(g_new, g)]
        fx = nd.where(take, fx_new, fx)
        i = nd.where(take, i + 1, nd.where(grow | halve, 0, i))
        eta = nd.where(grow, eta * 2.0, nd.where(halve, eta / 2.0, eta))
        return (x, fx, g, i, eta, stop | (step & small), ps)
    return nd.while_loop(cond, body, state)[0]


def saddle_objective(p, q):
    return (p[0] * p[0] + p[1] * p[1]) - (q[0] * q[0] + q[1] * q[1])


def saddle(start, mode):
    outer, inner = (GRAD[m] for m in mode)

    def minus_f(q, p0, p1):
        return -saddle_objective([p0, p1], q)

    def inner_grad(q, p0, p1):
        return inner(lambda qq: minus_f(qq, p0, p1))(q)

    def max_over_q(p):
        return saddle_objective(p, argmin(minus_f, inner_grad, start, p[0], p[1]))

    x = argmin(max_over_q, lambda p: outer(max_over_q)(p), start)
    y = argmin(minus_f, lambda q, x0, x1: outer(lambda qq: minus_f(qq, x0, x1))(q), start, x[0], x[1])
    return x + y


DT = 0.1


def particle(start, mode):
    outer, inner = (GRAD[m] for m in mode)

    def potential(x, w):
        total = 0.0
        for c in ((10.0, 10.0 - w), (10.0, 0.0)):
            d0, d1 = x[0] - c[0], x[1] - c[1]
            total = total + 1.0 / nd.sqrt(d0 * d0 + d1 * d1)
        return total

    def objective(ws):
        def body(s):
            x, v, w = s
            g = inner(lambda xx: potential(xx, w))(x)
            return ([x[0] + DT * v[0], x[1] + DT * v[1]],
                    [v[0] + DT * -g[0], v[1] + DT * -g[1]], w)
        x, v, _ = nd.while_loop(lambda s: s[0][1] + DT * s[1][1] > 0, body,
                                (list(nested.X_START), list(nested.V_START), ws[0]))
        dt_f = -x[1] / v[1]
        x_f = x[0] + dt_f * v[0]
        return x_f * x_f

    return argmin(objective, lambda w: outer(objective)(w), start)[0]


def end_to_end(solve, start, repeats):
    """Median seconds of a complete first call of a fresh staged solve, and its answer."""
    times, answer = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        answer = nd.stage(solve)(start)
        times.append(time.perf_counter() - t)
    return statistics.median(times), answer


def gradbench_rows(jax_times):
    repeats = 1 if QUICK else 5
    plain = {'saddle': nested.saddle_plain, 'particle': nested.particle_plain}
    rows, ok = [], True
    for name, solve, start in (('saddle', saddle, [1.0, 1.0]), ('particle', particle, [0.0])):
        plain_times = []
        for _ in range(repeats):
            t = time.perf_counter()
            plain[name]()
            plain_times.append(time.perf_counter() - t)
        tp = statistics.median(plain_times)
        for m in MODES:
            t, answer = end_to_end(lambda s: solve(s, m), start, repeats)
            if name == 'saddle':
                good = [float(v) for v in answer] == SADDLE_EXPECTED
                err = max(abs(float(v) - e) for v, e in zip(answer, SADDLE_EXPECTED))
            else:
                err = abs(float(answer) - PARTICLE_EXPECTED) / PARTICLE_EXPECTED
                good = err <= 1e-10
            jt = jax_times.get((name, m))
            jax_cell = jt if isinstance(jt, str) else (fmt_time(jt) if jt else "not run")
            faster = isinstance(jt, float) and t < jt
            passed = good and t <= 3 * tp and (faster or not isinstance(jt, float))
            ok &= passed
            rows.append([f"{name} {m}", fmt_time(tp), fmt_time(t), f"{t / tp:.2f}x",
                         f"{err:.1e}", jax_cell,
                         f"{jt / t:.1f}x" if isinstance(jt, float) else "-", verdict(passed)])
    print_table(["solve", "plain", "staged (e2e)", "vs plain (<= 3x)", "error",
                 "JAX jit (e2e)", "JAX / staged", "result"], rows)
    return ok


# ---------------------------------------------------------------- JAX versions

def jax_solvers():
    import jax
    import jax.numpy as jnp
    from jax import lax
    jax.config.update("jax_enable_x64", True)
    jgrad = {'f': lambda f: (lambda x, *a: jax.jacfwd(f)(x, *a)), 'r': jax.grad}

    def jargmin(f, grad, x, *params):
        state = (x, f(x, *params), grad(x, *params), 0, 1e-5, False)

        def body(s):
            x, fx, g, i, eta, done = s
            stop = jnp.sqrt(jnp.sum(g * g)) <= 1e-5
            double = i == 10
            x_new = x - eta * g
            small = jnp.sqrt(jnp.sum((x - x_new) ** 2)) <= 1e-5
            fx_new = f(x_new, *params)
            g_new = grad(x_new, *params)
            step = ~stop & ~double
            better = fx_new < fx
            take, halve, grow = step & ~small & better, step & ~small & ~better, ~stop & double
            return (jnp.where(take, x_new, x), jnp.where(take, fx_new, fx),
                    jnp.where(take, g_new, g), jnp.where(take, i + 1, jnp.where(grow | halve, 0, i)),
                    jnp.where(grow, eta * 2.0, jnp.where(halve, eta / 2.0, eta)),
                    stop | (step & small))
        return lax.while_loop(lambda s: ~s[5], body, state)[0]

    def jsaddle(mode):
        outer, inner = jgrad[mode[0]], jgrad[mode[1]]
        f = lambda p, q: jnp.sum(p * p) - jnp.sum(q * q)              # noqa: E731
        minus_f = lambda q, p: -f(p, q)                              # noqa: E731

        def max_over_q(p):
            return f(p, jargmin(minus_f, inner(minus_f), jnp.ones(2), p))

        def solve(start):
            x = jargmin(lambda p: max_over_q(p), outer(max_over_q), start)
            y = jargmin(minus_f, outer(minus_f), start, x)
            return jnp.concatenate([x, y])
        return solve

    def jparticle(mode):
        outer, inner = jgrad[mode[0]], jgrad[mode[1]]

        def objective(ws):
            w = ws[0]
            charges = jnp.array([[10.0, 10.0 - w], [10.0, 0.0]])
            potential = lambda x, c: jnp.sum(1.0 / jnp.sqrt(jnp.sum((x - c) ** 2, axis=1)))  # noqa: E731

            def body(s):
                x, v = s
                g = inner(potential)(x, charges)
                return (x + DT * v, v + DT * -g)
            x, v = lax.while_loop(lambda s: s[0][1] + DT * s[1][1] > 0, body,
                                  (jnp.array(nested.X_START), jnp.array(nested.V_START)))
            x_f = x[0] + (-x[1] / v[1]) * v[0]
            return x_f * x_f

        def solve(start):
            return jargmin(objective, outer(objective), start)[0]
        return solve

    return jax, jnp, jsaddle, jparticle


def jax_end_to_end():
    """{(workload, mode): seconds of the first call of a fresh jit, or why not}."""
    try:
        jax, jnp, jsaddle, jparticle = jax_solvers()
    except ImportError:
        return {}
    out = {}
    repeats = 1 if QUICK else 3
    for name, make, start in (('saddle', jsaddle, [1.0, 1.0]), ('particle', jparticle, [0.0])):
        for m in MODES:
            times = []
            try:
                for _ in range(repeats):
                    fn = jax.jit(make(m))
                    t = time.perf_counter()
                    answer = jax.block_until_ready(fn(jnp.array(start)))
                    times.append(time.perf_counter() - t)
                out[(name, m)] = statistics.median(times)
                out[(name, m, 'answer')] = np.asarray(answer)
            except Exception as e:          # JAX refuses reverse mode through while_loop
                out[(name, m)] = f"cannot ({type(e).__name__})"
    return out


# ---------------------------------------------------------------- 5: arrays

def array_rows():
    import arrays as A
    rows, ok = [], True
    mlp = nd.stage(nd.gradient_r(A.mlp_loss))
    hvp = nd.stage(lambda x, v: nd.hvp(A.rosen, x, v))
    tasks = [('(5) MLP gradient', lambda: mlp(A.PARAMS), lambda: A.mlp_grad_hand(A.PARAMS),
              lambda: nd.gradient_r(A.mlp_loss)(A.PARAMS), 5 if QUICK else 15),
             ('(5) Rosenbrock HVP n=1000', lambda: hvp(A.XR, A.VR), lambda: A.rosen_hvp_hand(A.XR, A.VR),
              lambda: nd.hvp(A.rosen, A.XR, A.VR), 50 if QUICK else 400)]
    for label, staged, hand, eager, reps in tasks:
        got, want = staged(), hand()
        same = all(np.allclose(g, w, rtol=1e-9, atol=1e-12) for g, w in
                   zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]))
        staged()
        ts, th, te = cpu_median(staged, reps), cpu_median(hand, reps), cpu_median(eager, reps)
        passed = same and ts <= 1.5 * th
        ok &= passed
        rows.append([label, f"{th * 1e3:.3f} ms", f"{ts * 1e3:.3f} ms", f"{ts / th:.2f}x",
                     f"{te * 1e3:.3f} ms", "<= 1.5x", verdict(passed)])
    print_table(["workload", "hand numpy", "staged", "staged/hand", "eager nestad", "target",
                 "result"], rows)
    return ok


# ---------------------------------------------------------------- 6: numba

def numba_rows():
    try:
        import numba  # noqa: F401
    except ImportError:
        print("numba not installed: skipped")
        return True
    try:
        jax, jnp, jsaddle, _ = jax_solvers()
    except ImportError:
        jax = None
    chain = lambda x: overhead.chain(x, nd.sin)                 # noqa: E731
    rows, ok = [], True
    cases = [('chain d/dx', nd.derivative(chain), overhead.X0, None)]
    for m in ('ff', 'fr'):
        cases.append((f'saddle {m}', lambda s, m=m: saddle(s, m), [1.0, 1.0], m))
    for label, fn, arg, mode in cases:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter('error')        # a fallback to Python would be a miss
            staged = nd.stage(fn, backend="numba")
            staged(arg)
            staged(arg)                           # compiles
        compile_time = time.perf_counter() - t
        reps = 3 if QUICK else 9
        tn = min(_time_call(lambda: staged(arg)) for _ in range(reps))
        tj = None
        if jax is not None:
            if mode is None:
                jf = jax.jit(lambda x: jax.jvp(lambda y: overhead.chain(y, jnp.sin), (x,), (1.0,))[1])
                ja = jnp.float64(arg)
            else:
                jf, ja = jax.jit(jsaddle(mode)), jnp.array(arg)
            jax.block_until_ready(jf(ja))
            tj = min(_time_call(lambda: jax.block_until_ready(jf(ja))) for _ in range(reps))
        passed = tj is None or tn <= 2 * tj
        ok &= passed
        rows.append([label, f"{compile_time:.1f} s", fmt_time(tn), fmt_time(tj) if tj else "not installed",
                     f"{tn / tj:.2f}x" if tj else "-", "<= 2x", verdict(passed)])
    print_table(["workload", "numba compile", "nestad numba", "JAX jit", "nestad/JAX",
                 "target", "result"], rows)
    return ok


def _time_call(fn):
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t
        if dt > (0.02 if QUICK else 0.1):
            return dt / n
        n *= 2


# ---------------------------------------------------------------- main

def main():
    versions = [f"Python {platform.python_version()}", f"nestad {nd.__version__}", f"numpy {np.__version__}"]
    for lib in ('jax', 'numba'):
        try:
            versions.append(f"{lib} {__import__(lib).__version__}")
        except ImportError:
            versions.append(f"{lib} not installed")
    print("Staged nestad against plain Python, hand-written numpy and JAX jit")
    print(", ".join(versions) + f"; {os.cpu_count()} CPU(s), load average "
          f"{os.getloadavg()[0]:.2f} at start; allocator: freed memory reused (as arrays.py)")
    print("\n1-3. Scalar programs, per call (median of paired samples against the plain function)")
    ok = scalar_rows()
    print("\n4. GradBench saddle and particle, end to end: a fresh nd.stage per solve (tracing "
          "and compiling included); JAX: a fresh jax.jit, first call (compile included)")
    jax_times = jax_end_to_end()
    ok &= gradbench_rows(jax_times)
    print("\n5. Arrays, per call (CPU-time medians, one BLAS thread)")
    ok &= array_rows()
    print("\n6. backend='numba', per call after compiling, against JAX jit's steady state")
    ok &= numba_rows()
    print("\nAll targets met." if ok else "\nSome targets missed (MISS above).")


if __name__ == "__main__":
    main()
