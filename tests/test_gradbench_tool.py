"""The GradBench tool (gradbench/run.py) speaks GradBench's protocol and answers
``hello``, ``saddle`` and ``particle`` correctly.

The tool runs as a subprocess; every message goes through its stdin and stdout as
JSON lines.  Expected values come from outside the tool: closed forms (hello), the
same gradient-descent solver run here on floats with derivatives written by hand
(saddle, particle), and GradBench's published reference outputs for its own inputs.

GradBench's inputs make saddle and particle solves of a few hundred outer steps
(1-9 s each in nestad), so by default only saddle ``rr`` runs on them; the other
checks use inputs on which the outer descent takes exactly one step, which still
runs every nested derivative in every mode and depends on the outer gradient's
value.  ``NESTAD_GRADBENCH_FULL=1`` adds all eight solves on GradBench's inputs
(about 40 s).
"""
import json
import math
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO, 'gradbench', 'run.py')
MODES = ('ff', 'fr', 'rf', 'rr')
FULL = os.environ.get('NESTAD_GRADBENCH_FULL') == '1'

# GradBench's reference outputs (evals/saddle and evals/particle) for its inputs
# start = [1, 1] and w = 0, and its comparison (ADBench's relative difference).
SADDLE_REFERENCE = [8.246324826140356e-06] * 4
PARTICLE_REFERENCE = 0.2071918746486116


def gradbench_close(expected, actual, tolerance=1e-4):
    return abs(actual - expected) / max(abs(actual) + abs(expected), 1) <= tolerance


