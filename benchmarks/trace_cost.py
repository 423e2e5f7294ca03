"""Staging's first two calls against one eager gradient (issue 19's 10x target), CPU time.

    PYTHONPATH=$PWD python benchmarks/trace_cost.py [equations, default 10000] [stagings, default 3]

The part-8 workload of staging.py (the reverse gradient of a straight-line ``mix``): five
eager gradients, then fresh ``nd.stage(grad)``, each called twice (trace; compile and
run); per equation, the minimum over repetitions, and (trace + second call) / eager.
"""
import gc
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nestad as nd                                 # noqa: E402
from staging import scale_gradient                  # noqa: E402


def main(size, reps):
    grad, xs = scale_gradient(size)
    cpu = time.process_time
    eager = []
    for _ in range(5):
        t = cpu()
        grad(xs)
        eager.append(cpu() - t)
    traces, seconds = [], []
    for _ in range(reps):
        staged = nd.stage(grad)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', nd.StagingWarning)
            gc.collect()
            t = cpu()
            staged(xs)
            traces.append(cpu() - t)
            t = cpu()
            staged(xs)
            seconds.append(cpu() - t)
        n = len(staged.programs()[0].eqns)
        del staged
    e, tr, se = min(eager), min(traces), min(seconds)
    print(f'{n} equations: eager {e / n * 1e6:.2f} us, trace {tr / n * 1e6:.2f} us, '
          f'second call {se / n * 1e6:.2f} us per equation; trace + second {(tr + se) / e:.2f}x eager')


if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
