"""Tracer values: the plain numbers of a program being recorded.

Staging (``nestad.trace``, ``nestad.stage``) runs a function once on *tracers*.  A
tracer stands where a plain number or ndarray would be: at the bottom of every tower
of Bundles and TapeCells, below every perturbation.  Whatever reaches a tracer is
therefore a computation on plain values, and it is recorded as one equation
``v = prim(a, b)`` of an ANF program (``nestad.staging.program``).  Derivative
operators inside the traced function run as usual on Bundles and TapeCells of
tracers: their tags exist while tracing only, and the program holds the primal,
tangent and sensitivity arithmetic they did, on plain values.

A tracer also carries an *example value*, the concrete value it has for the
arguments the trace was made at.  Comparisons use it to answer ``if``/``while``
and record a *guard*: the program is valid only for arguments that make every
comparison come out the same way (``nestad.stage`` retraces when one does not).

A scalar ``Tracer`` counts as a ``numbers.Real`` (as the numbers it stands for do),
so nestad's code treats it as a constant of every run of AD; lifting and array
primitives test for it before calling a primitive's plain implementation.
"""
import numbers
import os
import sys
import threading

import numpy as np

from .errors import InvalidInputError, NestadError
from .values import Perturbed


class StagingError(NestadError, TypeError):
    """Something a traced function did cannot be recorded as a program."""


class StagingWarning(UserWarning):
    """A staged function works but is slow or frozen in a way its author would want to
    know: it retraces often, a Python loop was unrolled into a huge program, or random
    numbers drawn while tracing were baked into the program."""


_FLOAT64 = np.dtype(float)
_new = object.__new__


class Var:
    """A variable of a program: a value of known shape and dtype.  The common one, a
    float64 scalar, is a ``Var`` itself with no fields (the class holds its shape, dtype
    and scalar-ness): tracing makes one per equation recorded, and the smallest object
    Python makes is 24 bytes smaller than one with three slots.  Any other is a
    ``ShapedVar``, which holds them.  Test ``isinstance(x, Var)`` (or both classes)."""
    __slots__ = ()
    shape, dtype, scalar = (), _FLOAT64, True

    def __new__(cls, shape=(), dtype=_FLOAT64, scalar=True):
        if cls is Var and dtype is _FLOAT64 and scalar and shape == ():
            return _new(Var)
        v = _new(ShapedVar)
        v.shape, v.dtype, v.scalar = shape, dtype, scalar
        return v

    def __repr__(self):
        return f"Var({self.shape}, {self.dtype})"


class ShapedVar(Var):
    """A variable other than a float64 scalar: an array, an int, a bool."""
    __slots__ = ('shape', 'dtype', 'scalar')


VARS = (Var, ShapedVar)     # (the classes of variables: ``x.__class__ in VARS``)


class Eqn:
    """``outs = op(*args, **params)``; each arg a Var or a constant.  ``tree``
    rebuilds the op's output structure from ``outs`` (None: one output)."""
    __slots__ = ('op', 'args', 'params', 'outs', 'tree')

    def __init__(self, op, args, params, outs, tree=None):
        self.op, self.args, self.params, self.outs, self.tree = op, args, params, outs, tree


def _aval(val):
    """(shape, dtype, scalar) of an example value."""
    if val.__class__ is float:          # (numpy's result_type takes a microsecond)
        return (), _FLOAT64, True
    if isinstance(val, np.ndarray):
        return val.shape, val.dtype, False
    if isinstance(val, (bool, np.bool_)):
        return (), np.dtype(bool), True
    if isinstance(val, (int, np.integer)):
        return (), np.dtype(int), True
    return (), np.result_type(val), True


