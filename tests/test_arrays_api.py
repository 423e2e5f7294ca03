"""Arrays, part three: the array API around the rules.  ndarray subclasses are refused,
nestad.numpy gives numpy's own values (signed zeros, nan, dtypes), accepts lists,
names unsupported numpy functions in full, and offers the ndarray methods and a
functional update ``x.at[i].set(v)``."""
import os
import sys

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp

pytestmark = pytest.mark.filterwarnings('ignore::PendingDeprecationWarning')   # numpy.matrix

sys.path.insert(0, os.path.dirname(__file__))
from test_arrays import check_gradient, check_hessian, check_jacobian, uniform  # noqa: E402


# ---------------------------------------------------------------- ndarray subclasses

def masked():
    return np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])


def matrix():
    return np.matrix([[1.0, 2.0], [3.0, 4.0]])


class Tagged(np.ndarray):
    """A user's ndarray subclass."""


def tagged():
    return np.arange(3.0).view(Tagged)


SUBCLASSES = {   # name: (constructor, words the message must contain)
    'masked': (masked, ['numpy.ma.MaskedArray', 'filled', 'numpy.asarray']),
    'matrix': (matrix, ['numpy.matrix', 'numpy.asarray', '@']),
    'user-subclass': (tagged, ['Tagged', 'subclass of numpy.ndarray', 'numpy.asarray']),
}


def total(x):
    return anp.sum(x * x)


OPERATORS_ON_INPUT = {
    'gradient_r': lambda x: nd.gradient_r(total)(x),
    'gradient_f': lambda x: nd.gradient_f(total)(x),
    'jacobian_f': lambda x: nd.jacobian_f(lambda x: x * 2.0)(x),
    'jacobian_r': lambda x: nd.jacobian_r(lambda x: x * 2.0)(x),
    'hessian': lambda x: nd.hessian(total)(x),
    'hvp': lambda x: nd.hvp(total, x, np.ones(np.shape(x))),
    'jvp-primal': lambda x: nd.jvp(total, (x,), (np.ones(np.shape(x)),)),
    'jvp-tangent': lambda x: nd.jvp(total, (np.ones(np.shape(x)),), (x,)),
    'vjp': lambda x: nd.vjp(total, x),
    'in-a-dict': lambda x: nd.gradient_r(lambda p: total(p['w']))({'w': x}),
    'vjp-cotangent': lambda x: nd.vjp(lambda y: y * 2.0, np.ones(np.shape(x)))[1](x),
}


@pytest.mark.parametrize('op', sorted(OPERATORS_ON_INPUT))
@pytest.mark.parametrize('kind', sorted(SUBCLASSES))
def test_operator_refuses_ndarray_subclass_input_naming_it(kind, op):
    make, words = SUBCLASSES[kind]
    with pytest.raises(nd.InvalidInputError) as info:
        OPERATORS_ON_INPUT[op](make())
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_memmap_input_is_refused_with_asarray_advice(tmp_path):
    m = np.memmap(tmp_path / 'x.dat', dtype=float, mode='w+', shape=(3,))
    with pytest.raises(nd.InvalidInputError, match='numpy.memmap.*numpy.asarray'):
        nd.gradient_r(total)(m)
    np.testing.assert_allclose(nd.gradient_r(total)(np.asarray(m)), np.zeros(3))


USES_INSIDE = {     # a subclass met by nestad.numpy inside a differentiated function
    'array-times-subclass': lambda x, m: x * m,
    'np-ufunc': lambda x, m: np.add(m, x),
    'anp-function': lambda x, m: anp.multiply(m, x),
    'matmul': lambda x, m: x @ m,
    'scalar-function-of-subclass': lambda x, m: nd.sin(m) * x,
    'where': lambda x, m: anp.where(np.ones(np.shape(m), dtype=bool), m, x),
    'concatenate': lambda x, m: anp.concatenate([x, m]),
}


@pytest.mark.parametrize('use', sorted(USES_INSIDE))
@pytest.mark.parametrize('kind', sorted(SUBCLASSES))
@pytest.mark.parametrize('op', ['gradient_r', 'gradient_f'])
def test_subclass_operand_inside_differentiated_code_is_refused(op, kind, use):
    make, words = SUBCLASSES[kind]
    m = make()
    x = np.ones(np.shape(m))
    with pytest.raises(nd.InvalidInputError) as info:
        getattr(nd, op)(lambda x: anp.sum(USES_INSIDE[use](x, m)))(x)
    assert words[0] in str(info.value)


@pytest.mark.parametrize('kind', sorted(SUBCLASSES))
def test_perturbed_scalar_times_subclass_is_refused(kind):
    make, words = SUBCLASSES[kind]
    with pytest.raises(nd.InvalidInputError) as info:
        nd.derivative(lambda s: s * make())(1.0)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_masked_array_on_the_left_of_an_operator_is_refused():
    # MaskedArray's own __mul__ converts its operand to a plain array: that is refused
    # (a TypeError naming masked arrays), not silently computed without the derivative.
    with pytest.raises(TypeError, match='masked'):
        nd.gradient_r(lambda x: anp.sum(masked() * x))(np.ones(3))
