"""Formatting and comparison helpers shared by the benchmark scripts."""


def max_rel_diff(a, b):
    """Largest relative difference between two sequences of numbers."""
    return max(abs(x - y) / max(abs(x), abs(y), 1e-300) for x, y in zip(a, b))


def fmt_time(seconds):
    if seconds >= 1.0:
        return f'{seconds:.2f} s'
    if seconds >= 1e-3:
        return f'{seconds * 1e3:.1f} ms'
    return f'{seconds * 1e6:.1f} us'


def print_table(header, rows):
    """Left-aligned columns under a header and a rule."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = '  '.join(f'{h:<{w}}' for h, w in zip(header, widths))
    print(line)
    print('-' * len(line))
    for r in rows:
        print('  '.join(f'{str(c):<{w}}' for c, w in zip(r, widths)))
