"""GradBench's two nested-AD workloads, ``saddle`` and ``particle``, in all four
mode pairings, timed for nestad, autograd and plain Python.

What is measured
----------------
Each workload is a gradient-descent solve whose objective itself contains a
gradient computed by AD, so the outer gradient differentiates through inner AD.
A pairing ``xy`` names the mode of the outer gradient (``x``) and of the inner
one (``y``): ``f`` forward, ``r`` reverse.

* **saddle**: ``f(p, q) = (p1^2 + p2^2) - (q1^2 + q2^2)`` on R^2 x R^2 (GradBench
  spells the arguments ``x1, y1`` and ``x2, y2``: the first point is (x1, y1)).
  ``x* = argmin_p max_q f(p, q)``, where the inner max is itself a gradient
  ascent, differentiated through by the outer gradient; then
  ``y* = argmax_q f(x*, q)`` with the outer mode.  Every solve starts at (1, 1).
  Expected output: ``[x*, y*] == [8.246324826140356e-06] * 4``.
* **particle**: a charged particle starts at (0, 8) with velocity (0.75, 0) and
  accelerates by ``-grad p(x)``, ``p(x) = 1/|x - (10, 10 - w)| + 1/|x - (10, 0)|``
  (the inner gradient).  Naive Euler with dt = 0.1 runs until the particle would
  cross the x axis; the crossing is interpolated and ``x_f[0]^2`` is minimised
  over ``w`` from ``w = 0`` (the outer gradient).  Expected: ``0.2071918746486116``.

Both use GradBench's gradient-descent solver (``argmin`` below).  The same
workload code runs under each tool; only the gradient operators and ``sqrt``
change.  The "plain" rows are the same solver on Python floats with gradients
written by hand (for saddle the inner argmax does not depend on p, so the outer
gradient is just 2p; for particle the Euler loop carries hand-written forward
sensitivities d/dw), so they have no mode.

Every answer is checked against the expected numbers.  The script prints, per
mode, the median time of nestad's complete solve, and the time of one *outer
step* (the outer objective and its gradient at the start point: the unit of work
the outer solver repeats, with the inner solves or simulations inside it) for
nestad and for autograd, whose step gradient is checked against nestad's.  The
target is autograd's time over nestad's >= 5x.  autograd's complete solves take
about 8 minutes together, so they are timed (once each, and their answers
checked) only with ``--full``; the verdict then uses the complete solves.

Usage::

    python benchmarks/nested.py            # nestad solves + steps for both (~2-3 min)
    python benchmarks/nested.py --full     # also autograd's complete solves
    python benchmarks/nested.py --quick    # one timed run of each, a smoke test

autograd is optional (``pip install -e ".[bench]"``); without it its columns
read "not installed".
"""
import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import nestad
from _report import fmt_time, max_rel_diff, print_table  # noqa: E402

try:
    import autograd
    import autograd.numpy as anp
except ImportError:             # optional peer
    autograd = None

MODES = ('ff', 'fr', 'rf', 'rr')
SADDLE_EXPECTED = [8.246324826140356e-06] * 4
PARTICLE_EXPECTED = 0.2071918746486116
SADDLE_TOLERANCE = 1e-12        # absolute
PARTICLE_TOLERANCE = 1e-10      # relative


# ---------------------------------------------------------------- the solver

def argmin(f, gradient, x, sqrt):
    """GradBench's gradient descent: minimise ``f`` from the list ``x``.

    ``gradient(x)`` returns the gradient of ``f`` at ``x`` as a list.  The step
    size starts at 1e-5, halves after a step that does not decrease ``f``, and
    doubles after ten successful steps in a row.
    """
    fx = f(x)
    g = gradient(x)
    i = 0
    eta = 1e-5
    while True:
        if sqrt(sum(gi * gi for gi in g)) <= 1e-5:
            return x
        if i == 10:
            eta *= 2.0
            i = 0
            continue
        x_new = [xi - eta * gi for xi, gi in zip(x, g)]
        if sqrt(sum((a - b) * (a - b) for a, b in zip(x, x_new))) <= 1e-5:
            return x
        fx_new = f(x_new)
        if fx_new < fx:
            x, fx, g = x_new, fx_new, gradient(x_new)
            i += 1
        else:
            eta /= 2.0
            i = 0


def negated(f):
    return lambda x: -f(x)


# ---------------------------------------------------------------- tools

@dataclass(frozen=True)
class Tool:
    """An AD library as the workloads see it: a gradient operator per mode
    (``gradient[mode](f)`` is the function x -> grad f(x), x a list) and sqrt."""
    name: str
    gradient: dict
    sqrt: Callable


