"""Issue 7, engine part: values that must never give a silent wrong number.

* perturbed values are unhashable (memoised code would return a plain cached number);
* a value whose derivative call has returned (escaped through a side effect) raises when
  any nestad operation meets it;
* scalar functions give numpy's float64 values at special points (nan, signed zeros,
  infinities);
* tag tables do not grow with the number of calls;
* linear-map partials are split and renamed alike (function-valued derivatives applied
  inside reverse mode over arrays)."""
import functools
import math

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import EscapedPerturbationError, UnhashableValueError

D = {'f': nd.derivative, 'r': nd.gradient_r}
MODES = ['f', 'r', 'ff', 'fr', 'rf', 'rr']


def nest(modes, f):
    for m in reversed(modes):
        f = D[m](f)
    return f


# ---------------------------------------------------------------- hashing

@pytest.mark.parametrize('modes', MODES)
def test_dict_cache_keyed_by_a_perturbed_value_raises_instead_of_returning_zero(modes):
    cache = {2.0: 4.0}              # filled by an earlier plain call

    def square(x):
        if x in cache:
            return cache[x]
        return x * x
    with pytest.raises(UnhashableValueError, match="primal_value"):
        nest(modes, square)(2.0)


@pytest.mark.parametrize('modes', MODES)
def test_lru_cache_raises_instead_of_returning_zero(modes):
    @functools.lru_cache(maxsize=None)
    def cube(x):
        return x * x * x
    assert cube(2.0) == 8.0
    with pytest.raises(UnhashableValueError, match="derivative"):
        nest(modes, cube)(2.0)


def test_arrays_and_sets_unhashable_too_and_the_plain_key_works():
    with pytest.raises(UnhashableValueError):
        nd.gradient_r(lambda x: anp.sum(x) * len({x}))(np.ones(2))
    # keying on the primal value is the documented way when no derivative is needed
    table = {2.0: 10.0}
    assert nd.derivative(lambda x: x * table[nd.primal_value(x)])(2.0) == 10.0
    with pytest.raises(TypeError):          # also a TypeError, as for unhashable types
        hash(nd.Bundle(1, 1.0, 1.0))
