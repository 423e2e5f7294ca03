"""GradBench's ``hello``: ``square(x) = x * x`` and its derivative ``double``, here by
reverse mode."""
import nestad as nd

from . import function


def _square(x):
    return x * x


@function(prepare=lambda x: (float(x),))
def square(x):
    return _square(x)


@function(prepare=lambda x: (float(x),))
def double(x):
    return nd.gradient_r(_square)(x)