class Trace:
    """A program being recorded: equations in execution order, guards among them.

    A trace of a loop's body or condition has the enclosing trace as ``parent``:
    tracers of the parent that it meets are *captured* as extra inputs
    (``captures``: (parent tracer, own Var) pairs).  Guards are refused there, since
    a body must be valid in every iteration, not only the one it was traced at."""

    def __init__(self, parent=None, purpose=None):
        self.eqns = []                  # Eqns, or tracers of compact ones (equations())
        self.cse = {}
        self.parent = parent
        self.purpose = purpose          # e.g. "the body of a while_loop"; None at top level
        self.captured = {}              # id(parent Var) -> own tracer
        self.captures = []
        self.tracers = {}               # Var -> its tracer, for the arguments of what
        #                                 record (not the lean paths) records: the array
        #                                 identities read the arguments of those equations
        self.input_names = ((), (), 0)  # (printed names, Vars, how many are arguments')
        self.draws = []                 # (generator slot, method, args, kwargs, Var, value)

    def new_tracer(self, val):
        """A tracer for a new input variable with example value ``val``."""
        return _wrap(self, Var(*_aval(val)), val)

    def record(self, op, args, params, val, tree=None, cse=True):
        """Append ``op(*args, **params)``, whose value at the example is ``val``;
        return its tracer (or the structure ``tree`` of tracers)."""
        simplify = SIMPLIFY.get(op)
        if simplify is not None:
            same = simplify(*args)
            if same is not None:
                return same
        tracers = self.tracers
        ins = []
        for a in args:
            if isinstance(a, _TRACERS):
                tracers[a.var] = a          # (the identities read the tracers of arguments)
                ins.append(a.var)
            else:
                ins.append(a)
        ins = tuple(ins)
        key = _cse_key(op, ins, params) if cse else None
        if key is not None:
            hit = self.cse.get(key)
            if hit is not None:
                return hit
        if tree is None:
            out = _wrap(self, Var(*_aval(val)), val)
            out_leaves = (out,)
        else:                     # several outputs: tree = (example leaves, TreeDef)
            out_leaves = [_wrap(self, Var(*_aval(v)), v) for v in tree[0]]
            out = tree[1].build(out_leaves)
        outs = tuple(t.var for t in out_leaves)
        eqn = Eqn(op, ins, params, outs, None if tree is None else tree[1])
        for t in out_leaves:
            tracers[t.var] = t
            t.eqn = eqn
        self.eqns.append(eqn)
        if key is not None:
            self.cse[key] = out
        return out

    def equations(self):
        """The equations recorded, in order, as ``Eqn``s, once recording is done.  The
        scalar path (``apply_traced``) keeps an equation compact, as its result's tracer
        whose ``eqn`` is the tuple ``(op, *args)`` (which is also its CSE key): about 180
        bytes less per equation while tracing, when the trace and the reverse tape are
        both alive.  Each is replaced in place, so its tracer goes as its Eqn comes."""
        eqns = self.eqns
        for k, e in enumerate(eqns):
            if e.__class__ is Tracer:
                r = e.eqn
                e.eqn = eqns[k] = r if r.__class__ is Eqn else \
                    Eqn(r[0], r[1:], _NO_PARAMS, (e.var,))
        return eqns

    def record_scalar(self, op, args, val):
        """``record`` for a scalar primitive without parameters on scalar tracers of this
        trace and plain numbers, giving one number, kept lean (``apply_traced`` writes
        out the one- and two-argument cases, most operations, and records them compactly;
        this is the case of more arguments).  Its tracers are not kept in ``tracers``
        (only the array identities read those, and not for scalar primitives)."""
        simplify = SIMPLIFY.get(op)
        if simplify is not None:
            same = simplify(*args)
            if same is not None:
                return same
        ins = tuple([a.var if a.__class__ is Tracer else a for a in args])
        key = (op,) + tuple([a if a.__class__ in VARS else _arg_key(a) for a in ins])
        cse = self.cse
        hit = cse.get(key)
        if hit is not None:
            return hit
        var = _new(Var) if val.__class__ is float else Var(*_aval(val))
        out = Tracer(self, var, val)
        eqn = out.eqn = Eqn(op, ins, _NO_PARAMS, (var,))
        self.eqns.append(eqn)
        cse[key] = out
        return out


_NO_PARAMS = {}         # (shared by the equations without parameters: never written to)


# op -> function of its arguments giving an argument that equals the result exactly
# (x * 1.0 is x for every float), or None: applied before recording.  A scalar
# primitive's identity needs a plain number among its arguments (record2 asks only then).
SIMPLIFY = {}

# Python operators that raise on some scalar operands where eager code would raise too
# (x / 0.0, x % 0, x // 0.0, 0.0 ** -1): op -> positions of the arguments an unused
# equation of it does not need.  An unused one is kept, with those arguments replaced
# by 1, as a check: staged code raises where eager code does (nestad.staging.program).
RAISES = {}


