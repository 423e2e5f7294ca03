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
import operator
import re

import numpy as np

from ..structures import _LEAF, flatten
from ..tracer import GUARD, RAISES, VARS, Var
from . import bytecode, lowering
from .accumulate import is_basic, rewrite as accumulate, subscript
from .bytecode import Unsupported
from .program import PROGRAM_HOOKS, GuardFailure, NumpyCall

_SIMPLE_LITERALS = (bool, int, str, type(None))
# A guard's line, by the value it expects (its test, the equation's index, its site).
_GUARD_LINES = {True: "if not {0}: raise _GuardFailure({1}, {2})",
                False: "if {0}: raise _GuardFailure({1}, {2})"}
_DEPTH = 8              # inlined expressions nest at most this deep
_INF = math.inf
_OP = operator.attrgetter('op')


class _Emitter:
    def __init__(self, safe=False, backend='python'):
        self.safe = safe        # spell nothing with a function that raises where IEEE answers
        self.backend = backend
        self.spellings, names = lowering.spellings(backend)
        self.globals = {'math': math, 'np': np, '_GuardFailure': GuardFailure, **names}
        self.names = {}         # id(var) -> its name or inlined expression, while to be read
        self.lines = []
        self.count = 0
        self.free = []          # names of variables no longer needed, to reuse
        self.inlined = {}       # id(var) -> precedence of its expression, written inline
        self.templates = {}     # op -> the template spelling it, or None
        self.quick = {}         # op -> emit_eqns' short way to spell it (_quick), or None
        self.piece = None       # lines per piece of a long function (None: one function)
        self.piece_chars = PIECE_CHARS      # (pieces) and characters
        self.alive = {}         # (pieces) top-level variable -> its name, while it is live
        self.cuts = []          # (pieces) (line where a piece starts, names live there)
        self.asm = None         # a bytecode.Assembler taking the lines instead of ``lines``
        self.codes = {}         # (asm) id(var) -> the code of its inlined expression

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
        names = self.names
        args = [names[id(a)] if a.__class__ in VARS else self.const(a) for a in eqn.args]
        template = self.templates.get(op, False)
        if template is False:
            template = self.templates[op] = self._template(op)
        inlined = self.inlined
        if inlined:                       # inlined arguments: parenthesized where needed
            needs = _shape(template)[1] if template.__class__ is str else _ANYWHERE
            for j, a in enumerate(eqn.args):
                if a.__class__ in VARS:
                    p = inlined.pop(id(a), None)    # (read once: by this expression)
                    if p is not None:
                        del names[id(a)]
                        if p < needs[j]:
                            args[j] = f"({args[j]})"
        if template is not None:
            if not eqn.params and template.__class__ is str:
                return template.format(*args)
            if template.__class__ is str and '[{index}]' in template:
                index = eqn.params['index']
                if is_basic(index):
                    params = dict(eqn.params, index=subscript(index, self))   # x[1:]
                    return lowering.spell(template, args, params)
                gather = gathered_axis(index)
                take = self.spellings.get('numpy.take')
                if gather is not None and take is not None:     # x.take(i, axis=1)
                    return lowering.spell(take, args, {'indices': self.const(gather[1]),
                                                       'axis': gather[0]})
            params = {k: self.const(v) for k, v in eqn.params.items()}
            return lowering.spell(template, args, params)
        if isinstance(op, NumpyCall):
            call_args, call_kwargs = eqn.params['tree'].build(args_as_code(args))
            parts = [_render(x, self) for x in call_args]
            parts += [f"{k}={_render(v, self)}" for k, v in call_kwargs.items()]
            fn = op.name if op.name.startswith('numpy.') else self.bind(op.func, 'f')
            fn = 'np.' + fn[len('numpy.'):] if fn.startswith('numpy.') else fn
            return f"{fn}({', '.join(parts)})"
        params = {k: self.const(v) for k, v in eqn.params.items()}
        parts = args + [f"{k}={v}" for k, v in params.items()]
        return f"{self.plain_name(op)}({', '.join(parts)})"

    def plain_name(self, op):
        """The global name of ``op``'s plain implementation."""
        # (a user primitive's name may hold any characters: 'f.<locals>.g')
        return self.bind(op.plain, "p_" + re.sub(r'\W', '_', op.name) + "_")

    def _template(self, op):
        """The spelling of ``op`` in this backend's lowering table (a template string or
        a function of the code of its arguments and parameters), or None (a numpy call,
        or a call of its plain implementation)."""
        if isinstance(op, NumpyCall):
            return None
        spelling = self.spellings.get(getattr(op, 'qualname', None))
        return spelling if spelling is not None and not (self.safe and _may_raise(spelling)) \
            else None

    def target(self, eqn):
        outs = [self.names[id(v)] for v in eqn.outs]
        if eqn.tree is None:
            return outs[0]
        return ", ".join(outs) + ("," if len(outs) == 1 else "")

    def emit_eqns(self, eqns, indent, keep=()):
        """Lines for ``eqns``.  A scalar value read once, by the expression of a later
        equation, is written inside that expression (``_plan``): fewer, fuller lines,
        which ``compile()`` handles in about half the time per operation.  A variable's
        name is reused once its last reader has run (the float it held is freed at once,
        which makes long straight-line code about twice as fast); variables in ``keep``
        live to the end."""
        pad = " " * indent
        ops = set(map(_OP, eqns))
        rewritten = accumulate(eqns, keep, ops)
        if rewritten is not eqns:
            eqns, ops = rewritten, set(map(_OP, rewritten))
        inline, release = self._plan(eqns, keep, ops)
        names, lines, expression, fresh = self.names, self.lines, self.expression, self.fresh
        inlined, const, quick, free = self.inlined, self.const, self.quick, self.free
        asm = self.asm
        if asm is not None:
            self.assemblable(ops)
            codes, load, positive, apply = self.codes, asm.load, asm.positive, asm.apply
        pieces = self.piece is not None and indent == 4
        alive, start = self.alive, len(lines)
        counted, chars = start, 0   # (pieces: lines measured, and their characters)
        for k, eqn in enumerate(eqns):
            op = eqn.op
            q = quick.get(op, False)
            if q is False:
                q = quick[op] = self._quick(op)
            if asm is not None:
                # The line as bytecode (no source): what follows, with each value's code
                # in place of its spelling.
                if op is GUARD:
                    test = eqn.args[0]
                    asm.statement(_GUARD_LINES[bool(eqn.params['expect'])], [
                        load(names[id(test)]) if test.__class__ in VARS else
                        self.constant_code(test), asm.constant(k),
                        asm.constant(eqn.params.get('site'))])
                    self.release(release[k])
                    continue
                codes_ = []
                for a in eqn.args:
                    if a.__class__ in VARS:
                        code = codes.pop(id(a), None)       # (inlined)
                        codes_.append(load(names[id(a)]) if code is None else code)
                    elif a.__class__ is float and 0.0 < a < _INF:
                        codes_.append(positive(a))
                    else:
                        codes_.append(self.constant_code(a))
                # (after the arguments, which may bind globals first, as expression does)
                spelling = self.templates[op] if q is not None and not eqn.params and \
                    eqn.tree is None else self.call_spelling(eqn)
                value = apply(spelling, codes_)
                out = id(eqn.outs[0])
                if inline[k]:
                    codes[out] = value
                    continue
                gone = release[k]
                if gone is not None:
                    for v in gone:
                        free.append(names.pop(id(v)))
                target = names[out] = fresh()
                asm.store(target, value)
                continue
            if q is not None and not eqn.params and eqn.tree is None:
                # The common equation (an operator or math call on scalars): expression's,
                # release's and fresh's work, written out here since it runs once per
                # equation.
                template, level, needs = q
                args = []
                j = 0
                for a in eqn.args:
                    if a.__class__ in VARS:
                        i = id(a)
                        if i in inlined:        # (its one reader: the entries go)
                            code = names.pop(i)
                            if inlined.pop(i) < needs[j]:
                                code = f"({code})"
                        else:
                            code = names[i]
                    elif a.__class__ is float and 0.0 < a < _INF:
                        code = repr(a)          # (const's answer for most constants)
                    else:
                        code = const(a)
                    args.append(code)
                    j += 1
                try:
                    expr = template(*args)
                except TypeError:           # (more arguments than an f-string's four)
                    expr = self.templates[op].format(*args)
                var = eqn.outs[0]
                out = id(var)
                if inline[k]:
                    names[out] = expr
                    inlined[out] = level
                    continue
                if pieces:
                    if len(lines) > counted:
                        chars += sum(map(len, lines[counted:]))
                        counted = len(lines)
                    if counted - start >= self.piece or chars >= self.piece_chars:
                        start, chars = counted, 0
                        self.cuts.append((start, list(dict.fromkeys(alive.values()))))
                gone = release[k]
                if gone is not None:
                    for v in gone:
                        free.append(names.pop(id(v)))
                        if pieces:
                            alive.pop(v, None)
                if free:
                    target = free.pop()
                else:
                    self.count += 1
                    target = f"v{self.count}"
                names[out] = target
                line = f"{pad}{target} = {expr}"
                lines.append(line)
                if pieces:
                    alive[var] = target
                    chars += len(line)      # (counted: the next test need not slice lines)
                    counted += 1
                continue
            if inline[k]:
                names[id(eqn.outs[0])] = expression(eqn)
                inlined[id(eqn.outs[0])] = _shape(self.templates[op])[0]
                continue
            if pieces:                      # a new piece (it gets the live variables)
                if len(lines) > counted:    # after PIECE_LINES lines or PIECE_CHARS
                    chars += sum(map(len, lines[counted:]))
                    counted = len(lines)
                if counted - start >= self.piece or chars >= self.piece_chars:
                    start, chars = counted, 0
                    self.cuts.append((start, list(dict.fromkeys(alive.values()))))
            if op is GUARD:
                test = self.arg(eqn.args[0])
                cond = f"not {test}" if eqn.params['expect'] else test
                site = eqn.params.get('site')
                lines.append(f"{pad}if {cond}: raise _GuardFailure({k}, {site!r})")
                self.release(release[k], pieces)
                continue
            custom = getattr(op, 'emit_lines', None)
            if custom is not None:
                custom(self, eqn, indent)
                self.release(release[k], pieces)
                if pieces:
                    for v in eqn.outs:
                        if id(v) in names:
                            alive[v] = names[id(v)]
                continue
            expr = expression(eqn)
            self.release(release[k], pieces)
            if eqn.tree is None:
                out = eqn.outs[0]
                target = names[id(out)] = fresh()
                if pieces:
                    alive[out] = target
            else:
                for v in eqn.outs:
                    names[id(v)] = fresh()
                    if pieces:
                        alive[v] = names[id(v)]
                target = self.target(eqn)
                if not _is_flat_sequence(eqn.tree):
                    expr = f"{self.bind(_leaves, 'leaves')}({expr})"     # nested results
            lines.append(f"{pad}{target} = {expr}")

    def assemblable(self, ops):
        """Raise Unsupported unless bytecode spells every op of ``ops`` (asm): by its
        template, or as a call of its plain implementation."""
        for op in ops:
            q = self.quick.get(op, False)
            if q is False:
                q = self.quick[op] = self._quick(op)
            if q is not None:
                if bytecode.template(self.templates[op]) is None:
                    raise Unsupported(f'{op}')
            elif op is GUARD:
                if bytecode.template(_GUARD_LINES[True], True) is None:
                    raise Unsupported('a guard')
            elif not self._called_plainly(op):
                raise Unsupported(f'{op}')

    def _called_plainly(self, op):
        """Whether ``expression`` spells ``op`` as a call of its plain implementation."""
        return self._template(op) is None and op is not GUARD and \
            not isinstance(op, NumpyCall) and getattr(op, 'emit_lines', None) is None and \
            getattr(op, 'plain', None) is not None

    def call_spelling(self, eqn):
        """The template of ``eqn`` as ``expression`` spells it, a call of its op's plain
        implementation with its parameters as keywords (asm; Unsupported otherwise)."""
        op = eqn.op
        if eqn.tree is not None or not self._called_plainly(op):
            raise Unsupported(f'the equation of {op}')
        parts = [f'{{{j}}}' for j in range(len(eqn.args))] + \
            [f"{k}={self.const(v)}" for k, v in eqn.params.items()]
        return f"{self.plain_name(op)}({', '.join(parts)})"

    def constant_code(self, c):
        """The code loading the constant ``c`` (asm)."""
        spelled = self.const(c)
        if spelled in self.globals:     # (bound as a global: inf, nan, a numpy scalar)
            return self.asm.global_(spelled)
        return self.asm.constant(c.item() if isinstance(c, np.bool_) else c)

    def _quick(self, op):
        """(spell, its level, the levels its arguments need) for an op spelled by a
        template string of its arguments alone (no parameters, no lines of its own), where
        ``spell(*codes)`` is the template's ``format``; else None: ``expression`` spells
        it."""
        if op is GUARD or getattr(op, 'emit_lines', None) is not None:
            return None
        template = self.templates.get(op, False)
        if template is False:
            template = self.templates[op] = self._template(op)
        if template.__class__ is not str or '{' in template.replace('{0}', '').replace(
                '{1}', '').replace('{2}', '').replace('{3}', ''):
            return None
        level, needs = _shape(template)
        return _formatter(template), level, needs

    def _plan(self, eqns, keep, ops=None):
        """(inline, release): for each equation, whether its value is written inside its
        one reader's expression rather than on a line of its own; and, for each line,
        the variables whose last reader it is (or None).

        Inlined: a scalar result of an expression spelling (an operator or a ``math``
        function: not a call of a plain implementation, nor of ``RAISES``, whose errors
        must come in program order) read exactly once, by an equation spelled by
        ``expression``, nested at most ``_DEPTH`` deep (the parser's limit on nesting).
        Moving such a value later changes no bits and raises nothing new: an exception of
        ``math`` only sends the call to the IEEE spelling, which inlines nothing that
        raises.  A variable read by an inlined expression lives until the line that
        computes that expression."""
        n = len(eqns)
        # (It runs once per equation: ops' properties are looked up once per op, in
        # ``frees``, ``spelled`` and ``takes``.)
        if ops is None:              # (the set of the equations' ops)
            ops = set(map(_OP, eqns))
        frees = {}                   # op -> its free_vars, for the ops that have one
        for op in ops:
            free = getattr(op, 'free_vars', None)
            if free is not None:
                frees[op] = free
        spelled = {op: self._inlinable(op) for op in ops}   # may its value be inlined
        takes = {op: op is not GUARD and getattr(op, 'emit_lines', None) is None
                 for op in ops}      # may an expression be written inside its own
        # Each equation's one reader (-1: none, or more than one), from the last equation
        # back: a variable leaves ``reader`` where it is defined, so the dict holds only
        # the variables live there (a few hundred, not the program's size: its lookups
        # stay in the cache, which made this pass slower per equation in longer programs).
        reader = dict.fromkeys(keep, -1)    # variable -> its one reader so far, or -1
        only = [-1] * n
        pop = reader.pop
        for k in range(n - 1, -1, -1):
            eqn = eqns[k]
            if frees:
                free = frees.get(eqn.op)
                if free is not None:
                    for v in free(eqn):
                        reader[v] = -1          # (read by a loop: a line of its own)
            for a in eqn.args:
                if a.__class__ in VARS:
                    reader[a] = k if a not in reader else -1
            outs = eqn.outs
            if len(outs) == 1:
                only[k] = pop(outs[0], -1)
            else:
                for v in outs:
                    pop(v, None)
        inline = [False] * n
        into = [0] * n               # for an inlined equation, the one it is written in
        deep = [0] * n               # how deep the expressions written inside each one nest
        for k, eqn in enumerate(eqns):
            if not spelled[eqn.op] or eqn.tree is not None:
                continue
            out = eqn.outs[0]
            r = only[k]
            if r < 0 or not out.scalar:
                continue
            d = deep[k]
            if d >= _DEPTH or not takes[eqns[r].op]:
                continue             # (too deep: this one is a line, its inlined arguments stay)
            inline[k] = True
            into[k] = r
            if deep[r] <= d:
                deep[r] = d + 1
        last = {}
        for v in keep:
            last[v] = n
        at = list(range(n))          # the line on which each equation's value is computed
        for k in range(n - 1, -1, -1):
            eqn = eqns[k]
            if inline[k]:
                line = at[k] = at[into[k]]
                del last[eqn.outs[0]]       # (read inline by its one reader: no name to free)
            else:
                line = k
                if frees:
                    free = frees.get(eqn.op)
                    if free is not None:
                        for v in free(eqn):
                            if last.get(v, -1) < k:
                                last[v] = k
            for a in eqn.args:
                if a.__class__ in VARS and last.get(a, -1) < line:
                    last[a] = line
        release = [None] * n
        for v, k in last.items():    # (in a fixed order: the source is the same in every process)
            if k < n:
                gone = release[k]
                if gone is None:
                    release[k] = [v]
                else:
                    gone.append(v)
        return inline, release

    def _inlinable(self, op):
        if op is GUARD or isinstance(op, NumpyCall) or op in RAISES or \
                getattr(op, 'emit_lines', None) is not None:
            return False
        emit = self.templates.get(op, False)
        if emit is False:
            emit = self.templates[op] = self._template(op)
        return emit.__class__ is str and _shape(emit)[0] > 0 and \
            all(emit.count('{%d}' % j) <= 1 for j in range(4))

    def release(self, variables, pieces=False):
        if variables:
            names, free = self.names, self.free
            for v in variables:
                free.append(names.pop(id(v)))
                if pieces:
                    self.alive.pop(v, None)

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