class Tool:
    """The tool as a subprocess, driven one message at a time."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, TOOL], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=REPO)
        self.id = 0

    def send(self, message):
        message = {'id': self.id} | message
        self.process.stdin.write(json.dumps(message) + '\n')
        self.process.stdin.flush()
        response = json.loads(self.process.stdout.readline())
        assert response['id'] == self.id
        self.id += 1
        return response

    def evaluate(self, module, function, input):
        response = self.send({'kind': 'evaluate', 'module': module, 'function': function,
                              'input': input})
        assert response['success'], response.get('error')
        assert 'error' not in response
        return response

    def close(self):
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0


@pytest.fixture(scope='module')
def tool():
    t = Tool()
    yield t
    t.close()


# ---------------------------------------------------------------- the protocol

def test_start_define_and_other_messages(tool):
    response = tool.send({'kind': 'start', 'eval': 'hello'})
    assert response['tool'] == 'nestad'
    for module in ('hello', 'saddle', 'particle', 'lse', 'llsq', 'det', 'gmm', 'kmeans',
                   'ode', 'lstm'):
        assert tool.send({'kind': 'define', 'module': module}) == {'id': tool.id - 1,
                                                                   'success': True}
    response = tool.send({'kind': 'define', 'module': 'ba'})
    assert response['success'] is False and 'ba' in response['error']
    # analysis (and any other kind) is acknowledged with the id alone
    assert tool.send({'kind': 'analysis', 'of': 1, 'valid': True}) == {'id': tool.id - 1}


def test_failures_are_reported_not_fatal(tool):
    response = tool.send({'kind': 'evaluate', 'module': 'hello', 'function': 'cube',
                          'input': 2.0})
    assert response['success'] is False and 'cube' in response['error']
    response = tool.send({'kind': 'evaluate', 'module': 'lse', 'function': 'primal',
                          'input': {'min_runs': 1, 'min_seconds': 0}})     # no 'x'
    assert response['success'] is False and 'KeyError' in response['error']
    assert 'output' not in response
    assert tool.evaluate('hello', 'square', 3.0)['output'] == 9.0


def test_runs_and_timings(tool):
    input = {'x': [0.5, -1.0, 2.0], 'min_runs': 3, 'min_seconds': 0}
    timings = tool.evaluate('lse', 'gradient', input)['timings']
    assert len(timings) == 3
    assert all(t['name'] == 'evaluate' and isinstance(t['nanoseconds'], int)
               and t['nanoseconds'] > 0 for t in timings)
    # at least min_seconds of runs: a 20 ms budget takes several runs of this
    input = {'x': [0.5, -1.0, 2.0], 'min_runs': 1, 'min_seconds': 0.02}
    timings = tool.evaluate('lse', 'primal', input)['timings']
    assert sum(t['nanoseconds'] for t in timings) >= 0.02e9
    # min_runs 0 still gives an output, from one run
    input = {'x': [0.5, -1.0, 2.0], 'min_runs': 0, 'min_seconds': 0}
    assert len(tool.evaluate('lse', 'primal', input)['timings']) == 1
    # hello's input has no runs fields: one run
    assert len(tool.evaluate('hello', 'double', 1.5)['timings']) == 1


def test_lse_against_closed_form(tool):
    x = [0.5, -1.0, 2.0, 700.0]       # 700: exp overflows without the max shift
    out = tool.evaluate('lse', 'gradient', {'x': x, 'min_runs': 1, 'min_seconds': 0})['output']
    m = max(x)
    z = sum(math.exp(v - m) for v in x)
    assert out == pytest.approx([math.exp(v - m) / z for v in x], rel=1e-14, abs=1e-300)


# ---------------------------------------------------------------- hello

def test_hello_as_gradbench_runs_it(tool):
    # GradBench's hello eval: x = 1, then four times y = square(x), x = double(y)
    x = 1.0
    for _ in range(4):
        y = tool.evaluate('hello', 'square', x)['output']
        assert y == x * x
        x = tool.evaluate('hello', 'double', y)['output']
        assert x == 2 * y
    assert x == 2.0 ** 15


# ---------------------------------------------------------------- reference solver

def argmin(f, gradient, x):
    """GradBench's gradient descent (evals/saddle, evals/particle) on floats, with a
    hand-written gradient; also returns the number of accepted steps."""
    norm = lambda v: math.sqrt(sum(vi * vi for vi in v))   # noqa: E731
    fx, gx = f(x), gradient(x)
    eta, i, steps = 1e-5, 0, 0
    while True:
        if norm(gx) <= 1e-5:
            return x, steps
        if i == 10:
            eta, i = 2 * eta, 0
            continue
        x_new = [a - eta * g for a, g in zip(x, gx)]
        if norm([a - b for a, b in zip(x, x_new)]) <= 1e-5:
            return x, steps
        fx_new = f(x_new)
        if fx_new < fx:
            x, fx, gx, i, steps = x_new, fx_new, gradient(x_new), i + 1, steps + 1
        else:
            eta, i = eta / 2, 0


# ---------------------------------------------------------------- saddle

def saddle_reference(start):
    """x* = argmin_x max_y f(x, y), then y* = argmax_y f(x*, y), f = |x|^2 - |y|^2.
    By hand: the inner ascent's gradient in y is -2y for every x, so the inner solve
    does not depend on x and the outer gradient is d/dx f(x, y*) = 2x."""
    f = lambda x, y: (x[0] ** 2 + x[1] ** 2) - (y[0] ** 2 + y[1] ** 2)   # noqa: E731
    twice = lambda v: [2 * v[0], 2 * v[1]]                               # noqa: E731

    def max_over_y(x):
        y, _ = argmin(lambda y: -f(x, y), twice, start)      # grad of -f in y is 2y
        return f(x, y)

    x, steps = argmin(max_over_y, twice, start)
    y, _ = argmin(lambda y: -f(x, y), twice, start)
    return x + y, steps


# |start| just above 1/2: the gradient's length 2|start| is just above 1, so the first
# step (1e-5 times it) is longer than 1e-5 and taken, the second is not.
SADDLE_ONE_STEP = [0.300003, 0.400004]


@pytest.mark.parametrize('mode', MODES)
def test_saddle_one_outer_step(tool, mode):
    expected, steps = saddle_reference(SADDLE_ONE_STEP)
    assert steps == 1
    input = {'start': SADDLE_ONE_STEP, 'min_runs': 1, 'min_seconds': 0}
    out = tool.evaluate('saddle', mode, input)['output']
    assert out != SADDLE_ONE_STEP + SADDLE_ONE_STEP
    assert out == pytest.approx(expected, rel=1e-14)


def test_saddle_gradbench_input_rr(tool):
    input = {'start': [1.0, 1.0], 'min_runs': 1, 'min_seconds': 0}
    out = tool.evaluate('saddle', 'rr', input)['output']
    assert out == pytest.approx(saddle_reference([1.0, 1.0])[0], rel=1e-12)
    assert all(gradbench_close(e, a) for e, a in zip(SADDLE_REFERENCE, out))
    assert out == pytest.approx(SADDLE_REFERENCE, rel=1e-12)


# ---------------------------------------------------------------- particle

def particle_objective(w, with_derivative):
    """x_f[0]^2 for control w and, if asked, its derivative in w by forward
    sensitivities written by hand (d = d/dw) through the Euler loop."""
    charges = [((10.0, 10.0 - w), (0.0, -1.0)), ((10.0, 0.0), (0.0, 0.0))]
    x, xdot, dx, dxdot = [0.0, 8.0], [0.75, 0.0], [0.0, 0.0], [0.0, 0.0]
    while True:
        # acceleration -grad p(x) = sum (x - c) / |x - c|^3, and its derivative
        a, da = [0.0, 0.0], [0.0, 0.0]
        for c, dc in charges:
            r = [x[0] - c[0], x[1] - c[1]]
            dr = [dx[0] - dc[0], dx[1] - dc[1]]
            n = math.sqrt(r[0] ** 2 + r[1] ** 2)
            r_dr = r[0] * dr[0] + r[1] * dr[1]
            for i in range(2):
                a[i] += r[i] / n ** 3
                da[i] += dr[i] / n ** 3 - 3 * r[i] * r_dr / n ** 5
        x_new = [x[0] + 0.1 * xdot[0], x[1] + 0.1 * xdot[1]]
        if not x_new[1] > 0:
            break
        dx = [dx[0] + 0.1 * dxdot[0], dx[1] + 0.1 * dxdot[1]]
        x, xdot = x_new, [xdot[0] + 0.1 * a[0], xdot[1] + 0.1 * a[1]]
        dxdot = [dxdot[0] + 0.1 * da[0], dxdot[1] + 0.1 * da[1]]
    t = -x[1] / xdot[1]
    dt = -(dx[1] * xdot[1] - x[1] * dxdot[1]) / xdot[1] ** 2
    x_f = x[0] + t * xdot[0]
    if not with_derivative:
        return x_f * x_f
    return 2 * x_f * (dx[0] + dt * xdot[0] + t * dxdot[0])


def particle_reference(w0):
    w, steps = argmin(lambda w: particle_objective(w[0], False),
                      lambda w: [particle_objective(w[0], True)], [w0])
    return w[0], steps


# Where the outer gradient is about 1.0014: one step of 1e-5 times it is taken, then
# the gradient has dropped below 1 and the next step would be shorter than 1e-5.
PARTICLE_ONE_STEP = 0.21083294


@pytest.mark.parametrize('mode', MODES)
def test_particle_one_outer_step(tool, mode):
    expected, steps = particle_reference(PARTICLE_ONE_STEP)
    assert steps == 1
    input = {'w': PARTICLE_ONE_STEP, 'min_runs': 1, 'min_seconds': 0}
    out = tool.evaluate('particle', mode, input)['output']
    # the step is 1e-5 * gradient: its length checks the nested gradient to ~1e-9
    assert (PARTICLE_ONE_STEP - out) / 1e-5 == pytest.approx(
        (PARTICLE_ONE_STEP - expected) / 1e-5, rel=1e-9)


@pytest.mark.skipif(not FULL, reason='set NESTAD_GRADBENCH_FULL=1 for the ~40 s solves')
@pytest.mark.parametrize('mode', MODES)
def test_gradbench_inputs_all_modes(tool, mode):
    out = tool.evaluate('saddle', mode, {'start': [1.0, 1.0], 'min_runs': 1,
                                         'min_seconds': 0})['output']
    assert out == pytest.approx(SADDLE_REFERENCE, rel=1e-12)
    out = tool.evaluate('particle', mode, {'w': 0.0, 'min_runs': 1, 'min_seconds': 0})['output']
    assert gradbench_close(PARTICLE_REFERENCE, out)
    assert out == pytest.approx(PARTICLE_REFERENCE, rel=1e-12)
    assert out == pytest.approx(particle_reference(0.0)[0], rel=1e-12)
