"""The registry of primitives: every operation nestad knows, by qualified name.

There is one registry, and every layer reads it: lifting applies a primitive's rules
to perturbed values; the staging layer records primitives into programs, emits code
for them and transforms programs with the same rules.  A primitive is registered
where it is defined, next to its rules (``nestad/primitives.py`` for scalars,
``nestad/numpy`` for arrays).

Qualified names: scalar primitives by their name (``sin``), array primitives of
``nestad.numpy`` as ``numpy.sin``, of its ``linalg`` as ``numpy.linalg.solve``.
"""
PRIMITIVES = {}


def register(prim, qualname):
    """Record ``prim`` under ``qualname``; names are unique."""
    if qualname in PRIMITIVES:
        raise ValueError(f"a primitive named {qualname!r} is already registered")
    PRIMITIVES[qualname] = prim
    return prim


def lookup(qualname):
    return PRIMITIVES[qualname]
