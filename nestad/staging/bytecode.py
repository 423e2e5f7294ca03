"""Straight-line functions assembled as CPython 3.11 bytecode, without ``compile()``.

``compile()`` of generated source needs about 2 KB and 2.5 us per line: most of it the
parser's (tokens, its memo, the syntax tree), which a program of scalar equations
rebuilds for every line although each line is one of a few templates.  Here each
template (``'math.cos({0})'``, ``'{0} * {1} + {2}'``) is compiled once, as a lambda of its
arguments, and its instructions are kept with a slot where each argument is loaded;
a line is then the template's instructions with its arguments' own (a local's load, a
constant, an inlined expression) put in the slots, and a store.  A conditional
expression's forward jumps are sized to what its slots received; a guard's line is a
statement template (``if not {0}: raise ...``).  The bytes are those ``compile()``
gives for the same source (``tests/test_bytecode.py`` compares them), built in a fraction
of the time and memory.

Only CPython 3.11's instruction set is spelled (its caches, ``PRECALL``, its location
table), and ``check`` compares it with ``compile()``'s at import: on another version, or
where a template holds an instruction not handled here (a loop, a nested function),
``codegen`` compiles the source as before.
"""
import dis
import math
import opcode
import re
import sys
import types

AVAILABLE = sys.version_info[:2] == (3, 11) and sys.implementation.name == 'cpython'

_OP = dis.opmap
_CACHES = getattr(opcode, '_inline_cache_entries', None)
# The instructions a template may hold: loads, calls, operators, building a tuple.
_PLAIN = frozenset(_OP[n] for n in (
    'PRECALL', 'CALL', 'BINARY_OP', 'UNARY_NEGATIVE', 'UNARY_NOT', 'UNARY_INVERT',
    'UNARY_POSITIVE', 'COMPARE_OP', 'IS_OP', 'CONTAINS_OP', 'BINARY_SUBSCR', 'BUILD_TUPLE',
    'BUILD_LIST', 'PUSH_NULL', 'RAISE_VARARGS')) if AVAILABLE else frozenset()
_NAMED = frozenset(_OP[n] for n in ('LOAD_GLOBAL', 'LOAD_METHOD', 'LOAD_ATTR')) \
    if AVAILABLE else frozenset()
_CONSTANT = frozenset(_OP[n] for n in ('LOAD_CONST', 'KW_NAMES')) if AVAILABLE else frozenset()
# Forward jumps (a conditional expression's): their targets move with the code put in
# the slots, so a template holding one is put together by ``_Jumps``.
_FORWARD = frozenset(_OP[n] for n in (
    'JUMP_FORWARD', 'POP_JUMP_FORWARD_IF_FALSE', 'POP_JUMP_FORWARD_IF_TRUE',
    'POP_JUMP_FORWARD_IF_NONE', 'POP_JUMP_FORWARD_IF_NOT_NONE', 'JUMP_IF_FALSE_OR_POP',
    'JUMP_IF_TRUE_OR_POP')) if AVAILABLE else frozenset()
_NOWHERE_NEXT = frozenset(_OP[n] for n in ('JUMP_FORWARD', 'RAISE_VARARGS')) \
    if AVAILABLE else frozenset()
_LITERALS = (bool, int, float, str, type(None))
_STACK_USE = 30     # compile() builds a longer tuple by appending to a list


class Unsupported(Exception):
    """What is to be assembled holds something this module does not spell."""


def _instruction(op, arg):
    """One instruction's bytes (with EXTENDED_ARG prefixes for a large argument, and its
    inline caches zeroed, as ``compile()`` leaves them)."""
    out = []
    for shift in (24, 16, 8):
        if arg >> shift:
            out += (_OP['EXTENDED_ARG'], (arg >> shift) & 0xFF)
    out += (op, arg & 0xFF)
    return bytes(out) + b'\0\0' * _CACHES[op]


