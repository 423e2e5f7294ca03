"""``export(f, *example_args)``: the source of a standalone Python module computing the
staged ``f``, needing only numpy (seed 002's source-to-source output as a file).

The module holds the code ``stage`` compiles (``codegen.python_source``: the fast
spelling and, where it differs, the IEEE one it falls back to), and beside it what that
code reads from its globals: constants (small finite arrays as literals, the others as
base64 of their ``.npy`` bytes), numpy/math/scipy functions by name, and nestad's plain
implementations of primitives by their source (each in a factory taking its closure
cells and globals as parameters, so names from different modules never collide).  Its
function checks what the program was specialised to: the arguments' structure, shapes
and dtypes, static values and the branches taken (guards), and says to export again
where they differ.  See notes/staging.md.
"""
import ast
import base64
import builtins
import collections
import dataclasses
import dis
import functools
import inspect
import io
import keyword
import math
import re
import sys
import textwrap
import types

import numpy as np

from ..errors import NestadError
from ..structures import _DICTS, _classes, _registry
from .codegen import _leaves, python_source
from .program import GuardFailure, _TRACED
from .stage import Staged
from .tracing import trace


class ExportError(NestadError, TypeError):
    """``nestad.export`` met something a module without nestad cannot express."""


_EXTERNAL = ('numpy', 'math', 'scipy', 'operator')     # modules the exported code may import
_TAKEN = ('flat', 'out', 'e', 'np', 'math', 'BranchError')     # names the function reads

_PRELUDE = '''\
import math

import numpy as np


class BranchError(ValueError):
    """An argument takes another branch than the example the module was exported at."""


def _branch(index, site=None):
    return BranchError(
        f"comparison {index} recorded at the example comes out differently for these "
        "arguments: this export is specialised to the branch its example took; export "
        "again (nestad.export) at arguments that take this branch")


def _fail(path, want, got, why="a"):
    raise TypeError(f"{path} must be {want}, not {got}: this module was exported for "
                    f"{why}n argument of that structure; export again (nestad.export) "
                    "at arguments like these")


def _node(x, path, kind, name, labels):
    if kind == 'dict':
        ok = isinstance(x, dict) and sorted(map(repr, x)) == sorted(map(repr, labels))
    elif kind == 'dataclass':
        ok = type(x).__name__ == name and hasattr(x, '__dataclass_fields__') and \\
            all(hasattr(x, n) for n in labels)
    else:
        ok = isinstance(x, tuple if kind == 'namedtuple' else (tuple, list)) and \\
            type(x).__name__ == name and len(x) == len(labels)
    if not ok:
        _fail(path, f"a {name} of {list(labels)!r:.80}", f"{type(x).__name__} {x!r:.60}")


def _scalar(x, path, kind):
    if isinstance(x, (bool, np.bool_, np.ndarray)) or not isinstance(x, (int, float, np.number)):
        _fail(path, "a real number", f"{type(x).__name__} {x!r:.60}")
    return float(x) if kind == 'float' else np.dtype(kind).type(x)


def _array(x, path, shape, dtype):
    if not (isinstance(x, np.ndarray) and x.shape == shape and x.dtype == dtype):
        got = f"an array of shape {x.shape} and dtype {x.dtype}" if isinstance(x, np.ndarray) \\
            else f"{type(x).__name__} {x!r:.60}"
        raise ValueError(f"{path} must be an array of shape {shape} and dtype {dtype}, not {got}: "
                         "this module is specialised to the shapes and dtypes of its example; "
                         "export again (nestad.export) at arguments of these shapes")
    return x


def _static(x, path, value):
    same = np.array_equal(x, value) if isinstance(value, np.ndarray) else \\
        type(x) is type(value) and x == value
    if not same:
        raise ValueError(f"{path} is {x!r:.60}, but this module was exported with the "
                         f"static value {value!r:.60} baked in; export again (nestad.export) "
                         "with this value")


def _leaves(x):
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (tuple, list)):
        return [leaf for y in x for leaf in _leaves(y)]
    return [x]
'''

