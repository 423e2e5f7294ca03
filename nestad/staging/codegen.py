"""Straight-line Python source from a Program, compiled with ``compile`` (or numba).

One line per equation: ``math`` calls and operators for scalars, numpy calls for
arrays, a call of the primitive's plain implementation where it has no expression
of its own.  Guards become ``if`` tests that raise ``GuardFailure``.  Constants that
have a literal spelling are written as literals; the others (arrays, inf, nan...)
are bound as globals of the generated module.

``math`` raises where IEEE 754 gives inf or nan (``math.log(0)``, ``math.sqrt(-1)``):
the caller catches that and evaluates the program with nestad's IEEE plain
implementations instead (``Compiled.__call__``), so staged code gives the numbers
eager code gives, at the speed of ``math`` where nothing is exceptional.
"""
import math
import re

import numpy as np

from ..structures import _LEAF, flatten
from ..tracer import GUARD, Var
from . import lowering
from .accumulate import is_basic, rewrite as accumulate, subscript
from .program import GuardFailure, NumpyCall

_SIMPLE_LITERALS = (bool, int, str, type(None))


class _Emitter:
    def __init__(self, safe=False, backend='python'):
        self.safe = safe        # spell nothing with a function that raises where IEEE answers
        self.spellings, names = lowering.spellings(backend)
        self.globals = {'math': math, 'np': np, '_GuardFailure': GuardFailure, **names}
        self.names = {}
        self.lines = []
        self.count = 0
        self.free = []          # names of variables no longer needed, to reuse

    def bind(self, value, hint):
        """A global name for ``value`` in the generated module."""
        for k, v in self.globals.items():
            if v is value:
                return k
        name = f"_{hint}{len(self.globals)}"
        self.globals[name] = value
        return name

    def const(self, c, index=False):
        """Source for a constant: a literal where one spells it exactly.  A numpy scalar
        is no Python literal (numpy promotes a float32 array with a float64 or int64
        scalar, not with a Python number), but in an index (``index``) it may be."""
        if isinstance(c, _SIMPLE_LITERALS):
            return repr(c)
        if isinstance(c, np.bool_) or index and isinstance(c, np.integer):
            return repr(c.item())
        if c.__class__ is float and math.isfinite(c):
            return f"({c!r})" if c < 0 or (c == 0 and math.copysign(1, c) < 0) else repr(c)
        if isinstance(c, (tuple, list)):         # (shapes, axes, indices: ints as literals)
            inner = ", ".join(self.const(x, True) for x in c)
            if isinstance(c, tuple):
                return f"({inner},)" if len(c) == 1 else f"({inner})"
            return f"[{inner}]"
        if isinstance(c, slice):
            return f"slice({self.const(c.start, True)}, {self.const(c.stop, True)}, " \
                f"{self.const(c.step, True)})"
        if c is Ellipsis:
            return "..."
        return self.bind(c, "c")

    def arg(self, a):
        return self.names[id(a)] if isinstance(a, Var) else self.const(a)

    def expression(self, eqn):
        op = eqn.op
        args = [self.arg(a) for a in eqn.args]
        if isinstance(op, NumpyCall):
            call_args, call_kwargs = eqn.params['tree'].build(args_as_code(args))
            parts = [_render(x, self) for x in call_args]
            parts += [f"{k}={_render(v, self)}" for k, v in call_kwargs.items()]
            fn = op.name if op.name.startswith('numpy.') else self.bind(op.func, 'f')
            fn = 'np.' + fn[len('numpy.'):] if fn.startswith('numpy.') else fn
            return f"{fn}({', '.join(parts)})"
        params = {k: self.const(v) for k, v in eqn.params.items()}
        spelling = self.spellings.get(getattr(op, 'qualname', None))
        if spelling is not None and not (self.safe and _may_raise(spelling)):
            if isinstance(spelling, str) and '[{index}]' in spelling and is_basic(eqn.params['index']):
                params['index'] = subscript(eqn.params['index'], self)     # x[1:]
            return lowering.spell(spelling, args, params)
        # (a user primitive's name may hold any characters: 'f.<locals>.g')
        fn = self.bind(op.plain, "p_" + re.sub(r'\W', '_', op.name) + "_")
        parts = args + [f"{k}={v}" for k, v in params.items()]
        return f"{fn}({', '.join(parts)})"

    def target(self, eqn):
        outs = [self.names[id(v)] for v in eqn.outs]
        if eqn.tree is None:
            return outs[0]
        return ", ".join(outs) + ("," if len(outs) == 1 else "")

    def emit_eqns(self, eqns, indent, keep=()):
        """Lines for ``eqns``.  A variable's name is reused once its last reader has
        run (the float it held is freed at once, which makes long straight-line code
        about twice as fast); variables in ``keep`` live to the end."""
        pad = " " * indent
        eqns = accumulate(eqns, keep)
        last = _last_uses(eqns, keep)
        for k, eqn in enumerate(eqns):
            if eqn.op is GUARD:
                test = self.arg(eqn.args[0])
                cond = f"not {test}" if eqn.params['expect'] else test
                site = eqn.params.get('site')
                self.lines.append(f"{pad}if {cond}: raise _GuardFailure({k}, {site!r})")
                self.release(eqn, k, last)
                continue
            custom = getattr(eqn.op, 'emit_lines', None)
            if custom is not None:
                custom(self, eqn, indent)
                self.release(eqn, k, last)
                continue
            expr = self.expression(eqn)
            self.release(eqn, k, last)
            for v in eqn.outs:
                self.names[id(v)] = self.fresh()
            if eqn.tree is not None and not _is_flat_sequence(eqn.tree):
                expr = f"{self.bind(_leaves, 'leaves')}({expr})"     # nested results
            self.lines.append(f"{pad}{self.target(eqn)} = {expr}")

    def release(self, eqn, k, last):
        # (in argument order, not a set's: a program's source is the same in every process)
        for a in dict.fromkeys(a for a in eqn.args if isinstance(a, Var)):
            if last.get(id(a)) == k:
                self.free.append(self.names[id(a)])

    def fresh(self):
        if self.free:
            return self.free.pop()
        self.count += 1
        return f"v{self.count}"


