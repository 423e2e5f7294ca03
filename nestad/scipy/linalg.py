"""``nestad.scipy.linalg``: scipy.linalg's functions of real matrices that differentiate.

Those numpy.linalg has too are nestad.numpy.linalg's (their values are numpy's LAPACK
calls, as scipy's are)."""
from ..numpy.linalg import det, inv, norm, pinv, solve  # noqa: F401
