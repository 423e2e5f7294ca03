"""Array workloads: nestad against autograd, JAX (eager and jit), torch.func, and hand-written numpy.

(i)   gradient of a 2-layer MLP loss (batch 256, 784-256-10, tanh, softmax cross-entropy)
      with respect to all weights; floor: the hand-written numpy gradient.
(ii)  Hessian-vector product of the n=1000 Rosenbrock function; floor: hand-written H v.
(iii) full Hessian of a 50-input function  f(x) = sum(log(1 + exp(A x))) + sum(x^4)/4.
(iv)  full (dense) Hessian of the n=1000 Rosenbrock function; floor: its hand-written closed
      form (tridiagonal, written into a dense array).  benchmarks/hessians.py has two more
      functions and the staged Hessians.

Every implementation's answer is checked against the floor before it is timed.  Times are
CPU-time medians (time.process_time) with BLAS, JAX and torch limited to one thread so that
libraries are compared on the same resources; peers that are not installed are skipped.

Targets (from the issue): (i) nestad within 1.5x of the hand-written gradient and no slower
than the fastest eager peer; (ii) and (iii) faster than autograd and torch.func; (iv) within
1.5x of JAX jit (issue 19).

Memory: glibc returns every large numpy temporary (here 0.5-1.6 MB arrays) to the operating
system when it is freed, so each call pays page faults for them again, about a third of
the MLP gradient's time for hand-written numpy, autograd and nestad alike; torch's caching
allocator does not.  To compare AD rather than allocators, the script re-executes itself
with glibc's mmap threshold raised (MALLOC_MMAP_THRESHOLD_), so that every library reuses
freed memory; ``--malloc-default`` keeps glibc's default.

    pip install -e ".[bench]" && python benchmarks/arrays.py [--quick] [--malloc-default]
"""
import os
import sys

if "--malloc-default" not in sys.argv and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(1 << 30)
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    os.execv(sys.executable, [sys.executable] + sys.argv)

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import nestad as nd  # noqa: E402
import nestad.numpy as anp  # noqa: E402

QUICK = "--quick" in sys.argv
REPEATS = 3 if QUICK else 15

rng = np.random.default_rng(0)
B, D, H, C = 256, 784, 256, 10
X = rng.standard_normal((B, D))
Y = rng.integers(0, C, B)
PARAMS = (rng.standard_normal((D, H)) * 0.05, np.zeros(H), rng.standard_normal((H, C)) * 0.1, np.zeros(C))
XR = rng.standard_normal(1000)
VR = rng.standard_normal(1000)
A50 = rng.standard_normal((50, 50)) / 7
X50 = rng.standard_normal(50)


def cpu_median(fn):
    fn()                                   # warm-up (and jit compilation)
    times = []
    for _ in range(REPEATS):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


# ---------------------------------------------------------------- floors (hand-written numpy)

def mlp_grad_hand(params):
    W1, b1, W2, b2 = params
    h = np.tanh(X @ W1 + b1)
    z = h @ W2 + b2
    e = np.exp(z - z.max(1, keepdims=True))
    s = e / e.sum(1, keepdims=True)
    s[np.arange(B), Y] -= 1
    s /= B
    dh = s @ W2.T
    da = dh * (1 - h * h)
    return X.T @ da, da.sum(0), h.T @ s, s.sum(0)


def rosen_hvp_hand(x, v):
    d = np.zeros_like(x)
    d[:-1] = 1200 * x[:-1] ** 2 - 400 * x[1:] + 2
    d[1:] += 200
    off = -400 * x[:-1]
    hv = d * v
    hv[:-1] += off * v[1:]
    hv[1:] += off * v[:-1]
    return hv


def rosen_hessian_hand(x):
    d = np.zeros_like(x)
    d[:-1] = 1200 * x[:-1] ** 2 - 400 * x[1:] + 2
    d[1:] += 200
    h = np.diag(d)
    i = np.arange(len(x) - 1)
    h[i, i + 1] = h[i + 1, i] = -400 * x[:-1]
    return h


