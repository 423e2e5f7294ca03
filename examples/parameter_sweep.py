"""A staged gradient mapped over a parameter sweep on worker processes (Dask, or
multiprocessing without it), and the same gradient exported as a numpy-only module.

A damped oscillation y(t) = a exp(-b t) cos(w t) is fitted to 200 noisy samples by
least squares, L(a, b, w) = mean((y(t) - data)^2). The gradient of L is scanned over a
16 x 16 grid of (b, w) (a landscape scan, as one does to pick starting points): the
staged gradient ``nd.stage(nd.gradient_r(loss))`` pickles as the function it stages, so
each worker traces it once and then runs compiled code for its rows of the grid. With
Dask installed (``pip install "nestad[distributed]"``) the rows go to a local cluster of
two worker processes on the loopback interface; without it, to a ``multiprocessing``
pool of two (the script says which). ``nd.export`` then writes the same gradient as the
source of a module that needs only numpy; the workers run that source too (no nestad
needed there).

Checks: every gradient against the hand-derived one, 2/N sum r * dy/dtheta with
dy/da = exp(-b t) cos(w t), dy/db = -t y, dy/dw = -a t exp(-b t) sin(w t) (1e-12
relative); the exported module's gradients equal the staged ones bit for bit; the
smallest gradient on the grid lies next to the parameters that made the data.
"""
import sys

import numpy as np

import nestad as nd
import nestad.numpy as anp

TRUE = np.array([1.0, 0.3, 2.0])                      # a, b, w that made the data
T = np.linspace(0.0, 10.0, 200)
DATA = TRUE[0] * np.exp(-TRUE[1] * T) * np.cos(TRUE[2] * T) + 0.01 * np.sin(37.0 * T)
BS, WS = np.linspace(0.1, 0.5, 16), np.linspace(1.6, 2.4, 16)


def loss(theta, t, data):
    a, b, w = theta[0], theta[1], theta[2]
    return anp.mean((a * anp.exp(-b * t) * anp.cos(w * t) - data) ** 2)


def hand_gradient(theta, t, data):
    a, b, w = theta
    e = np.exp(-b * t)
    y = a * e * np.cos(w * t)
    r = y - data
    return 2 / t.size * np.array([np.sum(r * e * np.cos(w * t)), np.sum(r * -t * y),
                                  np.sum(r * -a * t * e * np.sin(w * t))])


def grid_row(grad, b_row):
    """What a worker does: the gradient at every (1, b, w) of one row of the grid."""
    return np.array([grad(np.array([1.0, b, w]), T, DATA) for b, w in b_row])


def exported_row(source, b_row):
    """The same with the exported module's source: no nestad in this function."""
    namespace = {}
    exec(compile(source, "loss_grad.py", "exec"), namespace)
    return grid_row(namespace['loss_grad'], b_row)


def run_on_workers(tasks):
    """Results of ``fn(*args)`` for each (fn, args), on two worker processes."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print("dask.distributed is not installed (pip install 'nestad[distributed]'): "
              "using a multiprocessing pool of 2 processes instead")
        import multiprocessing
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            return [r.get() for r in [pool.apply_async(fn, args) for fn, args in tasks]]
    print("dask.distributed: a LocalCluster of 2 worker processes on 127.0.0.1")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        return client.gather([client.submit(fn, *args, pure=False) for fn, args in tasks])


def main():
    grad = nd.stage(nd.gradient_r(loss))
    source = nd.export(nd.gradient_r(loss), TRUE, T, DATA, name="loss_grad")
    rows = [[(b, w) for w in WS] for b in BS]
    results = run_on_workers([(grid_row, (grad, row)) for row in rows] +
                             [(exported_row, (source, row)) for row in rows])
    staged = np.array(results[:len(rows)])               # (16, 16, 3)
    exported = np.array(results[len(rows):])

    want = np.array([[hand_gradient(np.array([1.0, b, w]), T, DATA) for w in WS] for b in BS])
    err = np.max(np.abs(staged - want)) / np.max(np.abs(want))
    same = np.array_equal(exported, staged)
    norms = np.linalg.norm(staged, axis=-1)
    i, j = np.unravel_index(np.argmin(norms), norms.shape)
    near = abs(BS[i] - TRUE[1]) <= BS[1] - BS[0] and abs(WS[j] - TRUE[2]) <= WS[1] - WS[0]
    print(f"{norms.size} gradients on 2 workers; largest relative error against the hand "
          f"gradient {err:.1e} (tolerance 1e-12)")
    print(f"exported module ({len(source.splitlines())} lines, numpy only) equals the staged "
          f"gradient bit for bit: {same}")
    print(f"smallest |gradient| {norms[i, j]:.2e} at b = {BS[i]:.3f}, w = {WS[j]:.3f} "
          f"(data made with b = {TRUE[1]}, w = {TRUE[2]}; within one grid step: {near})")
    ok = err < 1e-12 and same and near
    print("all checks passed" if ok else "CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
