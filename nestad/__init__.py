"""nestad: nested forward- and reverse-mode automatic differentiation for Python.

Derivative operators nest to any depth and in any combination of modes without
confusing one perturbation with another (DVL's design: tagged perturbations
ordered by creation).  See README.md and notes/design.md.
"""
from .errors import (BatchedConversionError, EscapedPerturbationError, InvalidInputError, MissingRuleError, NestadError,
                     NonScalarOutputError, PerturbedConversionError, UnhashableValueError)
from .operators import (derivative, directional_derivative, elementwise_grad, gradient_f, gradient_r, grad,
                        hessian, hvp, jacfwd, jacobian_f, jacobian_r, jacrev, jvp,
                        value_and_grad, value_and_gradient_r, vjp)
from . import registry
from .primitives import where
from .structures import register_structure
from .vector_space import tangent_add, tangent_scale
from .values import Bundle, TapeCell, isfinite, isinf, isnan, primal_value
from . import numpy  # noqa: E402,F401  (installs array support and numpy dispatch)
from .staging import (GuardFailure, Program, StagingWarning, export, jit, stage,  # noqa: E402
                      trace, while_loop)
from .control import checkpoint, checkpoint_loop, fixed_point, stop_gradient  # noqa: E402
from .solvers import linear_solve, minimize, odeint, root  # noqa: E402
from .scan import fori_loop, scan  # noqa: E402
from . import extend  # noqa: E402
from .extend import primitive  # noqa: E402
from .tracer import StagingError  # noqa: E402
from . import modules as _modules  # noqa: E402
from . import optim  # noqa: E402,F401
from .optim import flatten  # noqa: E402
from .checking import check_grads  # noqa: E402

_modules.install()      # a missing nestad.x module names the nearest one that exists
from .batching import vmap  # noqa: E402
from .taylor import derivatives, jet, taylor_series  # noqa: E402

# The differentiable scalar functions (sin, exp, atan2, abs, floor...): every primitive
# defined for this namespace, from the registry (nestad/primitives.py defines them).
FUNCTIONS = registry.exported('nestad')
globals().update(FUNCTIONS)

__version__ = "0.1.0"

__all__ = [
    'derivative', 'directional_derivative', 'jvp', 'gradient_f', 'gradient_r', 'grad',
    'value_and_gradient_r', 'value_and_grad', 'vjp', 'jacobian_f', 'jacobian_r', 'jacfwd',
    'jacrev', 'hessian', 'hvp', 'elementwise_grad', 'check_grads',
    'where', 'isnan', 'isfinite', 'isinf',
    'vmap', 'jet', 'derivatives', 'taylor_series', 'trace', 'stage', 'jit', 'export', 'while_loop',
    'scan', 'fori_loop', 'Program', 'GuardFailure', 'StagingError', 'StagingWarning',
    'primitive', 'extend', 'stop_gradient', 'checkpoint', 'checkpoint_loop', 'fixed_point',
    'linear_solve', 'root', 'minimize', 'odeint',
    'register_structure', 'flatten', 'optim', 'primal_value', 'tangent_add', 'tangent_scale', 'Bundle', 'TapeCell',
    'NestadError', 'InvalidInputError', 'BatchedConversionError', 'NonScalarOutputError', 'PerturbedConversionError',
    'EscapedPerturbationError', 'UnhashableValueError', 'MissingRuleError',
] + sorted(FUNCTIONS)
