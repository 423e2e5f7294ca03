"""Which of nestad.numpy's functions compile with ``stage(backend="numba")``.

For every public function of nestad.numpy that takes one array (else two) of shape (3, 4)
and gives float values, three programs are staged with numba: its value and the gradient
of its sum (one program), and the Hessian of its sum.  Printed: the functions whose
programs fall back to Python, grouped by numba's complaint (the first line of its error
naming an unsupported function or signature), then the totals.  A few minutes.

    PYTHONPATH=. python benchmarks/numba_coverage.py [name ...]
"""
import collections
import os
import re
import sys
import tempfile
import warnings

os.environ.setdefault('NESTAD_CACHE_DIR', tempfile.mkdtemp(prefix='nestad-numba-cache-'))

import numpy as np  # noqa: E402

import nestad as nd  # noqa: E402
import nestad.numpy as anp  # noqa: E402
from nestad.staging import numba_backend  # noqa: E402

SKIP = {'ArrayPrimitive', 'InvalidInputError', 'Perturbed', 'apply', 'array', 'asarray',
        'astype', 'at', 'float32', 'float64', 'int32', 'int64', 'ndarray', 'is_array',
        'is_tracer', 'primal_value', 'result_type', 'subclass_error', 'shape', 'size', 'ndim',
        'empty', 'empty_like', 'zeros', 'zeros_like', 'ones', 'ones_like', 'full', 'full_like',
        'eye', 'identity', 'arange', 'linspace', 'meshgrid', 'allclose', 'array_equal',
        'sum_to', 'getitem'}
X = np.linspace(0.2, 0.9, 12).reshape(3, 4)
Y = np.linspace(1.1, 0.3, 12).reshape(3, 4)


def candidates(names):
    """name -> the function of one array, applied to X (or of two, to X and Y)."""
    out = {}
    for name in names:
        f = getattr(anp, name)
        for g in (lambda x, f=f: f(x), lambda x, f=f: f(x, Y)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter('ignore')
                    v = np.asarray(g(X))
            except Exception:
                continue
            if v.dtype.kind == 'f' and v.size:
                out[name] = g
                break
    return out


def reason(message):
    """numba's complaint, shortened to what names the unsupported feature."""
    m = re.search(r"compile a staged program \((.*)\); it runs", message, re.S)
    text = m.group(1) if m else message
    return re.sub(r' at 0x[0-9a-f]+', '', text)[:160]


def staged_reason(f, name):
    """numba's complaint, with the line of the generated code it was about."""
    staged = nd.stage(f, backend='numba')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            staged(X)
            staged(X)
        except Exception as e:          # noqa: BLE001  (a probe: report, go on)
            return f"error: {type(e).__name__}: {str(e)[:80]}"
    for w in caught:
        if issubclass(w.category, numba_backend.NumbaFallbackWarning):
            return reason(str(w.message))
    return None


def main():
    names = sys.argv[1:] or sorted(n for n in dir(anp) if not n.startswith('_') and
                                   n not in SKIP and callable(getattr(anp, n)))
    fns = candidates(names)
    fell = collections.defaultdict(list)
    counts = collections.Counter()
    for name, g in fns.items():
        programs = {'value+gradient': lambda x, g=g: (g(x), nd.gradient_r(
                        lambda y: anp.sum(g(y)))(x)),
                    'hessian': nd.hessian(lambda y, g=g: anp.sum(g(y)))}
        for kind, f in programs.items():
            why = staged_reason(f, name)
            counts[kind, why is None] += 1
            if why is not None:
                fell[why].append(f"{name} ({kind})")
        print(f"{name}: done", file=sys.stderr, flush=True)
    print(f"{len(fns)} functions of nestad.numpy probed")
    for kind in ('value+gradient', 'hessian'):
        print(f"  {kind}: {counts[kind, True]} compiled, {counts[kind, False]} fell back")
    for why, which in sorted(fell.items(), key=lambda kv: -len(kv[1])):
        print(f"\n{len(which)} x {why}\n    " + ", ".join(which))


if __name__ == '__main__':
    main()
