"""Pickling functions that stand for a user's function (staged functions, operators'
results): they pickle as that function, so it must be picklable itself.

The standard pickler (multiprocessing's) stores a function by module and name, so a
lambda or a function defined inside another fails with a message about attribute
lookups; ``check_picklable`` says which function and what to do instead.  A pickler
that stores functions by value (cloudpickle, which Dask uses) is let through.
"""
import inspect
import pickle
import sys


class UnpicklableFunction(pickle.PicklingError):
    """The function a staged function or operator stands for cannot be pickled."""


def check_picklable(f, what):
    """Raise ``UnpicklableFunction`` if the pickler at work cannot store ``f``; ``what``
    names the object being pickled (``"staged function"``...)."""
    if _pickles_by_value():
        return
    try:
        pickle.dumps(f)
    except UnpicklableFunction:
        raise                         # (an inner operator's, which names the function)
    except Exception as e:            # (PicklingError, AttributeError, TypeError...)
        inner = inspect.unwrap(f)
        name = f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', inner)}"
        raise UnpicklableFunction(
            f"cannot pickle the {what} of {name}: {e}. It is pickled as the function it "
            "stands for, which pickle stores by module and name: define that function with "
            "`def` at the top level of a module, not as a lambda or inside another function "
            "(or pickle with cloudpickle, which stores functions by value)") from e


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