_LOAD_NPY = '''

def _npy(text):
    return np.load(io.BytesIO(base64.b64decode(text)))
'''


def export(f, *example_args, name=None, static_argnums=()):
    """The source of a module with one function, named ``name`` (default
    ``f.__name__``), that computes ``f`` on arguments shaped like ``example_args``
    with numpy alone.  ``f`` is traced as ``nestad.stage`` traces it (derivative
    operators inside run while tracing); ``static_argnums`` as in ``stage``."""
    name = name or getattr(f, '__name__', None)
    if not (isinstance(name, str) and name.isidentifier()) or name.startswith('_') or \
            keyword.iskeyword(name) or name in _TAKEN:
        raise ExportError(f"export: the exported function needs a name that is a public "
                          f"Python identifier; got {name!r}: pass name='...'")
    if isinstance(f, Staged) and not static_argnums:
        static_argnums = f.static_argnums
    program = trace(f, *example_args, static_argnums=static_argnums)
    m = _Module()
    fast, glb = python_source(program, "_fast")
    safe, glb = python_source(program, "_ieee", safe=True, glb=glb)
    bound = [f"{k} = {v}" for k, v in ((k, m.value(v, k)) for k, v in glb.items()
                                        if k not in ('math', 'np')) if v != k]
    if safe.replace("def _ieee(", "def _fast(", 1) == fast:
        safe = "_ieee = _fast"
    params = _param_names(f, len(example_args))
    check, flat = _argument_lines(program, params, m)
    body = check + [f"    flat = ({''.join(v + ', ' for v in flat)})",
                    "    try:", "        out = _fast(*flat)",
                    "    except (ArithmeticError, ValueError) as e:",
                    "        if isinstance(e, BranchError):", "            raise",
                    "        out = _ieee(*flat)         # math raised where IEEE 754 answers",
                    f"    return {_output_expr(program.out_tree, m)}"]
    doc = (f'"""{name}: exported by nestad.export from {getattr(f, "__qualname__", f)!r:.80} '
           f'at arguments {_describe(example_args)}.\n\nNeeds numpy{m.needs()}; '
           f'specialised to the example\'s structure, shapes, dtypes, static values and '
           f'branches (it raises where an argument differs).\n"""')
    parts = [doc, _PRELUDE.replace('\nimport numpy as np\n', '\nimport numpy as np\n' +
                                   ''.join(f"import {mod}\n" for mod in m.imports), 1)]
    if m.npy:
        parts[1] = parts[1].replace('import math\n', 'import base64\nimport io\nimport math\n', 1)
        parts.append(_LOAD_NPY)
    parts += ["\n" + "\n\n".join(m.defs) if m.defs else "", "\n".join(bound),
              "\n" + fast, "\n" + safe,
              f"\ndef {name}({', '.join(params)}):", "\n".join(body)]
    return "\n".join(p for p in parts if p) + "\n"