def hessian50_hand(x):
    s = 1 / (1 + np.exp(-(A50 @ x)))
    return A50.T @ (A50 * (s * (1 - s))[:, None]) + np.diag(3 * x ** 2)


# ---------------------------------------------------------------- nestad

def mlp_loss(params, xp=anp):
    W1, b1, W2, b2 = params
    h = xp.tanh(X @ W1 + b1)
    z = h @ W2 + b2
    return xp.mean(xp.logsumexp(z, axis=1) - z[np.arange(B), Y])


def rosen(x, xp=anp):
    return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def f50(x, xp=anp):
    return xp.sum(xp.log1p(xp.exp(A50 @ x))) + xp.sum(x ** 4) / 4


def nestad_impls():
    return {
        "mlp": lambda: nd.gradient_r(mlp_loss)(PARAMS),
        "hvp": lambda: nd.hvp(rosen, XR, VR),
        "hessian": lambda: nd.hessian(f50)(X50),
        "hessian1000": lambda: nd.hessian(rosen)(XR),
    }


# ---------------------------------------------------------------- peers

def autograd_impls():
    import autograd
    import autograd.numpy as agnp
    from autograd.scipy.special import logsumexp

    def loss(params):
        W1, b1, W2, b2 = params
        h = agnp.tanh(agnp.dot(X, W1) + b1)
        z = agnp.dot(h, W2) + b2
        return agnp.mean(logsumexp(z, axis=1) - z[np.arange(B), Y])

    g = autograd.grad(loss)
    hvp = autograd.grad(lambda x, v: agnp.dot(autograd.grad(lambda y: rosen(y, agnp))(x), v))
    hess = autograd.hessian(lambda x: f50(x, agnp))
    hess1000 = autograd.hessian(lambda x: rosen(x, agnp))
    return {"mlp": lambda: g(list(PARAMS)), "hvp": lambda: hvp(XR, VR), "hessian": lambda: hess(X50),
            "hessian1000": lambda: hess1000(XR)}


def jax_impls(jit):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def loss(params):
        W1, b1, W2, b2 = params
        h = jnp.tanh(X @ W1 + b1)
        z = h @ W2 + b2
        return jnp.mean(jax.nn.logsumexp(z, axis=1) - z[np.arange(B), Y])

    def hvp(x, v):
        return jax.jvp(jax.grad(lambda y: rosen(y, jnp)), (x,), (v,))[1]

    g, hv, he = jax.grad(loss), hvp, jax.hessian(lambda x: f50(x, jnp))
    he1000 = jax.hessian(lambda x: rosen(x, jnp))
    if jit:
        g, hv, he, he1000 = jax.jit(g), jax.jit(hv), jax.jit(he), jax.jit(he1000)
    P, xr, vr, x50 = [jnp.asarray(p) for p in PARAMS], jnp.asarray(XR), jnp.asarray(VR), jnp.asarray(X50)
    block = lambda r: jax.block_until_ready(r)  # noqa: E731
    return {"mlp": lambda: block(g(P)), "hvp": lambda: block(hv(xr, vr)),
            "hessian": lambda: block(he(x50)), "hessian1000": lambda: block(he1000(xr))}


def torch_impls():
    import torch
    from torch.func import grad, hessian, jvp
    torch.set_num_threads(1)
    T = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    Xt, Yt, At = T(X), torch.tensor(Y), T(A50)

    def loss(params):
        W1, b1, W2, b2 = params
        h = torch.tanh(Xt @ W1 + b1)
        z = h @ W2 + b2
        return torch.mean(torch.logsumexp(z, dim=1) - z[torch.arange(B), Yt])

    def rosen_t(x):
        return torch.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    def f50_t(x):
        return torch.sum(torch.log1p(torch.exp(At @ x))) + torch.sum(x ** 4) / 4

    P = tuple(T(p) for p in PARAMS)
    xr, vr, x50 = T(XR), T(VR), T(X50)
    g = grad(loss)
    return {"mlp": lambda: g(P), "hvp": lambda: jvp(grad(rosen_t), (xr,), (vr,))[1],
            "hessian": lambda: hessian(f50_t)(x50), "hessian1000": lambda: hessian(rosen_t)(xr)}


