"""Taylor mode: the k-th derivative of a 14-operation scalar function and of three
GradBench programs, k = 1..12.

Programs (``--programs NAME,...``; default all):

* ``scalar``: 14 operations of one number (``sin exp * x*x 1+ log +2 / + tanh sqrt * - /``).
* ``ode``: GradBench's ``ode`` eval (``gradbench/evals/ode.py``: y' = f(y), classical
  Runge-Kutta, 10 steps, 8 unknowns), its last entry along a direction in x.
* ``gmm``: GradBench's ``gmm`` eval (``gradbench/evals/gmm.py``: the log posterior of a
  Gaussian mixture, d = 3, k = 4, n = 20), along a direction in all its parameters.
* ``particle``: GradBench's ``particle`` objective (``examples/gradbench_nested.py``:
  Euler steps pushed by an inner ``gradient_r`` of the potential until the particle
  crosses the x axis, 99 steps), the k-th derivative in w; its loop is ``nd.while_loop``
  (``particle_loop``), so that the staged jet is a loop, not 99 unrolled steps.

For each k: ``nd.derivatives(f, k)`` eagerly (one Taylor pass, O(k^2) per operation), the
same staged (``nd.stage``: first call with its trace, then per call), nested
``nd.derivative`` k times (3^k growth; while one call takes under ``NESTED_BUDGET``
seconds: past it, the next k's ratio is a lower bound, since nesting once more costs at
least as much), and JAX's ``jet`` where JAX runs the program (eager, and ``jax.jit`` of
it: per call in steady state and the first call with its compile), all as ratios to one
plain call of the program.  Every answer is checked against the eager jet before it is
timed.  For the array programs (ode, gmm) a second table puts the staged jets against
JAX jit (``staged_against_jax``): per call, the Python backend and ``backend="numba"``
(steady state), and end to end (the first two calls: trace, compile, one run; numba cold,
in an empty cache directory, and again from its disk cache) against JAX jit's first call
(trace, XLA compile, run).  ``backend="tiered"`` gets columns of its own: its first two
calls end to end (trace, the Python tier), the wall time until it switched to numba's code
(its child's cold compile in an empty cache directory, and the switching call), the
switching call's pause (numba's import and the cache load), and its steady call after the
switch.  The second table's calls per call (the staged Python function, numba's, the
tiered one after its trial, JAX jit's) are timed interleaved, in turns of 20 ms for 40
rounds (``interleaved``): a process's speed drifts by up to 2x on this machine, which
sequential medians would read as a difference between them.  The target "faster than JAX jit" holds at a k only where the better staged
backend wins both per call and end to end; the tiered backend counts when its first two
calls beat JAX jit's first call and its steady call after the switch beats JAX jit's.  The growth of the eager jet's cost is fitted as c k^p over k = 4..12 (targets:
p <= 2, at least 20x faster than nesting at k = 8 and 100x at k = 10), and the staged
first call's likewise (polynomial growth).

    PYTHONPATH=$PWD python benchmarks/taylor.py [--quick] [--programs scalar,ode,gmm,particle]
                                                [--ks 1,2,4,8] [--no-numba] [--no-tiered]
                                                [--jax-budget SECONDS]

``--no-numba`` leaves out the numba columns of the second table (numba's cold compile of
one staged jet takes minutes), ``--no-tiered`` the tiered ones (whose child compiles as
long).  ``--jax-budget``: past a jax.jit compile of more than this many seconds (default
60), higher k are not compiled by JAX (ode's jet at k = 9 compiles for minutes).
"""
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
import warnings

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# XLA on one thread, as in staging.py and hessians.py: on this 2-core machine its thread
# pool, left running between calls, took CPU from the numpy code timed in the same process
# (gmm's staged jet at k = 8: 586 us beside it, 299 us without; JAX jit's own call 343 us
# with its threads, 313 us without).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

import nestad as nd  # noqa: E402
from nestad.staging.numba_backend import NumbaFallbackWarning  # noqa: E402
from nestad.staging.tiered import TRIAL_CALLS  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _report import fmt_time, max_rel_diff, print_table  # noqa: E402

