"""Programs: derivatives (and everything else) as ANF straight-line code.

A ``Program`` is what ``nestad.trace`` records: input variables, equations
``v = prim(a, b)`` over variables and constants in execution order, and outputs
(variables or constants).  Tags are gone: a program holds only primitives on plain
values.  It can be printed (one line per equation, seed 002's notation), drawn
(Graphviz DOT, seed 000's drawings), evaluated, differentiated by source
transformation (``jvp``/``vjp``, in ``transform.py``) and compiled (``codegen.py``).
"""
import inspect
import re

import numpy as np

from ..errors import InvalidInputError, NestadError
from ..tracer import GUARD, RAISES, Eqn, Tracer, Var, _aval, _const_key, _param_key, active
from ..tracer import _NO_PARAMS, VARS
from ..structures import flatten, leaf_paths
from ..tracer import _TRACERS, RECORD_NUMPY_CALL, is_tracer, resolve
from .randomness import draw


# Program's methods built on modules above it: 'jvp' and 'vjp' (filled by transform.py),
# 'python_source' (by codegen.py).
PROGRAM_HOOKS = {}


class GuardFailure(NestadError):
    """The arguments make a comparison recorded in the program come out differently:
    the program does not compute the function there (``stage`` retraces)."""

    def __init__(self, index, site=None):
        where = f" (the comparison at {site})" if site else ""
        super().__init__(f"guard {index} of the program failed for these arguments{where}")
        self.index, self.site = index, site


class NumpyCall:
    """A numpy function recorded as called on traced values (generic: the call is
    replayed as it was, with the same arguments structure)."""
    __slots__ = ('func', 'name')

    def __init__(self, func):
        self.func = func
        self.name = _numpy_name(func)

    def plain(self, *leaves, tree):
        args, kwargs = tree.build(leaves)
        return self.func(*args, **kwargs)

    lifted = plain        # on perturbed values, numpy's dispatch reaches nestad.numpy

    def __reduce__(self):     # numpy's function by reference, one NumpyCall per function
        return numpy_call, (self.func,)

    def __repr__(self):
        return f"<numpy call {self.name}>"


_NUMPY_CALLS = {}
# Functions of an array's shape and dtype only: answered from the example value.
_STATIC_FUNCTIONS = {np.shape, np.ndim, np.size, np.result_type, np.zeros_like, np.ones_like,
                     np.empty_like, np.iscomplexobj, np.isrealobj}


def numpy_call(func):
    """The op of recorded calls of numpy function ``func`` (one per function)."""
    op = _NUMPY_CALLS.get(func)
    if op is None:
        op = _NUMPY_CALLS[func] = NumpyCall(func)
    return op


def record_numpy_call(func, args, kwargs):
    """Record ``func(*args, **kwargs)`` (a numpy function meeting tracers) as it is: the
    tracers' ``__array_function__``/``__array_ufunc__`` reach it through
    ``tracer.RECORD_NUMPY_CALL``."""
    leaves, tree = flatten((tuple(args), dict(kwargs)))
    vals = [a.val if isinstance(a, _TRACERS) else a for a in leaves]
    a, k = tree.build(vals)
    if func in _STATIC_FUNCTIONS:
        return func(*a, **k)
    trace, leaves = resolve(leaves)
    op = numpy_call(func)
    out = func(*a, **k)
    out_leaves, out_tree = flatten(out)
    if out_tree.children is None:
        return trace.record(op, leaves, {'tree': tree}, out)
    return trace.record(op, leaves, {'tree': tree}, None, tree=(out_leaves, out_tree))


RECORD_NUMPY_CALL['record'] = record_numpy_call


def _numpy_name(func):
    name = getattr(func, '__name__', repr(func))
    for prefix, module in (('numpy', np), ('numpy.linalg', np.linalg)):
        if getattr(module, name, None) is func:
            return f"{prefix}.{name}"
    return f"{getattr(func, '__module__', '?')}.{name}"


