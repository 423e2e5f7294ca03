"""nestad: nested forward- and reverse-mode automatic differentiation for Python.

Derivative operators nest to any depth and in any combination of modes without
confusing one perturbation with another (DVL's design: tagged perturbations
ordered by creation).  See README.md and notes/design.md.
"""
from .errors import (EscapedPerturbationError, InvalidInputError, MissingRuleError, NestadError,
                     NonScalarOutputError, PerturbedConversionError, UnhashableValueError)
from .operators import (derivative, directional_derivative, gradient_f, gradient_r, grad,
                        hessian, hvp, jacfwd, jacobian_f, jacobian_r, jacrev, jvp,
                        value_and_grad, value_and_gradient_r, vjp)
from . import registry
from .primitives import where
from .structures import register_structure
from .vector_space import tangent_add, tangent_scale
from .values import Bundle, TapeCell, isfinite, isinf, isnan, primal_value
from . import numpy  # noqa: E402,F401  (installs array support and numpy dispatch)
from .staging import (GuardFailure, Program, StagingWarning, jit, stage, trace,  # noqa: E402
                      while_loop)
from .control import checkpoint, checkpoint_loop, fixed_point, stop_gradient  # noqa: E402
from . import extend  # noqa: E402
from .extend import primitive  # noqa: E402
from .tracer import StagingError  # noqa: E402

# The differentiable scalar functions (sin, exp, atan2, abs, floor...): every primitive
# defined for this namespace, from the registry (nestad/primitives.py defines them).
FUNCTIONS = registry.exported('nestad')
globals().update(FUNCTIONS)

__version__ = "0.1.0"

__all__ = [
    'derivative', 'directional_derivative', 'jvp', 'gradient_f', 'gradient_r', 'grad',
    'value_and_gradient_r', 'value_and_grad', 'vjp', 'jacobian_f', 'jacobian_r', 'jacfwd',
    'jacrev', 'hessian', 'hvp',
    'where', 'isnan', 'isfinite', 'isinf',
    'trace', 'stage', 'jit', 'while_loop', 'Program', 'GuardFailure', 'StagingError',
    'StagingWarning',
    'primitive', 'extend', 'stop_gradient', 'checkpoint', 'checkpoint_loop', 'fixed_point',
    'register_structure', 'primal_value', 'tangent_add', 'tangent_scale', 'Bundle', 'TapeCell',
    'NestadError', 'InvalidInputError', 'NonScalarOutputError', 'PerturbedConversionError',
    'EscapedPerturbationError', 'UnhashableValueError', 'MissingRuleError',
] + sorted(FUNCTIONS)