FLOORS = {"mlp": lambda: mlp_grad_hand(PARAMS), "hvp": lambda: rosen_hvp_hand(XR, VR),
          "hessian": lambda: hessian50_hand(X50), "hessian1000": lambda: rosen_hessian_hand(XR)}
LABELS = {"mlp": "(i) MLP gradient", "hvp": "(ii) Rosenbrock HVP n=1000", "hessian": "(iii) Hessian n=50",
          "hessian1000": "(iv) Rosenbrock Hessian n=1000"}


def check(name, impl_name, result):
    want = FLOORS[name]()
    got = result() if callable(result) else result
    if name == "mlp":
        err = max(float(np.max(np.abs(np.asarray(g) - w))) for g, w in zip(got, want))
    else:
        err = float(np.max(np.abs(np.asarray(got) - want)))
    scale = 1.0 if name == "mlp" else float(np.max(np.abs(want)))
    if not err <= 1e-8 * max(scale, 1.0):
        raise AssertionError(f"{impl_name} gives a wrong answer for {name}: max error {err:.3g}")


def main():
    impls = {"nestad": nestad_impls()}
    for label, make in (("autograd", autograd_impls), ("JAX eager", lambda: jax_impls(False)),
                        ("JAX jit", lambda: jax_impls(True)), ("torch.func", torch_impls)):
        try:
            impls[label] = make()
        except ImportError:
            print(f"{label}: not installed (pip install -e '.[bench]')")
    malloc = ("glibc mmap threshold raised (freed memory is reused)" if "MALLOC_MMAP_THRESHOLD_" in os.environ
              else "glibc's default allocator settings")
    print(f"CPU-time medians of {REPEATS} runs, one thread everywhere, {malloc}; "
          "ratio = time / hand-written numpy\n")
    header = f"{'workload':<30}{'hand numpy':>14}" + "".join(f"{k:>20}" for k in impls)
    print(header)
    print("-" * len(header))
    results = {}
    for name in ("mlp", "hvp", "hessian", "hessian1000"):
        floor = cpu_median(FLOORS[name])
        row = f"{LABELS[name]:<30}{floor * 1e3:>11.3f} ms"
        for impl_name, fns in impls.items():
            check(name, impl_name, fns[name])
            t = cpu_median(fns[name])
            results[name, impl_name] = t
            row += f"{t * 1e3:>10.3f} ms {t / floor:>5.1f}x"
        results[name, "hand"] = floor
        print(row)
    print()
    verdicts = []
    r = results["mlp", "nestad"] / results["mlp", "hand"]
    verdicts.append(("(i) nestad <= 1.5x hand-written numpy", r <= 1.5, f"{r:.2f}x"))
    eager = [results["mlp", k] for k in ("autograd", "JAX eager", "torch.func") if ("mlp", k) in results]
    if eager:
        r = results["mlp", "nestad"] / min(eager)
        verdicts.append(("(i) nestad no slower than the fastest eager peer", r <= 1.0, f"{r:.2f}x"))
    for name in ("hvp", "hessian"):
        for peer in ("autograd", "torch.func"):
            if (name, peer) in results:
                r = results[name, peer] / results[name, "nestad"]
                verdicts.append((f"{LABELS[name][:4]} nestad faster than {peer}", r > 1.0,
                                 f"{peer} takes {r:.1f}x nestad's time"))
    if ("hessian1000", "JAX jit") in results:
        r = results["hessian1000", "nestad"] / results["hessian1000", "JAX jit"]
        verdicts.append(("(iv) nestad <= 1.5x JAX jit", r <= 1.5, f"{r:.2f}x"))
    for text, ok, detail in verdicts:
        print(f"  [{'PASS' if ok else 'MISS'}] {text}: {detail}")


if __name__ == "__main__":
    main()