class _Module:
    """What the exported module defines besides its functions: imports, factories of
    helper functions, output classes; ``value`` gives the source of an object."""

    def __init__(self):
        self.imports, self.defs, self.npy = [], [], False
        self.done = {}            # id(obj) -> its name in the module
        self.keep = []            # (objects whose ids are in done live as long as it)
        self.factories = {}       # source of a factory -> its name

    def needs(self):
        extra = dict.fromkeys(m.split('.')[0] for m in self.imports if m.startswith('scipy'))
        return "".join(f" and {m}" for m in extra)      # (the others are Python's own)

    def _import(self, module):
        if module not in self.imports:
            self.imports.append(module)
        return module

    def value(self, obj, hint="h"):
        """Source of an expression that is ``obj`` (or equals it) in the module."""
        if obj is GuardFailure:
            return "_branch"
        if obj is _leaves:
            return "_leaves"
        if id(obj) in self.done:
            return self.done[id(obj)]
        if obj is None or isinstance(obj, (bool, int, str)):
            return repr(obj)
        if isinstance(obj, (float, complex)):
            return repr(obj) if np.isfinite(obj) else f"{type(obj).__name__}({str(obj)!r})"
        if isinstance(obj, (tuple, list)) and type(obj) in (tuple, list):
            inner = ", ".join(self.value(x) for x in obj) + ("," if len(obj) == 1 else "")
            return f"({inner})" if isinstance(obj, tuple) else f"[{inner}]"
        if isinstance(obj, (np.ndarray, np.generic)):
            return self._array(obj)
        if isinstance(obj, np.dtype):
            return f"np.dtype({obj.str!r})"
        if isinstance(obj, types.ModuleType):
            return self._module(obj)
        if isinstance(obj, functools.partial):
            args = [self.value(obj.func)] + [self.value(a) for a in obj.args]
            args += [f"{k}={self.value(v)}" for k, v in obj.keywords.items()]
            return f"functools.partial({', '.join(args)})".replace(
                "functools.", self._import('functools') + ".", 1)
        found = _external_name(obj)
        if found is not None:
            module, qualname = found
            return qualname if module == 'builtins' else f"{self._module(sys.modules[module])}.{qualname}"
        if isinstance(obj, types.FunctionType):
            return self._function(obj, hint)
        if isinstance(obj, type) and issubclass(obj, Exception):
            # (nestad's errors, raised by plain implementations: the builtin error they are)
            base = next(c for c in obj.__mro__ if c.__module__ == 'builtins')
            name = self.done[id(obj)] = f"_{obj.__name__}"
            self.keep.append(obj)
            self.defs.append(f"{name} = type({obj.__name__!r}, ({base.__name__},), {{}})")
            return name
        raise ExportError(f"export: the staged code uses {type(obj).__name__} {obj!r:.80}, "
                          "which a module without nestad cannot express (only numbers, "
                          "arrays, numpy/math/scipy functions and Python functions with "
                          "source are); compute it inside the exported function instead")

    def _module(self, module):
        if module is np:
            return "np"
        if module is math:
            return "math"
        if module.__name__.split('.')[0] in _EXTERNAL:
            return self._import(module.__name__)
        raise ExportError(f"export: the staged code uses module {module.__name__}, but the "
                          f"exported module may import only {', '.join(_EXTERNAL)}")

    def _array(self, a):
        if isinstance(a, np.generic):
            return f"{self._array(np.asarray(a))}[()]"
        # The layout too: numpy's reductions may add in another order on another one.
        if a.size > 1 and 0 in a.strides:             # a broadcast constant (ones, ...)
            base = a[tuple(slice(0, 1) if s == 0 else slice(None) for s in a.strides)]
            return f"np.broadcast_to({self._array(np.ascontiguousarray(base))}, {a.shape!r})"
        if a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous:
            return f"np.asfortranarray({self._array(np.ascontiguousarray(a))})"
        if a.dtype.kind in 'biuf' and a.size <= 64 and np.all(np.isfinite(a)):
            return f"np.array({a.tolist()!r}, dtype={a.dtype.str!r})"
        if a.dtype.hasobject:
            raise ExportError(f"export: an object array {a!r:.60} cannot be embedded")
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        self.npy = True
        return f"_npy({base64.b64encode(buf.getvalue()).decode()!r})"

    def _function(self, fn, hint):
        """A helper function by its source, made by a factory that takes the values of
        its closure cells and of the globals it reads (so it needs no module of its own)."""
        name = self.done[id(fn)] = f"_{hint.strip('_')}"
        self.keep.append(fn)
        node = _source_node(fn)
        free = list(fn.__code__.co_freevars)
        values = [c.cell_contents for c in fn.__closure__ or ()]
        for g in _global_names(fn, node):
            if g in fn.__globals__ and g not in free and g != getattr(node, 'name', None):
                free.append(g)
                values.append(fn.__globals__[g])
        args = [self.value(v, f"{name}_{k}") for k, v in zip(free, values)]
        src = ast.unparse(node)
        body = f"return {src}" if isinstance(node, ast.Lambda) else f"{src}\nreturn {node.name}"
        factory = f"({', '.join(free)}):\n{textwrap.indent(body, '    ')}"
        make = self.factories.get(factory)       # (closures of one function share one)
        if make is None:
            base = re.sub(r'\W', '', fn.__code__.co_name).strip('_')
            make = self.factories[factory] = f"_make_{base}{len(self.factories)}"
            self.defs.append(f"def {make}{factory}")
        self.defs.append(f"{name} = {make}({', '.join(args)})")
        return name

    def output_class(self, cls, kind, fields):
        """A stand-in of a namedtuple or dataclass (by name and fields) for results."""
        key = ('class', cls)
        if key not in self.done:
            mod = self._import('collections' if kind == 'namedtuple' else 'dataclasses')
            make = 'namedtuple' if kind == 'namedtuple' else 'make_dataclass'
            name = self.done[key] = f"_{cls.__name__}"
            self.defs.append(f"{name} = {mod}.{make}({cls.__name__!r}, {list(fields)!r})")
        return self.done[key]


