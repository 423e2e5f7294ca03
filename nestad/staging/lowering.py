"""How staged code spells nestad.numpy's primitives (nestad.staging.codegen); the others
are called through their plain implementation."""
import numpy as _np

from .. import numpy as _numpy  # noqa: F401  (its primitives, registered)
from .. import registry as _registry


# Elementwise ufuncs are spelled np.<name>.
# (numpy's functions, not operators: on two Python floats an operator gives a Python float,
# which numpy does not promote a float32 array with, numpy.multiply a float64 scalar, as
# eager nestad.numpy gives; and / raises where numpy.true_divide gives inf)
_EXPRESSIONS = {
    'add': 'np.add({0}, {1})', 'subtract': 'np.subtract({0}, {1})',
    'multiply': 'np.multiply({0}, {1})', 'divide': 'np.true_divide({0}, {1})',
    'matmul': '{0} @ {1}', 'getitem': '{0}[{index}]', 'where': 'np.where({0}, {1}, {2})',
    'sum': 'np.sum({0}, axis={axis}, keepdims={keepdims})',
    'prod': 'np.prod({0}, axis={axis}, keepdims={keepdims})',
    'max': 'np.max({0}, axis={axis}, keepdims={keepdims})',
    'min': 'np.min({0}, axis={axis}, keepdims={keepdims})',
    'reshape': 'np.reshape({0}, {shape})', 'transpose': 'np.transpose({0}, {axes})',
    'broadcast_to': 'np.broadcast_to({0}, {shape})',
}
for _qualname, _prim in _registry.PRIMITIVES.items():
    _name = _qualname[len('numpy.'):]
    if _qualname.startswith('numpy.') and _prim.emit is None:
        if _name in _EXPRESSIONS:
            _prim.emit = _EXPRESSIONS[_name]
        elif isinstance(_prim.plain, _np.ufunc) and getattr(_np, _prim.plain.__name__, None) is _prim.plain:
            # every operand (the binary ones were written with their first operand only)
            _operands = ', '.join(f"{{{_k}}}" for _k in range(_prim.plain.nin))
            _prim.emit = f"np.{_prim.plain.__name__}({_operands})"