QUICK = "--quick" in sys.argv
NO_NUMBA = "--no-numba" in sys.argv
NO_TIERED = "--no-tiered" in sys.argv
KS = list(range(1, 13))
if "--ks" in sys.argv:
    KS = [int(k) for k in sys.argv[sys.argv.index("--ks") + 1].split(",")]
NESTED_MAX = 8 if QUICK else 10
NESTED_BUDGET = 20.0 if QUICK else 60.0       # seconds of one nested call: no deeper nesting past it
JAX_COMPILE_BUDGET = 20.0 if QUICK else 60.0  # seconds of one jax.jit compile: no higher k past it
if "--jax-budget" in sys.argv:
    JAX_COMPILE_BUDGET = float(sys.argv[sys.argv.index("--jax-budget") + 1])
NUMBA_COMPILE_BUDGET = 60.0 if QUICK else 240.0  # seconds of one cold numba end to end: likewise
TIERED_BUDGET = 120.0 if QUICK else 900.0  # seconds to wait for a tiered child: no higher k past it
AGAINST_JAX = ('ode', 'gmm')   # the array programs whose staged jets get the table against JAX jit
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


@contextlib.contextmanager
def empty_cache():
    """numba's disk cache (``NESTAD_CACHE_DIR``) in a new empty directory, for a cold
    compile; the variable as it was, and the directory removed, afterwards."""
    old = os.environ.get('NESTAD_CACHE_DIR')
    with tempfile.TemporaryDirectory() as cache:
        os.environ['NESTAD_CACHE_DIR'] = cache
        try:
            yield cache
        finally:
            if old is None:
                os.environ.pop('NESTAD_CACHE_DIR')
            else:
                os.environ['NESTAD_CACHE_DIR'] = old


def per_call(fn, budget=0.3, least=3):
    """Median seconds of one call of ``fn`` (calls repeated up to ``budget`` seconds)."""
    times = []
    end = time.perf_counter() + budget
    while len(times) < least or time.perf_counter() < end:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= 2000:
            break
    return statistics.median(times)


