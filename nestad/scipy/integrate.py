"""``nestad.scipy.integrate``: ``odeint`` for code ported from autograd and scipy
(``from autograd.scipy.integrate import odeint``), with scipy's signature
``odeint(func, y0, t, args=(), rtol=None, atol=None, mxstep=0)`` and ``func(y, t, *args)``,
on nestad's integrator with exact derivatives (``nestad.solvers.odeint``, issue 18) when
this nestad has it."""
from ..errors import InvalidInputError

try:
    from ..solvers import odeint as _odeint
except ImportError:
    _odeint = None


def _missing():
    # (ImportError: `from nestad.scipy.integrate import odeint` shows this message)
    return ImportError("nestad.scipy.integrate.odeint is nestad's ODE integrator with exact "
                       "derivatives, which this version of nestad does not have yet (it arrives "
                       "with nestad.solvers); integrate with a fixed-step loop of nestad "
                       "operations meanwhile")


if _odeint is not None:
    def odeint(func, y0, t, args=(), rtol=None, atol=None, mxstep=0, **options):
        """scipy.integrate.odeint's call on nestad.solvers.odeint: the solution of
        dy/dt = func(y, t, *args) at the times t, differentiable in y0 and args."""
        if options:
            raise InvalidInputError(
                f"nestad.scipy.integrate.odeint does not take {', '.join(sorted(options))}: "
                "it integrates with adaptive Dormand-Prince steps (rtol, atol, mxstep only)")
        if not isinstance(args, tuple):
            raise InvalidInputError("odeint: args must be a tuple of extra arguments of func, "
                                    f"as scipy's, not {type(args).__name__}")
        tolerances = {k: v for k, v in (('rtol', rtol), ('atol', atol), ('mxstep', mxstep)) if v}
        return _odeint(func, y0, t, *args, **tolerances)
else:
    def __getattr__(name):
        if name == 'odeint':
            raise _missing()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
