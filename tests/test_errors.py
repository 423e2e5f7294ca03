"""Bad input gets a specific exception whose message says what was wrong."""
import math

import numpy as np
import pytest

import nestad as nd
from nestad import (EscapedPerturbationError, InvalidInputError, NonScalarOutputError,
                    PerturbedConversionError)


def test_gradient_of_non_scalar_output():
    with pytest.raises(NonScalarOutputError, match="returned a list"):
        nd.gradient_r(lambda v: [v[0], v[1]])([1.0, 2.0])
    with pytest.raises(NonScalarOutputError, match="jacobian_r"):
        nd.gradient_r(lambda x: (x, x))(1.0)
    with pytest.raises(NonScalarOutputError, match="shape"):
        nd.gradient_r(lambda x: np.array([1.0, 2.0]))(1.0)
    with pytest.raises(NonScalarOutputError):
        nd.gradient_f(lambda v: [v[0]])([1.0])


@pytest.mark.parametrize('bad, where', [
    ("abc", "argument"), (None, "argument"), (object(), "argument"), (1 + 2j, "argument")])
def test_bad_scalar_argument(bad, where):
    with pytest.raises(InvalidInputError, match=where):
        nd.gradient_r(lambda x: x)(bad)
    with pytest.raises(InvalidInputError, match="not a real number"):
        nd.derivative(lambda x: x)(bad)


def test_bad_leaf_reports_its_path():
    with pytest.raises(InvalidInputError, match=r"argument\[0\]\['b'\]\[1\] is a str"):
        nd.gradient_r(lambda p: p['a'])({'a': 1.0, 'b': [2.0, "oops"]})
    with pytest.raises(InvalidInputError, match=r"primals\[1\] is a NoneType"):
        nd.jvp(lambda a, b: a, (1.0, None), (1.0, 1.0))


def test_string_inside_computation():
    with pytest.raises(TypeError):
        nd.derivative(lambda x: x + "s")(1.0)
    with pytest.raises(InvalidInputError, match="nestad.sin got str"):
        nd.sin("x")


def test_bad_output_leaf():
    with pytest.raises(InvalidInputError, match=r"output\[1\] is a str"):
        nd.derivative(lambda x: (x, "label"))(1.0)


@pytest.mark.parametrize('convert', [float, int, round, math.sin, math.exp, math.floor,
                                     math.trunc, complex])
@pytest.mark.parametrize('D', [nd.derivative, nd.gradient_r])
def test_conversions_refused(convert, D):
    with pytest.raises(PerturbedConversionError, match="drop its derivative"):
        D(lambda x: convert(x))(1.5)


def test_perturbed_value_as_index_refused():
    with pytest.raises(PerturbedConversionError):
        nd.derivative(lambda x: [1.0, 2.0][x])(1)


def test_escaped_perturbation_is_detected():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * x
    assert nd.derivative(f)(3.0) == 6.0
    # Using the leaked value in a later derivative call must not give a wrong number.
    with pytest.raises(EscapedPerturbationError, match="escaped"):
        nd.derivative(lambda y: y * leaked[0])(2.0)
    with pytest.raises(EscapedPerturbationError):
        nd.gradient_r(lambda y: y * leaked[0])(2.0)
    with pytest.raises(EscapedPerturbationError):
        float(leaked[0])


def test_escaped_tape_cell_is_detected():
    leaked = []
    nd.gradient_r(lambda x: leaked.append(x * 2) or x)(1.0)
    with pytest.raises(EscapedPerturbationError):
        nd.gradient_r(lambda y: y + leaked[0])(1.0)
    with pytest.raises(EscapedPerturbationError):
        nd.derivative(lambda y: y * leaked[0])(1.0)


def test_bad_argnums():
    with pytest.raises(InvalidInputError, match="argnums"):
        nd.gradient_r(lambda x: x, argnums=1)(1.0)


def test_mismatched_tangent_structure():
    with pytest.raises(InvalidInputError, match="same structure"):
        nd.jvp(lambda a: a, ([1.0, 2.0],), ([1.0],))


def test_plain_array_times_perturbed_scalar_differentiates():
    # numpy defers to nestad: no object array, no dropped derivative.
    d = nd.derivative(lambda x: np.array([1.0, 2.0]) * x)(1.0)
    assert isinstance(d, np.ndarray) and d.tolist() == [1.0, 2.0]


def test_unsupported_numpy_function_is_named():
    with pytest.raises(TypeError, match="numpy.fft.fft|numpy.fft|fft"):
        nd.gradient_r(lambda x: np.sum(np.abs(np.fft.fft(x))))(np.ones(4))
    with pytest.raises(TypeError, match="numpy.polyval"):
        nd.gradient_r(lambda x: np.polyval(x, 0.5))(np.ones(3))
    with pytest.raises(TypeError, match=r"numpy\.i0"):
        nd.derivative(lambda x: np.i0(x))(1.0)


def test_nan_and_inf_propagate():
    assert math.isnan(nd.derivative(lambda x: x * x)(math.nan))
    assert nd.derivative(lambda x: nd.exp(x))(math.inf) == math.inf
    assert nd.derivative(lambda x: nd.log(x))(0.0) == math.inf
    assert nd.gradient_r(lambda x: nd.sqrt(x))(0.0) == math.inf
