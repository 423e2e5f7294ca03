"""The registry: every primitive nestad knows, and every function it exports.

There is one registry, and every layer reads it: lifting applies a primitive's rules
to perturbed values; the staging layer records primitives into programs, emits code
for them and transforms programs with the same rules; the package's namespaces, numpy
dispatch and the README's list of functions are made from it.  A primitive is
registered where it is defined, next to its rules (``nestad/primitives.py`` for
scalars, ``nestad/numpy`` for arrays, ``nestad.primitive`` for users').

Qualified names: scalar primitives by their name (``sin``), array primitives of
``nestad.numpy`` as ``numpy.sin``, of its ``linalg`` as ``numpy.linalg.solve``, users'
by their module and qualified name.

A scalar primitive defined with the numpy function it mirrors (``unary('asin',
math.asin, numpy.arcsin, rule)``) is *elementwise*: nestad.numpy makes its array
version from the same rule, exports it under numpy's name (``nestad.numpy.arcsin``),
and numpy's dispatch sends ``numpy.arcsin`` of a nestad value there.  So adding a
function such as ``exp2`` to both is one definition.

Programs refer to primitives by these names when they are pickled (``reduce``), so a
program traced in one process runs in another.
"""
import importlib
from .errors import NestadError

PRIMITIVES = {}            # qualified name -> primitive
USER = set()               # qualified names of users' primitives (nestad.primitive)
EXPORTS = {}               # (namespace, name) -> public function
ELEMENTWISE = []           # (scalar primitive, numpy function it mirrors), in definition order


def register(prim, qualname, user=False):
    """Record ``prim`` under ``qualname``; names are unique, but a user's primitive may be
    defined again under its name (a primitive defined in a function body, each call)."""
    if qualname in PRIMITIVES and not (user and qualname in USER):
        raise ValueError(f"a primitive named {qualname!r} is already registered")
    PRIMITIVES[qualname] = prim
    prim.qualname = qualname        # the key of its rules in rule tables (nestad.batching)
    if user:
        USER.add(qualname)
    return prim


def export(fn, namespace, name=None):
    """Record ``fn`` as a public function of ``namespace`` (``'nestad'``,
    ``'nestad.numpy'``...) under ``name`` (default: its own)."""
    EXPORTS[(namespace, name or fn.__name__)] = fn
    return fn


def exported(namespace):
    """{name: function} of everything exported to ``namespace``."""
    return {name: fn for (ns, name), fn in EXPORTS.items() if ns == namespace}


def elementwise(prim, numpy_fn):
    """Declare scalar primitive ``prim`` the elementwise mirror of ``numpy_fn``."""
    ELEMENTWISE.append((prim, numpy_fn))


def lookup(qualname):
    return PRIMITIVES[qualname]



def reduce(prim, qualname):
    """pickle's reduction of a primitive: its registered name (rules are closures, and
    the primitive is the same object wherever its module is imported), with the module
    that defines it (a user's, or nestad's own) to import where it is not yet known."""
    if PRIMITIVES.get(qualname) is not prim or '<locals>' in qualname:
        import pickle
        raise pickle.PicklingError(
            f"cannot pickle the primitive {qualname!r}: it is defined inside a function (or "
            "defined again under its name since), so no other process can find it by name. "
            "Define it with nestad.primitive at the top level of a module")
    module = prim.plain.__module__ if qualname in USER else 'nestad'
    return named, (qualname, module)


def named(qualname, module='nestad'):
    """The primitive registered as ``qualname``, importing ``module`` if it is missing."""
    prim = PRIMITIVES.get(qualname)
    if prim is None:
        importlib.import_module(module)
        prim = PRIMITIVES.get(qualname)
    if prim is None:
        raise NestadError(f"a pickled program uses the primitive {qualname!r}, which importing "
                          f"{module} does not define: define it at the top level of a module "
                          "(not inside a function) and import that module before unpickling")
    return prim
