"""Taylor mode through linear algebra: one jet of order K of each function along a line
(a 3 x 3 system by default), wall-clock median of repeated calls.  Shows which rules cost
about K solves (recurrences) and which recurse through the ODE rule.

    PYTHONPATH=$PWD python benchmarks/taylor_linalg.py [--n 3] [--k 10] [--cap 20]

``--cap``: a case whose first call takes longer is timed once and not repeated."""
import argparse
import os
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # (2 shared cores: BLAS threads made 3 x 3 solves 20 ms)

import numpy as np

import nestad as nd
import nestad.numpy as anp
from nestad.scipy import linalg as sla


def cases(n, rng):
    m = rng.normal(size=(n, n))
    s = m @ m.T + n * np.eye(n)
    lo = np.linalg.cholesky(s)
    dlo = 0.1 * np.tril(rng.normal(size=(n, n)))
    ds = 0.1 * (m + m.T)
    b, db = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    ab = rng.normal(size=(3, n))
    ab[1] += 5.0
    dab = 0.3 * rng.normal(size=(3, n))
    return {
        'numpy.linalg.solve': lambda t: anp.linalg.solve(s + t * ds, b + t * db),
        'numpy.linalg.inv': lambda t: anp.linalg.inv(s + t * ds),
        'numpy.linalg.det': lambda t: anp.linalg.det(s + t * ds),
        'numpy.linalg.slogdet': lambda t: anp.linalg.slogdet(s + t * ds)[1],
        'numpy.linalg.cholesky': lambda t: anp.linalg.cholesky(s + t * ds),
        'numpy.linalg.eigh': lambda t: anp.linalg.eigh(s + t * ds)[0],
        'scipy.linalg.cho_solve': lambda t: sla.cho_solve((lo + t * dlo, True), b + t * db),
        'scipy.linalg.cho_solve (b only)': lambda t: sla.cho_solve((lo, True), b + t * db),
        'scipy.linalg.solve_banded': lambda t: sla.solve_banded((1, 1), ab + t * dab, b + t * db),
        'scipy.linalg.solve_triangular': lambda t: sla.solve_triangular(lo + t * dlo, b + t * db, lower=True),
        'scipy.linalg.cholesky': lambda t: sla.cho_factor(s + t * ds, lower=True)[0],
        'scipy.linalg.solve_sylvester': lambda t: sla.solve_sylvester(s + t * ds, s, b @ b.T + t * ds),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=3)
    ap.add_argument('--k', type=int, default=10)
    ap.add_argument('--cap', type=float, default=20.0)
    ap.add_argument('--only', default=None, help="a substring of the case names")
    args = ap.parse_args()
    print(f"n = {args.n}, K = {args.k}; median seconds per nd.derivatives(f, K)(0.0)")
    for name, f in cases(args.n, np.random.default_rng(16)).items():
        if args.only and args.only not in name:
            continue
        run = nd.derivatives(f, args.k)
        t0 = time.perf_counter()
        run(0.0)
        first = time.perf_counter() - t0
        times = [first]
        if first < args.cap:
            reps = max(3, min(20, int(0.5 / max(first, 1e-6))))
            for _ in range(reps):
                t0 = time.perf_counter()
                run(0.0)
                times.append(time.perf_counter() - t0)
        print(f"{name:34s} {np.median(times):10.4g} s  ({len(times)} calls)", flush=True)


if __name__ == '__main__':
    main()