class Program:
    """An ANF program: ``inputs`` (Vars), ``eqns``, ``outputs`` (Vars or constants).

    ``in_tree``/``out_tree`` rebuild the argument tuple and the result structure from
    flat leaves; ``static`` holds, per input leaf position, a value that is not traced
    (ints, bools, None...) or ``_TRACED``; ``names`` gives inputs their printed names;
    ``example`` is the argument leaves the program was traced at."""

    def __init__(self, inputs, eqns, outputs, in_tree, out_tree, static, names, example):
        self.inputs, self.eqns, self.outputs = inputs, eqns, outputs
        self.in_tree, self.out_tree = in_tree, out_tree
        self.static, self.names, self.example = static, names, example
        self.params = ()        # names of the traced function's positional parameters
        self.draws = ()         # (generator, method, args, kwargs) of each draw input
        self._compiled = {}

    # Pickled and copied without its compiled code (made again when first needed): the
    # equations, with primitives by registered name and constants by value.
    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != '_compiled'}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._compiled = {}

    # ------------------------------------------------------------ running it

    def __call__(self, *args, **kwargs):
        """Evaluate the program on plain arguments (IEEE semantics, like nestad's
        functions on plain numbers); a failed guard raises ``GuardFailure``."""
        return self.out_tree.build(self.run_flat(self.flat_inputs(args, kwargs)))

    def flat_inputs(self, args, kwargs):
        """The traced leaves of ``args`` (checked against the structure traced)."""
        leaves, tree = flatten((tuple(args), kwargs))
        if tree.signature() != self.in_tree.signature():
            raise NestadError("the arguments do not have the structure the program was "
                              "traced with")
        flat, generators = [], []
        for k, (x, s) in enumerate(zip(leaves, self.static)):
            if s is _GENERATOR:
                if not isinstance(x, np.random.Generator):
                    raise InvalidInputError(
                        f"argument {_argument_path(leaf_paths((tuple(args), kwargs))[k], self.params)} "
                        f"is {x!r:.40}, but the program was traced with a "
                        "numpy.random.Generator there (it draws from it on each call)")
                generators.append(x)
                continue
            if s is not _TRACED:
                if not _same_static(x, s):
                    raise NestadError(f"static argument leaf {k} is {x!r:.40}, but the program "
                                      f"was traced with {s!r:.40}")
                continue
            # A program is straight-line code for the shapes and dtypes it was traced at
            # (len(v), loops over rows, int or float arithmetic): others would give a
            # wrong number silently.
            var = self.inputs[len(flat)]
            if _aval(x) != (var.shape, var.dtype, var.scalar):
                raise InvalidInputError(_mismatch(var, x, k, args, kwargs, self.params))
            flat.append(x)
        if self.draws:
            flat.extend(draw(generators, self.draws))
        return flat

    def run_flat(self, values, lifted=False):
        """Evaluate on flat input values; ``lifted`` applies each primitive's public
        function (so perturbed or traced inputs are differentiated or recorded),
        otherwise its plain implementation."""
        env = dict(zip(map(id, self.inputs), values))
        read = lambda a: env[id(a)] if isinstance(a, Var) else a      # noqa: E731
        for k, eqn in enumerate(self.eqns):
            op = eqn.op
            args = [read(a) for a in eqn.args]
            if op is GUARD:
                _check_guard(args[0], eqn.params, k)
                continue
            fn = op.lifted if lifted else op.plain
            out = fn(*args, **eqn.params)
            if eqn.tree is None:
                env[id(eqn.outs[0])] = out
            else:
                for v, o in zip(eqn.outs, flatten(out)[0]):
                    env[id(v)] = o
        return [read(o) for o in self.outputs]

    # ------------------------------------------------------------ transforming it

    # (their bodies live in the modules built on Program, which fill ``PROGRAM_HOOKS``)

    def jvp(self):
        """The forward derivative program (see ``nestad.staging.transform``)."""
        return PROGRAM_HOOKS['jvp'](self)

    def vjp(self):
        """The reverse derivative program (see ``nestad.staging.transform``)."""
        return PROGRAM_HOOKS['vjp'](self)

    def source(self):
        """The Python source ``stage`` compiles for this program."""
        return PROGRAM_HOOKS['python_source'](self)[0]

    # ------------------------------------------------------------ showing it

    def var_names(self):
        """Printed names: inputs by their parameter names, the rest v1, v2, ..."""
        names = {id(v): n for v, n in zip(self.inputs, self.names)}
        k = 0
        for eqn in self.eqns:
            for v in eqn.outs:
                if id(v) not in names:
                    k += 1
                    names[id(v)] = f"v{k}"
        return names

    def __str__(self):
        names = self.var_names()
        show = lambda a: names[id(a)] if isinstance(a, Var) else _show_const(a)   # noqa: E731
        lines = ["input " + ", ".join(self.names)]
        for eqn in self.eqns:
            args = ", ".join(show(a) for a in eqn.args)
            if isinstance(eqn.op, NumpyCall):
                args = _show_call(eqn, show)
            if eqn.op is GUARD:
                lines.append(f"guard {args} is {eqn.params['expect']}")
                continue
            outs = [names[id(v)] for v in eqn.outs]
            lhs = outs[0] if eqn.tree is None else "(" + ", ".join(outs) + ")"
            subs = {k: v for k, v in eqn.params.items() if isinstance(v, Program)}
            params = _show_params(eqn) if not subs else ""
            lines.append(f"{lhs} = {op_name(eqn.op)} ({args}){params}")
            for k, sub in subs.items():        # a loop's condition and body, indented
                lines.append(f"  {k}:")
                lines.extend("    " + ln for ln in str(sub).split("\n"))
        lines.append("output " + ", ".join(show(o) for o in self.outputs))
        return "\n".join(lines)

    def __repr__(self):
        return (f"<Program: {len(self.inputs)} inputs, {len(self.eqns)} equations, "
                f"{len(self.outputs)} outputs>")

    def to_dot(self):
        """Graphviz DOT text: variables as ellipses, equations as boxes, data flowing
        left to right (seed 000's drawing of a tape as a graph)."""
        names = self.var_names()
        lines = ["digraph program {", "  rankdir=LR;", "  node [fontsize=12];"]
        defined = {}
        for v, n in zip(self.inputs, self.names):
            lines.append(f'  "{n}" [shape=ellipse, style=bold];')
            defined[id(v)] = f'"{n}"'
        for k, eqn in enumerate(self.eqns):
            node = f'"e{k}"'
            label = "guard" if eqn.op is GUARD else op_name(eqn.op)
            lines.append(f'  {node} [shape=box, label="{label}"];')
            for j, a in enumerate(eqn.args):
                if isinstance(a, Var):
                    lines.append(f"  {defined[id(a)]} -> {node};")
                else:
                    c = f'"c{k}_{j}"'
                    lines.append(f'  {c} [shape=plaintext, label="{_dot_escape(_show_const(a))}"];')
                    lines.append(f"  {c} -> {node};")
            for v in eqn.outs:
                n = f'"{names[id(v)]}"'
                lines.append(f"  {n} [shape=ellipse];")
                lines.append(f"  {node} -> {n};")
                defined[id(v)] = n
        for k, o in enumerate(self.outputs):
            lines.append(f'  "out{k}" [shape=doublecircle, label="output {k}"];')
            if isinstance(o, Var):
                lines.append(f'  {defined[id(o)]} -> "out{k}";')
        lines.append("}")
        return "\n".join(lines)


