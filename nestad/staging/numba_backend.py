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
    python = {name: value for name, value in glb.items()
              if name.startswith('_p_') and callable(value)}
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
