"""Pickling functions that stand for a user's function (staged functions, operators'
results): they pickle as that function, so it must be picklable itself.

The standard pickler (multiprocessing's) stores a function by module and name, so a
lambda or a function defined inside another fails with a message about attribute
lookups; ``check_picklable`` says which function and what to do instead.  A pickler
that stores functions by value (cloudpickle, which Dask uses) is let through.
"""
import pickle
import sys
import types


class UnpicklableFunction(pickle.PicklingError):
    """The function a staged function or operator stands for cannot be pickled."""


def check_picklable(f, what):
    """Raise ``UnpicklableFunction`` if ``f`` is a function that the pickler at work
    cannot store; ``what`` names the object being pickled (``"staged function"``...).
    Other callables (an operator's result, a staged function) are checked when they are
    pickled in turn, by their own ``__reduce__``."""
    if not isinstance(f, types.FunctionType):
        return
    found = _lookup(f)
    if found is f or _pickles_by_value():
        return
    name = f"{f.__module__}.{f.__qualname__}"
    why = ("is not found by its name (a lambda, or a function defined inside another)"
           if found is None else "finds another object (a closure named after the function "
           "it wraps, as decorators and nd.checkpoint make)")
    raise UnpicklableFunction(
        f"cannot pickle the {what} of {name}: it is pickled as that function, which pickle "
        f"stores by module and name, and {name} {why}. Define the function with `def` at "
        "the top level of a module (or pickle with cloudpickle, which stores functions by "
        "value)")


def _lookup(f):
    """What ``f``'s module and qualified name find (pickle stores ``f`` if it is ``f``)."""
    obj = sys.modules.get(f.__module__)
    for part in f.__qualname__.split('.'):
        obj = getattr(obj, part, None)
    return obj


def _pickles_by_value():
    """True if the pickler at work defines ``reducer_override`` (cloudpickle's does, to
    store functions by value; the standard pickler has none), found among the frames
    that called ``__reduce__``."""
    frame = sys._getframe(3)
    for _ in range(30):
        if frame is None:
            break
        pickler = frame.f_locals.get('self')
        if isinstance(pickler, (pickle.Pickler, pickle._Pickler)):
            return hasattr(pickler, 'reducer_override')
        frame = frame.f_back
    return False