def _const_key(c):
    if isinstance(c, float):             # keeps -0.0 apart from 0.0, and numpy's float64
        return (c.__class__, c.hex())    # (which promotes float32 arrays) from Python's
    if isinstance(c, (int, bool, str, type(None))):
        return (type(c), c)
    if isinstance(c, np.ndarray):        # equal constants are one constant
        return ((np.ndarray, c.shape, c.dtype.str, c.tobytes()) if c.size <= 100_000
                else (np.ndarray, id(c)))
    return (type(c), id(c))


def _param_key(v):
    if isinstance(v, slice):
        return ('slice', _param_key(v.start), _param_key(v.stop), _param_key(v.step))
    if isinstance(v, tuple):
        return tuple(_param_key(x) for x in v)
    return _const_key(v)


def _arg_key(c):
    """A constant argument's part of a CSE key: a finite non-zero Python float as itself
    (equal floats are the same bits but for 0.0/-0.0 and nans, which go by their bits);
    anything else with its type (an int 2 is not the float 2.0)."""
    if c.__class__ is float and c and c == c:
        return c
    return _const_key(c)


def _cse_key(op, ins, params):
    """(op, arguments' keys... [, ('params', their keys)]): variables by identity,
    constants by ``_arg_key`` (the format of ``record_scalar``'s keys).  The op itself
    for a scalar primitive (it hashes by identity), else its id (some ops compare equal
    by value)."""
    key = (op if op.__class__ in SCALAR_OPS else id(op),) + \
        tuple([a if a.__class__ in VARS else _arg_key(a) for a in ins])
    if not params:
        return key
    try:
        key += (('params',) + tuple(sorted((k, _param_key(v)) for k, v in params.items())),)
        hash(key)
        return key
    except TypeError:            # unhashable params: no sharing
        return None


# ---------------------------------------------------------------- the active trace

_state = threading.local()


def active():
    """The innermost trace being recorded in this thread, or None."""
    stack = getattr(_state, 'stack', None)
    return stack[-1] if stack else None


class recording:
    """``with recording(trace):`` makes ``trace`` the active one."""
    __slots__ = ('trace',)

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        if not hasattr(_state, 'stack'):
            _state.stack = []
        _state.stack.append(self.trace)
        return self.trace

    def __exit__(self, *exc):
        _state.stack.pop()


def resolve(args):
    """(trace, args): the innermost active trace, and ``args`` with the tracers of
    enclosing traces captured into it."""
    t = active()
    out = None
    for i, a in enumerate(args):
        if isinstance(a, _TRACERS) and a.trace is not t:
            if out is None:
                out = list(args)
            out[i] = _capture(t, a)
    return t, (args if out is None else out)


def _capture(t, x):
    if x.trace is t:
        return x
    if t is None:
        raise StagingError(
            "a traced value was used after its nestad.trace/stage call returned (it escaped "
            "through a side effect). Return values out of the traced function instead.")
    if t.parent is None:
        raise StagingError(
            "a value traced by one nestad.trace/stage call was used inside another (it "
            "escaped through a closure or a global). Pass it to the inner staged function "
            "as an argument.")
    outer = _capture(t.parent, x)
    own = t.captured.get(id(outer.var))
    if own is None:
        own = t.captured[id(outer.var)] = t.new_tracer(outer.val)
        t.captures.append((outer, own.var))
    return own


# ---------------------------------------------------------------- tracer values

def _refuse_concrete(what, x=None):
    if x is not None and x.var.dtype.kind in 'iu':
        # Python ints are traced as values (as in JAX): say which, and how to make one static.
        raise StagingError(
            f"{what} of a traced int ({x.val!r} here): int arguments of a staged function "
            "are traced as values, so that a new value does not trace the function again, "
            "but range(), indexing a list, a shape or a repetition count needs a concrete "
            f"int.{_int_inputs(x.trace)} Name the argument in static_argnums (or "
            "static_argnames) of nestad.stage/nestad.trace: the program is then traced once "
            "per value of it.")
    raise StagingError(
        f"{what} of a traced value: the staged program would be specialised on this one "
        "value. Use nestad's functions on it (nestad.floor, nestad.numpy...), compare it "
        "(comparisons are recorded as guards), or pass the argument it comes from as a "
        "static one (nestad.stage(f, static_argnums=...)).")


def _int_inputs(trace):
    while trace.parent is not None:
        trace = trace.parent
    names, inputs, n = trace.input_names
    names = [names[k] for k in range(n) if inputs[k].dtype.kind in 'iu']
    return f" (traced int arguments: {', '.join(names)}.)" if names else ""


