"""Tables of GradBench session logs, tools side by side.

    python gradbench/summarize.py [--median] LOG.jsonl [LOG.jsonl ...]

Reads logs in the format of GradBench's intermediary (as written by ``drive.py -o``
or ``gradbench run -o``), and prints one Markdown table per eval: a row per
workload (the ``description`` of the evaluate messages) and, per tool (in the order
of the files given), the time of each function.  A time is the mean of the
``evaluate`` timings of one message, as GradBench's own scorer takes it, or with
``--median`` their median (robust to a slow first run and to a noisy machine).  A cell is
marked ``invalid`` when the eval's analysis rejected the output and ``failed`` when
the tool reported no success.  Evaluations without a ``description`` (``hello``'s)
are left out, as GradBench's scorer leaves them out.

Under each table, the ``total`` line is GradBench's score for the classic evals
(the sum over workloads of every function's time), taken over the workloads
that every tool in the table completed with valid outputs, so that the totals
compare the same work.
"""
import json
import statistics
import sys
from collections import defaultdict


def fmt(ns):
    for unit, size in (('s', 1e9), ('ms', 1e6), ('us', 1e3)):
        if ns >= size:
            return f'{ns / size:.3g} {unit}'
    return f'{ns:.0f} ns'


def read(path, statistic):
    """(eval, tool, {(description, function): [mean ns or None, note]}, [functions])."""
    eval_name = tool = None
    cells, functions = {}, []
    pending, by_id = {}, {}
    with open(path) as f:
        for line in f:
            entry = json.loads(line)
            if 'message' in entry:
                message = pending = entry['message']
                if message.get('kind') == 'start':
                    eval_name = message.get('eval')
                elif message.get('kind') == 'analysis' and not message['valid']:
                    key = by_id.get(message['of'])
                    if key:
                        cells[key][1] = 'invalid'
                continue
            response = entry['response']
            kind = pending.get('kind')
            if kind == 'start':
                tool = response.get('tool')
            elif kind == 'evaluate' and 'description' in pending:
                key = (pending['description'], pending['function'])
                if pending['function'] not in functions:
                    functions.append(pending['function'])
                times = [t['nanoseconds'] for t in response.get('timings') or ()
                         if t['name'] == 'evaluate']
                if response.get('success') and times:
                    cells[key] = [statistic(times), '']
                else:
                    cells[key] = [None, 'failed']
                by_id[pending['id']] = key
    return eval_name, tool, cells, functions


def cell_text(cell):
    if cell is None:
        return ''
    mean, note = cell
    text = fmt(mean) if mean is not None else ''
    return f'{text} ({note})' if note and text else (note or text)


def main(args):
    statistic = statistics.fmean
    if args and args[0] == '--median':
        statistic, args = statistics.median, args[1:]
    evals = defaultdict(list)               # eval -> [(tool, cells, functions)]
    for path in args:
        eval_name, tool, cells, functions = read(path, statistic)
        evals[eval_name].append((tool, cells, functions))
    for eval_name, runs in evals.items():
        functions, workloads = [], []
        for _, cells, fs in runs:
            functions += [f for f in fs if f not in functions]
            for d, _ in cells:
                if d not in workloads:
                    workloads.append(d)
        header = ['workload'] + [f'{tool} {fn}' for tool, _, _ in runs for fn in functions]
        print(f'### {eval_name}\n')
        print('| ' + ' | '.join(header) + ' |')
        print('|' + ' --- |' * len(header))
        for w in workloads:
            row = [w] + [cell_text(cells.get((w, fn))) for _, cells, _ in runs for fn in functions]
            print('| ' + ' | '.join(row) + ' |')
        complete = [w for w in workloads
                    if all((w, fn) in cells and cells[(w, fn)][0] is not None
                           and not cells[(w, fn)][1] for _, cells, _ in runs for fn in functions)]
        totals = [f'{tool} {fmt(sum(cells[(w, fn)][0] for w in complete for fn in functions))}'
                  for tool, cells, _ in runs]
        print(f'\ntotal over the {len(complete)} of {len(workloads)} workloads every tool '
              f'completed: ' + ', '.join(totals) + '\n')


if __name__ == '__main__':
    main(sys.argv[1:])
