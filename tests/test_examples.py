"""Every script in examples/ runs to completion and exits with status 0.

Each example checks its own numbers (against closed forms or finite differences) and exits
non-zero on a mismatch, so a zero status means its checks passed.  Figures go to a
temporary directory (the committed ones in examples/figures/ are left alone), drawn with
matplotlib's Agg backend when matplotlib is installed."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_examples_found():
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", NESTAD_EXAMPLES_FIGURES=str(tmp_path))
    # The nestad being tested, not whichever one is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (
        f"{script.name} exited with {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}"
        f"\n--- stderr\n{proc.stderr[-3000:]}")


@pytest.mark.skipif(not os.environ.get("AUTOGRAD_CHECKOUT"),
                    reason="autograd's examples are read from a checkout of github.com/HIPS/autograd "
                           "named by AUTOGRAD_CHECKOUT (none is kept in this repository)")
def test_autograds_examples_run_ported():
    """neural_net.py, gaussian_process.py and rnn.py of autograd, unchanged but for their
    import lines, print the numbers they print on autograd (benchmarks/autograd_examples.py)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "autograd_examples.py"),
                           "--autograd", env["AUTOGRAD_CHECKOUT"], "--iters", "10"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("ok  ") == 3, proc.stdout
