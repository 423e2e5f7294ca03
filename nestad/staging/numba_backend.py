"""``stage(f, backend="numba")``: the generated Python compiled by ``numba.njit``.

The same source as the Python backend: ``math`` calls, operators and loops, which
numba compiles to machine code.  Primitives spelled as calls of their plain Python
implementation are compiled with ``njit`` too.  A program numba cannot compile (most
array programs: numba supports a subset of numpy) runs with the Python backend
instead, with a warning naming numba's complaint.  numba is optional
(``pip install "nestad[numba]"``).
"""
import warnings

from ..errors import InvalidInputError


class NumbaFallbackWarning(UserWarning):
    """A staged program could not be compiled by numba and runs as Python instead."""


def _narrow_float(program):
    """True if a value of the program (its loops' included) is a float narrower than
    float64: numba types float32 times a Python float as float64, numpy (NEP 50) as
    float32, so numba's numbers would not be the Python backend's."""
    from .program import Program
    for v in program.inputs:
        if getattr(v, 'dtype', None) is not None and v.dtype.kind == 'f' and v.dtype.itemsize < 8:
            return True
    for eqn in program.eqns:
        for v in eqn.outs:
            if v.dtype is not None and v.dtype.kind == 'f' and v.dtype.itemsize < 8:
                return True
        if any(isinstance(p, Program) and _narrow_float(p) for p in eqn.params.values()):
            return True
    return False


_TAUGHT = None


def _teach(numba):
    """numba implementations of what staged scalar code calls and numba cannot compile
    as it is (registered once): the functions they implement, which stay as they are
    in the generated code.

    * ``pow``'s plain implementation (``_pow_plain``: numpy's IEEE answers where Python
      raises or makes a complex number).  numba's ``float ** float`` is C's ``pow``,
      which gives those answers (but where numpy's exponent 0.5 is a square root), and
      Python's ``x ** y`` of floats is that same ``pow`` elsewhere; an int exponent is
      made a float first, since numba computes ``x ** 3`` by multiplications (rounded
      differently).  Both ints: no implementation, so the program runs as Python
      (Python's ints are exact).
    * ``math.cbrt`` (Python 3.11), which numba lacks: numpy's ``cbrt``, the same C
      ``cbrt``."""
    global _TAUGHT
    if _TAUGHT is None:
        import math

        import numpy as np
        from numba.core import types
        from numba.extending import overload

        from ..primitives import _pow_plain, _real_pow

        def pow_ieee(x, y):
            x, y = float(x), float(y)
            if y == 0.5 and x <= 0.0:     # numpy's power is sqrt: -0.0 at -0.0, nan at -inf
                return np.sqrt(x)
            return x ** y

        @overload(_pow_plain)
        def _pow(x, y):
            if isinstance(x, types.Float) or isinstance(y, types.Float):
                return pow_ieee

        def int_pow(x, y):
            # exact below 2**63, as Python's ints; beyond, numba's would wrap: raise, and
            # the call reruns as Python (stage.Compiled)
            if abs(x) > 1 and y * math.log2(abs(x)) >= 62.0:
                raise OverflowError("an int power beyond 64 bits")
            return x ** y

        @overload(_real_pow)
        def _rpow(x, y):
            if isinstance(x, types.Integer) and isinstance(y, types.Integer):
                return int_pow
            return lambda x, y: float(x) ** float(y)
        _TAUGHT = {_pow_plain}
        if hasattr(math, 'cbrt') and not _knows(numba, math.cbrt):
            @overload(math.cbrt)
            def _cbrt(x):
                if isinstance(x, (types.Float, types.Integer)):
                    return lambda x: np.cbrt(float(x))
    return _TAUGHT


def _knows(numba, fn):
    """Whether numba has a type for ``fn`` (asked of its typing context, without compiling)."""
    from numba.core.registry import cpu_target
    ctx = cpu_target.typing_context
    ctx.refresh()
    try:
        ctx.resolve_value_type(fn)
    except (ValueError, numba.core.errors.TypingError):
        return False
    return True


def compile_numba(fn, source, program):
    try:
        import numba
    except ImportError:
        raise InvalidInputError('stage(backend="numba") needs numba: pip install "nestad[numba]"') \
            from None
    if _narrow_float(program):
        warnings.warn("numba would compute a staged program's float32 values in float64 (it "
                      "promotes float32 with Python floats, numpy does not); it runs as Python "
                      "code instead", NumbaFallbackWarning, stacklevel=4)
        return fn
    glb = fn.__globals__
    taught = _teach(numba)
    python = {name: value for name, value in glb.items()
              if name.startswith('_p_') and callable(value) and value not in taught}
    try:
        for name, value in python.items():
            # (``value.numba``: a version that raises where numba's arithmetic would not
            # give Python's answer, so that the call reruns as Python)
            glb[name] = numba.njit(cache=False)(getattr(value, 'numba', value))
        jitted = numba.njit(cache=False)(fn)
        jitted(*program.example)        # compile now, at the example the program was traced at
    except Exception as e:              # numba's typing and lowering errors have many types
        from .program import GuardFailure
        if isinstance(e, GuardFailure):
            raise
        lines = str(e).strip().splitlines()
        first = f"{type(e).__name__}: {lines[0]}" if lines else f"{type(e).__name__} inside numba"
        warnings.warn(f"numba could not compile a staged program ({first}); it runs as "
                      "Python code instead", NumbaFallbackWarning, stacklevel=4)
        glb.update(python)
        return fn
    return jitted
