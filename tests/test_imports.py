"""nestad's modules form no import cycle, and each public module imports on its own.

The graph is read from the source (``ast``), not from a running interpreter: an edge
m -> n for every ``import`` of nestad module n in m, at module level and inside
functions alike (an import inside a function that would close a cycle only hides it
until the function runs).  Importing ``a.b.c`` from outside package ``a.b`` runs
``a.b``'s ``__init__`` first, so that is an edge to ``a.b`` as well.  The package
``nestad`` itself, which imports everything, is an edge only where a module names it.
"""
import ast
import os
import random
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Function-level imports that would close a cycle, with the reason each must stay.
# This list can only shrink: an entry that no longer exists fails the test below.
ALLOWED = {
    ('nestad.primitives', 'nestad.scipy.special'):
        "erf and erfc of an array are scipy's (an optional dependency, imported when used); "
        "nestad.scipy.special defines its primitives with nestad.primitives",
    ('nestad.primitives', 'nestad.scipy'): "(the package of the import above)",
}


def _modules():
    mods = {}
    for d, _, files in os.walk(os.path.join(ROOT, 'nestad')):
        for f in files:
            if f.endswith('.py'):
                path = os.path.join(d, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, '.')
                mods[name[:-len('.__init__')] if name.endswith('.__init__') else name] = path
    return mods


def _targets(mods, importer, is_package, node):
    """The nestad modules an import statement runs, its parent packages included."""
    if isinstance(node, ast.Import):
        named = [a.name for a in node.names]
    else:
        base = node.module or ''
        if node.level:
            parts = (importer if is_package else importer.rpartition('.')[0]).split('.')
            parts = parts[:len(parts) - (node.level - 1)]
            base = '.'.join(parts + ([node.module] if node.module else []))
        named = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = set()
    own = importer if is_package else importer.rpartition('.')[0]
    for name in named:
        if not (name == 'nestad' or name.startswith('nestad.')):
            continue
        while name not in mods:
            name = name.rpartition('.')[0]
        out.add(name)
        parts = name.split('.')
        for k in range(2, len(parts)):
            package = '.'.join(parts[:k])
            if not (own == package or own.startswith(package + '.')):
                out.add(package)
    out.discard(importer)
    return out


def import_graph():
    """({module: set of modules its module-level imports run},
    {module: set of modules imported inside its functions})."""
    mods = _modules()
    top, inner = {}, {}
    for name, path in mods.items():
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        is_package = path.endswith('__init__.py')
        top[name], inner[name] = set(), set()

        def visit(node, in_function):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    (inner if in_function else top)[name].update(
                        _targets(mods, name, is_package, child))
                visit(child, in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
        visit(tree, False)
    return top, inner


def find_cycle(edges):
    """A cycle [a, b, ..., a] in the graph, or None."""
    state, stack = {}, []

    def visit(v):
        state[v] = 'open'
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if state.get(w) == 'open':
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 'done'
        return None
    for v in sorted(edges):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_module_level_imports_form_no_cycle():
    top, _ = import_graph()
    assert find_cycle(top) is None, " -> ".join(find_cycle(top))


def test_no_cycle_with_function_level_imports_but_the_listed_ones():
    top, inner = import_graph()
    edges = {m: top[m] | {n for n in inner[m] if (m, n) not in ALLOWED} for m in top}
    cycle = find_cycle(edges)
    assert cycle is None, ("import cycle (through imports inside functions too): "
                           + " -> ".join(cycle))


def test_the_allowed_list_only_names_imports_that_exist_and_close_a_cycle():
    top, inner = import_graph()
    for (m, n), reason in ALLOWED.items():
        assert n in inner.get(m, ()), f"{m} no longer imports {n} in a function: remove it from ALLOWED"
        assert n not in top[m], f"{m} imports {n} at module level: it cannot be allowed"
        # without the allowance there is a path back from n to m
        edges = {k: top[k] | inner[k] for k in top}
        seen, todo = set(), [n]
        while todo:
            v = todo.pop()
            if v not in seen:
                seen.add(v)
                todo.extend(edges.get(v, ()))
        assert m in seen, f"{m} -> {n} closes no cycle ({reason}): import it at module level"


def test_the_graph_finds_a_cycle_when_there_is_one():
    # the checker itself: a back edge from the lowest module makes a cycle it reports
    top, _ = import_graph()
    edges = {m: set(v) for m, v in top.items()}
    edges['nestad.errors'] = edges['nestad.errors'] | {'nestad.numpy'}
    cycle = find_cycle(edges)
    assert cycle is not None and 'nestad.errors' in cycle and 'nestad.numpy' in cycle
    assert 'nestad.numpy._kernel' in top['nestad.numpy._plumbing']
    # an import of a package's module from outside it runs the package too
    assert 'nestad.numpy' in top['nestad.extend']


def test_the_kernel_of_array_helpers_imports_only_the_value_layer():
    top, inner = import_graph()
    value_layer = {'nestad.arrays', 'nestad.values', 'nestad.tracer', 'nestad.errors',
                   'nestad.perturbation', 'nestad.interpret', 'nestad.registry'}
    assert top['nestad.numpy._kernel'] | inner['nestad.numpy._kernel'] <= value_layer
    for m in value_layer:                 # and that layer imports no array code
        assert not any(n.startswith('nestad.numpy') for n in top[m] | inner[m]), m


def test_nestad_numpy_init_only_reexports():
    with open(os.path.join(ROOT, 'nestad', 'numpy', '__init__.py'), encoding='utf-8') as f:
        tree = ast.parse(f.read())
    defined = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Assign,
                                                       ast.For, ast.AugAssign))]
    assert defined == [], [ast.dump(n)[:80] for n in defined]


def _public_modules():
    return sorted(m for m in _modules() if not any(p.startswith('_') for p in m.split('.')))


def _run(code):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    return subprocess.Popen([sys.executable, '-c', code], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _import_in_fresh_interpreters(orders):
    """[(order, error)] of the orders whose imports, in a fresh interpreter each, failed."""
    procs = [(order, _run("import importlib\nfor m in %r:\n    importlib.import_module(m)\n"
                          % (order,))) for order in orders]
    failures = []
    for order, proc in procs:
        out, err = proc.communicate(timeout=600)
        if proc.returncode:
            failures.append((order, err.decode()[-800:]))
    return failures


def _loaded_by_importing_nestad():
    """The modules ``import nestad`` loads.  Importing any nestad.X runs nestad's
    __init__ first, so for these ``import nestad.X`` alone is ``import nestad``."""
    proc = _run("import sys, nestad\nprint(' '.join(m for m in sys.modules if m == 'nestad' "
                "or m.startswith('nestad.')))")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-800:]
    return set(out.decode().split())


def test_each_public_module_imports_on_its_own():
    pytest.importorskip('scipy')          # (nestad.scipy's modules need it)
    mods = _public_modules()
    loaded = _loaded_by_importing_nestad()
    assert 'nestad.numpy' in loaded and 'nestad.staging' in loaded
    rest = [m for m in mods if m not in loaded]       # (nestad.scipy's, nestad.catalog)
    assert 'nestad.scipy.special' in rest
    failures = _import_in_fresh_interpreters([(m,) for m in rest])
    assert not failures, failures


def test_public_modules_import_in_any_order():
    pytest.importorskip('scipy')
    mods = _public_modules()
    orders = []
    for seed in range(2):
        order = list(mods)
        random.Random(seed).shuffle(order)
        orders.append(tuple(order))
    orders.append(tuple(reversed(mods)))
    failures = _import_in_fresh_interpreters(orders)
    assert not failures, failures