def interleaved(calls, rounds=40, turn=0.02):
    """{name: median seconds per call} of the ``calls`` ({name: function}) timed in
    turns: each round runs every function for ``turn`` seconds, one after another."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            n, start = 0, time.perf_counter()
            end = start + turn
            while True:
                fn()
                n += 1
                now = time.perf_counter()
                if now >= end:
                    break
            times[name].append((now - start) / n)
    return {name: statistics.median(ts) for name, ts in times.items()}


def once(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def fit_exponent(ks, ts):
    p, _ = np.polyfit(np.log(ks), np.log(ts), 1)
    return p


def leaves(y):
    """The numbers of an output (a number or an array) as a list of floats."""
    return [float(v) for v in np.ravel(np.asarray(y, dtype=float))]


# ---------------------------------------------------------------- the programs

def scalar_f(x, m=nd):
    """14 operations: sin exp * x*x 1+ log +2 / + tanh sqrt * - /."""
    e = 1.0 + x * x
    return (m.sin(x) * m.exp(x) + m.log(e) / (x + 2.0) - m.tanh(x) * m.sqrt(e)) / e


def scalar_program():
    return dict(f=lambda t: scalar_f(0.7 + t), plain=lambda: scalar_f(0.7, math),
                jax=lambda jnp: (lambda t: scalar_f(0.7 + t, jnp)))


def ode_program():
    from gradbench.evals.ode import runge_kutta
    x0, v = np.linspace(0.5, 1.5, 8), np.cos(np.arange(8.0))

    def rk_jax(jnp):
        def run(t):
            x = x0 + t * v

            def f(y):
                return jnp.concatenate([x[:1], x[1:] * y[:-1]])
            h, y = 2.0 / 10, jnp.zeros(len(x0))
            for _ in range(10):
                k1 = f(y)
                k2 = f(y + h * k1 / 2)
                k3 = f(y + h * k2 / 2)
                k4 = f(y + h * k3)
                y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
            return y[-1]
        return run
    return dict(f=lambda t: runge_kutta(x0 + t * v, 10)[-1], plain=lambda: runge_kutta(x0, 10)[-1],
                jax=rk_jax)


def gmm_program():
    from gradbench.evals.gmm import log_multigamma, log_posterior, lower_triangle_index
    rng = np.random.default_rng(3)
    d, k, n, m, gamma = 3, 4, 20, 0, 1.0
    p0 = dict(alpha=rng.normal(size=k), mu=rng.normal(size=(k, d)), q=0.3 * rng.normal(size=(k, d)),
              l=0.3 * rng.normal(size=(k, d * (d - 1) // 2)))
    dp = {name: rng.normal(size=a.shape) for name, a in p0.items()}
    x = rng.normal(size=(n, d))

    def along(t):
        return {name: p0[name] + t * dp[name] for name in p0}

    def gmm_jax(jnp):
        import jax

        def lse(a, axis=None):
            mx = jax.lax.stop_gradient(jnp.max(a, axis=axis, keepdims=True))
            return jnp.log(jnp.sum(jnp.exp(a - mx), axis=axis)) + jnp.squeeze(mx, axis)

        def run(t):               # log_posterior, written with jax.numpy
            p = along(t)
            alpha, mu, q, l = p['alpha'], p['mu'], p['q'], p['l']
            zero_then_l = jnp.concatenate([np.zeros((k, 1)), l], axis=1)
            Q = zero_then_l[:, lower_triangle_index(d)] + jnp.exp(q)[:, :, None] * np.eye(d)
            centred = x[None, :, :] - mu[:, None, :]
            Qx = centred @ jnp.swapaxes(Q, 1, 2)
            sum_q = jnp.sum(q, axis=1)
            beta = (alpha + sum_q)[:, None] - 0.5 * jnp.sum(Qx * Qx, axis=2)
            ll = -n * (d / 2 * math.log(2 * math.pi) + lse(alpha)) + jnp.sum(lse(beta, axis=0))
            dof = d + m + 1
            frob = jnp.sum(jnp.exp(q) ** 2) + jnp.sum(l * l)
            prior = (k * (dof * d * math.log(gamma / math.sqrt(2)) - log_multigamma(dof / 2, d))
                     - gamma * gamma / 2 * frob + m * jnp.sum(sum_q))
            return ll + prior
        return run
    return dict(f=lambda t: log_posterior(along(t), x, m, gamma), plain=lambda: log_posterior(p0, x, m, gamma),
                jax=gmm_jax)


def particle_loop(w, m=nd, gradient=None, while_loop=None):
    """GradBench's particle objective (examples/gradbench_nested.particle_path) with its
    data-dependent exit as ``nd.while_loop`` (Python's loop unrolled when staged: 229,453
    equations at k = 5, growing quadratically in k).  State (x0, x1, v0, v1); each step
    is pushed by an inner ``gradient(potential)``, until x1 would cross 0 (99 steps at
    w = 0.2).  ``m``, ``gradient``, ``while_loop``: nestad's, or JAX's."""
    gradient = gradient or nd.gradient_r
    while_loop = while_loop or nd.while_loop
    charges = ((10.0, 10.0 - w), (10.0, 0.0))

    def potential(x):
        total = 0.0
        for c0, c1 in charges:
            d0, d1 = x[0] - c0, x[1] - c1
            total = total + 1.0 / m.sqrt(d0 * d0 + d1 * d1)
        return total
    grad_p, dt = gradient(potential), 0.1

    def body(s):
        x0, x1, v0, v1 = s
        g = grad_p([x0, x1])
        return (x0 + dt * v0, x1 + dt * v1, v0 - dt * g[0], v1 - dt * g[1])
    x0, x1, v0, v1 = while_loop(lambda s: s[1] + dt * s[3] > 0, body, (0.0, 8.0, 0.75, 0.0))
    x_f = x0 - x1 / v1 * v0
    return x_f * x_f


def particle_program():
    """The particle program through ``nd.while_loop``, checked first against the Python-loop
    original (examples/gradbench_nested.particle_path) to order 12.  No JAX columns: JAX's
    jet has no rule for its while primitive (KeyError 'while'), and jit cannot run the
    Python loop's data-dependent exit (eager JAX jet through 99 unrolled steps took 36 s
    at k = 3)."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from gradbench_nested import particle_path
    f = lambda t: particle_loop(0.2 + t)
    ours = nd.derivatives(f, KS[-1])(0.0)
    python = nd.derivatives(lambda t: particle_path(0.2 + t), KS[-1])(0.0)
    assert max_rel_diff(ours, python) < 1e-12, "particle: while_loop against Python's loop"
    return dict(f=f, plain=lambda: particle_loop(0.2), jax=None)


