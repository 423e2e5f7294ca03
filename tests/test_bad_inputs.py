"""Bad inputs: each raises a nestad exception of the documented type whose message names
the cause (a path, a shape, a type, an argnums) and, where there is one, what to do instead.

Never a silently wrong number, never an internal crash."""
import numpy as np
import pytest

import nestad as nd
from nestad import InvalidInputError


def f2(x, y):
    return x * y * y


# ---------------------------------------------------------------- argnums

ARGNUMS_OPS = [nd.gradient_r, nd.value_and_gradient_r, nd.gradient_f, nd.jacobian_f,
               nd.jacobian_r, nd.hessian]


@pytest.mark.parametrize('op', ARGNUMS_OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize('argnums', [(0, 0), (1, 1, 0), (0, -2), [1, -1]])
def test_repeated_argnums(op, argnums):
    # gradient_r(f, argnums=(0, 0)) used to return (0.0, 2.0): a wrong number.
    with pytest.raises(InvalidInputError, match=r"more than once") as e:
        op(f2, argnums=argnums)(2.0, 3.0)
    assert op.__name__ in str(e.value) and "argnums" in str(e.value)


@pytest.mark.parametrize('op', ARGNUMS_OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize('argnums', [2, -3, (0, 2)])
def test_out_of_range_argnums(op, argnums):
    with pytest.raises(InvalidInputError, match=r"does not name an argument of a call with 2 "):
        op(f2, argnums=argnums)(2.0, 3.0)


@pytest.mark.parametrize('op', ARGNUMS_OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize('argnums', [True, 0.0, "x", (0, None)])
def test_argnums_that_are_not_positions(op, argnums):
    # Refused when the operator is made, before any call.
    with pytest.raises(InvalidInputError, match=r"is not a position"):
        op(f2, argnums=argnums)


def test_argnums_numpy_int_and_negative_are_positions():
    assert nd.gradient_r(f2, argnums=np.int64(1))(2.0, 3.0) == 12.0
    assert nd.gradient_r(f2, argnums=(-1, 0))(2.0, 3.0) == (12.0, 9.0)
    assert nd.jacobian_r(f2, argnums=[-2])(2.0, 3.0) == (9.0,)
