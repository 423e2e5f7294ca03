"""Run three of autograd's example programs on nestad, unchanged but for their import
lines, and compare what they print with the same programs on autograd.

From a checkout of github.com/HIPS/autograd, ``examples/neural_net.py`` (an MLP on MNIST
trained with ``adam``), ``gaussian_process.py`` (a GP's marginal likelihood maximised by
scipy's ``minimize`` with ``value_and_grad``) and ``rnn.py`` (a character RNN trained with
``adam``) are read, their ``autograd`` import lines are replaced by nestad's (``PORTS``:
nothing else in them changes), and each is run twice, as ported and as written, in a
fresh interpreter.  The printed numbers (losses, likelihoods, accuracies) must agree to
``--rtol``.  Two stand-ins keep the runs short and offline, the same for both: MNIST is
replaced by a small synthetic set of the same format (``from data import load_mnist``),
and pyplot by a module that draws nothing (``gaussian_process.py`` would otherwise
``plt.pause`` for ten seconds); ``--iters`` caps the optimizers' iterations (both
libraries' ``adam``).  Nothing of autograd's code is kept: the programs are read from the
checkout and run from a temporary directory.

Usage::

    git clone https://github.com/HIPS/autograd autograd-checkout
    python benchmarks/autograd_examples.py --autograd autograd-checkout [--iters 40]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

EXAMPLES = ['neural_net.py', 'gaussian_process.py', 'rnn.py']

# autograd's import lines -> nestad's (the only change made to the programs)
PORTS = {
    'import autograd.numpy as np': 'import nestad.numpy as np',
    'import autograd.numpy.random as npr': 'import nestad.numpy.random as npr',
    'import autograd.scipy.stats.multivariate_normal as mvn':
        'import nestad.scipy.stats.multivariate_normal as mvn',
    'from autograd import grad': 'from nestad import grad',
    'from autograd import value_and_grad': 'from nestad import value_and_grad',
    'from autograd.misc.flatten import flatten': 'from nestad import flatten',
    'from autograd.misc.optimizers import adam': 'from nestad.optim import adam',
    'from autograd.scipy.special import logsumexp': 'from nestad.scipy.special import logsumexp',
    'from autograd.numpy.linalg import solve': 'from nestad.numpy.linalg import solve',
}

# the stand-ins both runs use (import lines too)
STAND_INS = {
    'from data import load_mnist': 'from synthetic_mnist import load_mnist',
    'import matplotlib.pyplot as plt': 'import quiet_pyplot as plt',
}

SYNTHETIC_MNIST = '''
"""MNIST's format (N, train images (N, 784) in [0, 1], one-hot train labels, test images,
test labels) for a small synthetic set: each class a random prototype image plus noise."""
import numpy as np


def load_mnist(n_train=512, n_test=128, seed=0):
    rng = np.random.RandomState(seed)
    prototypes = rng.uniform(size=(10, 784))

    def draw(n):
        labels = rng.randint(10, size=n)
        images = np.clip(prototypes[labels] + 0.8 * rng.randn(n, 784), 0.0, 1.0)
        return images, np.array(labels[:, None] == np.arange(10)[None, :], dtype=int)
    train_images, train_labels = draw(n_train)
    test_images, test_labels = draw(n_test)
    return n_train, train_images, train_labels, test_images, test_labels
'''

QUIET_PYPLOT = '''
"""pyplot's calls the examples make, drawing nothing (and not pausing)."""


class _Nothing:
    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self


_nothing = _Nothing()


def __getattr__(name):
    return _nothing
'''

RUN = '''
import functools, re, sys
sys.path.insert(0, {tmp!r})
iters = {iters!r}
for module in ('autograd.misc.optimizers', 'nestad.optim'):
    try:
        optimizers = __import__(module, fromlist=['adam'])
    except ImportError:
        continue
    def capped(optimize):
        @functools.wraps(optimize)
        def run(*args, num_iters=100, **kwargs):
            return optimize(*args, num_iters=min(num_iters, iters), **kwargs)
        return run
    optimizers.adam = capped(optimizers.adam)
source = open({path!r}).read()
for old, new in {lines!r}.items():
    source = re.sub('^' + re.escape(old) + '$', new, source, flags=re.M)
exec(compile(source, {path!r}, 'exec'), {{'__name__': '__main__', '__file__': {path!r}}})
'''


def run(path, lines, tmp, iters, env):
    code = RUN.format(tmp=str(tmp), iters=iters, path=str(path), lines=lines)
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=600)
    return proc


NUMBER = re.compile(r'-?\d+\.\d+(?:e[-+]?\d+)?')


def compare(ported, original, rtol):
    """(agree, message): the printed numbers, in order, to rtol."""
    a = [float(x) for x in NUMBER.findall(ported)]
    b = [float(x) for x in NUMBER.findall(original)]
    if len(a) != len(b):
        return False, f"{len(a)} numbers printed on nestad, {len(b)} on autograd"
    worst = max([abs(x - y) / max(abs(y), 1e-300) for x, y in zip(a, b)] + [0.0])
    return worst <= rtol, f"{len(a)} numbers agree to {worst:.1e} relative (tolerance {rtol:g})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--autograd", required=True, help="a checkout of github.com/HIPS/autograd")
    ap.add_argument("--iters", type=int, default=40, help="cap on adam's iterations")
    ap.add_argument("--rtol", type=float, default=1e-6)
    args = ap.parse_args(argv)
    source = pathlib.Path(args.autograd) / "examples"
    repo_root = pathlib.Path(__file__).resolve().parent.parent
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "synthetic_mnist.py").write_text(SYNTHETIC_MNIST.lstrip())
        (tmp / "quiet_pyplot.py").write_text(QUIET_PYPLOT.lstrip())
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
            str(repo_root), os.environ.get("PYTHONPATH")])), MPLBACKEND="Agg")
        for name in EXAMPLES:
            path = source / name
            ported = run(path, {**STAND_INS, **PORTS}, tmp, args.iters, env)
            original = run(path, STAND_INS, tmp, args.iters, env)
            changed = [line for line in path.read_text().splitlines() if line in PORTS]
            if ported.returncode or original.returncode:
                failures += 1
                which = "nestad" if ported.returncode else "autograd"
                err = (ported if ported.returncode else original).stderr
                print(f"FAIL {name}: the run on {which} failed\n{err[-2000:]}")
                continue
            ok, message = compare(ported.stdout, original.stdout, args.rtol)
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} ({len(changed)} import lines ported): {message}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
