"""Overhead of nestad's derivative operators on scalar Python code, next to
autograd, JAX (eager, no jit) and torch.func running the same scalar program.

What is measured
----------------
Each workload is written once, as plain Python over scalars, with its ``sin``
passed in: ``math.sin`` for the plain-float baseline, ``nestad.sin``,
``autograd.numpy.sin``, ``jax.numpy.sin`` or ``torch.sin``.  Every library runs
exactly the same scalar operations on its natural scalar (a Python float for
nestad and autograd, a 0-d float64 array for JAX, a 0-d float64 tensor for torch).

(i)   forward derivative of a 1,000-operation chain,
      ``x = sin(x) * 1.0001 + 0.1 * x`` repeated 250 times, at x = 0.5:
      nestad.derivative, autograd.deriv (autograd's forward mode), jax.jvp,
      torch.func.jvp.
(ii)  reverse gradient of a 100-input, 10,000-operation scalar function: 2,500
      steps of ``acc = acc * 0.999 + sin(x[k % 100] * x[(7k + 3) % 100])``,
      with the inputs a list of 100 scalars: nestad.gradient_r, autograd.grad,
      jax.grad, torch.func.grad (a list of 0-d tensors).
(iii) the second derivative of (i) in the four pairings ff, fr, rf, rr (first
      letter: the outer mode): nestad.derivative / gradient_r nested, autograd
      deriv / grad, JAX jvp / grad, torch.func jvp / grad.

Each library is measured in its own fresh Python process, so that one
library's imports, caches and threads cannot slow another down.  A time is the
median per call over several repeats (each repeat calls the operation enough
times to take at least 50 ms), after a warm-up call.  Every repeat of a task
alternates with a repeat of its plain-float baseline in the same process, and
the ratios printed are of these plain-normalised times (the median of the
per-repeat ratios): nestad / plain directly, and peer / nestad as the quotient
of the two normalised times.  That damps drifts in machine speed between
measurements (on a shared machine plain Python alone can vary 2x over seconds),
though it cannot remove them: run to run, ratios still move by 10-30%.
The garbage collector stays on, as in normal use, with the objects made by the
imports frozen (gc.freeze).  Every peer's answer is checked against nestad's.

Targets: nestad forward (i) <= 40x plain, reverse (ii) <= 150x plain, and
nestad >= 10x faster than each peer on every workload.  torch runs on one
thread (torch.set_num_threads(1)); JAX eagerly on the CPU in float64 with one
intra-op thread.

Usage::

    python benchmarks/overhead.py           # full run (about 1.5 minutes)
    python benchmarks/overhead.py --quick   # smoke run

The peers are optional (``pip install -e ".[bench]"``); a missing one is shown
as "not installed".
"""
import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

# JAX: CPU only, one intra-op thread, no accelerator probing or preallocation, no log noise.
os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('XLA_FLAGS',
                      '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1')
os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import nestad  # noqa: E402
from _report import fmt_time, max_rel_diff, print_table  # noqa: E402

CHAIN_STEPS = 250               # 4 operations each: 1,000
MIX_INPUTS = 100
MIX_STEPS = 2500                # 4 operations each: 10,000
X0 = 0.5
XS = [0.1 + 0.008 * i for i in range(MIX_INPUTS)]

FORWARD_TARGET = 40             # nestad (i) / plain at most this
REVERSE_TARGET = 150            # nestad (ii) / plain at most this
PEER_TARGET = 10                # peer / nestad at least this
CHECK_TOLERANCE = 1e-9          # max relative difference of a peer's answer from nestad's

TASKS = [
    # key, label, plain baseline key, nestad/plain target
    ('fwd', '(i)   d/dx chain, forward', 'plain chain', FORWARD_TARGET),
    ('rev', '(ii)  gradient, reverse', 'plain mix', REVERSE_TARGET),
    ('ff', '(iii) d2/dx2 chain, ff', 'plain chain', None),
    ('fr', '(iii) d2/dx2 chain, fr', 'plain chain', None),
    ('rf', '(iii) d2/dx2 chain, rf', 'plain chain', None),
    ('rr', '(iii) d2/dx2 chain, rr', 'plain chain', None),
]


# ---------------------------------------------------------------- the workloads

def chain(x, sin):
    """1,000 scalar operations in a dependent chain."""
    for _ in range(CHAIN_STEPS):
        x = sin(x) * 1.0001 + 0.1 * x
    return x


def mix(xs, sin):
    """10,000 scalar operations reading 100 inputs by index."""
    n = len(xs)
    acc = 0.0
    for k in range(MIX_STEPS):
        acc = acc * 0.999 + sin(xs[k % n] * xs[(7 * k + 3) % n])
    return acc


# The baselines: the same functions on Python floats.
PLAIN = {
    'plain chain': lambda: chain(X0, math.sin),
    'plain mix': lambda: mix(XS, math.sin),
}
BASELINE_OF = {key: base for key, _, base, _ in TASKS}
BASELINE_OF['fwd by grad'] = 'plain chain'


