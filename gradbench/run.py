"""nestad as a GradBench tool: speaks GradBench's protocol on stdin/stdout.

    python gradbench/run.py

reads one JSON message per line from the eval and answers each with one line:

* ``start``: ``{"id", "tool": "nestad", "config": {versions}}``;
* ``define``: ``success`` true if ``module`` is one of the evals in ``evals/``;
* ``evaluate``: runs ``module.function`` on ``input`` at least ``min_runs`` times and
  until ``min_seconds`` have been spent (at least once: there must be an output;
  once when the input has neither field, as in ``hello``), and answers the last result as ``output`` with one ``evaluate`` timing
  per run (nanoseconds of the call alone, JSON conversion excluded); an exception
  becomes ``success: false`` with its traceback as ``error``;
* anything else (``analysis``, ...): ``{"id"}``.

The tool imports the nestad of the checkout it lives in (the directory above this
one), so it measures the working tree, not whatever nestad is installed.
"""
import importlib
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if os.path.isdir(os.path.join(REPO, 'nestad')):
    sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import numpy  # noqa: E402

import nestad  # noqa: E402
from evals import EVALS, Function  # noqa: E402


def start(message):
    return {'tool': 'nestad',
            'config': {'nestad': nestad.__version__, 'numpy': numpy.__version__,
                       'python': sys.version.split()[0]}}


def define(message):
    module = message.get('module')
    if module not in EVALS:
        return {'success': False, 'error': f"nestad's tool has no implementation of {module!r}"}
    importlib.import_module(f'evals.{module}')
    return {'success': True}


def evaluate(message):
    module, name, data = message['module'], message['function'], message.get('input')
    if module not in EVALS:
        return {'success': False, 'error': f"nestad's tool has no implementation of {module!r}"}
    fn = getattr(importlib.import_module(f'evals.{module}'), name, None)
    if not isinstance(fn, Function):
        return {'success': False, 'error': f"the {module} eval has no function {name!r}"}
    runs = data if isinstance(data, dict) else {}
    min_runs = runs.get('min_runs', 1)
    min_seconds = runs.get('min_seconds', 0)
    args = fn.prepare(data)
    timings, elapsed = [], 0
    while not timings or len(timings) < min_runs or elapsed < min_seconds:
        t0 = time.perf_counter_ns()
        result = fn.compute(*args)
        t1 = time.perf_counter_ns()
        timings.append({'name': 'evaluate', 'nanoseconds': t1 - t0})
        elapsed += (t1 - t0) / 1e9
    return {'success': True, 'output': fn.output(result), 'timings': timings}


HANDLERS = {'start': start, 'define': define, 'evaluate': evaluate}


def respond(message):
    handler = HANDLERS.get(message.get('kind'))
    response = {'id': message['id']}
    if handler is None:
        return response
    try:
        response |= handler(message)
        # Strict JSON (no NaN or Infinity) is what the other side can parse.
        json.dumps(response, allow_nan=False)
    except Exception as e:   # a failed evaluation is reported, not fatal
        response = {'id': message['id'], 'success': False,
                    'error': ''.join(traceback.format_exception(e))}
    return response


def main():
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            print(json.dumps(respond(json.loads(line)), allow_nan=False), flush=True)
    except BrokenPipeError:
        pass


if __name__ == '__main__':
    main()
