"""Reverse mode through staged loops: the adjoint rule against the forward loop.

1. A 200-step ``while_loop`` whose state holds an n-vector of parameters and an
   n-vector it updates: the staged reverse gradient's time per call as a ratio to the
   staged forward loop's (target: at most 5x at every n).  ``--rule directions`` forces
   the forward-direction rule instead, for comparison.
2. GradBench particle (benchmarks/staging.py) staged, rf and rr, compiled (later calls
   of one staged solver), as a ratio to its hand-written Python solve (``particle_plain``):
   as written (only ``w`` in the simulation loop's state depends on the input) and with
   all five state slots depending on it (``x0 + 0 w``, ``v0 + 0 w``).
3. Checkpointed loops (``--section checkpoints``): the 200-step loop of 1. at n = 1000,
   its reverse gradient storing every iterate against ``checkpoints=N`` for N = 4, 16
   and ceil(sqrt(200)) = 15, as ``while_loop`` (trip count found by the forward loop)
   and ``fori_loop`` (known: the forward loop stores the first sweep's states): CPU time
   (``process_time``: the machine is shared, and wall time at this size is mostly
   waiting) over the staged forward loop's, peak memory of a call (tracemalloc, in MB and in copies of
   the 8 KB state) and the body steps recomputed (``nestad.revolve.advances``, less the
   first sweep's for fori_loop).

Run: PYTHONPATH=. python benchmarks/loops.py [--rule adjoint|directions|auto]
[--section all|rules|checkpoints].  Each sample alternates with a sample of its
baseline; ratios are medians (section 3: of 31, with the lowest and highest).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nestad as nd                     # noqa: E402
import nestad.numpy as anp              # noqa: E402
from nestad.staging import loops        # noqa: E402

STEPS = 200


def loop_objective(p):
    def body(s):
        i, x, q = s
        return i + 1, x * 0.99 + anp.sin(x) * 0.01 * q, q
    return anp.sum(nd.while_loop(lambda s: s[0] < STEPS, body, (0, p * 1.0, p))[1])


def ratio(f, base, arg, samples=15, spread=False, clock=time.perf_counter):
    f(arg), base(arg)
    rs = []
    for _ in range(samples):
        t0 = clock(); base(arg); t1 = clock()
        f(arg); t2 = clock()
        rs.append((t2 - t1) / (t1 - t0))
    return (statistics.median(rs), min(rs), max(rs)) if spread else statistics.median(rs)


def checkpointed_objective(checkpoints, known):
    def f(p):
        def body(s):
            i, x, q = s
            return i + 1, x * 0.99 + anp.sin(x) * 0.01 * q, q
        if known:
            x = nd.fori_loop(0, STEPS, lambda i, s: body((i,) + s)[1:], (p * 1.0, p),
                             checkpoints=checkpoints)[0]
        else:
            x = nd.while_loop(lambda s: s[0] < STEPS, body, (0, p * 1.0, p),
                              checkpoints=checkpoints)[1]
        return anp.sum(x)
    return f


def peak_bytes(f, arg):
    import tracemalloc
    f(arg)
    tracemalloc.start()
    try:
        f(arg)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def checkpoint_rows(n=1000):
    from nestad.revolve import advances
    p = np.linspace(0.1, 1.0, n)
    fwd = nd.stage(checkpointed_objective(None, False))
    sqrt_n = int(np.ceil(np.sqrt(STEPS)))            # (15)
    print(f"  {STEPS}-step loop, n = {n}: reverse gradient / forward loop in CPU time, median (min-max) of 31; "
          f"peak memory of a call; body steps recomputed")
    for loop, known in (('while_loop', False), ('fori_loop', True)):
        for N in (None, 4, 16, sqrt_n):
            grad = nd.stage(nd.gradient_r(checkpointed_objective(N, known)))
            np.testing.assert_array_equal(
                grad(p), nd.stage(nd.gradient_r(checkpointed_objective(None, known)))(p))
            med, lo, hi = ratio(grad, fwd, p, samples=31, spread=True, clock=time.process_time)
            peak = peak_bytes(grad, p)
            if N is None:
                extra = 0
            else:
                extra = advances(STEPS, N)
                if known:
                    kept = loops.first_sweep(STEPS, N)[0]
                    extra -= kept[-1] if kept else 0
            name = 'every iterate' if N is None else f'checkpoints={N}'
            print(f"    {loop:10s} {name:16s} {med:6.2f}x ({lo:.2f}-{hi:.2f})  "
                  f"peak {peak / 1e6:6.2f} MB = {peak / p.nbytes:6.1f} states  "
                  f"recomputed {extra:4d} steps")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rule', choices=['auto', 'adjoint', 'directions'], default='auto')
    ap.add_argument('--section', choices=['all', 'rules', 'checkpoints'], default='all')
    args = ap.parse_args()
    loops.ADJOINT_MIN_DIRECTIONS = {'auto': loops.ADJOINT_MIN_DIRECTIONS, 'adjoint': 1,
                                    'directions': 10 ** 9}[args.rule]
    print(f"rule {args.rule} (adjoint from {loops.ADJOINT_MIN_DIRECTIONS} input scalars); "
          f"load {os.getloadavg()[0]:.2f}")
    if args.section != 'rules':
        checkpoint_rows()
        print(f"  (load {os.getloadavg()[0]:.2f})")
        if args.section == 'checkpoints':
            return
    for n in (1, 10, 100, 1000):
        p = np.linspace(0.1, 1.0, n)
        fwd, grad = nd.stage(loop_objective), nd.stage(nd.gradient_r(loop_objective))
        print(f"  {STEPS}-step loop, n = {n:4d}: reverse gradient / forward loop "
              f"{ratio(grad, fwd, p):6.2f}x")
    import staging
    one = staging.NESTAD
    five = staging.Tool('nestad', one.gradient, one.sqrt, one.where, five_slots)
    for slots, tool in (('one slot', one), ('five slots', five)):
        for mode in ('rf', 'rr'):
            solve = nd.stage(lambda start: staging.particle(tool, mode, start))
            start = list(staging.W_START)
            r = ratio(solve, lambda s: staging.particle_plain(), start, samples=5)
            print(f"  particle {mode} ({slots}): staged / hand-written solve {r:6.2f}x")


def five_slots(cond, body, state):
    """while_loop with the particle simulation's position and velocity made to depend on w
    (argmin's own loops pass through unchanged)."""
    if isinstance(state, tuple) and len(state) == 3 and isinstance(state[0], list):
        x, v, w = state
        state = ([a + 0.0 * w for a in x], [a + 0.0 * w for a in v], w)
    return nd.while_loop(cond, body, state)


if __name__ == '__main__':
    main()