# ---------------------------------------------------------------- the libraries
# Each suite returns (version, {task key: zero-argument callable}, notes).

def tasks(derivative, gradient, sin, x0, xs):
    """The six tasks, written once with a library's operators, sine and inputs."""
    def f(x):
        return chain(x, sin)
    return {
        'fwd': lambda: derivative(f)(x0),
        'rev': lambda: gradient(lambda v: mix(v, sin))(xs),
        'ff': lambda: derivative(derivative(f))(x0),
        'fr': lambda: derivative(gradient(f))(x0),
        'rf': lambda: gradient(derivative(f))(x0),
        'rr': lambda: gradient(gradient(f))(x0),
    }


def nestad_suite():
    return nestad.__version__, tasks(nestad.derivative, nestad.gradient_r, nestad.sin, X0, XS), []


def autograd_suite():
    import autograd
    import autograd.numpy as anp
    from importlib.metadata import version
    suite = tasks(autograd.deriv, autograd.grad, anp.sin, X0, XS)
    suite['fwd by grad'] = lambda: autograd.grad(lambda x: chain(x, anp.sin))(X0)
    return version('autograd'), suite, ['autograd: forward mode is autograd.deriv (autograd.core.make_jvp), reverse autograd.grad.']


def jax_suite():
    import jax
    import jax.numpy as jnp
    jax.config.update('jax_enable_x64', True)

    def derivative(h):
        return lambda x: jax.jvp(h, (x,), (jnp.ones_like(x),))[1]

    return jax.__version__, tasks(derivative, jax.grad, jnp.sin, X0, XS), ['jax: eager (no jit), CPU, float64, one intra-op thread; forward mode is jax.jvp, '
        'reverse jax.grad.']


def torch_suite():
    import torch
    import torch.func
    torch.set_num_threads(1)
    x0 = torch.tensor(X0, dtype=torch.float64)
    xs = [torch.tensor(v, dtype=torch.float64) for v in XS]

    def derivative(h):
        return lambda x: torch.func.jvp(h, (x,), (torch.ones_like(x),))[1]

    return torch.__version__, tasks(derivative, torch.func.grad, torch.sin, x0, xs), ['torch.func: float64 0-d tensors, one thread (torch.set_num_threads(1)); '
        'forward mode is torch.func.jvp, reverse torch.func.grad.']


# worker name: (column label, suite)
LIBRARIES = {
    'nestad': ('nestad', nestad_suite),
    'autograd': ('autograd', autograd_suite),
    'jax': ('jax (eager)', jax_suite),
    'torch': ('torch.func', torch_suite),
}
PEERS = ['autograd', 'jax', 'torch']


# ---------------------------------------------------------------- measuring

def _calibrate(fn, min_sample):
    """(calls per sample so that a sample takes at least ``min_sample``, time of one call)."""
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    return max(1, math.ceil(min_sample / max(once, 1e-9))), once


