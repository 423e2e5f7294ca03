"""A missing nestad module names the nearest one that exists.

``import nestad.scipy.stat`` (or ``nestad.numpy.randm``) would fail with Python's bare
"No module named ...": a finder at the end of ``sys.meta_path``, asked only after every
real finder has failed, raises ``ModuleNotFoundError`` naming the closest nestad module.
"""
import difflib
import importlib.util
import pathlib
import sys

_ROOT = pathlib.Path(__file__).parent


def module_paths():
    """Every importable nestad module path: the package's files (private ones left out)
    and the modules made at import time (``nestad.scipy.stats.norm``...)."""
    paths = {'nestad'}
    for p in _ROOT.rglob('*.py'):
        parts = p.relative_to(_ROOT).with_suffix('').parts
        if parts[-1] == '__init__':
            parts = parts[:-1]
        if parts and not any(s.startswith('_') for s in parts):
            paths.add('.'.join(('nestad',) + parts))
    paths.update(m for m in list(sys.modules) if m.startswith('nestad.')
                 and not any(s.startswith('_') for s in m.split('.')))
    return sorted(paths)


def nearest(name):
    """The existing nestad module path closest to ``name``: a close spelling, else the
    longest existing prefix of it."""
    paths = module_paths()
    close = difflib.get_close_matches(name, paths, n=1, cutoff=0.6)
    if close:
        return close[0]
    parts = name.split('.')
    while parts and '.'.join(parts) not in paths:
        parts.pop()
    return '.'.join(parts) or 'nestad'


def _asked_whether_it_exists():
    """True inside importlib.util.find_spec, whose callers expect None for a missing
    module (an import statement expects an error)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is importlib.util.find_spec.__code__:
            return True
        frame = frame.f_back
    return False


class HintingFinder:
    """Last on sys.meta_path: reached only by a nestad module no finder found."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if not name.startswith('nestad.') or _asked_whether_it_exists():
            return None
        near = nearest(name)
        parent = near.rsplit('.', 1)[0]
        siblings = [p for p in module_paths() if p != parent and p.rsplit('.', 1)[0] == parent]
        raise ModuleNotFoundError(
            f"No module named {name!r}; the nearest nestad module is {near!r} (its siblings: "
            f"{', '.join(siblings)}). docs/migrating.md lists where autograd's and JAX's "
            "names are in nestad.", name=name)

    @staticmethod
    def invalidate_caches():
        pass


def install():
    if not any(isinstance(f, HintingFinder) for f in sys.meta_path):
        sys.meta_path.append(HintingFinder())