class _Template:
    """A template's instructions: (op, argument, what the argument means), in order,
    where the meaning is ('slot', j) for the load of argument j, ('name', name) for an
    instruction naming a global or attribute, ('const', value) for a constant,
    ('jump', step) for a forward jump, or None; and the stack depth before each and at
    most.  A template is an expression, or a statement (``statement``: a line that
    stores nothing, such as a guard's ``if``)."""
    __slots__ = ('steps', 'before', 'top', 'jumps')

    def __init__(self, spelling, arity, statement=False):
        params = ', '.join(f'_{j}' for j in range(arity))
        text = spelling.format(*(f"_{j}" for j in range(arity)))
        code = compile(f'def _({params}):\n    {text}' if statement else
                       f'lambda {params}: {text}', '<template>', 'exec' if statement else
                       'eval').co_consts[0]
        raw = code.co_code
        steps, at, arg, end = [], {}, 0, None   # (at: code unit -> its step)
        for i in range(0, len(raw), 2):
            op, arg = raw[i], raw[i + 1] | arg << 8
            if op == _OP['EXTENDED_ARG']:
                continue
            if op in (_OP['RESUME'], _OP['CACHE']):
                arg = 0
                continue
            if end is not None:
                raise Unsupported(f'code after the return in {spelling!r}')
            at[i >> 1] = len(steps)
            if op == _OP['RETURN_VALUE']:
                end = len(steps)
            elif op == _OP['LOAD_FAST'] and arg < arity:
                meaning = ('slot', arg)
            elif op in _NAMED:
                meaning = ('name', code.co_names[arg >> 1 if op == _OP['LOAD_GLOBAL'] else arg])
            elif op in _CONSTANT:
                meaning = ('const', code.co_consts[arg])
            elif op in _PLAIN:
                meaning = None
            elif op in _FORWARD:            # (to the unit after it and its caches, + arg)
                meaning = ('jump', (i >> 1) + 1 + _CACHES[op] + arg)
            else:
                raise Unsupported(f'{dis.opname[op]} in {spelling!r}')
            if end is None:
                steps.append((op, arg, meaning))
            arg = 0
        if statement:               # (its function's implicit ``return None``)
            if not steps or steps[-1][:2] != (_OP['LOAD_CONST'], 0) or \
                    code.co_consts[0] is not None:
                raise Unsupported(f'the end of {spelling!r}')
            steps.pop()
        # Jump targets as steps, and the stack depth before each step: after a jump that
        # always jumps, or a raise, the depth is the one the jumps to the next step left.
        steps = [(op, arg, ('jump', at[m[1]]) if m and m[0] == 'jump' else m)
                 for op, arg, m in steps]
        before, depth, top, landing = [], 0, 0, {}
        for k, (op, arg, meaning) in enumerate(steps):
            if k in landing and (k == 0 or steps[k - 1][0] in _NOWHERE_NEXT):
                depth = landing[k]
            before.append(depth)
            if meaning and meaning[0] == 'jump':
                after = depth + dis.stack_effect(op, arg, jump=True)
                if landing.setdefault(meaning[1], after) != after:
                    raise Unsupported(f'stack depths at a jump in {spelling!r}')
            depth += dis.stack_effect(op, arg, jump=False) if op >= dis.HAVE_ARGUMENT else \
                dis.stack_effect(op)
            top = max(top, depth)
        self.steps, self.before, self.top = steps, before, top
        self.jumps = any(m and m[0] == 'jump' for _, _, m in steps)


_TEMPLATES = {}     # (spelling, statement) -> _Template, or None where Unsupported
_TEMPLATES_MAX = 4096   # (a plain call's spelling holds its global's name and parameters:
#                         a process staging many programs would make ever more of them)
_FIELD = re.compile(r'\{(\d+)\}')


def template(spelling, statement=False):
    """The instructions of a template string of its arguments ``{0}``, ``{1}``..., or
    None where this module does not spell them."""
    key = (spelling, statement)
    t = _TEMPLATES.get(key, False)
    if t is False:
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        try:
            t = _Template(spelling, 1 + max(map(int, _FIELD.findall(spelling)), default=-1),
                          statement)
        except (Unsupported, SyntaxError, IndexError, KeyError, ValueError):
            t = None
        _TEMPLATES[key] = t
    return t