# Python's precedence levels of the operators templates use (higher binds tighter);
# an inlined expression is parenthesized where its level is below what its place needs.
_BINARY = {'|': 5, '^': 6, '&': 7, '+': 9, '-': 9, '*': 10, '/': 10, '//': 10, '%': 10,
           '@': 10}
_COMPARE = {'<', '<=', '>', '>=', '==', '!='}
_ATOM = 14
_ANYWHERE = (1,) * 8             # call arguments and list items: any expression
_SHAPES = {}


def _shape(emit):
    """(level of the template's own expression, 0 if it is not to be inlined; for each
    argument position, the lowest level an expression there may have unparenthesized).
    Binary operators are left-associative, so ``a - b + c`` needs no parentheses on the
    left (Python computes it as ``(a - b) + c``), but ``a - (b + c)`` keeps them;
    comparisons chain, so both sides of one are parenthesized unless tighter."""
    shape = _SHAPES.get(emit)
    if shape is None:
        shape = _SHAPES[emit] = _parse_shape(emit)
    return shape


# (compiled when imported: compiling them on first use was a fixed cost of the first
# staged function, as long as an eager gradient of 1,000 operations)
_BINARY_TEMPLATE = re.compile(r'(\{\d\}|[\w.]+) (\S+) (\{\d\}|[\w.]+)')
_NEGATION = re.compile(r'-\{0\}')
_CALL = re.compile(r'[A-Za-z_][\w.]*\((.*)\)')
_CALL_ARGUMENT = re.compile(r'\{\d\}|\w+=\{\w+\}|[\w.]+')