class _TracerBase:
    __slots__ = ('trace', 'var', 'val', 'eqn')

    def __init__(self, trace, var, val, eqn=None):
        self.trace, self.var, self.val, self.eqn = trace, var, val, eqn

    @property
    def shape(self):
        return self.var.shape

    @property
    def ndim(self):
        return len(self.var.shape)

    @property
    def size(self):
        return int(np.prod(self.var.shape))

    @property
    def dtype(self):
        return self.var.dtype

    def __float__(self):
        _refuse_concrete("float()", self)

    def __int__(self):
        _refuse_concrete("int()", self)

    def __index__(self):
        _refuse_concrete("using as an index (range(), a list index, a shape)", self)

    def __complex__(self):
        _refuse_concrete("complex()", self)

    def __round__(self, ndigits=None):
        _refuse_concrete("round() (use nestad.numpy.round)", self)

    def __trunc__(self):
        _refuse_concrete("math.trunc() (use nestad.numpy.trunc)", self)

    def __hash__(self):
        raise StagingError("traced values are unhashable: a cache keyed by value would be "
                           "specialised on the example value the trace was made at")

    def __floor__(self):
        _refuse_concrete("math.floor() (use nestad.floor)")

    def __ceil__(self):
        _refuse_concrete("math.ceil() (use nestad.ceil)")

    # As on perturbed values (eager code that uses them stages too): divmod is
    # (x // y, x % y); the value is real, so .real is itself and .imag zero.
    def __divmod__(self, other):
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    @property
    def real(self):
        return self

    @property
    def imag(self):
        return np.zeros(self.var.shape) if isinstance(self, ArrayTracer) else 0.0

    def conjugate(self):
        return self

    conj = conjugate

    def __format__(self, spec):
        return f"<traced {format(self.val, spec)}>"

    def __repr__(self):
        if self.var.scalar and self.var.dtype.kind in 'iu':
            # (numpy shows only this where a shape needs an int: np.zeros(n))
            return (f"Tracer({self.val!r}: a traced int; to use it as a shape or count, name "
                    "its argument in static_argnums)")
        return f"{type(self).__name__}({self.val!r})"


class Tracer(_TracerBase):
    """A traced real scalar or bool (arithmetic installed by nestad.primitives).
    Comparisons give traced bools; ``if`` on one records a guard."""
    __slots__ = ()

    def __bool__(self):
        if self.var.dtype == bool:
            return guard(self)
        return guard(COMPARISONS['ne'](self, 0))

    def __lt__(self, other):
        return _compare('lt', self, other)

    def __le__(self, other):
        return _compare('le', self, other)

    def __gt__(self, other):
        return _compare('gt', self, other)

    def __ge__(self, other):
        return _compare('ge', self, other)

    def __eq__(self, other):
        return _compare('eq', self, other)

    def __ne__(self, other):
        return _compare('ne', self, other)

    __hash__ = _TracerBase.__hash__


numbers.Real.register(Tracer)


class ArrayTracer(_TracerBase):
    """A traced ndarray (its arithmetic and numpy protocols are installed by
    nestad.numpy).  Comparisons give traced boolean arrays, as numpy's do."""
    __slots__ = ()

    def __len__(self):
        if not self.var.shape:
            raise TypeError("len() of a 0-d array")
        return self.var.shape[0]

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        return guard(self if self.var.dtype == bool else np.not_equal(self, 0))

    __hash__ = _TracerBase.__hash__


_TRACERS = (Tracer, ArrayTracer)


def is_tracer(x):
    return isinstance(x, _TRACERS)


def _wrap(trace, var, val):
    return (Tracer if var.scalar else ArrayTracer)(trace, var, val)


# ---------------------------------------------------------------- comparisons and guards

class Guard:
    """An equation that asserts a traced bool has the value it had when traced."""
    name = 'guard'

    def __reduce__(self):            # the one GUARD, also in another process or a copy
        return 'GUARD'

    def __repr__(self):
        return '<guard>'


GUARD = Guard()


def guard(c):
    """Record that the traced bool ``c`` must keep its example value; return that value."""
    t = c.trace
    value = bool(c.val)
    if t.purpose is not None:
        raise StagingError(
            f"a comparison decides a Python `if` (or `and`, `or`, `min`...) inside {t.purpose}: "
            "its outcome may change from one iteration to the next, so it cannot be fixed "
            "when the loop is traced. Choose values with nestad.where(cond, x, y) instead.")
    t.eqns.append(Eqn(GUARD, (c.var,), {'expect': value, 'site': user_site()}, ()))
    return value