class Assembler:
    """The body of one function, line by line: ``apply`` a template to its arguments'
    code (``load``, ``constant``, or an earlier ``apply``), ``store`` a line's value.
    A value's code is (bytes, the stack depth it needs)."""

    def __init__(self, params):
        self.varnames = list(params)
        self.local = {p: j for j, p in enumerate(params)}
        self.loads = {}             # local name -> its load's code
        self.stores = {}            # local name -> its store's bytes
        self.consts, self.const_index = [None], {(type(None), 'None'): 0}
        self.const_code = {}        # const_index's key -> the constant's load's code
        self.floats = {}            # a positive float -> its load's code
        self.names, self.name_index = [], {}
        self.linked = {}            # spelling (a statement's: (it, True)) -> its function of
        #                             the arguments' code
        self.code = [_instruction(_OP['RESUME'], 0)]
        self.lines = bytearray(b'\xe8\x00')     # RESUME on the def's line (code 13, +0)
        self.depth = 0

    def _local(self, name):
        return _entry(self.local, self.varnames, name, name)

    def load(self, name):
        """The code loading the local ``name``."""
        got = self.loads.get(name)
        if got is None:
            got = self.loads[name] = _load(_OP['LOAD_FAST'], self._local(name))
        return got

    def positive(self, value):
        """The code loading a positive float (so no -0.0, nor an int, among the keys)."""
        got = self.floats.get(value)
        if got is None:
            j = len(self.consts)
            self.consts.append(value)
            got = self.floats[value] = _load(_OP['LOAD_CONST'], j)
        return got

    def constant(self, value):
        """The code loading the constant ``value`` (a literal's value)."""
        cls = value.__class__
        if cls is tuple:
            if not all(v.__class__ in _LITERALS for v in value):
                raise Unsupported(f'constant {value!r:.40}')
        elif cls not in _LITERALS:
            raise Unsupported(f'constant {value!r:.40}')
        if cls is float and 0.0 < value < math.inf:
            return self.positive(value)
        key = (cls, repr(value) if cls is float or cls is tuple else value)
        got = self.const_code.get(key)
        if got is None:
            got = self.const_code[key] = _load(_OP['LOAD_CONST'], self._const_index(key, value))
        return got

    def _const_index(self, key, value):
        return _entry(self.const_index, self.consts, key, value)

    def global_(self, name):
        """The code loading the global ``name``."""
        return _instruction(_OP['LOAD_GLOBAL'], self._name(name) << 1), 1

    def _name(self, name):
        return _entry(self.name_index, self.names, name, name)

    def _link(self, spelling, statement=False):
        """The function from the arguments' code to ``spelling``'s: its instructions,
        with this function's indices of names and constants, cut at the slots."""
        t = template(spelling, statement)
        if t is None:
            raise Unsupported(f'template {spelling!r}')
        key = (spelling, True) if statement else spelling
        items = []          # per step: its bytes, or ('slot', j, depth), or ('jump', op, step)
        for (op, arg, meaning), depth in zip(t.steps, t.before):
            if meaning is not None:
                kind, what = meaning
                if kind == 'slot':
                    items.append(('slot', what, depth))
                    continue
                if kind == 'jump':
                    items.append(('jump', op, what))
                    continue
                if kind == 'name':
                    j = self._name(what)
                    arg = j << 1 | arg & 1 if op == _OP['LOAD_GLOBAL'] else j
                elif what.__class__ is tuple:   # (KW_NAMES' names, a tuple literal)
                    arg = self._const_index((tuple, repr(what)), what)
                else:
                    items.append(self.constant(what)[0])
                    continue
            items.append(_instruction(op, arg))
        if t.jumps:
            fn = self.linked[key] = _Jumps(items, t.top)
            return fn
        segments, slots, before, part = [], [], [], []
        for item in items:
            if item.__class__ is tuple:
                segments.append(b''.join(part))
                part = []
                slots.append(item[1])
                before.append(item[2])
            else:
                part.append(item)
        segments.append(b''.join(part))
        # (written out as one expression: this runs once per equation)
        body = ' + '.join(f's{j} + a[{s}][0]' for j, s in enumerate(slots)) + \
            f' + s{len(slots)}' if slots else 's0'
        depth = ', '.join([f'{b} + a[{s}][1]' for s, b in zip(slots, before)] + [str(t.top)])
        env = {f's{j}': seg for j, seg in enumerate(segments)}
        fn = eval(f'lambda a: ({body}, max({depth}))' if slots else
                  f'lambda a: (s0, {t.top})', env)
        self.linked[key] = fn
        return fn

    def apply(self, spelling, args):
        """The code computing ``spelling`` of the arguments' code."""
        fn = self.linked.get(spelling)
        if fn is None:
            fn = self._link(spelling)
        return fn(args)

    def statement(self, spelling, args):
        """A line of its own: the statement template ``spelling`` of the arguments'
        code (``if not {0}: raise ...``)."""
        fn = self.linked.get((spelling, True))
        if fn is None:
            fn = self._link(spelling, True)
        self._add_line(*fn(args))

    def store(self, name, value):
        """A line: ``name = <value>``."""
        code, depth = value
        store = self.stores.get(name)
        if store is None:
            store = self.stores[name] = _load(_OP['STORE_FAST'], self._local(name))[0]
        self._add_line(code + store, depth)

    def _add_line(self, code, depth):
        """The next line's code, its location entries and the stack it needs."""
        self.code.append(code)
        self.lines += _LINE.get(len(code)) or _line(len(code))
        if depth > self.depth:
            self.depth = depth

    def function(self, name, returns, glb, filename, argcount, single):
        """The function: its lines, then ``return`` of ``returns`` (code each): the one
        value if ``single``, else their tuple."""
        if single:
            code, depth = returns[0]
        elif len(returns) <= _STACK_USE:
            code = b''.join(c for c, _ in returns) + _instruction(_OP['BUILD_TUPLE'],
                                                                   len(returns))
            depth = max([len(returns)] + [j + d for j, (_, d) in enumerate(returns)])
        else:                       # (a list appended to, as compile() builds a long tuple)
            append = _instruction(_OP['LIST_APPEND'], 1)
            code = _instruction(_OP['BUILD_LIST'], 0) + b''.join(
                c + append for c, _ in returns) + _instruction(_OP['LIST_TO_TUPLE'], 0)
            depth = 1 + max(d for _, d in returns)
        self._add_line(code + _instruction(_OP['RETURN_VALUE'], 0), depth)
        co = types.CodeType(
            argcount, 0, 0, len(self.varnames), max(self.depth, 1), 3,
            b''.join(self.code), tuple(self.consts), tuple(self.names),
            tuple(self.varnames), filename, name, name, 1, bytes(self.lines), b'', (), ())
        return types.FunctionType(co, glb, name)


