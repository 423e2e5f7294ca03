"""vmap: per-example gradients of an MLP, and jacobian_f of a 1000-input function.

(i)  per-example gradients of a 2-layer MLP's squared loss (batch 512, tanh) with respect
     to every weight: ``vmap(gradient_r(loss), in_axes=(None, 0, 0))`` against the
     hand-batched numpy gradient (target: within 1.5x) and against a Python loop of
     ``gradient_r`` over the examples (target: at least 100x faster).  Three sizes: at
     64-128-10 the arithmetic dominates (the hand-batched ratio is the one that matters),
     at 8-16-4 the per-call overhead does (the loop's ratio is).  The loop's line also
     shows how much slower it is than the hand-batched numpy: no vmap can beat the loop
     by more than that, so the 100x target is out of reach wherever it is below 100x
     (64-128-10 and 32-64-10; the 784-256-10 MLP of benchmarks/arrays.py: 3-6x).
     A vmap call at 8-16-4 takes about 0.7 ms, half of it in its 25 numpy calls (18
     batched applications, each through the reverse and the batching interpretations).
     Staged, ``stage(vmap(gradient_r(loss)))`` and ``vmap(stage(gradient_r(loss)))``
     (each called twice, tracing and compiling, before it is timed) run the batched
     program without that per-application cost;
(ii) ``jacobian_f`` of f(x) = sin(x) * sum(x^2) + cumsum(x) at n = 1000 (target: no slower
     than before vmap; run this script with another checkout first on PYTHONPATH to
     compare: it then times (ii) alone).

Times are CPU-time medians (time.process_time), BLAS on one thread; each answer is checked
against the hand-written one before it is timed.  As benchmarks/arrays.py, the script
re-executes itself with glibc's mmap threshold raised, so that the 8 MB temporaries of
the per-example gradients are reused rather than page-faulted in again on every call
(``--malloc-default`` keeps glibc's default).

    PYTHONPATH=$PWD python benchmarks/vmap.py [--quick] [--malloc-default]
"""
import os
import sys

if "--malloc-default" not in sys.argv and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(1 << 30)
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    os.execv(sys.executable, [sys.executable] + sys.argv)

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import nestad as nd  # noqa: E402
import nestad.numpy as anp  # noqa: E402

QUICK = "--quick" in sys.argv
B = 512
SIZES = ((64, 128, 10), (32, 64, 10), (8, 16, 4))
rng = np.random.default_rng(0)


def mlp_data(d, h, o):
    params = (rng.normal(size=(d, h)) / np.sqrt(d), rng.normal(size=h) * 0.1,
              rng.normal(size=(h, o)) / np.sqrt(h))
    return params, rng.normal(size=(B, d)), rng.normal(size=(B, o))


def loss(params, x, y):
    w1, b1, w2 = params
    h = anp.tanh(x @ w1 + b1)
    return anp.sum((h @ w2 - y) ** 2)


def per_example_hand(params, xs, ys):
    w1, b1, w2 = params
    h = np.tanh(xs @ w1 + b1)
    r = 2.0 * (h @ w2 - ys)
    gz = (r @ w2.T) * (1.0 - h * h)
    return (np.einsum('bi,bj->bij', xs, gz), gz, np.einsum('bi,bj->bij', h, r))


def per_example_loop(params, xs, ys):
    g = nd.gradient_r(loss)
    outs = [g(params, x, y) for x, y in zip(xs, ys)]
    return tuple(np.stack([o[k] for o in outs]) for k in range(3))


N = 1000
XJ = rng.normal(size=N)


def fj(x):
    return anp.sin(x) * anp.sum(x * x) + anp.cumsum(x)


def fj_jacobian_hand(x):
    return np.diag(np.cos(x) * np.sum(x * x)) + 2.0 * np.outer(np.sin(x), x) + np.tril(np.ones((N, N)))


def timed(fn, repeat):
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        samples.append(time.process_time() - t0)
    return statistics.median(samples)


