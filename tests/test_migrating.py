"""docs/migrating.md: its two nestad ports run (the right-hand column of each side-by-side
block, as written there), every module path it names imports, and the README links it."""
import pathlib
import re

import numpy as np

import nestad as nd

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "migrating.md").read_text()


def _nestad_column(block):
    """The right-hand column (from the 49th character) of a side-by-side code block."""
    lines = block.splitlines()[1:]
    return "\n".join(re.sub(r"\s*# changed$", "", line[48:]) for line in lines)


def _ports():
    section = DOC.split("## Two ports, side by side")[1]
    return [_nestad_column(b) for b in re.findall(r"```python\n(.*?)```", section, re.S)]


def test_the_autograd_port_runs():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = (X @ np.array([1.0, -2.0, 0.5]) > 0).astype(float)
    scope = {'X': X, 'y': y}
    exec(_ports()[0], scope)
    accuracy = np.mean(((X @ scope['w']) > 0) == y)
    assert accuracy > 0.9 and scope['w'].shape == (3,)


def test_the_jax_port_runs():
    scope = {}
    exec(_ports()[1], scope)
    X = scope['X']
    y = X @ np.array([1.0, 2.0, -1.0])
    w, losses = np.zeros(3), []
    for _ in range(100):
        w, loss = scope['step'](w, X, y)
        losses.append(loss)
    assert losses[-1] < 1e-3 * losses[0]
    assert np.allclose(w, [1.0, 2.0, -1.0], atol=1e-2)


def test_named_modules_import():
    import importlib
    for path in set(re.findall(r"`(nestad(?:\.[a-z_]+)+)", DOC)):
        parts = path.split(".")
        for k in range(len(parts), 1, -1):          # a module, or an attribute of one
            try:
                module = importlib.import_module(".".join(parts[:k]))
            except ImportError:
                continue
            obj = module
            for name in parts[k:]:
                obj = getattr(obj, name)
            break
        else:
            raise AssertionError(f"docs/migrating.md names {path}, which does not exist")


def test_named_functions_exist():
    for name in set(re.findall(r"`nd\.([a-z_]+)", DOC)):
        assert hasattr(nd, name), f"docs/migrating.md names nd.{name}"


def test_readme_links_the_guide():
    assert "docs/migrating.md" in (ROOT / "README.md").read_text()