class _Code(str):
    """Source text standing for a leaf inside a rebuilt argument structure."""


def args_as_code(args):
    return [_Code(a) for a in args]


def _render(x, emitter):
    if isinstance(x, _Code):
        return str(x)
    if isinstance(x, tuple) and not hasattr(x, '_fields'):
        inner = ", ".join(_render(y, emitter) for y in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(_render(y, emitter) for y in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_render(v, emitter)}" for k, v in x.items()) + "}"
    return emitter.const(x)


def _last_uses(eqns, keep):
    """id(var) -> index of the last equation that reads it (never, for ``keep``)."""
    last = {}
    for k, eqn in enumerate(eqns):
        for a in eqn.args:
            if isinstance(a, Var):
                last[id(a)] = k
        for v in getattr(eqn.op, 'free_vars', lambda e: ())(eqn):
            last[id(v)] = k
    for v in keep:
        last[id(v)] = len(eqns)
    return last


def _leaves(x):
    return flatten(x)[0]


def _is_flat_sequence(tree):
    """A tuple/list/namedtuple of leaves: its outputs unpack with ``a, b = ...``."""
    return tree.children is not None and all(c is _LEAF for c in tree.children) and \
        tree.unflatten is not None and tree.aux is None


def _may_raise(spelling):
    """math's functions and 1/x raise where nestad's plain implementations give IEEE 754's
    inf or nan (operators raise only where eager Python code raises too)."""
    return not isinstance(spelling, str) or 'math.' in spelling or spelling.startswith('1.0 /')


def python_source(program, name="staged", safe=False, glb=None, backend='python'):
    """(source, globals) of a Python function computing ``program`` on its flat inputs,
    spelled with ``backend``'s lowering table (nestad.staging.lowering); ``safe`` spells
    every scalar primitive that could raise by its IEEE implementation.  ``glb``: the
    globals dict to bind names in (shared by two functions of one module)."""
    em = _Emitter(safe, backend)
    if glb is not None:
        glb.update((k, v) for k, v in em.globals.items() if k not in glb)
        em.globals = glb
    params = []
    for v, n in zip(program.inputs, program.names):
        ident = n if n.isidentifier() else f"x{len(params)}"
        em.names[id(v)] = ident
        params.append(ident)
    em.emit_eqns(program.eqns, 4, keep=[o for o in program.outputs if isinstance(o, Var)])
    outs = [em.arg(o) for o in program.outputs]
    # one leaf is returned as it is; any structure as the tuple of its leaves
    ret = outs[0] if program.out_tree.children is None else "(" + "".join(o + ", " for o in outs) + ")"
    body = em.lines or []
    src = "\n".join([f"def {name}({', '.join(params)}):"] + body + [f"    return {ret}"])
    return src, em.globals


def compile_python(program, name="staged", safe=False, backend='python'):
    src, glb = python_source(program, name, safe, backend=backend)
    code = compile(src, f"<nestad staged {name}>", "exec")
    exec(code, glb)
    return glb[name], src



def emit_while(em, eqn, indent):
    """A while_loop equation as a Python ``while``: the state in fresh variables, the
    condition's lines at the top of each iteration, then the body's."""
    p = eqn.params
    cond, body, n, nc = p['cond'], p['body'], p['n'], p['nc']
    pad = " " * indent
    args = [em.arg(a) for a in eqn.args]
    state = [em.fresh() for _ in range(n)]
    em.lines.append(f"{pad}{', '.join(state)}, = {', '.join(args[:n])},")
    em.lines.append(f"{pad}while True:")
    for sub, names in ((cond, state + args[n:n + nc]), (body, state + args[n + nc:])):
        for v, name in zip(sub.inputs, names):
            em.names[id(v)] = name
        keep = list(sub.inputs) + [o for o in sub.outputs if isinstance(o, Var)]
        em.emit_eqns(sub.eqns, indent + 4, keep=keep)
        if sub is cond:
            em.lines.append(f"{pad}    if not {em.arg(cond.outputs[0])}: break")
    # Reassign the leaves the body changes (a leaf it returns as it got it stays put).
    moved = [(s, em.arg(o)) for s, o, v in zip(state, body.outputs, body.inputs) if o is not v]
    if moved:
        em.lines.append(f"{pad}    {', '.join(s for s, _ in moved)}, = "
                        f"{', '.join(o for _, o in moved)},")
    for v, name in zip(eqn.outs, state):
        em.names[id(v)] = name