def _external_name(obj):
    """(module, qualified name) of a numpy/math/scipy/builtin object found by that name."""
    module = getattr(obj, '__module__', None) or ('numpy' if isinstance(obj, np.ufunc) else None)
    module = 'operator' if module == '_operator' else module
    qualname = getattr(obj, '__qualname__', getattr(obj, '__name__', None))
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if module.split('.')[0] not in _EXTERNAL + ('builtins',):
        return None
    if module == 'builtins' and getattr(builtins, qualname, None) is not obj:
        return None
    found = sys.modules.get(module)
    for part in qualname.split('.'):
        found = getattr(found, part, None)
    return (module, qualname) if found is obj else None


def _source_node(fn):
    """The ast of ``fn``'s definition (decorators and annotations dropped), found in
    its file by first line and, among lambdas on one line, by the columns its code
    spans."""
    try:
        lines, _ = inspect.findsource(fn)
    except (OSError, TypeError):
        raise ExportError(f"export: the source of {fn.__module__}.{fn.__qualname__} (used by "
                          "the staged code) is not available; define it in a file") from None
    tree = ast.parse("".join(lines))
    code = fn.__code__
    spots = {(i.positions.lineno, i.positions.col_offset) for i in dis.get_instructions(code)
             if i.positions.lineno and i.positions.col_offset is not None}
    spots.discard((code.co_firstlineno, 0))     # (RESUME and a lambda's RETURN_VALUE)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda) and code.co_name == '<lambda>':
            if node.lineno == code.co_firstlineno and all(
                    (node.lineno, node.col_offset) <= s <= (node.end_lineno, node.end_col_offset)
                    for s in spots):
                found.append(node)
        elif isinstance(node, ast.FunctionDef) and node.name == code.co_name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first == code.co_firstlineno:
                found.append(node)
    if not found:
        raise ExportError(f"export: could not find the definition of {fn.__qualname__} in "
                          "its source file")
    node = min(found, key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset - n.col_offset))
    if isinstance(node, ast.FunctionDef):
        node.decorator_list, node.returns = [], None
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            a.annotation = None
    return node