def _parse_shape(emit):
    m = _BINARY_TEMPLATE.fullmatch(emit)
    if m:
        left, o, right = m.groups()
        if o in _BINARY or o in _COMPARE:
            level = _BINARY.get(o, 4)
            needs = [_ATOM] * 8
            for side, need in ((left, level if o in _BINARY else 5), (right, level + 1)):
                if side.startswith('{'):
                    needs[int(side[1])] = need
            return level, tuple(needs)
        return 0, (_ATOM,) * 8
    if _NEGATION.fullmatch(emit):
        return 11, (11,) + (_ATOM,) * 7
    m = _CALL.fullmatch(emit)
    if m and _balanced(m.group(1)) and all(
            _CALL_ARGUMENT.fullmatch(part.strip())
            for part in m.group(1).split(',')):
        return _ATOM, _ANYWHERE          # a call whose arguments are the values
    return 0, (_ATOM,) * 8


def _balanced(text):
    depth = 0
    for ch in text:
        depth += (ch in '([{') - (ch in ')]}')
        if depth < 0:
            return False
    return depth == 0


def _leaves(x):
    return flatten(x)[0]


_FORMATTERS = {}


def _formatter(template):
    """``template.format`` for a template whose fields are ``{0}``..``{3}``, as a function
    writing an f-string: a third of ``format``'s time, which parses the template at every
    call (code generation spells most equations with one)."""
    spell = _FORMATTERS.get(template)
    if spell is None:
        text = template.replace('{', '{_')
        if '}' in template.replace('{0}', '').replace('{1}', '').replace('{2}', '').replace(
                '{3}', ''):
            spell = template.format          # (a brace of its own: format it as it is)
        else:
            spell = eval(f"lambda _0=None, _1=None, _2=None, _3=None: f{text!r}")
        _FORMATTERS[template] = spell
    return spell