class _Mark:
    """A mark in Program.static: ``_TRACED`` for a traced input leaf, ``_GENERATOR`` for a
    numpy.random.Generator argument, whose draws are inputs.  Marks are compared by
    identity, so each is one object, also in copies and in other processes."""

    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return self.name

    def __repr__(self):
        return f'<{self.name.strip("_").lower()}>'


_TRACED = _Mark('_TRACED')
_GENERATOR = _Mark('_GENERATOR')


def _describe_aval(shape, dtype, scalar):
    return f"a {dtype} scalar" if scalar else f"an array of shape {shape} and dtype {dtype}"


def _mismatch(var, x, k, args, kwargs, params):
    path = _argument_path(leaf_paths((tuple(args), kwargs))[k], params)
    return (f"argument {path} is {_describe_aval(*_aval(x))}, but the program was traced "
            f"with {_describe_aval(var.shape, var.dtype, var.scalar)}: a program computes "
            "its function only at the shapes and dtypes it was traced at. Trace it again "
            "for these arguments (nestad.trace(f, ...)), or use nestad.stage(f), which "
            "traces once per shape and dtype.")


def _argument_path(path, params=()):
    """'[0][1][2]' (a leaf of (args, kwargs)) as 'name[2]', where ``params`` (the names of
    the positional parameters) names parameter 1, or else 'args[1][2]'; '[1]['n']' as 'n'."""
    m = re.match(r"\[(\d+)\](\[(\d+|'[^']*')\])?(.*)", path)
    if not m or m.group(2) is None:
        return path
    if m.group(1) == '1':
        return f"{m.group(3).strip(chr(39))}{m.group(4)}"
    k = int(m.group(3))
    return f"{params[k] if k < len(params) else f'args[{k}]'}{m.group(4)}"


