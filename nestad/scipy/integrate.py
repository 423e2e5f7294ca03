"""``nestad.scipy.integrate``: ``odeint`` for code ported from autograd
(``from autograd.scipy.integrate import odeint``), re-exported from nestad's solvers
(the integrator with exact derivatives of issue 18) when this nestad has them."""
try:
    from ..solvers import odeint  # noqa: F401
except ImportError:
    try:
        from .. import odeint  # noqa: F401
    except ImportError:
        def __getattr__(name):
            if name == 'odeint':        # (ImportError: `from ... import odeint` shows it)
                raise ImportError(
                    "nestad.scipy.integrate.odeint is nestad's ODE integrator with exact "
                    "derivatives, which this version of nestad does not have yet (it arrives "
                    "with nestad.solvers); integrate with a fixed-step loop of nestad "
                    "operations meanwhile")
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
