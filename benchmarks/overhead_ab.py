"""Eager overhead of two checkouts of nestad, measured in lockstep: A/B on a busy machine.

``overhead.py`` times each library in its own process, one after the other; on a machine
shared with other jobs, the speed available to a process changes faster than that (a
ratio moved 5x between two runs of one checkout under a load of 12 on two cores).  Here
one worker process per checkout runs the workloads of ``overhead.py`` (i) forward chain,
(ii) reverse gradient and (iii) the second derivatives ff, fr, rf and rr, in short
bursts, alternately (the order swapped every repeat), and times them in CPU time (``time.process_time``), which
another job's use of the cores disturbs much less than wall time.  Each burst's time is
normalised by the plain-float baseline run just before and after it in the same worker.
Printed: each checkout's median ratio to plain, and the quartiles of the per-burst ratio
B / A.

Usage::

    python benchmarks/overhead_ab.py A_DIR B_DIR [--repeats 20]

where each directory holds a checkout (its ``nestad`` package is the one imported).
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = ('fwd', 'rev', 'ff', 'fr', 'rf', 'rr')


def worker():
    import gc

    import nestad

    def chain(x, sin):
        for _ in range(250):
            x = sin(x) * 1.0001 + 0.1 * x
        return x

    def mix(xs, sin):
        acc = 0.0
        for k in range(2500):
            acc = acc * 0.999 + sin(xs[k % 100] * xs[(7 * k + 3) % 100])
        return acc
    xs = [0.1 + 0.008 * i for i in range(100)]
    fwd = nestad.derivative(lambda x: chain(x, nestad.sin))
    rev = nestad.gradient_r(lambda v: mix(v, nestad.sin))
    d, g = nestad.derivative, nestad.gradient_r
    second = {k: outer(inner(lambda x: chain(x, nestad.sin)))
              for k, outer, inner in (('ff', d, d), ('fr', d, g), ('rf', g, d), ('rr', g, g))}
    work = {'fwd': (lambda: fwd(0.5), lambda: chain(0.5, math.sin), 40, 800),
            'rev': (lambda: rev(xs), lambda: mix(xs, math.sin), 4, 60)}
    for k, f in second.items():
        work[k] = ((lambda f=f: f(0.5)), lambda: chain(0.5, math.sin), 6, 600)

    def per_call(fn, n):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - t0) / n
    gc.freeze()
    for line in sys.stdin:
        f, plain, n, m = work[line.strip()]
        before, t, after = per_call(plain, m), per_call(f, n), per_call(plain, m)
        print(t / ((before + after) / 2), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('a')
    parser.add_argument('b')
    parser.add_argument('--repeats', type=int, default=20)
    args = parser.parse_args()
    procs = []
    for root in (args.a, args.b):
        env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), '--worker'],
                                      cwd=root, env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE))
    ratios = {(i, k): [] for i in (0, 1) for k in WORKLOADS}
    for rep in range(args.repeats):
        for k in WORKLOADS:
            for i in ((0, 1) if rep % 2 == 0 else (1, 0)):
                procs[i].stdin.write(k + '\n')
                procs[i].stdin.flush()
                ratios[(i, k)].append(float(procs[i].stdout.readline()))
    for p in procs:
        p.stdin.close()
        p.wait()
    print(f"{'workload':8} {'A / plain':>10} {'B / plain':>10}   per-burst B / A: quartiles")
    for k in WORKLOADS:
        a, b = ratios[(0, k)], ratios[(1, k)]
        q = sorted(y / x for x, y in zip(a, b))
        n = len(q)
        print(f"{k:8} {statistics.median(a):10.1f} {statistics.median(b):10.1f}   "
              f"{q[n // 4]:.3f} {q[n // 2]:.3f} {q[(3 * n) // 4]:.3f}  (n={n})")


if __name__ == '__main__':
    if sys.argv[1:] == ['--worker']:
        worker()
    else:
        main()