def paired(base, fns, repeat):
    """Median time of ``base`` and of each of ``fns``, and each one's median ratio to
    ``base`` over rounds in which all are sampled in turn."""
    calls = {}
    for k, fn in list(fns.items()) + [("base", base)]:
        fn()
        t0 = time.process_time()
        fn()
        calls[k] = max(1, int(0.02 / max(time.process_time() - t0, 1e-6)))
    samples = {k: [] for k in list(fns) + ["base"]}
    for _ in range(repeat):
        for k, fn in list(fns.items()) + [("base", base)]:
            t0 = time.process_time()
            for _ in range(calls[k]):
                fn()
            samples[k].append((time.process_time() - t0) / calls[k])
    ratios = {k: statistics.median(a / b for a, b in zip(samples[k], samples["base"])) for k in fns}
    return (statistics.median(samples["base"]), {k: statistics.median(samples[k]) for k in fns}, ratios)


def check(got, want, what):
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11, err_msg=what)


def main():
    repeat = 3 if QUICK else 15
    check(nd.jacobian_f(fj)(XJ), fj_jacobian_hand(XJ), "jacobian_f")
    t_jac = timed(lambda: nd.jacobian_f(fj)(XJ), repeat)
    if not hasattr(nd, 'vmap'):
        print(f"(ii) jacobian_f n={N}: {t_jac * 1e3:.2f} ms (this checkout has no vmap)")
        return 0
    ways = {"vmap(gradient_r)": nd.vmap(nd.gradient_r(loss), in_axes=(None, 0, 0)),
            "stage(vmap(gradient_r))": nd.stage(nd.vmap(nd.gradient_r(loss), in_axes=(None, 0, 0))),
            "vmap(stage(gradient_r))": nd.vmap(nd.stage(nd.gradient_r(loss)), in_axes=(None, 0, 0))}
    print(f"vmap benchmarks (batch {B}; CPU-time medians, one BLAS thread)")
    print(f"{'workload':44s} {'time':>10s}  ratio          target   result   loop / it: >= 100x")
    for d, h, o in SIZES:
        params, xs, ys = mlp_data(d, h, o)
        want = per_example_hand(params, xs, ys)
        for name, vg in ways.items():      # (a staged one: its trace, then its program)
            for _ in range(2):
                check(vg(params, xs, ys), want, name)
        check(per_example_loop(params, xs[:8], ys[:8]), tuple(w[:8] for w in want), "loop")
        # the samples of the batched ways alternate with the hand-written one's, and each
        # ratio is the median of the per-round ratios (a shared machine drifts)
        t_hand, times, ratios = paired(lambda: per_example_hand(params, xs, ys),
                                       {k: (lambda vg=vg: vg(params, xs, ys)) for k, vg in ways.items()},
                                       repeat)
        t_loop = timed(lambda: per_example_loop(params, xs, ys), 1 if QUICK else 3)
        size = f"{d}-{h}-{o}"
        print(f"{'(i)  ' + size + ' hand-batched':44s} {t_hand * 1e3:8.2f} ms")
        for name in ways:
            r_hand, r_loop = ratios[name], t_loop / times[name]
            both = r_hand <= 1.5 and r_loop >= 100
            print(f"{'(i)  ' + size + ' ' + name:44s} {times[name] * 1e3:8.2f} ms  {r_hand:5.2f}x hand"
                  f"     <= 1.5x  {'PASS' if r_hand <= 1.5 else 'FAIL'}     {r_loop:5.0f}x "
                  f"{'PASS' if r_loop >= 100 else 'FAIL'}{'  (both targets)' if both else ''}")
        print(f"{'(i)  ' + size + ' Python loop of gradient_r':44s} {t_loop * 1e3:8.2f} ms  "
              f"(hand: {t_loop / t_hand:.0f}x: no way can beat the loop by more)")
    print(f"{'(ii) jacobian_f n=1000':44s} {t_jac * 1e3:8.2f} ms  (compare with the run on main)")
    print("fallbacks (primitives applied member by member):", nd.batching.fallbacks() or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