def gradient_by_derivatives(derivative):
    """A forward-mode gradient operator from a scalar ``derivative`` operator:
    one forward pass per coordinate."""
    def gradient(f):
        def grad_f(x):
            return [derivative(lambda xi, i=i: f(x[:i] + [xi] + x[i + 1:]))(x[i])
                    for i in range(len(x))]
        return grad_f
    return gradient


NESTAD = Tool('nestad', {'f': nestad.gradient_f, 'r': nestad.gradient_r}, nestad.sqrt)
AUTOGRAD = None if autograd is None else Tool(
    'autograd', {'f': gradient_by_derivatives(autograd.deriv), 'r': autograd.grad}, anp.sqrt)


# ---------------------------------------------------------------- saddle

SADDLE_START = [1.0, 1.0]


def saddle_objective(p, q):
    return (p[0] * p[0] + p[1] * p[1]) - (q[0] * q[0] + q[1] * q[1])


def saddle_outer(tool, mode):
    """The outer problem: ``p -> max_q f(p, q)`` (an inner gradient ascent) and
    its gradient, by the modes of ``mode``."""
    outer, inner = (tool.gradient[m] for m in mode)

    def max_over_q(p):
        minus_f = negated(lambda q: saddle_objective(p, q))
        q_star = argmin(minus_f, inner(minus_f), SADDLE_START, tool.sqrt)
        return saddle_objective(p, q_star)

    return max_over_q, outer(max_over_q)


def saddle(tool, mode):
    """``[x*, y*]``; the final argmax over q uses the outer mode."""
    objective, gradient = saddle_outer(tool, mode)
    x_star = argmin(objective, gradient, SADDLE_START, tool.sqrt)
    minus_f = negated(lambda q: saddle_objective(x_star, q))
    y_star = argmin(minus_f, tool.gradient[mode[0]](minus_f), SADDLE_START, tool.sqrt)
    return [float(v) for v in x_star + y_star]


def _saddle_q_gradient(q):
    """grad_q of -f(p, q)."""
    return [2.0 * q[0], 2.0 * q[1]]


def saddle_outer_plain():
    def max_over_q(p):
        minus_f = negated(lambda q: saddle_objective(p, q))
        q_star = argmin(minus_f, _saddle_q_gradient, SADDLE_START, math.sqrt)
        return saddle_objective(p, q_star)

    # d/dp f(p, q*(p)) = df/dp + df/dq dq*/dp, and dq*/dp = 0: the inner
    # gradient 2q does not involve p, so the inner solve does not depend on p.
    return max_over_q, lambda p: [2.0 * p[0], 2.0 * p[1]]


def saddle_plain():
    objective, gradient = saddle_outer_plain()
    x_star = argmin(objective, gradient, SADDLE_START, math.sqrt)
    minus_f = negated(lambda q: saddle_objective(x_star, q))
    y_star = argmin(minus_f, _saddle_q_gradient, SADDLE_START, math.sqrt)
    return x_star + y_star


# ---------------------------------------------------------------- particle

W_START = [0.0]
DT = 0.1
X_START = (0.0, 8.0)
V_START = (0.75, 0.0)


def charges_at(w):
    return ((10.0, 10.0 - w), (10.0, 0.0))


def naive_euler(w, gradient, sqrt):
    """``x_f[0]^2`` where the particle crosses the x axis; ``gradient`` is the
    inner gradient operator, applied to the potential."""
    charges = charges_at(w)

    def potential(x):
        total = 0.0
        for c in charges:
            d0, d1 = x[0] - c[0], x[1] - c[1]
            total = total + 1.0 / sqrt(d0 * d0 + d1 * d1)
        return total

    grad_p = gradient(potential)
    x, v = list(X_START), list(V_START)
    while True:
        g = grad_p(x)
        acc = [-g[0], -g[1]]
        x_new = [x[0] + DT * v[0], x[1] + DT * v[1]]
        if not x_new[1] > 0:
            break
        x = x_new
        v = [v[0] + DT * acc[0], v[1] + DT * acc[1]]
    dt_f = -x[1] / v[1]
    x_f = x[0] + dt_f * v[0]
    return x_f * x_f


def particle_outer(tool, mode):
    """The outer problem ``[w] -> x_f[0]^2`` and its gradient, by the modes of ``mode``."""
    outer, inner = (tool.gradient[m] for m in mode)

    def objective(w):
        return naive_euler(w[0], inner, tool.sqrt)

    return objective, outer(objective)


def particle(tool, mode):
    """The optimal ``w``."""
    objective, gradient = particle_outer(tool, mode)
    return float(argmin(objective, gradient, W_START, tool.sqrt)[0])


