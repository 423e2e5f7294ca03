"""Selection: ``where`` (the condition carries no derivative) and ``clip``."""
import numpy as _np

from ..lifting import ARRAY_ROUTES
from ..tracer import is_tracer
from ..values import Batched as _Batched, primal_value
from ._kernel import _as_operand, _define, _shape
from ._plumbing import _jvp2, sum_to


# ---------------------------------------------------------------- selection

# _where(cond, x, y): cond carries no derivative (``where`` passes its primal value), so
# only x and y have rules.  cond is an argument, not a parameter, so that it may be traced.
_where_jvp_x = _jvp2(lambda t, x, y, out, cond: _where(cond, t, 0.0))[0]
_where_jvp_y = _jvp2(lambda t, x, y, out, cond: _where(cond, 0.0, t))[1]
_where = _define(
    'where', lambda cond, x, y: _np.where(cond, x, y),
    jvps=(None, lambda t, cond, x, y, out: _where_jvp_x(t, x, y, out, cond=cond),
          lambda t, cond, x, y, out: _where_jvp_y(t, x, y, out, cond=cond)),
    vjps=(None, lambda g, cond, x, y, out: sum_to(_where(cond, g, 0.0), _shape(x)),
          lambda g, cond, x, y, out: sum_to(_where(cond, 0.0, g), _shape(y))))


def where(condition, x=_np._NoValue, y=_np._NoValue):
    """Elementwise choice; the condition is read from primal values (no derivative).
    With the condition alone, numpy's indices of its nonzero entries."""
    if x is _np._NoValue and y is _np._NoValue:
        return _np.nonzero(primal_value(_as_operand(condition)))
    if x is _np._NoValue or y is _np._NoValue:
        raise ValueError("either both or neither of x and y should be given")
    cond = primal_value(_as_operand(condition))
    if not is_tracer(cond) and cond.__class__ is not _Batched:
        cond = _np.asarray(cond, dtype=bool)
    return _where(cond, _as_operand(x), _as_operand(y))


ARRAY_ROUTES['select'] = where


def clip(x, a_min, a_max):
    x, a_min, a_max = _as_operand(x), _as_operand(a_min), _as_operand(a_max)
    out = x
    if a_min is not None:
        out = where(primal_value(out) < primal_value(a_min), a_min, out)
    if a_max is not None:
        out = where(primal_value(out) > primal_value(a_max), a_max, out)
    return out
