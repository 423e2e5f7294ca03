"""Tables of GradBench session logs, tools side by side.

    python gradbench/summarize.py LOG.jsonl [LOG.jsonl ...]

Reads logs in the format of GradBench's intermediary (as written by ``drive.py -o``
or ``gradbench run -o``), and prints one Markdown table per eval: a row per
workload (the ``description`` of the evaluate messages) and, per tool, the time of
each function.  A time is the mean of the ``evaluate`` timings of one message, as
GradBench's own scorer takes it.  A cell is marked ``invalid`` when the eval's
analysis rejected the output, ``failed`` when the tool reported no success, and
left blank when the tool has no implementation of the eval.  Evaluations without a
``description`` (``hello``'s) are left out, as GradBench's scorer leaves them out.
"""
import json
import sys
from collections import defaultdict


def fmt(ns):
    for unit, size in (('s', 1e9), ('ms', 1e6), ('us', 1e3)):
        if ns >= size:
            return f'{ns / size:.3g} {unit}'
    return f'{ns:.0f} ns'


def read(path):
    """(eval, tool, {(description, function): cell text}, [functions in order])."""
    eval_name = tool = None
    cells, functions = {}, []
    pending, by_id = {}, {}
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            if 'message' in entry:
                message = entry['message']
                pending = message
                if message.get('kind') == 'start':
                    eval_name = message.get('eval')
                elif message.get('kind') == 'analysis' and not message['valid']:
                    key = by_id.get(message['of'])
                    if key:
                        cells[key] += ' (invalid)'
                continue
            response = entry['response']
            kind = pending.get('kind')
            if kind == 'start':
                tool = response.get('tool')
            elif kind == 'evaluate' and 'description' in pending:
                # as GradBench's scorer: evaluations without a description are not timed
                key = (pending['description'], pending['function'])
                if pending['function'] not in functions:
                    functions.append(pending['function'])
                if response.get('success'):
                    times = [t['nanoseconds'] for t in response.get('timings') or ()
                             if t['name'] == 'evaluate']
                    cells[key] = fmt(sum(times) / len(times)) if times else '?'
                else:
                    cells[key] = 'failed'
                by_id[pending['id']] = key
    return eval_name, tool, cells, functions


def main(paths):
    evals = defaultdict(list)               # eval -> [(tool, cells, functions)]
    for path in paths:
        eval_name, tool, cells, functions = read(path)
        evals[eval_name].append((tool, cells, functions))
    for eval_name, runs in evals.items():
        functions = []
        for _, _, fs in runs:
            functions += [f for f in fs if f not in functions]
        workloads = []
        for _, cells, _ in runs:
            for d, _ in cells:
                if d not in workloads:
                    workloads.append(d)
        header = ['workload'] + [f'{tool} {fn}' for tool, _, _ in runs for fn in functions]
        print(f'### {eval_name}\n')
        print('| ' + ' | '.join(header) + ' |')
        print('|' + ' --- |' * len(header))
        for w in workloads:
            row = [w] + [cells.get((w, fn), '') for _, cells, _ in runs for fn in functions]
            print('| ' + ' | '.join(row) + ' |')
        print()


if __name__ == '__main__':
    main(sys.argv[1:])