def particle_trajectory_plain(w, with_sensitivity):
    """``x_f[0]^2`` on floats, and, if asked, its derivative in ``w`` by
    hand-written forward sensitivities (dx = dx/dw, dv = dv/dw)."""
    charges = charges_at(w)
    dcharges = ((0.0, -1.0), (0.0, 0.0))
    x0, x1 = X_START
    v0, v1 = V_START
    dx0 = dx1 = dv0 = dv1 = 0.0
    while True:
        # acceleration -grad p = sum r / |r|^3 with r = x - c, and its w-derivative
        # (I / |r|^3 - 3 r r^T / |r|^5) dr/dw.
        a0 = a1 = da0 = da1 = 0.0
        for (c0, c1), (dc0, dc1) in zip(charges, dcharges):
            r0, r1 = x0 - c0, x1 - c1
            d = math.sqrt(r0 * r0 + r1 * r1)
            inv3 = 1.0 / (d * d * d)
            a0 += r0 * inv3
            a1 += r1 * inv3
            if with_sensitivity:
                dr0, dr1 = dx0 - dc0, dx1 - dc1
                inv5 = inv3 / (d * d)
                rdr = r0 * dr0 + r1 * dr1
                da0 += dr0 * inv3 - 3.0 * r0 * rdr * inv5
                da1 += dr1 * inv3 - 3.0 * r1 * rdr * inv5
        x0_new, x1_new = x0 + DT * v0, x1 + DT * v1
        if not x1_new > 0:
            break
        dx0, dx1 = dx0 + DT * dv0, dx1 + DT * dv1
        x0, x1 = x0_new, x1_new
        v0, v1 = v0 + DT * a0, v1 + DT * a1
        dv0, dv1 = dv0 + DT * da0, dv1 + DT * da1
    dt_f = -x1 / v1
    x_f = x0 + dt_f * v0
    if not with_sensitivity:
        return x_f * x_f
    ddt_f = -(dx1 * v1 - x1 * dv1) / (v1 * v1)
    dx_f = dx0 + ddt_f * v0 + dt_f * dv0
    return x_f * x_f, 2.0 * x_f * dx_f


def particle_outer_plain():
    return (lambda w: particle_trajectory_plain(w[0], False),
            lambda w: [particle_trajectory_plain(w[0], True)[1]])


def particle_plain():
    objective, gradient = particle_outer_plain()
    return argmin(objective, gradient, W_START, math.sqrt)[0]


# ---------------------------------------------------------------- checking and timing

@dataclass(frozen=True)
class Workload:
    name: str
    solve: Callable             # solve(tool, mode) -> output
    outer: Callable             # outer(tool, mode) -> (objective, gradient) of the outer solve
    solve_plain: Callable
    outer_plain: Callable
    start: list                 # the outer solve's starting point
    error: Callable             # error(output) -> float
    tolerance: float
    error_name: str


WORKLOADS = [
    Workload('saddle', saddle, saddle_outer, saddle_plain, saddle_outer_plain, SADDLE_START,
             lambda out: max(abs(a - b) for a, b in zip(out, SADDLE_EXPECTED)),
             SADDLE_TOLERANCE, 'abs err'),
    Workload('particle', particle, particle_outer, particle_plain, particle_outer_plain, W_START,
             lambda out: abs(out - PARTICLE_EXPECTED) / PARTICLE_EXPECTED,
             PARTICLE_TOLERANCE, 'rel err'),
]


def outer_step(objective, gradient, start):
    """The unit of work the outer solver repeats: the objective and its gradient at
    one point (here the start)."""
    return lambda: (objective(start), [float(g) for g in gradient(start)])


def alternate(fns, repeats, budget, warmup=False):
    """Call the callables in turn, timing each call, for ``repeats`` rounds or
    fewer: no new round starts once ``budget`` seconds have been spent.

    Returns a list of times per callable and each callable's first result (from
    an extra untimed round first if ``warmup``).  Alternating lets ratios be taken
    round by round, which damps drifts in machine speed.
    """
    results = [fn() for fn in fns] if warmup else [None] * len(fns)
    times = [[] for _ in fns]
    start = time.perf_counter()
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            out = fn()
            times[i].append(time.perf_counter() - t0)
            if results[i] is None:
                results[i] = out
        if time.perf_counter() - start > budget:
            break
    return times, results


def median_ratio(a, b):
    return statistics.median(x / y for x, y in zip(a, b))








