"""Source transformation of programs (seed 002): forward and reverse derivative programs.

``jvp(program)`` is the program of ``(x, dx) -> (f(x), J dx)``: each equation is
evaluated on Bundles of tracers through its primitive's own rule, so every line of
``program`` becomes its primal line followed by its tangent lines, interleaved as in
the seed.  ``vjp(program)`` is the program of ``(x, ct) -> (f(x), ct^T J)``: the
forward lines, with the partials each rule computes, then the adjoint lines in
reverse topological order, where a variable read twice has its sensitivities added
up (the accumulation that seed 002 writes as an explicit ``dup``).

Both run nestad's own ``jvp``/``vjp`` on a lifted evaluation of the program, so they
agree with the overloading results by construction, and both return Programs, which
transform again: ``jvp(program)`` then ``vjp`` is a Hessian-vector program.
"""
import numpy as np

from ..extraction import primal_of, tangent_of
from ..operators import vjp as _vjp
from .. import perturbation
from ..arrays import make_bundle
from .program import PROGRAM_HOOKS
from .tracing import trace


def _ones_like(x):
    return np.ones(np.shape(x)) if isinstance(x, np.ndarray) else 1.0


def jvp(program):
    """The forward derivative program: inputs ``x..., dx...``; outputs the program's
    outputs, then their tangents."""
    n = len(program.inputs)

    def forward(*flat):
        tag = perturbation.fresh()
        try:
            args = [make_bundle(tag, p, t) for p, t in zip(flat[:n], flat[n:])]
            out = program.run_flat(args, lifted=True)
            return tuple(primal_of(tag, out, "jvp")) + tuple(tangent_of(tag, out, "jvp"))
        finally:
            perturbation.retire(tag)

    example = list(program.example)
    result = trace(forward, *example, *map(_ones_like, example))
    result.names = list(program.names) + ["d" + n for n in program.names]
    return result


def vjp(program):
    """The reverse derivative program: inputs ``x..., ct...`` (one cotangent per
    output); outputs the program's outputs, then the cotangents of the inputs."""
    n = len(program.inputs)

    def reverse(*flat):
        value, pullback = _vjp(lambda *xs: program.run_flat(xs, lifted=True), *flat[:n])
        return tuple(value) + tuple(pullback(list(flat[n:])))

    cts = [np.ones(np.shape(o)) if np.ndim(o) else 1.0 for o in program.run_flat(program.example)]
    result = trace(reverse, *program.example, *cts)
    result.names = list(program.names) + [f"ct{k}" for k in range(len(cts))]
    return result


PROGRAM_HOOKS['jvp'], PROGRAM_HOOKS['vjp'] = jvp, vjp