def gathered_axis(index):
    """(axis, indices) where ``x[index]`` is ``x.take(indices, axis=axis)``: one integer
    array (not a boolean mask) among full slices ``:``; else None."""
    parts = index if isinstance(index, tuple) else (index,)
    arrays = [k for k, p in enumerate(parts) if isinstance(p, np.ndarray)]
    if len(arrays) != 1:
        return None
    axis = arrays[0]
    indices = parts[axis]
    if indices.dtype.kind not in 'iu' or indices.ndim == 0 or not all(
            p == _FULL for k, p in enumerate(parts) if k != axis):
        return None
    return axis, indices


_FULL = slice(None)


def _is_flat_sequence(tree):
    """A tuple/list/namedtuple of leaves: its outputs unpack with ``a, b = ...``."""
    return tree.children is not None and all(c is _LEAF for c in tree.children) and \
        tree.unflatten is not None and tree.aux is None


def _may_raise(spelling):
    """math's functions and 1/x raise where nestad's plain implementations give IEEE 754's
    inf or nan (operators raise only where eager Python code raises too); a spelling
    function may spell anything."""
    return not isinstance(spelling, str) or 'math.' in spelling or spelling.startswith('1.0 /')


# A function longer than this is compiled in pieces (see python_sources): compile()
# needs about 100 bytes per character of source (its tokens and syntax tree), so a
# piece is also cut after PIECE_CHARS characters (about 2 MB to compile it).
PIECE_LINES = 1000
PIECE_CHARS = 20_000
# ... or, in a program of more than 8,000 equations, two and a half characters per
# equation, up to PIECE_CHARS_MAX: each cut costs compile() the names of the values
# live there twice (a piece's return, the next one's parameters: several hundred in a
# gradient of many inputs, about 3 us each), a third of the time of 20,000-character
# pieces; and compiling a piece of 2.5n characters for n equations takes about 250
# bytes per equation, which keeps the second call's peak under the first's (tracing's:
# measured at 1e4, 1.2e4 and 1.5e4 equations; three characters did not at 1.2e4).
PIECE_CHARS_MAX = 200_000


