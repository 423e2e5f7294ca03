"""``nestad.scipy``: scipy.special and scipy.stats functions that differentiate.

An optional part of nestad (``pip install "nestad[scipy]"``): ``import nestad`` does not
import scipy.  Every function here is a primitive defined with ``nestad.primitive`` (the
public extension mechanism), whose values are scipy's own and whose rules are written
with differentiable functions, so derivatives of every order work in every mode.
"""
try:
    import scipy  # noqa: F401
except ImportError:                      # pragma: no cover - exercised without scipy only
    raise ImportError('nestad.scipy needs scipy: pip install "nestad[scipy]"') from None

from . import special, stats  # noqa: E402,F401
