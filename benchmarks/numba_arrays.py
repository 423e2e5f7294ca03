"""The array programs of the benchmarks staged with ``backend="numba"`` against JAX jit.

Programs: benchmarks/arrays.py's MLP gradient (batch 256, 784-256-10), Rosenbrock HVP
(n = 1000) and Hessian of a 50-input function, and GradBench's GMM log posterior and its
gradient (k = 5, d = 10, n = 1000).  For each: whether numba compiled it (or it fell back
to Python, and numba's complaint), numba's compile time (the staged function's second
call, minus one run), its run time per call, JAX jit's compile time (first call) and run
time, and the ratio of run times (samples of the two alternating, in one process).

The whole is run twice in fresh processes sharing a new, empty cache directory
(``NESTAD_CACHE_DIR``): "cold" compiles, "warm" loads the machine code the first stored.
One thread for BLAS and XLA, as in arrays.py (which also raises glibc's mmap threshold).

    PYTHONPATH=. python benchmarks/numba_arrays.py [--quick]
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import arrays  # noqa: E402  (re-executes this script with arrays.py's environment)
import numpy as np  # noqa: E402
from staging import first_calls, paired  # noqa: E402

import nestad as nd  # noqa: E402
from nestad.staging.numba_backend import NumbaFallbackWarning  # noqa: E402

QUICK = "--quick" in sys.argv


def gmm_problem():
    from gradbench.evals import gmm
    rng = np.random.default_rng(5)
    k, d, n = 5, 10, 1000
    params = {'alpha': rng.standard_normal(k), 'mu': rng.standard_normal((k, d)),
              'q': rng.standard_normal((k, d)) * 0.1,
              'l': rng.standard_normal((k, d * (d - 1) // 2)) * 0.1}
    x = rng.standard_normal((n, d))
    return gmm.log_posterior, params, x


def programs():
    """name -> (nestad function, JAX function (unjitted) or None, arguments)."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    log_posterior, params, x = gmm_problem()

    def jax_mlp(p):
        W1, b1, W2, b2 = p
        z = jnp.tanh(arrays.X @ W1 + b1) @ W2 + b2
        return jnp.mean(jax.nn.logsumexp(z, axis=1) - z[np.arange(arrays.B), arrays.Y])

    def jax_gmm(p):         # GradBench's gmm written for JAX (the same formula)
        from gradbench.evals.gmm import log_multigamma, lower_triangle_index
        alpha, mu, q, l = p['alpha'], p['mu'], p['q'], p['l']
        n, d = x.shape
        k = alpha.shape[0]
        Q = jnp.concatenate([jnp.zeros((k, 1)), l], axis=1)[:, lower_triangle_index(d)] \
            + jnp.exp(q)[:, :, None] * jnp.eye(d)
        Qx = (x[None, :, :] - mu[:, None, :]) @ jnp.swapaxes(Q, 1, 2)
        sum_q = jnp.sum(q, axis=1)
        beta = (alpha + sum_q)[:, None] - 0.5 * jnp.sum(Qx * Qx, axis=2)
        ll = -n * (d / 2 * np.log(2 * np.pi) + jax.nn.logsumexp(alpha)) \
            + jnp.sum(jax.nn.logsumexp(beta, axis=0))
        dof = d + 2 + 1
        frob = jnp.sum(jnp.exp(q) ** 2) + jnp.sum(l * l)
        return ll + k * (dof * d * np.log(1.0 / np.sqrt(2)) - log_multigamma(dof / 2, d)) \
            - 0.5 * frob + 2 * jnp.sum(sum_q)

    gmm_f = lambda p: log_posterior(p, x, 2, 1.0)           # noqa: E731
    return {
        'MLP gradient': (nd.gradient_r(arrays.mlp_loss), jax.grad(jax_mlp), (arrays.PARAMS,)),
        'Rosenbrock HVP': (lambda x, v: nd.hvp(arrays.rosen, x, v),
                           lambda x, v: jax.jvp(jax.grad(lambda y: arrays.rosen(y, jnp)),
                                                (x,), (v,))[1], (arrays.XR, arrays.VR)),
        'Hessian f50': (nd.hessian(arrays.f50), jax.hessian(lambda y: arrays.f50(y, jnp)),
                        (arrays.X50,)),
        'GMM objective': (gmm_f, jax_gmm, (params,)),
        'GMM gradient': (nd.gradient_r(gmm_f), jax.grad(jax_gmm), (params,)),
    }


def worker(with_jax):
    import jax
    out = {}
    for name, (f, jf, args) in programs().items():
        staged = nd.stage(f, backend='numba')
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always', NumbaFallbackWarning)
            _, t_trace, t_second = first_calls(staged, *args)
        fell = [str(w.message) for w in caught if issubclass(w.category, NumbaFallbackWarning)]
        fn = lambda: staged(*args)                          # noqa: E731,B023
        t0 = time.perf_counter()
        fn()
        t_run = time.perf_counter() - t0
        r = out[name] = dict(trace=t_trace, compile=t_second - t_run, fell_back=fell)
        if not with_jax:
            continue
        jitted = jax.jit(jf)
        jargs = jax.tree_util.tree_map(jax.numpy.asarray, args)
        t0 = time.perf_counter()
        jax.block_until_ready(jitted(*jargs))
        r['jax_compile'] = time.perf_counter() - t0
        ours, theirs = nd_leaves(fn()), nd_leaves(jitted(*jargs))
        r['diff'] = max(float(np.max(np.abs(a - np.asarray(b)) / (np.max(np.abs(a)) or 1.0)))
                        for a, b in zip(ours, theirs))
        r['time'], r['jax_time'], r['ratio'] = paired(
            fn, lambda: jax.block_until_ready(jitted(*jargs)), QUICK, clock=time.process_time)
    print(json.dumps(out))


def nd_leaves(x):
    import jax
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def main():
    cache = tempfile.mkdtemp(prefix='nestad-numba-cache-')
    env = dict(os.environ, NESTAD_CACHE_DIR=cache)
    runs = {}
    for label, jax_too in (('cold', True), ('warm', False)):
        cmd = [sys.executable, os.path.abspath(__file__), '--worker', str(jax_too)] + \
            (['--quick'] if QUICK else [])
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"{label} worker failed:\n{done.stderr}")
        runs[label] = json.loads(done.stdout.strip().splitlines()[-1])
    ms = lambda t: f"{t * 1e3:9.2f} ms"                    # noqa: E731
    print(f"numba arrays against JAX jit (cache dir {cache}; CPU time per call, one thread)")
    print(f"{'program':16} {'numba':9} {'compile':>9} {'cached':>9} {'run':>12} "
          f"{'JAX compile':>12} {'JAX run':>12} {'numba/JAX':>9} {'rel diff':>9}")
    for name, r in runs['cold'].items():
        status = 'FALLBACK' if r['fell_back'] else 'compiled'
        print(f"{name:16} {status:9} {r['compile']:8.2f}s {runs['warm'][name]['compile']:8.2f}s "
              f"{ms(r['time'])} {r['jax_compile']:11.2f}s {ms(r['jax_time'])} "
              f"{r['ratio']:9.2f} {r['diff']:9.1e}")
    for name, r in runs['cold'].items():
        for message in r['fell_back']:
            print(f"  {name}: {message}")


if __name__ == '__main__':
    if '--worker' in sys.argv:
        worker(sys.argv[sys.argv.index('--worker') + 1] == 'True')
    else:
        main()