def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='one timed run of everything (a smoke test)')
    parser.add_argument('--full', action='store_true',
                        help="also time autograd's complete solves, once each (about 8 minutes)")
    args = parser.parse_args()
    solve_repeats, step_repeats = (1, 1) if args.quick else (3, 5)
    budget = 8.0                # seconds of rounds, per measurement

    # The garbage collector stays on (as in normal use); the imported modules'
    # objects are frozen so that full collections do not scan them.
    gc.collect()
    gc.freeze()

    print('Nested AD: GradBench saddle and particle, four mode pairings (outer mode, inner mode)')
    print(f'Python {platform.python_version()}, nestad {nestad.__version__}, autograd '
          f'{_version("autograd") if autograd else "not installed"}; {os.cpu_count()} CPU(s), '
          f'load average {os.getloadavg()[0]:.2f} at start')
    print(f'Times are medians: of up to {solve_repeats} nestad solves, each followed by a plain '
          f'solve ("vs plain" = median of the per-pair ratios); of up to {step_repeats} rounds of '
          'nestad step, autograd step (after a warm-up round; "ratio" = median of per-round '
          f'autograd/nestad).  Fewer rounds once a measurement has taken {budget:.0f} s.  '
          'Garbage collector on, imported modules frozen (gc.freeze).')
    print('"step" = one outer step: the outer objective and its gradient at the start point, '
          'the unit of work the outer solver repeats.')
    if not args.full:
        print("autograd's complete solves take several minutes, so by default the comparison is "
              'by the step; --full times them too (once each; "ratio" then uses them).')
    print()

    problems = []

    def check(what, err, wl):
        if err > wl.tolerance:
            problems.append(f'{wl.name} {what}: {wl.error_name} {err:.1e} > {wl.tolerance:.0e}')

    for wl in WORKLOADS:
        (t_plain, t_plain_step), (out, _) = alternate(
            [wl.solve_plain, outer_step(*wl.outer_plain(), wl.start)], solve_repeats, budget)
        check('plain', wl.error(out), wl)
        print(f'{wl.name}: plain Python with hand-written gradients: solve '
              f'{fmt_time(statistics.median(t_plain))} ({wl.error_name} {wl.error(out):.1e}), '
              f'step {fmt_time(statistics.median(t_plain_step))}')

        rows = []
        for mode in MODES:
            (t_solve, t_plain_pair), (out, _) = alternate(
                [lambda: wl.solve(NESTAD, mode), wl.solve_plain], solve_repeats, budget)
            err = wl.error(out)
            check(f'{mode} nestad', err, wl)
            row = [mode, fmt_time(statistics.median(t_solve)),
                   f'{median_ratio(t_solve, t_plain_pair):.0f}x', f'{err:.1e}']
            steps = [outer_step(*wl.outer(NESTAD, mode), wl.start)]
            if AUTOGRAD is not None:
                steps.append(outer_step(*wl.outer(AUTOGRAD, mode), wl.start))
            t_steps, step_results = alternate(steps, step_repeats, budget, warmup=True)
            row.append(fmt_time(statistics.median(t_steps[0])))
            if AUTOGRAD is None:
                rows.append(row + ['not installed'])
                continue
            diff = max_rel_diff(step_results[0][1], step_results[1][1])
            if diff > 1e-10:
                problems.append(f'{wl.name} {mode}: autograd step gradient differs from '
                                f"nestad's by {diff:.1e} (relative)")
            speedup = median_ratio(t_steps[1], t_steps[0])
            row += [fmt_time(statistics.median(t_steps[1])), f'{diff:.0e}', f'{speedup:.1f}x']
            if args.full:
                (t_ag_solve,), (out,) = alternate([lambda: wl.solve(AUTOGRAD, mode)], 1, 0.0)
                err = wl.error(out)
                check(f'{mode} autograd', err, wl)
                speedup = t_ag_solve[0] / statistics.median(t_solve)
                row += [fmt_time(t_ag_solve[0]), f'{err:.1e}', f'{speedup:.1f}x']
            verdict = 'PASS' if speedup >= 5 else 'MISS'
            if verdict == 'MISS':
                problems.append(f'{wl.name} {mode}: nestad only {speedup:.1f}x faster '
                                'than autograd')
            rows.append(row + [verdict])

        header = ['mode', 'nestad solve', 'vs plain', wl.error_name, 'nestad step']
        if AUTOGRAD is None:
            header.append('autograd')
        else:
            header += ['autograd step', 'grad diff', 'ratio']
            if args.full:
                header += ['autograd solve', wl.error_name, 'ratio']
            header += ['>=5x']
        print_table(header, rows)
        print()

    if AUTOGRAD is not None:
        print('"grad diff" = max relative difference between the step gradients of autograd and '
              'nestad; ">=5x" judges the last "ratio" (autograd time / nestad time).')
    print(f'Tolerances: saddle {SADDLE_TOLERANCE:.0e} absolute, particle '
          f'{PARTICLE_TOLERANCE:.0e} relative.')
    if problems:
        print('MISSES:\n  ' + '\n  '.join(problems))
    elif AUTOGRAD is None:
        print('All answers within tolerance; autograd is not installed, so the speed target '
              'was not checked.')
    else:
        print('All answers within tolerance, and all speed targets met.')
    return 1 if problems else 0


def _version(dist):
    from importlib.metadata import version
    return version(dist)


if __name__ == '__main__':
    sys.exit(main())