PROGRAMS = dict(scalar=scalar_program, ode=ode_program, gmm=gmm_program, particle=particle_program)


# ---------------------------------------------------------------- one program's table

def nested(f, k):
    g = f
    for _ in range(k):
        g = nd.derivative(g)
    return g


def measure(name, program, jax):
    f, plain_fn = program['f'], program['plain']
    slow = name == 'particle'
    plain = per_call(plain_fn, budget=0.5, least=5 if slow else 1000)
    budget = 0.6 if slow else 0.3
    rows, jet_times, first_times = [], [], []
    nested_last, compile_last = 0.0, 0.0
    against = StagedAgainstJax(name, f, plain) if name in AGAINST_JAX else None
    for k in KS:
        ours = nd.derivatives(f, k)(0.0)
        t_jet = per_call(lambda: nd.derivatives(f, k)(0.0), budget=budget)
        jet_times.append(t_jet)
        staged = nd.stage(nd.derivatives(f, k))
        t_first, first = once(lambda: staged(0.0))
        first_times.append(t_first)
        assert max_rel_diff(first, ours) < 1e-11, (name, k)
        t_staged = per_call(lambda: staged(0.0), budget=budget)
        row = [k, f"{t_jet / plain:.0f}", fmt_time(t_jet), fmt_time(t_first), f"{t_staged / plain:.1f}"]
        if k <= NESTED_MAX and nested_last < NESTED_BUDGET:
            g = nested(f, k)
            t_nest, val = once(lambda: g(0.0))
            if t_nest < 1.0:
                t_nest = per_call(lambda: g(0.0), budget=budget)
            nested_last = t_nest
            assert max_rel_diff(leaves(val), leaves(ours[k])) < 1e-9, (name, k)
            row += [f"{t_nest / plain:,.0f}", f"{t_nest / t_jet:,.1f}x"]
        elif k <= NESTED_MAX:     # nesting once more costs at least the last one measured
            row += [f">{nested_last / plain:,.0f}", f">{nested_last / t_jet:,.1f}x"]
        else:
            row += ["-", "-"]
        if jax is not None and program['jax'] is not None:
            cols = jax_columns(program['jax'], k, ours, t_jet, t_staged, t_first, jax,
                               compile_last < JAX_COMPILE_BUDGET)
            jit = cols.pop()
            compile_last = cols.pop() or compile_last
            row += cols
            if against is not None:
                against.add(k, ours, staged, jit)
        rows.append(row)
    header = ["k", "jet/plain", "jet", "staged 1st call", "staged/plain", "nested/plain", "nested/jet"]
    if jax is not None and program['jax'] is not None:
        header += ["JAX jet/jet", "JAX jit/jet", "JAX jit/staged", "JAX jit 1st call", "JAX jit 1st / staged 1st"]
    print(f"\n## {name}: plain call {fmt_time(plain)}; ratios are per call (median)")
    print_table(header, rows)
    fit = [i for i, k in enumerate(KS) if k >= 4]
    if len(fit) >= 2:           # (fewer with --ks)
        ks = [KS[i] for i in fit]
        p = fit_exponent(ks, [jet_times[i] for i in fit])
        q = fit_exponent(ks, [first_times[i] for i in fit])
        print(f"eager jet cost ~ k^{p:.2f}, staged first call (trace, compile, run) ~ k^{q:.2f} "
              f"over k = {ks[0]}..{ks[-1]} (fits of log time on log k)")
    if against is not None:
        against.report()


