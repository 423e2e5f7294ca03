"""nestad's implementations of GradBench's evals, one module per eval.

A module defines the eval's functions (``primal`` and ``gradient``, ``ff`` ... ``rr``,
...) with the ``function`` decorator below.  ``prepare`` turns the JSON ``input`` of
an ``evaluate`` message into the arguments of the function (numpy arrays, lists of
floats) and ``output`` turns the result back into JSON values; neither is timed, as
in GradBench's other tools: the ``evaluate`` timings cover the call of the function
itself, derivative included.
"""
from dataclasses import dataclass
from typing import Any, Callable

# The evals this tool implements (GradBench's module names).
EVALS = ('hello', 'saddle', 'particle', 'lse', 'llsq', 'det', 'gmm', 'kmeans', 'ode', 'lstm')


@dataclass(frozen=True)
class Function:
    compute: Callable[..., Any]
    prepare: Callable[[Any], tuple]
    output: Callable[[Any], Any]


def function(prepare, output=float):
    """Declare ``compute(*prepare(input))`` as a function of the eval, its result sent
    back as ``output(result)``."""
    def declare(compute):
        return Function(compute, prepare, output)
    return declare


def to_list(a):
    """An array (or list of them) as nested lists of Python floats."""
    return a.tolist()