def _sample(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def measure(fn, quick, baseline=None):
    """(median seconds per call of ``fn``, the warm-up call's result, ratio).

    With a ``baseline``, samples of ``fn`` and of the baseline alternate, and
    ratio is the median over repeats of fn's time / the baseline's: that damps
    drifts in machine speed between the two.  Without one, ratio is None.
    """
    min_sample, max_repeats, budget = (0.01, 3, 3.0) if quick else (0.05, 7, 10.0)
    result = fn()                                   # warm-up (JAX compiles kernels here)
    calls, once = _calibrate(fn, min_sample)
    repeats = max(1 if quick else 3, min(max_repeats, int(budget / (calls * once))))
    if baseline is not None:
        base_calls, _ = _calibrate(baseline, min_sample)
    samples, ratios = [], []
    for _ in range(repeats):
        samples.append(_sample(fn, calls))
        if baseline is not None:
            ratios.append(samples[-1] / _sample(baseline, base_calls))
    return statistics.median(samples), result, (statistics.median(ratios) if ratios else None)


def as_floats(result):
    if isinstance(result, (list, tuple)):
        return [float(v) for v in result]
    return [float(result)]






def fmt_ratio(r):
    return f'{r:.0f}x' if r >= 100 else f'{r:.1f}x'




def run_library(name, quick):
    """Measure one library's suite in this process: a dict for the parent."""
    try:
        version, tasks, notes = LIBRARIES[name][1]()
    except ImportError as e:
        return {'missing': str(e)}
    # The garbage collector stays on, as in normal use; what the imports made is
    # frozen, so that full collections do not scan it.
    gc.collect()
    gc.freeze()
    times, results, ratios = {}, {}, {}
    if name == 'nestad':
        for key, fn in PLAIN.items():
            times[key], _, _ = measure(fn, quick)
    for key, fn in tasks.items():
        times[key], result, ratios[key] = measure(fn, quick, PLAIN[BASELINE_OF[key]])
        results[key] = as_floats(result)
    return {'version': version, 'notes': notes, 'times': times, 'results': results,
            'ratios': ratios}


def run_worker(name, quick):
    """``run_library`` in a fresh interpreter, so that one library's imports,
    caches, threads and garbage cannot slow down another's measurements."""
    cmd = [sys.executable, os.path.abspath(__file__), '--worker', name] + (['--quick'] * quick)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f'measuring {name} failed:\n{proc.stderr}')
    return json.loads(proc.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='a fast smoke run (rough figures)')
    parser.add_argument('--worker', choices=LIBRARIES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run_library(args.worker, args.quick)))
        return 0

    load = os.getloadavg()[0]
    runs = {name: run_worker(name, args.quick) for name in LIBRARIES}
    if 'missing' in runs['nestad']:
        raise RuntimeError(runs['nestad']['missing'])
    mine = runs['nestad']
    peers = [name for name in PEERS if 'missing' not in runs[name]]
    labels = [LIBRARIES[name][0] for name in PEERS]

    print('Overhead of AD on scalar Python code: median time per call, and ratios')
    print(f'Python {platform.python_version()}, nestad {mine["version"]}, '
          + ', '.join(f'{LIBRARIES[n][0]} {runs[n].get("version", "not installed")}'
                      for n in PEERS)
          + f'; {os.cpu_count()} CPU(s), load average {load:.2f} at start'
          + ('; --quick (rough figures)' if args.quick else ''))
    print('  Each library is measured in its own fresh process; garbage collector on, with '
          'the objects made by the imports frozen (gc.freeze).')
    print('  Ratios are of plain-normalised times: in every process each sample of a task '
          'alternates with a sample of its plain-float baseline, and a task\'s normalised time '
          'is the median of its per-sample ratios (this damps drifts in machine speed).')
    for name in peers:
        for note in runs[name]['notes']:
            print('  ' + note)
    print()

    def time_of(name, key):
        return runs[name]['times'][key]

    checks = []
    for name in peers:
        for key, _, _, _ in TASKS:
            diff = max_rel_diff(mine['results'][key], runs[name]['results'][key])
            if diff > CHECK_TOLERANCE:
                checks.append(f'{name} {key}: answer differs from nestad by {diff:.1e} (relative)')

    rows = []
    for key, label, base_key, _ in TASKS:
        rows.append([label, fmt_time(time_of('nestad', base_key)), fmt_time(time_of('nestad', key))]
                    + [fmt_time(time_of(n, key)) if n in peers else 'not installed' for n in PEERS])
    print('Median time per call (plain = the same function on Python floats)')
    print_table(['workload', 'plain', 'nestad'] + labels, rows)
    print()

    rows, misses = [], []
    for key, label, _, target in TASKS:
        ratio = mine['ratios'][key]
        row = [label, fmt_ratio(ratio)]
        if target is None:
            row += ['-', '-']
        else:
            verdict = 'PASS' if ratio <= target else 'MISS'
            row += [f'<= {target}x', verdict]
            if verdict == 'MISS':
                misses.append(f'{label.split()[0]} {key}: nestad is {fmt_ratio(ratio)} plain '
                              f'(target <= {target}x)')
        for n in PEERS:
            if n not in peers:
                row.append('not installed')
                continue
            speedup = runs[n]['ratios'][key] / mine['ratios'][key]
            verdict = 'PASS' if speedup >= PEER_TARGET else 'MISS'
            row.append(f'{fmt_ratio(speedup)} {verdict}')
            if verdict == 'MISS':
                misses.append(f'{label.split()[0]} {key}: nestad only {fmt_ratio(speedup)} '
                              f'faster than {LIBRARIES[n][0]} (target >= {PEER_TARGET}x)')
        rows.append(row)
    print(f'Ratios: nestad / plain (target), and peer / nestad (target >= {PEER_TARGET}x)')
    print_table(['workload', 'nestad/plain', 'target', 'result'] + [f'{n}/nestad' for n in labels],
                rows)
    print()
    if 'autograd' in peers:
        by_grad = time_of('autograd', 'fwd by grad')
        speedup = runs['autograd']['ratios']['fwd by grad'] / mine['ratios']['fwd']
        print(f'For reference, autograd.grad (reverse mode) on (i): {fmt_time(by_grad)}, '
              f'{fmt_ratio(speedup)} nestad.derivative.')
    if checks:
        print('ANSWER CHECKS FAILED:\n  ' + '\n  '.join(checks))
    elif peers:
        print(f'Answers: every peer agrees with nestad to within {CHECK_TOLERANCE:.0e} (relative).')
    else:
        print('Answers: no peer installed to compare with.')
    print('All targets met.' if not misses else 'Targets missed:\n  ' + '\n  '.join(misses))
    return 1 if checks else 0


if __name__ == '__main__':
    sys.exit(main())
