"""Dense Hessians at n = 1000 against JAX jit's steady state (issue 19): part 7 of
benchmarks/staging.py, and runnable alone.

Three functions of 1000 (or 1034) inputs, each differentiated by ``nd.hessian`` (batched
forward over reverse: all n basis directions in one pass), eagerly and staged
(``nd.stage(nd.hessian(f))``, timed after its first two calls), and by
``jax.jit(jax.hessian(f))`` after its compiling call:

* ``rosen``: the Rosenbrock function of benchmarks/arrays.py (elementwise and slices: the
  work is the passes over the 1000 x 1000 tangent blocks; the Hessian is tridiagonal);
* ``quadlog``: ``0.5 x A x + sum(log(1 + x^2))`` with a dense A (two 1000-cubed matrix
  products in every method);
* ``net``: the mean squared loss of a 20-47-1 tanh network on 64 examples, in its 1034
  weights (reshape, slices, matrix products of the weights' batched tangents).

Hand-written numpy Hessians (closed forms) are timed for rosen and quadlog for reference.
Every answer is checked before timing (against the closed form, or JAX's for net; 1e-10
relative to the largest entry).  Times are CPU-time medians (``time.process_time``), one
BLAS and one XLA thread, glibc's mmap threshold raised as in arrays.py; the methods run in
one process and their samples alternate, and the ratios are medians of the per-round
ratios (so the drifts of a shared machine hit both sides alike).  Target: nestad (eager
and staged) <= 1.5x JAX jit.

    PYTHONPATH=. python benchmarks/hessians.py [--quick]
"""
import os
import statistics
import sys
import time

if __name__ == "__main__" and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(1 << 30)
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    os.execv(sys.executable, [sys.executable] + sys.argv)

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

import nestad as nd  # noqa: E402
import nestad.numpy as anp  # noqa: E402

TARGET = 1.5
N = 1000
_rng = np.random.default_rng(1000)
X = _rng.normal(size=N) * 0.5
A = _rng.normal(size=(N, N)) / np.sqrt(N)
D, H, M = 20, 47, 64                       # the network: 20*47 + 47 + 47 = 1034 weights
XD, YD = _rng.normal(size=(M, D)), _rng.normal(size=M)
W = _rng.normal(size=D * H + 2 * H) * 0.2


def rosen(x, xp=anp):
    return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosen_hand(x):
    d = np.zeros_like(x)
    d[:-1] = 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    d[1:] += 200.0
    h = np.diag(d)
    off = -400.0 * x[:-1]
    i = np.arange(len(x) - 1)
    h[i, i + 1] = off
    h[i + 1, i] = off
    return h


def quadlog(x, xp=anp):
    return 0.5 * x @ (A @ x) + xp.sum(xp.log(1.0 + x ** 2))


def quadlog_hand(x):
    s = 1.0 + x * x
    h = 0.5 * (A + A.T)
    h[np.diag_indices_from(h)] += 2.0 * (1.0 - x * x) / (s * s)
    return h


def net(w, xp=anp):
    w1 = xp.reshape(w[:D * H], (D, H))
    b1, w2 = w[D * H:D * H + H], w[D * H + H:]
    return xp.sum((xp.tanh(XD @ w1 + b1) @ w2 - YD) ** 2) / M


WORKLOADS = {"rosen": (rosen, X, rosen_hand), "quadlog": (quadlog, X, quadlog_hand),
             "net": (net, W, None)}
LABELS = {"rosen": "Rosenbrock n=1000", "quadlog": "0.5 xAx + sum log(1+x^2) n=1000",
          "net": "20-47-1 net loss, 1034 weights"}


def _sample(fn, calls):
    t0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t0) / calls


def _calls(fn, min_sample):
    t0 = time.process_time()
    fn()
    return max(1, int(min_sample / max(time.process_time() - t0, 1e-6)) + 1)


def _check(got, want, what):
    err = float(np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want)))
    if not err <= 1e-10:
        raise AssertionError(f"{what}: the Hessian is off by {err:.1e} (relative to its largest entry)")
    return err


