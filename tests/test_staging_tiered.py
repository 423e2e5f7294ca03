"""stage(f, backend="tiered"): the Python backend's code from the first call, numba's once
a child process has compiled the program into the disk cache; both tiers give the same
numbers, the child never outlives its parent, and without numba (or where numba cannot
compile) the program stays on Python with the numba backend's warning."""
import os
import pickle
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import nestad as nd
from nestad.staging.numba_backend import NumbaFallbackWarning

pytest.importorskip("numba", reason="the tiered backend's second tier is numba's")

X = np.linspace(0.2, 1.4, 7)


# (small programs: the child's cold compile of each takes seconds)
def curve(t):           # a jet's program: sums (pairwise in both tiers), products, sin
    y = X + t * np.cos(X)
    return nd.numpy.sum(nd.sin(y) * y) + nd.numpy.sum(y[:, None] * SPREAD)


# a constant array that is a view, not C-ordered: it reaches the child pickled, as a C-ordered
# copy, and numba's disk cache is keyed by the layout it compiled for
SPREAD = np.broadcast_to(np.linspace(0.5, 2.0, 7)[:, None], (7, 2))


def loss(w):            # a reverse gradient's program
    return nd.numpy.sum(nd.sin(w) * w)


def _alive(pid):
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_tiered_runs_python_then_numba_with_the_same_numbers(monkeypatch):
    from nestad.staging import numba_backend
    # (the child compiles with the parent's knobs, which are part of the cache key: with
    # numba's defaults it would store code the switch does not look for)
    monkeypatch.setattr(numba_backend, "VECTORIZE_FROM", 1)
    jet = nd.stage(nd.derivatives(curve, 2), backend="tiered")
    grad = nd.stage(nd.gradient_r(loss), backend="tiered")
    w = np.cos(X) + 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no fallback for these
        first = jet(0.3), grad(w)             # traced; both children start compiling
        assert jet.tiers() == grad.tiers() == ["python"]
        python = jet(0.3), grad(w)            # the Python tier's code
        assert jet.tiers() == grad.tiers() == ["python"]
        assert jet.wait(120) and grad.wait(120)
        fast = jet(0.3), grad(w)              # the switch: numba's code loaded from disk
        assert jet.tiers() == grad.tiers() == ["numba"]
        again = jet(0.3), grad(w)
    for a, b, c, d in zip(first, python, fast, again):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(b))     # bit for bit
        np.testing.assert_array_equal(np.asarray(d), np.asarray(b))
    ref = [nd.derivative(curve)(0.3), nd.derivative(nd.derivative(curve))(0.3)]
    np.testing.assert_allclose(np.asarray(fast[0][1:3]), ref, rtol=1e-13)
    np.testing.assert_allclose(fast[1], nd.gradient_r(loss)(w), rtol=1e-13)
    job = jet._compiled()[0].tier.job
    assert job.proc.returncode == 0           # reaped: no zombie
    # a pickled copy stages again, with the same backend; its program is the one compiled
    # already (no second child) and it switches too
    copy = pickle.loads(pickle.dumps(grad))
    assert copy.backend == "tiered"
    np.testing.assert_array_equal(copy(w), python[1])
    assert copy._compiled()[0].tier.job is grad._compiled()[0].tier.job
    assert copy.wait(120)
    np.testing.assert_array_equal(copy(w), python[1])
    assert copy.tiers() == ["numba"]


def test_tiered_stays_python_where_numba_cannot_compile():
    # (numba has no np.einsum, which einsum's plain implementation calls)
    g = nd.stage(lambda x: nd.numpy.einsum('i,i->', x, x * x), backend="tiered")
    x = np.array([1.0, -2.0, 3.0])
    assert g(x) == 20.0
    assert g.wait(120)
    with pytest.warns(NumbaFallbackWarning, match="numba could not compile"):
        assert g(x) == 20.0
    assert g(x) == 20.0 and g.tiers() == ["python"]


def test_tiered_without_numba_stays_python(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)       # import numba: ImportError
    g = nd.stage(nd.gradient_r(loss), backend="tiered")
    w = np.cos(X)
    with pytest.warns(NumbaFallbackWarning, match="needs numba"):
        a = g(w)
    np.testing.assert_array_equal(g(w), a)
    assert g.tiers() == ["python"] and g._compiled()[0].tier.job is None    # no child


_PARENT = """
import os, signal, sys, time
import numpy as np
import nestad as nd
g = nd.stage(lambda x: nd.numpy.sum(nd.sin(x) * x), backend="tiered")
g(np.linspace(0.0, 1.0, 3))
print(g._compiled()[0].tier.job.proc.pid, flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_tiered_child_dies_with_its_parent(tmp_path, how):
    # the parent leaves while its child compiles: at exit it kills the child (atexit);
    # killed itself, the child sees its stdin close and exits
    env = dict(os.environ, NESTAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run = subprocess.run([sys.executable, "-c", _PARENT, how], env=env, capture_output=True,
                         text=True, timeout=120)
    pid = int(run.stdout.split()[0])
    end = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(pid)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_tiered_in_a_forked_process():
    g = nd.stage(nd.gradient_r(loss), backend="tiered")
    w = np.sin(X)
    expected = g(w)                           # traced, its child compiling
    pid = os.fork()
    if pid == 0:                              # the fork: the child is not its own, so it
        ok = False                            # stays on Python, with the same numbers
        try:
            ok = all(np.array_equal(g(w), expected) for _ in range(3)) and \
                g.tiers() == ["python"]
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert g.wait(120)
    np.testing.assert_array_equal(g(w), expected)
    assert g.tiers() == ["numba"]


def test_tiered_switch_never_compiles(tmp_path, monkeypatch):
    # the switching call only loads: a program whose code is not in the disk cache (a
    # child that said it stored it, wrongly) stays on Python with a warning, at once
    from nestad.staging import tiered

    done = tiered.Job.__new__(tiered.Job)
    done.result, done.directory, done.pid = ('numba', 'nowhere'), str(tmp_path), os.getpid()
    monkeypatch.setattr(tiered, "job_for", lambda program, directory: done)
    g = nd.stage(nd.gradient_r(loss), backend="tiered")
    w = np.cos(X)
    expected = g(w)
    start = time.perf_counter()
    with pytest.warns(NumbaFallbackWarning, match="not in the disk cache"):
        np.testing.assert_array_equal(g(w), expected)
    assert time.perf_counter() - start < 5.0 and g.tiers() == ["python"]
    np.testing.assert_array_equal(g(w), expected)


def test_tiered_trial_keeps_the_faster_tier():
    # after the switch the tiers take turns for TRIAL_CALLS calls and the faster one stays:
    # numba's code is not always the faster (gmm's stacked jet at k = 8)
    from types import SimpleNamespace

    from nestad.staging import tiered

    def slow(x):
        time.sleep(0.002)
        return x + 1.0

    def fast(x):
        return x + 1.0

    for numba_fn, python_fn, kept, name in [(slow, fast, fast, "python"),
                                            (fast, slow, fast, "numba")]:
        tier = tiered.Tier.__new__(tiered.Tier)
        tier.compiled, tier.python = SimpleNamespace(fn=None), python_fn
        trial = tier.compiled.fn = tiered.Trial(tier, numba_fn)
        assert tier.name == "numba"           # numba's code loaded, on trial
        for k in range(tiered.TRIAL_CALLS):
            assert tier.compiled.fn is trial
            assert trial(float(k)) == k + 1.0
        assert tier.compiled.fn is kept and tier.name == name
        assert trial.times[0] and len(trial.times[0]) == len(trial.times[1])