def jax_columns(make, k, ours, t_jet, t_staged, t_first, jax, compile_jit):
    """JAX's eager jet, and jax.jit of it unless the last compile took over its budget
    (then '-'); the last entry is the compile time (None when not compiled)."""
    from jax.experimental.jet import jet as jjet
    fj = make(jax.numpy)
    series = ((1.0,) + (0.0,) * (k - 1),)
    run = lambda: jjet(fj, (0.0,), series)
    _, js = run()
    assert max_rel_diff([float(v) for v in js], [float(v) for v in ours[1:]]) < 1e-9
    t_jax = per_call(run, budget=0.5, least=3)
    if not compile_jit:
        return [f"{t_jax / t_jet:.1f}x", "-", "-", "-", "-", None, None]
    jitted = jax.jit(lambda t: jjet(fj, (t,), series))
    t_compile, _ = once(lambda: jax.block_until_ready(jitted(0.0)))
    call = lambda: jax.block_until_ready(jitted(0.0))           # noqa: E731
    t_jit = per_call(call)
    return [f"{t_jax / t_jet:.1f}x", f"{t_jit / t_jet:.2f}x", f"{t_jit / t_staged:.1f}x",
            fmt_time(t_compile), f"{t_compile / t_first:.0f}x", t_compile, (call, t_compile)]


# ---------------------------------------------------------------- staged jets against JAX jit