def measure(quick=False):
    """{workload: {method: median seconds, method + '/jax': median ratio, ...}}."""
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
    except ImportError:
        jax = None
    rounds, min_sample = (3, 0.02) if quick else (11, 0.1)
    out = {}
    for key, (f, x, hand) in WORKLOADS.items():
        eager = nd.hessian(f)
        staged = nd.stage(nd.hessian(f))
        t0 = time.perf_counter()
        staged(x)
        t1 = time.perf_counter()
        staged(x)
        first_calls = (t1 - t0, time.perf_counter() - t1)
        methods = {"eager": lambda: eager(x), "staged": lambda: staged(x)}
        if jax is not None:
            jh = jax.jit(jax.hessian(lambda y: f(y, jnp)))
            xj = jnp.asarray(x)
            t0 = time.perf_counter()
            jh(xj).block_until_ready()
            jax_compile = time.perf_counter() - t0
            methods["jax"] = lambda: jh(xj).block_until_ready()
        if hand is not None:
            methods["hand"] = lambda: hand(x)
        want = hand(x) if hand is not None else np.asarray(methods["jax"]())
        errs = {m: _check(fn(), want, f"{key} {m}") for m, fn in methods.items()}
        calls = {m: _calls(fn, min_sample) for m, fn in methods.items()}
        samples = {m: [] for m in methods}
        for _ in range(rounds):
            for m, fn in methods.items():
                samples[m].append(_sample(fn, calls[m]))
        r = {m: statistics.median(s) for m, s in samples.items()}
        r["spread"] = {m: (min(s), max(s)) for m, s in samples.items()}
        r["errors"] = errs
        r["trace"], r["compile"] = first_calls[0], first_calls[1] - r["staged"]
        r["equations"] = sum(len(p.eqns) for p in staged.programs())
        if jax is not None:
            r["jax_compile"] = jax_compile
            for m in ("eager", "staged", "hand"):
                if m in samples:
                    r[m + "/jax"] = statistics.median(a / b for a, b in zip(samples[m], samples["jax"]))
        out[key] = r
    return out


def report(results, fmt_time, print_table):
    """Print the table; return the missed targets (text)."""
    misses = []
    rows = []
    for key, r in results.items():
        row = [LABELS[key], fmt_time(r["eager"]), fmt_time(r["staged"]),
               fmt_time(r["jax"]) if "jax" in r else "not installed",
               fmt_time(r["hand"]) if "hand" in r else "-"]
        if "jax" in r:
            for m in ("eager", "staged"):
                ok = r[m + "/jax"] <= TARGET
                row.append(f"{r[m + '/jax']:.2f}x {'PASS' if ok else 'MISS'}")
                if not ok:
                    misses.append(f"7. Hessian {LABELS[key]}: {m} {r[m + '/jax']:.2f}x JAX jit "
                                  f"(target <= {TARGET}x)")
            row.append(f"{r['hand/jax']:.2f}x" if "hand/jax" in r else "-")
        else:
            row += ["", "", ""]
        row += [fmt_time(r["trace"]), fmt_time(r["compile"]), str(r["equations"])]
        rows.append(row)
    print(f"7. Dense Hessians against JAX jit's steady state (target: nestad eager and staged "
          f"<= {TARGET}x JAX jit; CPU-time medians, samples alternating in one process)")
    print_table(["workload", "eager", "staged", "JAX jit", "hand numpy", "eager/JAX",
                 "staged/JAX", "hand/JAX", "trace (1st call)", "compile (2nd)", "equations"], rows)
    print("   ratios: medians of the per-round ratios; answers checked against the closed "
          "forms (net: against JAX's) to 1e-10 of the largest entry.")
    return misses


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _report import fmt_time, print_table
    load = os.getloadavg()[0]
    results = measure("--quick" in sys.argv)
    print(f"load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at end (1-minute)")
    misses = report(results, fmt_time, print_table)
    for key, r in results.items():
        print(f"   {key}: spread (min-max ms) " + ", ".join(
            f"{m} {lo * 1e3:.1f}-{hi * 1e3:.1f}" for m, (lo, hi) in r["spread"].items()))
    print("All targets met." if not misses else "Targets missed:\n  " + "\n  ".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
