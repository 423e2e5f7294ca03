"""The eager paths of the operators with rules of their own (checkpoint, fixed_point,
stop_gradient of a function, a staged function, the solvers), against another checkout.

Each workload is one derivative call through one such operator, small enough that the
dispatch's per-call cost shows (scalar and 3-vector problems); a staged while_loop's rules
run when it is traced, so its workloads trace (and compile) a fresh program each call.  A time is the median
CPU time per call (``time.process_time``) over repeats that each call the workload for
at least 50 ms, after a warm-up call.

Run: ``python benchmarks/control_ops.py --against DIR [--rounds 5] [--only NAME]``: the workloads run
alternately in fresh processes importing nestad from DIR (``before``) and from this
checkout (``after``), ``rounds`` times each; printed are each side's median time and the
median and range over rounds of the per-round ratio after / before.  Without
``--against`` it prints this checkout's times.  ``--calls``: the Python function calls of
one call of each workload instead (before, after), which the machine's load cannot move.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def workloads():
    import nestad as nd
    import nestad.numpy as anp
    M = np.array([[0.3, 0.1, 0.0], [0.2, 0.4, 0.1], [0.0, 0.1, 0.3]])
    a3 = np.array([0.5, 1.0, 1.5])

    def chain(x):
        for _ in range(10):
            x = anp.sin(x) * 0.9 + 0.1 * x
        return x
    ck = nd.checkpoint(chain)
    staged = nd.stage(lambda x: anp.sum(anp.tanh(M @ x) * x))
    staged(a3)
    fp = lambda a: anp.sum(nd.fixed_point(lambda z, p: anp.tanh(M @ z) * 0.5 + p, a3 * 0, a))  # noqa
    rt = lambda a: anp.sum(nd.root(lambda y, p: y ** 3 + y - p, a3, a))   # noqa: E731

    def stopped(x):
        return nd.stop_gradient(lambda y: anp.sin(y) * x)(x)

    def loop(p):                  # benchmarks/loops.py's loop, 20 steps
        def body(s):
            i, x, q = s
            return i + 1, x * 0.99 + anp.sin(x) * 0.01 * q, q
        return anp.sum(nd.while_loop(lambda s: s[0] < 20, body, (0, p * 1.0, p))[1])
    return {
        'checkpoint, gradient_r': lambda: nd.gradient_r(lambda x: ck(x))(0.7),
        'checkpoint, derivative': lambda: nd.derivative(lambda x: ck(x))(0.7),
        'checkpoint_loop (40 steps), gradient_r': lambda: nd.gradient_r(
            lambda x: nd.checkpoint_loop(lambda s: anp.sin(s) * 0.9 + 0.1 * s, x, 40))(0.7),
        'fixed_point (3), gradient_r': lambda: nd.gradient_r(fp)(a3),
        'fixed_point (3), jacobian_f': lambda: nd.jacobian_f(fp)(a3),
        'root (3), gradient_r': lambda: nd.gradient_r(rt)(a3),
        'root (3), derivative along a line': lambda: nd.derivative(lambda s: rt(a3 + s))(0.1),
        'stop_gradient(f), gradient_r': lambda: nd.gradient_r(stopped)(0.7),
        'staged function, gradient_r': lambda: nd.gradient_r(staged)(a3),
        'staged function, jvp': lambda: nd.jvp(staged, (a3,), (a3,)),
        # a staged while_loop's rules run when it is traced: a fresh trace each call
        'while_loop traced, gradient_r (3)': lambda: nd.stage(nd.gradient_r(loop))(a3),
        'while_loop traced, derivative': lambda: nd.stage(nd.derivative(loop))(0.7),
        'while_loop traced, vmap (3)': lambda: nd.stage(nd.vmap(loop))(a3),
    }


def measure(only=None):
    out = {}
    for name, fn in workloads().items():
        if only and only not in name:
            continue
        fn()
        times = []
        for _ in range(5):
            n, t0 = 0, time.process_time()
            while True:
                fn()
                n += 1
                t = time.process_time() - t0
                if t >= 0.05:
                    break
            times.append(t / n)
        out[name] = statistics.median(times)
    return out


def count_calls(only=None):
    """Python function calls per workload call (load-independent, unlike times)."""
    out = {}
    for name, fn in workloads().items():
        if only and only not in name:
            continue
        fn()
        n = 0

        def count(frame, event, arg):
            nonlocal n
            n += event == 'call'
        sys.setprofile(count)
        try:
            fn()
        finally:
            sys.setprofile(None)
        out[name] = n
    return out


def run(path, only=None, calls=False):
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1')
    res = subprocess.run([sys.executable, os.path.abspath(__file__), '--worker']
                         + (['--only', only] if only else []) + (['--calls'] * calls), env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--against')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--only', help='the workloads whose name contains this')
    ap.add_argument('--calls', action='store_true',
                    help='count Python function calls per workload call instead of timing')
    ap.add_argument('--worker', action='store_true')
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(count_calls(args.only) if args.calls else measure(args.only)))
        return
    if args.calls:
        here = run(ROOT, args.only, True)
        there = run(os.path.abspath(args.against), args.only, True) if args.against else here
        for k in here:
            print(f"{k:45s} {there[k]:8d} {here[k]:8d} calls ({here[k] - there[k]:+d})")
        return
    if not args.against:
        for k, v in run(ROOT, args.only).items():
            print(f"{k:45s} {v * 1e6:10.1f} us")
        return
    before, after = [], []
    for _ in range(args.rounds):
        before.append(run(os.path.abspath(args.against), args.only))
        after.append(run(ROOT, args.only))
    print(f"{'workload':45s} {'before us':>10s} {'after us':>10s} {'after/before':>13s} "
          f"{'range':>13s}")
    for k in before[0]:
        ratios = [a[k] / b[k] for a, b in zip(after, before)]
        print(f"{k:45s} {statistics.median(b[k] for b in before) * 1e6:10.1f} "
              f"{statistics.median(a[k] for a in after) * 1e6:10.1f} "
              f"{statistics.median(ratios):13.3f}   {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == '__main__':
    main()