def _global_names(fn, node):
    """Names ``fn`` reads as globals: in its code (and nested code) and its defaults."""
    names, stack = [], [fn.__code__]
    while stack:
        code = stack.pop()
        names += [i.argval for i in dis.get_instructions(code)
                  if i.opname in ('LOAD_GLOBAL', 'LOAD_NAME')]
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
        names += [n.id for n in ast.walk(d) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------- arguments and results

def _param_names(f, n):
    try:
        params = [p.name for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = params[:n] if len(params) >= n else [f"x{i}" for i in range(n)]
    if len(set(names)) < n or any(p in _TAKEN or keyword.iskeyword(p) or p.startswith('_')
                                  or re.fullmatch(r'a\d+', p) for p in names):
        names = [f"x{i}" for i in range(n)]
    return names


def _kind(tree):
    """'tuple', 'list', 'dict', 'namedtuple' or 'dataclass' and the class of a node."""
    cls = _classes[tree.unflatten]
    if cls in (tuple, list):
        return cls.__name__, cls
    if cls in _DICTS:
        return 'dict', cls
    if cls not in _registry and issubclass(cls, tuple) and hasattr(cls, '_fields'):
        return 'namedtuple', cls
    if cls not in _registry and dataclasses.is_dataclass(cls):
        return 'dataclass', cls
    raise ExportError(f"export: {cls.__name__} is a structure registered with "
                      "nestad.register_structure; a module without nestad cannot take it "
                      "apart or rebuild it: pass (or return) its parts as a tuple, dict, "
                      "namedtuple or dataclass instead")


def _labels(tree, kind, cls):
    if kind == 'dict':
        return list(tree.aux[1] if cls is collections.defaultdict else tree.aux)
    if kind == 'dataclass':
        return list(tree.aux)
    if kind == 'namedtuple':
        return list(cls._fields)
    return list(range(len(tree.children)))


def _argument_lines(program, params, m):
    """Lines checking the arguments against the program's ``in_tree`` and reading its
    traced leaves, and the names of those leaves."""
    lines, flat = [], []
    static = iter(program.static)
    examples = iter(program.example)

    def walk(expr, tree, path):
        if tree.children is None:
            value = next(static)
            if value is not _TRACED:
                lines.append(f"    _static({expr}, {path!r}, {m.value(value)})")
                return
            example, var = next(examples), f"a{len(flat)}"
            if isinstance(example, np.ndarray):
                lines.append(f"    {var} = _array({expr}, {path!r}, {example.shape!r}, "
                             f"{example.dtype.str!r})")
            else:
                kind = 'float' if type(example) is float else np.dtype(type(example)).str
                lines.append(f"    {var} = _scalar({expr}, {path!r}, {kind!r})")
            flat.append(var)
            return
        kind, cls = _kind(tree)
        labels = _labels(tree, kind, cls)
        lines.append(f"    _node({expr}, {path!r}, {kind!r}, {cls.__name__!r}, {labels!r})")
        for label, child in zip(labels, tree.children):
            if kind in ('namedtuple', 'dataclass'):
                walk(f"{expr}.{label}", child, f"{path}.{label}")
            else:
                walk(f"{expr}[{label!r}]", child, f"{path}[{label!r}]")

    args_tree, kwargs_tree = program.in_tree.children
    for p, child in zip(params, args_tree.children):
        walk(p, child, p)
    return lines, flat


def _output_expr(tree, m):
    """The result rebuilt from ``out`` (one leaf, or the tuple of the leaves)."""
    if tree.children is None:
        return "out"
    count = iter(range(tree.n_leaves))

    def build(t):
        if t.children is None:
            return f"out[{next(count)}]"
        kind, cls = _kind(t)
        parts = [build(c) for c in t.children]
        if kind in ('tuple', 'list'):
            inner = ", ".join(parts) + ("," if len(parts) == 1 and kind == 'tuple' else "")
            return f"({inner})" if kind == 'tuple' else f"[{inner}]"
        labels = _labels(t, kind, cls)
        if kind == 'dict':
            if cls is not dict:
                raise ExportError(f"export: a result is a {cls.__name__}; return a dict")
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(labels, parts)) + "}"
        return f"{m.output_class(cls, kind, labels)}({', '.join(parts)})"
    return build(tree)


def _describe(args):
    def one(a):
        if isinstance(a, np.ndarray):
            return f"array{a.shape} {a.dtype}"
        if isinstance(a, (tuple, list)) and type(a) in (tuple, list):
            return "(" + ", ".join(one(x) for x in a) + ")"
        return type(a).__name__
    return "(" + ", ".join(one(a) for a in args) + ")"
