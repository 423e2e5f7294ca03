"""Run a GradBench eval against a tool without GradBench's (Rust) CLI.

    python gradbench/drive.py --eval "EVAL COMMAND" --tool "TOOL COMMAND" [-o LOG]

Both commands are shell commands.  This relays the eval's messages to the tool and
the tool's responses back, one JSON line each way, as GradBench's intermediary does;
prints one line per message (function, input description, mean ``evaluate`` time,
and the eval's verdict from its ``analysis`` message); and, with ``-o``, writes the
session in the intermediary's log format (one ``{"elapsed", "message"}`` or
``{"elapsed", "response"}`` object per line), which ``summarize.py`` reads.

The exit status is 0 when the tool answered every message, every evaluation
succeeded and the eval found every output valid; 1 otherwise.
"""
import argparse
import json
import subprocess
import sys
import time


def fmt_ns(ns):
    for unit, size in (('s', 1e9), ('ms', 1e6), ('us', 1e3)):
        if ns >= size:
            return f'{ns / size:.3g} {unit}'
    return f'{ns:.0f} ns'


def mean_evaluate(response):
    times = [t['nanoseconds'] for t in response.get('timings') or () if t['name'] == 'evaluate']
    return (sum(times) / len(times), len(times)) if times else (None, 0)


def drive(eval_cmd, tool_cmd, log, timeout):
    start = time.perf_counter_ns()
    tool = subprocess.Popen(tool_cmd, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, bufsize=1)
    ev = subprocess.Popen(eval_cmd, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, bufsize=1)
    evaluations = {}            # message id -> printed line prefix
    ok, invalid, failed = True, 0, 0

    def record(key, obj):
        if log:
            log.write(json.dumps({'elapsed': {'nanoseconds': time.perf_counter_ns() - start},
                                  key: obj}) + '\n')
            log.flush()

    try:
        for line in ev.stdout:
            if not line.strip():
                continue
            message = json.loads(line)
            record('message', message)
            tool.stdin.write(json.dumps(message) + '\n')
            tool.stdin.flush()
            if message.get('kind') == 'end':
                continue
            answer = tool.stdout.readline()
            if not answer:
                print(f"[{message['id']}] the tool closed its output", file=sys.stderr)
                ok = False
                break
            response = json.loads(answer)
            record('response', response)
            if response.get('id') != message['id']:
                print(f"[{message['id']}] the tool answered id {response.get('id')}", file=sys.stderr)
                ok = False
                break
            kind = message.get('kind')
            if kind == 'start':
                print(f"[{message['id']}] start {message.get('eval', '')} ({response.get('tool')})")
            elif kind == 'define':
                print(f"[{message['id']}] define {message['module']}: "
                      f"{'ok' if response.get('success') else 'FAILED'}")
                if not response.get('success'):
                    print(response.get('error', ''), file=sys.stderr)
                    ok = False
            elif kind == 'evaluate':
                mean, runs = mean_evaluate(response)
                prefix = (f"[{message['id']}] {message['module']}::{message['function']} "
                          f"{message.get('description', '')}".ljust(40))
                if response.get('success'):
                    prefix += f" {fmt_ns(mean):>10} x{runs}"
                    evaluations[message['id']] = prefix
                else:
                    failed += 1
                    print(prefix + ' FAILED')
                    print(response.get('error', ''), file=sys.stderr)
            elif kind == 'analysis':
                prefix = evaluations.pop(message['of'], f"[{message['of']}]")
                print(prefix + ('  valid' if message['valid'] else '  INVALID'), flush=True)
                if not message['valid']:
                    invalid += 1
                    print(message.get('error', ''), file=sys.stderr)
            ev.stdin.write(json.dumps(response) + '\n')
            ev.stdin.flush()
    finally:
        for p in (ev, tool):
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass
        for p in (ev, tool):
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
    for prefix in evaluations.values():     # evaluations the eval did not analyse
        print(prefix)
    print(f'outcome: {"ok" if ok and not invalid and not failed else "NOT ok"} '
          f'({invalid} invalid, {failed} failed)')
    return 0 if ok and not invalid and not failed and ev.returncode == 0 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--eval', required=True, help='shell command that runs the eval')
    parser.add_argument('--tool', required=True, help='shell command that runs the tool')
    parser.add_argument('-o', '--output', help='write the session log (JSON lines) here')
    parser.add_argument('--timeout', type=float, default=30,
                        help='seconds to wait for both processes to exit at the end')
    args = parser.parse_args()
    log = open(args.output, 'w') if args.output else None
    try:
        sys.exit(drive(args.eval, args.tool, log, args.timeout))
    finally:
        if log:
            log.close()


if __name__ == '__main__':
    main()