class StagedAgainstJax:
    """The second table of an array program: staged nestad (Python and numba backends)
    against jax.jit of JAX's jet, per call and end to end."""

    def __init__(self, name, f, plain):
        self.name, self.f, self.plain, self.rows = name, f, plain, []
        self.numba_last = self.tiered_last = 0.0

    def add(self, k, ours, staged_python, jit):
        """One k: ``staged_python`` the Python backend's staged jet (compiled); ``jit``
        (JAX jit's call, its first call's seconds) or None where it was not compiled."""
        # end to end with the Python backend: the first two calls of a fresh staged
        # function (the first traces and answers, the second compiles and runs)
        fresh = nd.stage(nd.derivatives(self.f, k))
        e2e_python, _ = once(lambda: (fresh(0.0), fresh(0.0)))
        cols = self.numba(k, ours) if not NO_NUMBA and self.numba_last < NUMBA_COMPILE_BUDGET else None
        tiered = self.tiered(k, ours) if not NO_TIERED and self.tiered_last < TIERED_BUDGET \
            else None
        # every backend's steady call, and JAX jit's, timed in turns (``interleaved``)
        calls = {'python': lambda: staged_python(0.0)}
        if cols is not None:
            calls['numba'] = lambda: cols[0](0.0)
        if tiered is not None:
            calls['tiered'] = lambda: tiered[0](0.0)
        if jit is not None:
            calls['jax'] = jit[0]
        t = interleaved(calls)
        t_python = t['python']
        if cols is not None:
            cols = (t['numba'],) + cols[1:]
        if tiered is not None:
            tiered = (t['tiered'],) + tiered[1:]
        if jit is not None:
            jit = (t['jax'], jit[1])
        py = (t_python, e2e_python)
        row = [k, fmt_time(t_python), fmt_time(e2e_python)]
        cold = None
        if cols is None:
            row += ["-", "-", "-"]
            best = py
        else:
            t_numba, cold, warm = cols
            row += [fmt_time(t_numba), fmt_time(cold), fmt_time(warm)]
            best = min((t_numba, warm), py)      # (the backend faster per call)
            cold = cold if best is not py else None
        if jit is None:
            row += ["-", "-", "-", "-", "-"]
        else:
            t_jit, t_compile = jit
            won = best[0] < t_jit and best[1] < t_compile
            e2e = f"{t_compile / best[1]:.2f}x"
            if cold is not None:
                e2e += f" (cold {t_compile / cold:.2f}x)"
                won = won and ("yes" if cold < t_compile else "cached only")
            row += [fmt_time(t_jit), fmt_time(t_compile), f"{t_jit / best[0]:.2f}x", e2e,
                    won if isinstance(won, str) else ("yes" if won else "no")]
        row.insert(3, "numba" if best is not py else "python")
        if tiered is None:
            row += ["-"] * 6
        else:
            t_tiered, e2e_tiered, switch, pause = tiered
            won = "-"
            if jit is not None:
                won = "yes" if t_tiered < jit[0] and e2e_tiered < jit[1] else "no"
                if won == "yes" and row[-1] != "yes":
                    row[-1] = "yes (tiered)"
            row += [fmt_time(e2e_tiered), fmt_time(switch), fmt_time(pause), fmt_time(t_tiered),
                    "-" if jit is None else f"{jit[0] / t_tiered:.2f}x", won]
        self.rows.append(row)

    def tiered(self, k, ours):
        """(the function after its switch and trial, first two calls end to end, wall time from staging
        until the switching call returned, that call's loading pause) with
        backend="tiered" in an empty cache directory, or None (no switch within the budget,
        or numba fell back)."""
        with empty_cache(), warnings.catch_warnings():
            warnings.simplefilter('error', NumbaFallbackWarning)
            try:
                start = time.perf_counter()
                fn = nd.stage(nd.derivatives(self.f, k), backend="tiered")
                e2e, _ = once(lambda: (fn(0.0), fn(0.0)))
                if not fn.wait(TIERED_BUDGET):
                    fn._compiled()[0].tier.job.kill()
                    print(f"  {self.name} k = {k}: tiered, no switch within {TIERED_BUDGET:.0f} s")
                    self.tiered_last = math.inf
                    return None
                out = fn(0.0)
                switch = time.perf_counter() - start
            except NumbaFallbackWarning as w:
                print(f"  {self.name} k = {k}: tiered: {w}")
                self.tiered_last = math.inf
                return None
        assert fn.tiers() == ['numba'], fn.tiers()
        assert max_rel_diff(out, ours) < 1e-11, (self.name, k)
        self.tiered_last = switch
        for _ in range(TRIAL_CALLS):    # (the trial after the switch: the faster tier stays)
            fn(0.0)
        return fn, e2e, switch, fn._compiled()[0].tier.pause

    def numba(self, k, ours):
        """(the function loaded from the disk cache, cold end to end, end to end from it) with
        backend="numba", or None where numba fell back to Python (then the table says so)."""
        with empty_cache(), warnings.catch_warnings():
            warnings.simplefilter('error', NumbaFallbackWarning)
            try:
                cold_fn = nd.stage(nd.derivatives(self.f, k), backend="numba")
                cold, _ = once(lambda: (cold_fn(0.0), cold_fn(0.0)))
                warm_fn = nd.stage(nd.derivatives(self.f, k), backend="numba")
                warm, out = once(lambda: (warm_fn(0.0), warm_fn(0.0)))
            except NumbaFallbackWarning as w:
                print(f"  {self.name} k = {k}: {w}")
                self.numba_last = math.inf
                return None
        assert max_rel_diff(out[1], ours) < 1e-11, (self.name, k)
        self.numba_last = cold
        return warm_fn, cold, warm

    def report(self):
        print(f"\n## {self.name}: staged jets against JAX jit (per call: medians of interleaved turns; "
              f"end to end: trace, compile, first run; plain call {fmt_time(self.plain)})")
        print_table(["k", "staged py", "py e2e", "better", "numba", "numba e2e cold",
                     "numba e2e cached", "JAX jit", "JAX jit e2e", "JAX jit / better",
                     "JAX e2e / better e2e", "faster in both", "tiered e2e", "tiered until switch",
                     "switch pause", "tiered", "JAX jit / tiered", "tiered faster in both"],
                    self.rows)
        won = [str(row[0]) for row in self.rows if str(row[11]).startswith("yes")]
        print(f"faster than JAX jit at both ends (per call and end to end) at k = "
              f"{', '.join(won) or 'none'} (a staged backend, the tiered one counted)")


def main():
    chosen = list(PROGRAMS)
    if "--programs" in sys.argv:
        chosen = sys.argv[sys.argv.index("--programs") + 1].split(",")
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
    except ImportError:
        jax = None
    print(f"load (uptime) at start: {os.getloadavg()[0]:.1f}")
    for name in chosen:
        measure(name, PROGRAMS[name](), jax)
        print(f"load after {name}: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