class _Jumps:
    """A linked template holding forward jumps: each jump's argument is the length of
    the code it jumps over, known once the arguments' code is."""

    def __init__(self, items, top):
        self.items, self.top = items, top

    def __call__(self, args):
        items = self.items
        units = []                  # each item's length in code units
        for item in items:
            if item.__class__ is bytes:
                units.append(len(item) >> 1)
            elif item[0] == 'slot':
                units.append(len(args[item[1]][0]) >> 1)
            else:
                units.append(1 + _CACHES[item[1]])
        starts = [0]
        for u in units:
            starts.append(starts[-1] + u)
        parts, depth = [], self.top
        for k, item in enumerate(items):
            if item.__class__ is bytes:
                parts.append(item)
            elif item[0] == 'slot':
                code, d = args[item[1]]
                parts.append(code)
                depth = max(depth, item[2] + d)
            else:
                distance = starts[item[2]] - starts[k + 1]
                if not 0 <= distance < 256:
                    raise Unsupported('a jump over more than 255 code units')
                parts.append(_instruction(item[1], distance))
        return b''.join(parts), depth


def _entry(index, table, key, value):
    """The index of ``key``'s entry of ``table`` (a code object's locals, constants or
    names), ``value`` appended as a new one if ``index`` has no ``key`` yet."""
    j = index.get(key)
    if j is None:
        j = index[key] = len(table)
        table.append(value)
    return j


def _load(op, j):
    """(the instruction ``op j``, 1): shared by every function for a small ``j``."""
    return _LOADS[op][j] if j < 256 else (_instruction(op, j), 1)


_LOADS = {op: [(_instruction(op, j), 1) for j in range(256)]
          for op in (_OP['LOAD_FAST'], _OP['STORE_FAST'], _OP['LOAD_CONST'])} if AVAILABLE else {}


def _line(size):
    """Location entries for a line of ``size`` bytes: the line after the last (code 13:
    a line number without columns), 8 code units an entry."""
    units = size >> 1
    n = min(units, 8)
    out = bytes((0x80 | 13 << 3 | n - 1, 2))         # (+1 line: zig-zag 2)
    units -= n
    while units:
        n = min(units, 8)
        out += bytes((0x80 | 13 << 3 | n - 1, 0))
        units -= n
    return out


_LINE = {size: _line(size) for size in range(2, 512, 2)}


def line_of_each(code):
    """The line of each code unit of ``code`` (its location table, read back)."""
    lines = [None] * (len(code.co_code) // 2)
    for start, end, line in code.co_lines():
        lines[start // 2:end // 2] = [line] * ((end - start) // 2)
    return lines


def check():
    """Whether this interpreter's bytecode is the one assembled here: a small function
    assembled and compiled from its source must give the same bytes."""
    if not AVAILABLE or _CACHES is None:
        return False
    try:
        asm = Assembler(['a', 'b'])
        x = asm.apply('math.cos({0})', [asm.apply('{0} * {1}', [asm.load('a'), asm.load('b')])])
        asm.store('v1', x)
        asm.store('v2', asm.apply('{0} + {1}', [asm.apply('-{0}', [asm.load('v1')]),
                                                asm.constant(1.5)]))
        asm.store('v1', asm.apply('{0} < {1}', [asm.apply('abs({0})', [asm.load('v2')]),
                                                asm.load('a')]))
        fn = asm.function('f', [asm.load('v1'), asm.load('v2')], {'math': math}, '<check>',
                          2, False)
        src = ('def f(a, b):\n    v1 = math.cos(a * b)\n    v2 = -v1 + 1.5\n'
               '    v1 = abs(v2) < a\n    return (v1, v2, )\n')
        want = compile(src, '<check>', 'exec').co_consts[0]
        got = fn.__code__
        return (got.co_code, got.co_consts, got.co_names, got.co_varnames, got.co_stacksize,
                line_of_each(got)) == (want.co_code, want.co_consts, want.co_names,
                                       want.co_varnames, want.co_stacksize,
                                       line_of_each(want)) and fn(2.0, 3.0) == (
                                              abs(1.5 - math.cos(6.0)) < 2.0,
                                              1.5 - math.cos(6.0))
    except Exception:
        return False


AVAILABLE = check()
