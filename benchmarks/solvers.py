"""Solvers with implicit derivatives (issue 18): a bilevel hypergradient and a reverse
gradient through odeint.

What is measured
----------------
1. Bilevel, the target: ridge regression trained by gradient descent to tolerance.
   200 training and 200 validation samples, 10 correlated features (the design's
   singular values spread over 1.5 decades, so the training Hessian's condition number
   is about 900 at lambda = exp(-4)); the hypergradient d val(w*(theta)) / d theta of the
   validation loss, theta = log(lambda), at theta = -4, end to end (the training
   included).  The inner solver is one Python function, ``descent(value_and_grad, w)``:
   gradient descent with step 1/L until max |grad| <= 1e-11 (891 steps here).
   * implicit: ``nd.gradient_r(lambda th: val(nd.minimize(train, w0, th,
     method=descent)))``: ``descent`` runs on plain values (nestad's value and gradient,
     staged after 8 eager calls), then one solve with the Hessian (the optimality
     condition);
   * unrolled: ``nd.gradient_r(lambda th: val(descent(lambda w:
     nd.value_and_gradient_r(train)(w, th), w0)))``: the same function on nestad values,
     differentiated through its 891 steps (the same steps: the trip count is the same);
   * JAX implicit: ``jax.lax.custom_root`` around the same gradient descent in a
     ``lax.while_loop``, the tangent solve by ``jnp.linalg.solve``, the whole
     hypergradient under ``jax.jit``, end to end with compile (``jax.clear_caches()``
     and a fresh jitted function per sample), and compiled (steady state);
   * the closed form ``-(X_v^T r_v / n)^T (H + lambda I)^-1 lambda w*`` gives each one's
     error, and tracemalloc each one's peak memory.
   Targets: implicit >= 10x faster than unrolled, and <= 2x JAX's time.
   Then, no target, the logistic-regression variant of the earlier runs: Newton's method
   (``minimize(method='newton')``, 7 steps) against 8 unrolled Newton steps and 300
   unrolled gradient-descent steps, and JAX's ``custom_root`` around 20 Newton steps.
2. odeint: ``dy/dt = tanh(W y + b) - k y`` with 100 states (W a fixed 100x100 matrix,
   k and b 100-vectors), from t = 0 to 5 (rtol = atol = 1e-6): the reverse gradient of
   ``sum(y(5)^2)`` with respect to y0, k and b (the adjoint method) against the forward
   solve on plain values.  Target <= 5x.  Then the peak memory of that gradient
   (tracemalloc) and its time for spans 5, 20 and 80 (so 4x and 16x the steps), with
   every forward step kept (the default: memory grows with the steps) and with
   ``checkpoints=8`` (at most 8 steps kept at a time: memory must not grow).  Last,
   the same with all of W as the parameter (10,000 parameter cotangents integrated
   backwards with the 100 states; no target).

Each part runs in its own Python process (JAX's in its own too), with one BLAS thread;
times are CPU time of the process (``time.process_time``: on a loaded machine wall time
mostly measures the other processes), the median of the samples.
Run: ``PYTHONPATH=. python benchmarks/solvers.py``.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 5
FEATURES, SAMPLES_N = int(os.environ.get('FEATURES', 10)), int(os.environ.get('SAMPLES_N', 200))
NEWTON_STEPS = 8       # nd.minimize's Newton takes 7 steps here (checked in bilevel_nestad)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def timed(fn, samples=SAMPLES):
    out, times = None, []
    for _ in range(samples):
        t0 = time.process_time()
        out = fn()
        times.append(time.process_time() - t0)
    return out, median(times)


def data():
    import numpy as np
    rng = np.random.default_rng(0)
    w_true = rng.normal(size=FEATURES)
    X = rng.normal(size=(2 * SAMPLES_N, FEATURES))
    y = (X @ w_true + rng.normal(size=2 * SAMPLES_N) > 0).astype(float)
    return X[:SAMPLES_N], y[:SAMPLES_N], X[SAMPLES_N:], y[SAMPLES_N:]


def bilevel_nestad():
    import numpy as np
    import nestad as nd
    import nestad.numpy as anp
    Xt, yt, Xv, yv = data()

    def nll(w, X, y):
        z = X @ w
        return anp.sum(anp.logaddexp(0.0, z) - y * z) / y.size

    def train(w, th):
        return nll(w, Xt, yt) + anp.exp(th) * anp.sum(w * w) / 2

    def implicit(th):
        return nll(nd.minimize(train, np.zeros(FEATURES), th, method='newton'), Xv, yv)

    def unrolled_newton(th):          # the same Newton iterations, differentiated through
        w = np.zeros(FEATURES)
        for _ in range(NEWTON_STEPS):
            w = w - anp.linalg.solve(nd.hessian(train)(w, th), nd.gradient_r(train)(w, th))
        return nll(w, Xv, yv)

    def unrolled_gd(th):
        w = np.zeros(FEATURES)
        for _ in range(300):
            w = w - 1.0 * nd.gradient_r(train)(w, th)
        return nll(w, Xv, yv)
    def descent(value_and_grad, w):   # the same 300 steps, on plain values
        for _ in range(300):
            w = w - 1.0 * value_and_grad(w)[1]
        return w

    def implicit_gd(th):
        return nll(nd.minimize(train, np.zeros(FEATURES), th, method=descent), Xv, yv)
    g_imp, t_imp = timed(lambda: nd.gradient_r(implicit)(0.0))
    g_igd, t_igd = timed(lambda: nd.gradient_r(implicit_gd)(0.0), 3)
    g_new, t_new = timed(lambda: nd.gradient_r(unrolled_newton)(0.0), 3)
    g_gd, t_gd = timed(lambda: nd.gradient_r(unrolled_gd)(0.0), 3)
    return dict(implicit=t_imp, newton=t_new, gd=t_gd, implicit_gd=t_igd, g_implicit=float(g_imp),
                g_implicit_gd=float(g_igd),
                g_newton=float(g_new), g_gd=float(g_gd))


RIDGE_THETA = -4.0


def ridge_data():
    import numpy as np
    rng = np.random.default_rng(0)
    U, _, Vt = np.linalg.svd(rng.normal(size=(FEATURES, FEATURES)))
    X = rng.normal(size=(2 * SAMPLES_N, FEATURES)) @ (U * np.logspace(0, -1.5, FEATURES)) @ Vt
    y = X @ rng.normal(size=FEATURES) + 0.5 * rng.normal(size=2 * SAMPLES_N)
    Xt, yt = X[:SAMPLES_N], y[:SAMPLES_N]
    step = 1.0 / (np.linalg.eigvalsh(Xt.T @ Xt / SAMPLES_N)[-1] + np.exp(RIDGE_THETA))
    return Xt, yt, X[SAMPLES_N:], y[SAMPLES_N:], step


def ridge_exact():
    import numpy as np
    Xt, yt, Xv, yv, _ = ridge_data()
    n, lam = SAMPLES_N, np.exp(RIDGE_THETA)
    H = Xt.T @ Xt / n + lam * np.eye(FEATURES)
    w = np.linalg.solve(H, Xt.T @ yt / n)
    return float((Xv.T @ (Xv @ w - yv) / n) @ -np.linalg.solve(H, lam * w))


def peak_memory(fn):
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def ridge_nestad():
    import numpy as np
    import nestad as nd
    import nestad.numpy as anp
    Xt, yt, Xv, yv, step = ridge_data()
    n = SAMPLES_N

    def train(w, th):
        r = Xt @ w - yt
        return anp.sum(r * r) / (2 * n) + anp.exp(th) * anp.sum(w * w) / 2

    def val(w):
        r = Xv @ w - yv
        return anp.sum(r * r) / (2 * n)
    steps = [0]

    def descent(value_and_grad, w):   # the one solver: on plain values or nestad values
        k = 0
        while True:
            _, g = value_and_grad(w)
            if np.max(np.abs(nd.primal_value(g))) <= 1e-11:
                steps[0] = k
                return w
            w = w - step * g
            k += 1

    def implicit(th):
        return val(nd.minimize(train, np.zeros(FEATURES), th, method=descent))

    def unrolled(th):
        return val(descent(lambda w: nd.value_and_gradient_r(train)(w, th), np.zeros(FEATURES)))
    t_imp, t_unr = [], []
    for _ in range(SAMPLES):          # interleaved: a change of the machine's load hits both
        g_unr, t = timed(lambda: nd.gradient_r(unrolled)(RIDGE_THETA), 1)
        t_unr.append(t)
        steps_unr = steps[0]
        g_imp, t = timed(lambda: nd.gradient_r(implicit)(RIDGE_THETA), 1)
        t_imp.append(t)
        assert steps[0] == steps_unr
    return dict(implicit=median(t_imp), unrolled=median(t_unr), g_implicit=float(g_imp),
                g_unrolled=float(g_unr), steps=steps[0],
                ratios=sorted(u / i for u, i in zip(t_unr, t_imp)),
                mem_implicit=peak_memory(lambda: nd.gradient_r(implicit)(RIDGE_THETA)),
                mem_unrolled=peak_memory(lambda: nd.gradient_r(unrolled)(RIDGE_THETA)))


def ridge_jax():
    import jax
    jax.config.update('jax_enable_x64', True)
    import jax.numpy as jnp
    Xt, yt, Xv, yv, step = ridge_data()
    n = SAMPLES_N

    def hypergradient(th):
        def train(w):
            r = Xt @ w - yt
            return jnp.sum(r * r) / (2 * n) + jnp.exp(th) * jnp.sum(w * w) / 2

        def descent(F, w):
            return jax.lax.while_loop(lambda w: jnp.max(jnp.abs(F(w))) > 1e-11,
                                      lambda w: w - step * F(w), w)
        w = jax.lax.custom_root(jax.grad(train), jnp.zeros(FEATURES), descent,
                                lambda g, y: jnp.linalg.solve(jax.jacfwd(g)(y), y))
        r = Xv @ w - yv
        return jnp.sum(r * r) / (2 * n)

    def once():
        jax.clear_caches()
        return float(jax.jit(jax.grad(hypergradient))(RIDGE_THETA))
    g, t = timed(once)
    compiled = jax.jit(jax.grad(hypergradient))
    compiled(RIDGE_THETA)
    _, steady = timed(lambda: float(compiled(RIDGE_THETA)))
    return dict(jax=t, g_jax=g, jax_steady=steady)


def bilevel_jax():
    import jax
    jax.config.update('jax_enable_x64', True)
    import jax.numpy as jnp
    Xt, yt, Xv, yv = data()

    def nll(w, X, y):
        z = X @ w
        return jnp.sum(jnp.logaddexp(0.0, z) - y * z) / y.size

    def hypergradient(th):
        train = lambda w: nll(w, Xt, yt) + jnp.exp(th) * jnp.sum(w * w) / 2   # noqa: E731

        def newton(F, w):
            return jax.lax.fori_loop(0, 20, lambda _, w: w - jnp.linalg.solve(
                jax.jacfwd(F)(w), F(w)), w)
        w = jax.lax.custom_root(jax.grad(train), jnp.zeros(FEATURES), newton,
                                lambda g, y: jnp.linalg.solve(jax.jacfwd(g)(y), y))
        return nll(w, Xv, yv)

    def once():
        jax.clear_caches()
        return float(jax.jit(jax.grad(hypergradient))(0.0))
    g, t = timed(once)
    compiled = jax.jit(jax.grad(hypergradient))
    compiled(0.0)
    _, steady = timed(lambda: float(compiled(0.0)))
    return dict(jax=t, g_jax=g, jax_steady=steady)


def odeint_nestad():
    import tracemalloc
    import numpy as np
    import nestad as nd
    import nestad.numpy as anp
    rng = np.random.default_rng(1)
    W = rng.normal(size=(100, 100)) / 10
    y0, k, b = rng.normal(size=100), np.full(100, 0.5), rng.normal(size=100) / 10
    ts = lambda T: np.array([0.0, T])                                         # noqa: E731
    f = lambda y, t, k, b: anp.tanh(W @ y + b) - k * y                        # noqa: E731
    solve = lambda y0, k, b, T=5.0: nd.odeint(f, y0, ts(T), k, b, rtol=1e-6, atol=1e-6)  # noqa
    loss = lambda y0, k, b, T=5.0: anp.sum(solve(y0, k, b, T)[-1] ** 2)      # noqa: E731
    _, t_fwd = timed(lambda: solve(y0, k, b))
    _, t_rev = timed(lambda: nd.gradient_r(loss, (0, 1, 2))(y0, k, b))
    peaks, peaks_cp, times_cp = {}, {}, {}
    for T in (5.0, 20.0, 80.0):
        tracemalloc.start()
        nd.gradient_r(loss, (0, 1, 2))(y0, k, b, T=T)
        peaks[T] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        cp = lambda y0, k, b: anp.sum(nd.odeint(f, y0, ts(T), k, b, rtol=1e-6, atol=1e-6,  # noqa
                                                checkpoints=8)[-1] ** 2)
        tracemalloc.start()
        nd.gradient_r(cp, (0, 1, 2))(y0, k, b)
        peaks_cp[T] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        times_cp[T] = (timed(lambda: solve(y0, k, b, T), 3)[1],
                       timed(lambda: nd.gradient_r(loss, (0, 1, 2))(y0, k, b, T=T), 3)[1],
                       timed(lambda: nd.gradient_r(cp, (0, 1, 2))(y0, k, b), 3)[1])
    # the same system with all of W as the parameter: 10,000 cotangents ride along
    g = lambda y, t, W: anp.tanh(W @ y + b) - k * y                           # noqa: E731
    solve_w = lambda W: nd.odeint(g, y0, ts(5.0), W, rtol=1e-6, atol=1e-6)    # noqa: E731
    _, t_fwd_w = timed(lambda: solve_w(W))
    _, t_rev_w = timed(lambda: nd.gradient_r(lambda W: anp.sum(solve_w(W)[-1] ** 2))(W))
    return dict(forward=t_fwd, reverse=t_rev, peaks=peaks, forward_w=t_fwd_w, reverse_w=t_rev_w,
                peaks_cp=peaks_cp, times_cp=times_cp)


def run(part):
    out = subprocess.run([sys.executable, __file__, part], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(HERE),
                                  OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1'))
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    from _report import fmt_time, print_table
    rd = run('ridge_nestad')
    try:
        rj = run('ridge_jax')
    except RuntimeError as e:
        rj = {'jax': float('nan'), 'g_jax': float('nan'), 'jax_steady': float('nan')}
        print(f"JAX part failed: {str(e).splitlines()[-1]}")
    exact = ridge_exact()
    rel = lambda g: f"{g:.12g} (rel. error {abs(g - exact) / abs(exact):.1e})"   # noqa: E731
    print(f"1. Bilevel hypergradient (ridge regression, gradient descent to max |grad| <= 1e-11: "
          f"{rd['steps']} steps), CPU time")
    print_table(['method', 'time', 'peak memory', 'hypergradient', 'ratio'], [
        ['closed form', '', '', f"{exact:.12g}", ''],
        ['nestad implicit (minimize, method=descent)', fmt_time(rd['implicit']),
         f"{rd['mem_implicit'] / 1e6:.2f} MB", rel(rd['g_implicit']), '1'],
        ['nestad unrolled (the same descent, differentiated through)', fmt_time(rd['unrolled']),
         f"{rd['mem_unrolled'] / 1e6:.2f} MB", rel(rd['g_unrolled']),
         f"{rd['unrolled'] / rd['implicit']:.1f}x slower (target >= 10; pairs "
         f"{min(rd['ratios']):.1f}-{max(rd['ratios']):.1f}x)"],
        ['JAX implicit (custom_root, jit, with compile)', fmt_time(rj['jax']), '',
         rel(rj['g_jax']), f"nestad / JAX = {rd['implicit'] / rj['jax']:.3f} (target <= 2)"],
        ['JAX implicit, compiled (2nd call on)', fmt_time(rj['jax_steady']), '', '',
         f"nestad / JAX = {rd['implicit'] / rj['jax_steady']:.1f} (no target)"],
    ])
    print()
    nd_b = run('bilevel_nestad')
    try:
        jx = run('bilevel_jax')
    except RuntimeError as e:
        jx = {'jax': float('nan'), 'g_jax': float('nan'), 'jax_steady': float('nan')}
        print(f"JAX part failed: {str(e).splitlines()[-1]}")
    err = {k: abs(nd_b['g_' + k] - nd_b['g_implicit']) / abs(nd_b['g_implicit'])
           for k in ('newton', 'gd', 'implicit_gd')}
    print("1b. Bilevel hypergradient (logistic regression, lambda = exp(theta)), CPU time; "
          "no target")
    print_table(['method', 'time', 'hypergradient', 'ratio'], [
        ['nestad implicit (minimize, newton)', fmt_time(nd_b['implicit']),
         f"{nd_b['g_implicit']:.12g}", '1'],
        [f'nestad unrolled Newton ({NEWTON_STEPS} steps)', fmt_time(nd_b['newton']),
         f"{nd_b['g_newton']:.12g} (rel. error {err['newton']:.1e})",
         f"{nd_b['newton'] / nd_b['implicit']:.1f}x slower"],
        ['nestad unrolled gradient descent (300)', fmt_time(nd_b['gd']),
         f"{nd_b['g_gd']:.12g} (rel. error {err['gd']:.1e})",
         f"{nd_b['gd'] / nd_b['implicit']:.1f}x slower"],
        ['nestad implicit, the same 300 GD steps as solver', fmt_time(nd_b['implicit_gd']),
         f"{nd_b['g_implicit_gd']:.12g} (rel. error {err['implicit_gd']:.1e})",
         f"unrolled GD / this = {nd_b['gd'] / nd_b['implicit_gd']:.1f}x"],
        ['JAX implicit (custom_root, jit)', fmt_time(jx['jax']), f"{jx['g_jax']:.12g}",
         f"nestad / JAX = {nd_b['implicit'] / jx['jax']:.3f}"],
        ['JAX implicit, compiled (2nd call on)', fmt_time(jx['jax_steady']), '',
         f"nestad / JAX = {nd_b['implicit'] / jx['jax_steady']:.1f} (no target)"],
    ])
    od = run('odeint_nestad')
    print("\n2. odeint, 100 states, CPU time")
    print_table(['what', 'time', 'ratio'], [
        ['forward solve (plain values)', fmt_time(od['forward']), '1'],
        ['reverse gradient, y0 and 200 parameters', fmt_time(od['reverse']),
         f"{od['reverse'] / od['forward']:.2f} (target <= 5)"],
        ['forward solve, W as parameter', fmt_time(od['forward_w']), '1'],
        ['reverse gradient, W (10,000 parameters)', fmt_time(od['reverse_w']),
         f"{od['reverse_w'] / od['forward_w']:.2f}"],
    ])
    print("\nby span T (the steps grow with T): peak memory (tracemalloc) and CPU time of the "
          "gradient, every step kept and checkpoints=8")
    print_table(['T', 'forward', 'gradient', 'ratio', 'peak', 'checkpoints=8', 'ratio', 'peak'], [
        [f"{float(T):g}", fmt_time(tf), fmt_time(tr), f"{tr / tf:.2f}",
         f"{od['peaks'][T] / 1e6:.2f} MB", fmt_time(tc), f"{tc / tf:.2f}",
         f"{od['peaks_cp'][T] / 1e6:.2f} MB"]
        for T, (tf, tr, tc) in od['times_cp'].items()])


if __name__ == '__main__':
    if len(sys.argv) > 1:
        print(json.dumps(globals()[sys.argv[1]]()))
    else:
        sys.path.insert(0, HERE)
        main()