def positional_names(f):
    """The names of ``f``'s positional parameters (none if it has no signature)."""
    try:
        return [p.name for p in inspect.signature(f).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _same_static(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and bool(np.all(a == b)))
    return type(a) is type(b) and (a is b or a == b)


def _check_guard(value, params, index):
    if is_tracer(value):                  # evaluating into another trace: keep the guard
        value.trace.eqns.append(Eqn(GUARD, (value.var,), params, ()))
    elif bool(value) != params['expect']:
        raise GuardFailure(index, params.get('site'))


def op_name(op):
    return op.name


def _show_const(c):
    if isinstance(c, np.ndarray):
        if c.size <= 4:
            return np.array2string(c, separator=', ').replace('\n', '')
        return f"<array {c.shape} {c.dtype}>"
    return repr(c)


def _show_call(eqn, show):
    """The arguments of a recorded numpy call, in the structure it was called with."""
    call_args, call_kwargs = eqn.params['tree'].build([show(a) for a in eqn.args])
    parts = [_show_nested(a) for a in call_args]
    parts += [f"{k}={_show_nested(v)}" for k, v in call_kwargs.items()]
    return ", ".join(parts)


def _show_nested(x):
    if isinstance(x, str):
        return x
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_show_nested(y) for y in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    return _show_const(x)


def _show_params(eqn):
    params = eqn.params
    if not params or eqn.op is GUARD:
        return ""
    if isinstance(eqn.op, NumpyCall):
        return ""          # the call's own keywords are among its arguments' structure
    return " {" + ", ".join(f"{k}={_show_const(v)}" for k, v in params.items()) + "}"


def _dot_escape(s):
    return s.replace('"', '\\"')


def simplify(eqns, outputs, checks=False):
    """(equations, outputs) of a finished trace: dead code removed (loops drop the state
    that no live result needs), then equal computations shared (``share``: tracing
    shares all but loops, so it has nothing to do without one).  ``checks``: keep the
    unused divisions that could raise (``remove_dead``), in a traced function's own
    code (not in loop bodies, whose unused state is pruned and shared)."""
    eqns, loops = _remove_dead(eqns, outputs, checks)
    if not loops:
        return eqns, outputs
    return share(eqns, outputs)


def remove_dead(eqns, outputs, checks=False):
    """The equations that outputs or guards depend on, in their order.  An equation
    whose op can drop the results nobody reads (``op.prune``: a loop's dead state
    slots) is replaced by the smaller one.  With ``checks``, unused equations that
    raise where eager code raises stay as checks (``_add_checks``).  ``eqns`` may be a
    trace's own list (``Trace.eqns``), whose compact records (tracers, see
    ``Trace.equations``) become Eqns here, the live ones only."""
    return _remove_dead(eqns, outputs, checks)[0]


_new = object.__new__


def _remove_dead(eqns, outputs, checks):
    """(``remove_dead``'s equations, whether an op of theirs has ``prune``: a loop,
    which ``share`` may merge with another)."""
    # (Vars hash by identity: sets of them, not of their ids.  It runs once per
    # equation recorded, so the common equation, one output and no sub-program, takes
    # the short way; an op's ``prune`` and ``free_vars`` are looked up once per op.
    # A compact record that no output needs, 30% of a gradient's, is never made an
    # Eqn, unless a check might need it.)
    live = {o for o in outputs if o.__class__ in VARS}
    add = live.add
    kept = [None] * len(eqns)
    plain = set()                 # ids of ops with neither prune nor free_vars
    loops = False                 # has a kept equation's op ``prune``?
    dead_raises = False           # does an unused equation's op raise (RAISES)?
    for k in range(len(eqns) - 1, -1, -1):
        eqn = eqns[k]
        if eqn.__class__ is Tracer:             # a compact record: one output, no params
            r = eqn.eqn
            var = eqn.var
            if var not in live:
                if not dead_raises and (r.op if r.__class__ is Eqn else r[0]) in RAISES:
                    dead_raises = True
                continue
            if r.__class__ is not Eqn:
                # (Eqn's __init__ written out: this runs once per equation kept)
                e = _new(Eqn)
                e.op, e.args, e.params, e.outs, e.tree = r[0], r[1:], _NO_PARAMS, (var,), None
                r = e
            eqn.eqn = eqns[k] = kept[k] = r     # (in place: the tracer goes)
            for a in r.args:
                if a.__class__ in VARS:
                    add(a)
            continue
        op, outs = eqn.op, eqn.outs
        if not (outs[0] in live if len(outs) == 1 else
                op is GUARD or any(v in live for v in outs)):
            if not dead_raises and op in RAISES:
                dead_raises = True
            continue
        if id(op) not in plain:
            prune = getattr(op, 'prune', None)
            if prune is not None:
                loops = True
                eqn = prune(eqn, [v in live for v in outs])
            elif getattr(op, 'free_vars', None) is None:
                plain.add(id(op))
            live.update(_inner_free_vars(eqn))
        kept[k] = eqn
        for a in eqn.args:
            if a.__class__ in VARS:
                add(a)
    if checks and dead_raises:
        for k, e in enumerate(eqns):            # (the unused compact records too)
            if e.__class__ is Tracer:
                r = e.eqn
                e.eqn = eqns[k] = r if r.__class__ is Eqn else \
                    Eqn(r[0], r[1:], _NO_PARAMS, (e.var,))
        _add_checks(eqns, kept)
    return [e for e in kept if e is not None], loops


def _add_checks(eqns, kept):
    """Put back the unused equations of ``RAISES`` (``x / y``, ...) as checks of what
    decides them (``1.0 / y``), with the unused straight-line code that computes it
    (``y // 1.0``): the gradient of ``x / (y // 1.0) + x`` does not need the division,
    but eager code raised there.  A check never brings back a loop (nor a state slot a
    loop dropped): a division whose divisor only an unused loop computes goes with it."""
    made = {id(v): k for k, e in enumerate(eqns) for v in e.outs}
    available = {id(v) for e in kept if e is not None for v in e.outs}
    for k in range(len(eqns) - 1, -1, -1):
        if kept[k] is not None or eqns[k].op not in RAISES:
            continue
        check = _check_only(eqns[k])
        if check is None:
            continue
        need, todo = set(), [a for a in check.args if isinstance(a, Var)]
        while todo:
            a = todo.pop()
            j = made.get(id(a))
            if j is None or id(a) in available or j in need:
                continue                          # an input, computed anyway, or seen
            e = eqns[j]
            if kept[j] is not None or e.op is GUARD or hasattr(e.op, 'prune') or \
                    _inner_free_vars(e):
                break                             # a pruned slot, or a loop: no check
            need.add(j)
            todo.extend(a for a in e.args if isinstance(a, Var))
        else:
            kept[k] = check
            for j in need:
                kept[j] = eqns[j]
                available.update(id(v) for v in eqns[j].outs)


def _check_only(eqn):
    """An unused equation of a Python operator that raises on some operands (``x / y``
    where eager code divides by zero, say, and only the derivative, ``1/y``, is an
    output): kept where it could raise, reading only what decides that (``1.0 / y``);
    None where it cannot (constant divisor, or arrays, whose numpy operators do not)."""
    unused = RAISES[eqn.op]
    if unused and not isinstance(eqn.args[1], Var) or \
            any(isinstance(a, Var) and not a.scalar for a in eqn.args) or \
            not any(isinstance(a, Var) for a in eqn.args):
        return None
    args = tuple((1 if a.dtype.kind in 'iub' else 1.0) if k in unused and isinstance(a, Var)
                 else a for k, a in enumerate(eqn.args))
    return Eqn(eqn.op, args, eqn.params, eqn.outs, eqn.tree)


def depends(program, outputs):
    """The positions of ``program.inputs`` that ``outputs`` (values of it) are computed
    from."""
    live = {id(o) for o in outputs if isinstance(o, Var)}
    for eqn in reversed(program.eqns):
        if any(id(v) in live for v in eqn.outs):
            live.update(id(a) for a in eqn.args if isinstance(a, Var))
            live.update(_inner_free_vars(eqn))
    return {k for k, v in enumerate(program.inputs) if id(v) in live}


def share(eqns, outputs):
    """Common subexpressions that tracing cannot see: loops (recorded unshared, since
    each has its own sub-programs) with the same arguments and sub-programs equal up to
    renaming (``structure``), and then whatever reads their results the same way.  An
    equation equal to an earlier one computes the same values: its outputs are the
    earlier one's.  A loop whose first state slots, alone, are another loop
    (``op.restrict``) computes that loop's results too: one of the two goes (``_subsume``).
    Returns (equations, outputs)."""
    same = {}                     # id(Var) -> the earlier Var it equals
    seen = {}
    kept = []
    loops = []                    # positions in kept of the loops kept
    where = {}                    # id(Var) -> position in kept of the equation computing it
    last_guard = -1
    for eqn in eqns:
        if any(isinstance(a, Var) and id(a) in same for a in eqn.args):
            args = tuple(same.get(id(a), a) if isinstance(a, Var) else a for a in eqn.args)
            eqn = Eqn(eqn.op, args, eqn.params, eqn.outs, eqn.tree)
        key = None if eqn.op is GUARD else _eqn_key(eqn)
        if key is not None:
            first = seen.get(key)
            if first is not None:
                # (the first equation may itself have been shared since: its outputs then
                # stand for another's, which every entry of ``same`` names directly)
                for v, w in zip(eqn.outs, first.outs):
                    same[id(v)] = same.get(id(w), w)
                continue
            seen[key] = eqn
        if hasattr(eqn.op, 'restrict') and _subsume(eqn, kept, loops, where, same, last_guard):
            continue
        if eqn.op is GUARD:
            last_guard = len(kept)
        if hasattr(eqn.op, 'restrict'):
            loops.append(len(kept))
        for v in eqn.outs:
            where[id(v)] = len(kept)
        kept.append(eqn)
    outputs = [same.get(id(o), o) if isinstance(o, Var) else o for o in outputs]
    return kept, outputs


def _subsume(eqn, kept, loops, where, same, last_guard):
    """Share ``eqn`` with a kept loop one of which, restricted to its first slots, is the
    other: the larger one computes both.  If ``eqn`` is the smaller, its results are
    the kept loop's first ones; if it is the larger, it takes the kept loop's place
    (when its arguments are all computed before that place and no guard lies between),
    its first results being the kept loop's variables.  True if ``eqn`` is shared."""
    for pos in loops:
        other = kept[pos]
        if other.op is not eqn.op:
            continue
        small, big = (eqn, other) if eqn.params['n'] < other.params['n'] else (other, eqn)
        m = small.params['n']
        if m == big.params['n'] or not all(
                a is b or not isinstance(a, Var) and not isinstance(b, Var) and
                _const_key(a) == _const_key(b) for a, b in zip(small.args[:m], big.args[:m])):
            continue
        part = big.op.restrict(big, m)
        if part is None or _eqn_key(part) != _eqn_key(small):
            continue
        if big is other:
            for v, w in zip(eqn.outs, other.outs):
                same[id(v)] = w
            return True
        if pos < last_guard or any(where.get(id(a), -1) >= pos for a in eqn.args
                                   if isinstance(a, Var)):
            continue
        kept[pos] = Eqn(eqn.op, eqn.args, eqn.params, other.outs + eqn.outs[m:], eqn.tree)
        for v, w in zip(eqn.outs, other.outs):
            same[id(v)] = w
        for v in eqn.outs[m:]:
            where[id(v)] = pos
        return True
    return False


def _eqn_key(eqn, pos=None):
    """A hashable key of an equation: its op, its arguments (variables by identity, or
    by ``pos``), its parameters (sub-programs by ``structure``); None if a parameter
    is unhashable."""
    try:
        args = tuple((pos.get(id(a), ('free', id(a))) if pos is not None else ('v', id(a)))
                     if isinstance(a, Var) else ('c',) + _const_key(a) for a in eqn.args)
        params = tuple(sorted((k, structure(v) if isinstance(v, Program) else _param_key(v))
                              for k, v in eqn.params.items()))
        key = (id(eqn.op), args, params)
        hash(key)
        return key
    except TypeError:
        return None


def structure(program):
    """A hashable description of ``program`` up to the names of its variables: programs
    with equal descriptions compute the same function (raises TypeError if some
    parameter cannot be described)."""
    key = program._compiled.get('structure')
    if key is None:
        pos = {id(v): ('in', k) for k, v in enumerate(program.inputs)}
        eqns = []
        for j, eqn in enumerate(program.eqns):
            k = _eqn_key(eqn, pos)
            if k is None:
                raise TypeError("unhashable parameter")
            eqns.append(k)
            for m, v in enumerate(eqn.outs):
                pos[id(v)] = ('eq', j, m)
        outs = tuple(pos.get(id(o), ('free', id(o))) if isinstance(o, Var) else
                     ('c',) + _const_key(o) for o in program.outputs)
        key = program._compiled['structure'] = (len(program.inputs), tuple(eqns), outs)
    return key


def _inner_free_vars(eqn):
    """Variables of the enclosing program that an equation's sub-programs read."""
    inner = getattr(eqn.op, 'free_vars', None)
    return inner(eqn) if inner is not None else ()


def is_active():
    return active() is not None