def user_stacklevel():
    """The ``stacklevel`` for ``warnings.warn`` (called by its caller) that points at the
    first line of user code (outside nestad) on the stack."""
    f, level = sys._getframe(2), 2
    while f is not None:
        name = f.f_globals.get('__name__', '')
        if name and name != 'nestad' and not name.startswith('nestad.'):
            return level
        f, level = f.f_back, level + 1
    return 2


def user_site():
    """'file.py:12 in f': the line of user code (outside nestad) running now, which a
    guard names when it fails (for the retracing warning)."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_globals.get('__name__', '')
        if name and name != 'nestad' and not name.startswith('nestad.'):
            return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} in {f.f_code.co_name}"
        f = f.f_back
    return "?"


# The scalar comparison primitives, by name ('lt', 'ne'...): filled by nestad.primitives,
# which defines them on this module's tracers.
COMPARISONS = {}


def _compare(cmp, x, y):
    if isinstance(y, Perturbed):
        return NotImplemented         # the Perturbed side answers (on primal values)
    return COMPARISONS[cmp](x, y)  # a traced bool (a traced bool array against an array)


def apply_traced(op, args, params):
    """``op`` applied to plain values some of which are tracers: evaluate it on the
    example values and record it."""
    if not params and op.__class__ in SCALAR_OPS:
        # The common case, without resolve's and record's generality: a scalar
        # primitive on scalar tracers of the active trace and plain numbers.
        n = len(args)
        if n == 2:
            out = record2(op, args[0], args[1])
            if out is not None:
                return out
        elif n == 1:
            out = record1(op, args[0])
            if out is not None:
                return out
        else:
            stack = getattr(_state, 'stack', None)
            t = stack[-1] if stack else None
            vals = []
            for a in args:
                c = a.__class__
                if c is Tracer:
                    if a.trace is not t:
                        break
                    vals.append(a.val)
                elif c is float or c is int:
                    vals.append(a)
                else:
                    break
            else:
                val = op.plain(*vals)
                c = val.__class__
                if c is float or c is int or c is bool:
                    return t.record_scalar(op, args, val)
    trace, args = resolve(args)
    vals = [a.val if isinstance(a, _TRACERS) else a for a in args]
    val = op.plain(*vals, **params)
    if val is None or isinstance(val, (tuple, list, dict, str)):   # a user primitive's function
        raise one_output_error(op.name, val)
    return trace.record(op, args, params, val)


# Tracing runs ``record2``/``record1`` once per scalar operation (most of a trace's
# time): they make the result's Var and tracer without calling their ``__init__``
# (``_new``, then the slots), and ask ``SIMPLIFY`` only where an identity can apply.


def record2(op, x, y):
    """``apply_traced`` of scalar primitive ``op`` (no parameters) on two arguments, each
    a scalar tracer of the active trace or a Python float or int, giving a Python number:
    its tracer (or the argument an identity gives); None where that is not the case
    (``apply_traced``'s general path then records it).

    The equation is kept compact, as ``(op, a, b)`` in its result's tracer (which
    ``t.eqns`` holds: ``Trace.equations``); where the arguments are their own keys
    (variables, most floats) that tuple is also its CSE key."""
    try:
        t = _state.stack[-1]
    except (AttributeError, IndexError):        # (no trace is being recorded)
        return None
    a, b = x, y
    constant = False            # a plain number among the arguments?
    c = a.__class__
    if c is Tracer and a.trace is t:
        va = a.val
        a = ka = a.var
    elif c is float or c is int:
        va = ka = a
        if c is not float or not a or a != a:
            ka = _const_key(a)
        constant = True
    else:
        return None
    c = b.__class__
    if c is Tracer and b.trace is t:
        vb = b.val
        b = kb = b.var
    elif c is float or c is int:
        vb = kb = b
        if c is not float or not b or b != b:
            kb = _const_key(b)
        constant = True
    else:
        return None
    # (an equal equation recorded before is its answer, before computing: an identity's
    # equation is never recorded, so looking it up first changes nothing)
    rec = (op, a, b)
    key = rec if ka is a and kb is b else (op, ka, kb)
    cse = t.cse
    hit = cse.get(key)
    if hit is not None:
        return hit
    val = op.plain(va, vb)
    c = val.__class__
    if c is not float and c is not int and c is not bool:
        return None
    if constant:
        # (a scalar primitive's identities, x * 1.0, need a plain number; they read
        # the arguments' tracers)
        simplify = SIMPLIFY.get(op)
        if simplify is not None:
            same = simplify(x, y)
            if same is not None:
                return same
    var = _new(Var) if c is float else Var(*_aval(val))
    out = _new(Tracer)
    out.trace, out.var, out.val, out.eqn = t, var, val, rec
    t.eqns.append(out)
    cse[key] = out
    return out


def record1(op, a):
    """``record2`` for one argument, a scalar tracer of the active trace (None
    otherwise)."""
    try:
        t = _state.stack[-1]
    except (AttributeError, IndexError):
        return None
    if a.__class__ is not Tracer or a.trace is not t:
        return None
    key = (op, a.var)           # (compact, and looked up first, as in record2)
    cse = t.cse
    hit = cse.get(key)
    if hit is not None:
        return hit
    val = op.plain(a.val)
    c = val.__class__
    if c is not float and c is not int and c is not bool:
        return None
    simplify = SIMPLIFY.get(op)
    if simplify is not None:
        same = simplify(a)
        if same is not None:
            return same
    var = _new(Var) if c is float else Var(*_aval(val))
    out = _new(Tracer)
    out.trace, out.var, out.val, out.eqn = t, var, val, key
    t.eqns.append(out)
    cse[key] = out
    return out


# Classes of scalar primitives (nestad.lifting.Primitive): apply_traced's fast path.
SCALAR_OPS = set()


def one_output_error(name, out):
    """The error for a primitive's function returning ``out``, not one number or array:
    its rules, and the values nestad makes of its result, are for one output."""
    what = (f"a {type(out).__name__} of {len(out)} values" if isinstance(out, (tuple, list))
            else "None" if out is None else f"a {type(out).__name__} ({out!r:.40})")
    return InvalidInputError(
        f"primitive {name}: its function returned {what}; a primitive returns one real number "
        "or array. For several outputs define one primitive per output (or return them "
        "stacked in one array).")


def any_tracer(args):
    for a in args:
        if isinstance(a, _TRACERS):
            return True
    return False


# ---------------------------------------------------------------- numpy calls on tracers

# How a numpy function meeting tracers is recorded: ``RECORD_NUMPY_CALL['record'](func,
# args, kwargs)``, filled by staging/program.py (it owns the op of a recorded call).
RECORD_NUMPY_CALL = {}


def record_numpy_call(func, args, kwargs):
    """Record ``func(*args, **kwargs)`` (a numpy function meeting tracers) as it is."""
    return RECORD_NUMPY_CALL['record'](func, args, kwargs)


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if any(isinstance(x, Perturbed) for x in inputs):
        return NotImplemented             # the perturbed argument's protocol answers
    if kwargs.get('out') is not None:
        raise StagingError(f"numpy.{ufunc.__name__}(..., out=...) cannot write a traced "
                           "value into an array")
    route = UFUNC_PRIMITIVES.get(ufunc)
    if route is not None and method == '__call__' and not kwargs:
        return route(*inputs)             # nestad's primitive: its identities apply
    func = ufunc if method == '__call__' else getattr(ufunc, method)
    return record_numpy_call(func, inputs, kwargs)


# numpy ufuncs that nestad.numpy records as its own primitives (filled by nestad.numpy)
UFUNC_PRIMITIVES = {}


def producer(x):
    """The equation that computed tracer ``x`` (None for an input)."""
    if not isinstance(x, _TRACERS):
        return None
    e = x.eqn
    if e.__class__ is tuple:             # (recorded compact: Trace.equations)
        e = x.eqn = Eqn(e[0], e[1:], _NO_PARAMS, (x.var,))
    return e


def _array_function(self, func, types, args, kwargs):
    if any(issubclass(t, Perturbed) for t in types):
        return NotImplemented
    return record_numpy_call(func, args, kwargs)


def _array(self, dtype=None, copy=None):
    _refuse_concrete("converting to a plain numpy array (numpy.asarray, numpy.array, an "
                     "index of a numpy array)", self)


_TracerBase.__array_ufunc__ = _array_ufunc
_TracerBase.__array_function__ = _array_function
_TracerBase.__array__ = _array