def piece_limits(lines, equations):
    """(lines, characters) at which a piece of a function of ``equations`` equations is
    cut, given ``lines`` (PIECE_LINES) for a program of up to PIECE_CHARS equations."""
    chars = max(PIECE_CHARS, min(PIECE_CHARS_MAX, 5 * equations // 2))
    return lines * chars // PIECE_CHARS, chars


def python_source(program, name="staged", safe=False, glb=None, backend='python'):
    """(source, globals) of a Python function computing ``program`` on its flat inputs,
    spelled with ``backend``'s lowering table (nestad.staging.lowering); ``safe`` spells
    every scalar primitive that could raise by its IEEE implementation.  ``glb``: the
    globals dict to bind names in (shared by two functions of one module)."""
    sources, glb = python_sources(program, name, safe, glb, backend=backend)
    return "\n\n".join(sources), glb


def python_sources(program, name="staged", safe=False, glb=None, piece=None,
                   backend='python'):
    """(sources, globals): as ``python_source``, the function's source as a list of
    definitions, the function ``name`` last.  With ``piece`` (lines), a long function is
    cut at top-level lines into functions ``name_0``, ``name_1``... of about that many
    lines or PIECE_CHARS characters (more in a longer program: ``piece_limits``), each
    taking the variables live where it starts and returning those live
    where the next starts; ``name`` calls them in turn.  So each piece can be compiled
    by itself: ``compile()``'s memory (its syntax tree, several times the source) stays
    that of one piece, not of the whole function, and its time linear."""
    em = _Emitter(safe, backend)
    if piece is not None:
        em.piece, em.piece_chars = piece_limits(piece, len(program.eqns))
    if glb is not None:
        glb.update((k, v) for k, v in em.globals.items() if k not in glb)
        em.globals = glb
    params = _parameters(em, program)
    em.emit_eqns(program.eqns, 4, keep=[o for o in program.outputs if isinstance(o, Var)])
    outs = [em.arg(o) for o in program.outputs]
    # one leaf is returned as it is; any structure as the tuple of its leaves
    ret = outs[0] if program.out_tree.children is None else "(" + "".join(o + ", " for o in outs) + ")"
    body = em.lines or []
    if not em.cuts:
        return ["\n".join([f"def {name}({', '.join(params)}):"] + body + [f"    return {ret}"])], \
            em.globals
    sources, calls = [], []
    bounds = [(0, params)] + em.cuts + [(len(body), None)]
    for j in range(len(bounds) - 1):
        (begin, takes), (end, gives) = bounds[j], bounds[j + 1]
        fn = f"{name}_{j}"
        back = f"    return {ret}" if gives is None else \
            f"    return ({''.join(g + ', ' for g in gives)})"
        sources.append("\n".join([f"def {fn}({', '.join(takes)}):"] + body[begin:end] + [back]))
        # (each piece returns the variables the next one takes, in its order: the calls
        # pass them on as a tuple, and the caller stays a few short lines to compile)
        call = f"{fn}({', '.join(takes)})" if j == 0 else f"{fn}(*_s)"
        calls.append(f"    return {call}" if gives is None else f"    _s = {call}")
    sources.append("\n".join([f"def {name}({', '.join(params)}):"] + calls))
    return sources, em.globals


def _parameters(em, program):
    """The function's parameters: the program's input names, where they are names."""
    params = []
    for v, n in zip(program.inputs, program.names):
        ident = n if n.isidentifier() else f"x{len(params)}"
        em.names[id(v)] = ident
        em.alive[v] = ident
        params.append(ident)
    return params


def assemble_python(program, name="staged", safe=False, backend='python'):
    """The function ``python_source`` spells, assembled as bytecode without its source
    (nestad.staging.bytecode: a few times faster than ``compile()`` and a fraction of its
    memory), or None where bytecode does not spell one of its lines (loops, calls with
    parameters such as a reduction's axis, several results...: they are compiled)."""
    if not bytecode.AVAILABLE:
        return None
    em = _Emitter(safe, backend)
    params = _parameters(em, program)
    em.asm = asm = bytecode.Assembler(params)
    try:
        em.emit_eqns(program.eqns, 4, keep=[o for o in program.outputs if isinstance(o, Var)])
        returns = [asm.load(em.names[id(o)]) if isinstance(o, Var) else em.constant_code(o)
                   for o in program.outputs]
        single = program.out_tree.children is None
        if not single and not any(isinstance(o, Var) or em.const(o) in em.globals
                                  for o in program.outputs):
            # (a tuple of literals is one constant, as compile() folds it)
            values = tuple(c.item() if isinstance(c, np.bool_) else c for c in program.outputs)
            returns, single = [asm.constant(values)], True
    except Unsupported:
        return None
    return asm.function(name, returns, em.globals, f"<nestad staged {name}>", len(params),
                        single)


def compile_python(program, name="staged", safe=False, piece=None, backend='python'):
    """(the compiled function, its source, or None where it was assembled as bytecode:
    ``python_source`` spells it); ``piece``: compile a long function in pieces of about
    that many lines (``python_sources``)."""
    fn = assemble_python(program, name, safe, backend)
    if fn is not None:
        return fn, None
    sources, glb = python_sources(program, name, safe, piece=piece, backend=backend)
    for src in sources:
        exec(compile(src, f"<nestad staged {name}>", "exec"), glb)
    return glb[name], "\n\n".join(sources)


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


PROGRAM_HOOKS['python_source'] = python_source
