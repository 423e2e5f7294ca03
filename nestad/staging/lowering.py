"""Lowering tables: how each backend spells a primitive in generated code.

A table maps a primitive's qualified name (``'sin'``, ``'numpy.sum'``) to its spelling:
a format string of the arguments' code (``{0}``, ``{1}``...) and the parameters' (by
name: ``{axis}``), or a function ``spell(args, params)`` of those (lists of code) that
returns the expression.  ``PYTHON`` is every backend's fallback; a backend's own table
overrides it where the backend needs another spelling; a primitive found in neither is
called through its plain implementation (``codegen``).

Adding a backend is a table and a registration: ``register(name, table, names)``, where
``names`` are the globals its spellings use, bound in the generated module.  Then
``codegen.python_source(program, backend=name)`` spells the program with it.

Scalar code calls ``math`` (fast; where it raises, ``stage`` reruns the call with the
IEEE implementations: ``safe``), and the arithmetic operators.  Array code calls numpy's
functions, not its operators: on two Python floats an operator gives a Python float, which
numpy does not promote a float32 array with (numpy.multiply gives a float64 scalar, as
eager nestad.numpy does), and ``/`` raises where numpy.true_divide gives inf.
"""
import math

import numpy as np

from .. import numpy as _numpy  # noqa: F401  (its primitives, registered)
from .. import primitives as _primitives  # noqa: F401
from .. import registry

def _concatenate(args, params):
    # numpy's call on a tuple: not the primitive's plain ``*xs, axis`` (a Python frame
    # more per call, and numba binds no keyword after *args)
    return f"np.concatenate(({', '.join(args)},), axis={params['axis']})"


PYTHON = {
    # scalar arithmetic, comparisons and logic (nestad.primitives)
    'add': '{0} + {1}', 'sub': '{0} - {1}', 'mul': '{0} * {1}', 'div': '{0} / {1}',
    'mod': '{0} % {1}', 'neg': '-{0}', 'floordiv': '{0} // {1}', 'recip': '1.0 / {0}',
    'abs': 'abs({0})', 'select': '({1} if {0} else {2})',
    'lt': '{0} < {1}', 'le': '{0} <= {1}', 'gt': '{0} > {1}', 'ge': '{0} >= {1}',
    'eq': '{0} == {1}', 'ne': '{0} != {1}',
    'and': '{0} & {1}', 'or': '{0} | {1}', 'xor': '{0} ^ {1}', 'not': '(not {0})',
    'atan2': 'math.atan2({0}, {1})', 'hypot': 'math.hypot({0}, {1})',
    # arrays (nestad.numpy)
    'numpy.add': 'np.add({0}, {1})', 'numpy.subtract': 'np.subtract({0}, {1})',
    'numpy.multiply': 'np.multiply({0}, {1})', 'numpy.divide': 'np.true_divide({0}, {1})',
    'numpy.matmul': '{0} @ {1}', 'numpy.getitem': '{0}[{index}]',
    'numpy.where': 'np.where({0}, {1}, {2})',
    'numpy.sum': 'np.sum({0}, axis={axis}, keepdims={keepdims})',
    'numpy.prod': 'np.prod({0}, axis={axis}, keepdims={keepdims})',
    'numpy.max': 'np.max({0}, axis={axis}, keepdims={keepdims})',
    'numpy.min': 'np.min({0}, axis={axis}, keepdims={keepdims})',
    'numpy.reshape': 'np.reshape({0}, {shape})', 'numpy.transpose': 'np.transpose({0}, {axes})',
    'numpy.broadcast_to': 'np.broadcast_to({0}, {shape})', 'numpy.concatenate': _concatenate,
    # staged loops (nestad.staging.loops)
    'nestad.loops.loop_row': '{0}[{1}]',
}


def _defaults():
    """The spellings that follow a rule: a scalar primitive whose function is math's
    (through its IEEE wrapper) is spelled as math's call; an array primitive whose plain
    implementation is numpy's ufunc of that name, as that ufunc's call."""
    for qualname, prim in registry.PRIMITIVES.items():
        if qualname in PYTHON:
            continue
        plain = getattr(prim, 'plain', None)
        fn = getattr(plain, '__wrapped__', plain)
        if '.' not in qualname and len(getattr(prim, 'partials', None) or ()) == 1 and \
                getattr(math, getattr(fn, '__name__', ''), None) is fn:
            PYTHON[qualname] = f"math.{fn.__name__}({{0}})"
        elif qualname.startswith('numpy.') and isinstance(plain, np.ufunc) and \
                getattr(np, plain.__name__, None) is plain:
            PYTHON[qualname] = f"np.{plain.__name__}({', '.join(f'{{{k}}}' for k in range(plain.nin))})"


_defaults()

# backend name -> (its own table, the globals its spellings use).  Python's own: np.sum is
# np.add.reduce behind about 3 us of Python, which doubled the cost of a reduction of a
# small array, and np.max/np.min are np.maximum/minimum.reduce behind about 2 us;
# np.reshape and np.transpose are the array's methods behind about 1 us and 0.4 us of
# Python (np.asarray: the argument may be a Python number).  numba types np.sum, np.max,
# np.reshape... only, so the shared table keeps those.  ``numpy.take`` spells a gather by
# one integer array (``x[:, i]``: codegen.gathered_axis): the array's ``take`` is 2-3x
# faster than the subscript on small stacks, and its result is C-ordered where the
# subscript keeps a transposed operand's order (a later ``@`` of it took 3.5x as long).
BACKENDS = {'python': ({
    'numpy.sum': 'np.add.reduce({0}, axis={axis}, keepdims={keepdims})',
    'numpy.max': 'np.maximum.reduce({0}, axis={axis}, keepdims={keepdims})',
    'numpy.min': 'np.minimum.reduce({0}, axis={axis}, keepdims={keepdims})',
    'numpy.reshape': 'np.asarray({0}).reshape({shape})',
    'numpy.transpose': 'np.asarray({0}).transpose({axes})',
    'numpy.take': '{0}.take({indices}, axis={axis})'}, {})}


def register(name, table, names=None):
    """Declare backend ``name``: ``table`` overrides the Python spellings for it, and
    ``names`` ({name: object}, read when code is spelled: it may be filled later) are
    bound in the code it spells."""
    BACKENDS[name] = (table, {} if names is None else names)
    return table


def spellings(backend='python'):
    """({qualname: spelling} for ``backend``, the globals its spellings use)."""
    table, names = BACKENDS[backend]
    return ({**PYTHON, **table} if table else PYTHON), names


def spell(spelling, args, params):
    """The expression of a spelling for the arguments' and parameters' code."""
    if isinstance(spelling, str):
        return spelling.format(*args, **params)
    return spelling(args, params)
