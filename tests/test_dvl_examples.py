"""Every example of DVL's derivative and reverse-mode example files, in Python.

Source: Alexey Radul's DysVunctional Language (DVL), GitHub repository
axch/dysvunctional-language:

* ``dvl/examples/derivative-examples.dvl`` (commit 3e9f5bf3cc9ac9998b896da028db063e497ec233)
* ``dvl/examples/reverse-examples.dvl`` (commit 43193960a72b39478b536e233c60f86b94be7b8f;
  ``ls/dvl/examples/reverse-examples.dvl`` holds the same examples)

Each DVL example states its answer as ``expression ===> value``.  Translation notes:

* DVL's ``derivative-r`` is ``gradient-r`` of a function of one real: here
  ``nestad.gradient_r``.
* A DVL function of several arguments takes them as one cons structure, and
  ``(gradient-r-at f (cons a b))`` returns a pair: here a tuple argument and a
  tuple gradient (``(list ...)`` becomes a Python list).  For
  ``(lambda (x y) ...)`` applied to ``(real 3.) (real 4.)`` the two reals are
  the two positional arguments, differentiated together (``argnums=(0, 1)``).
* ``(real 4)`` marks a number as unknown to DVL's compiler; in Python it is just
  a float, and the unmarked constant stays an int.
* ``(+ pair)`` sums the pair's two halves and ``(means (means ...))`` applies
  ``means`` to the pair returned by the inner call.

None of the examples in these two files has a function-valued output.
"""
import math

import pytest

import nestad as nd
from nestad import derivative, gradient_r

SOURCE = "axch/dysvunctional-language"
# Derivative operators of DVL, by the name the example files use.
OPERATORS = {'derivative': derivative, 'derivative-r': gradient_r}


def gradient_r_at(f, pt):
    """DVL's ``(define (gradient-r-at f pt) ((gradient-r f) pt))``."""
    return gradient_r(f)(pt)


def product(xs):
    """DVL's ``product`` of a list."""
    out = 1
    for x in xs:
        out = out * x
    return out


def means(x, y):
    """``(define (means x y) (cons (/ (+ x y) 2) (sqrt (* y x))))``."""
    return ((x + y) / 2, nd.sqrt(y * x))


# ============================================================== the shared examples
# derivative-examples.dvl lists these with ``derivative``; reverse-examples.dvl
# repeats them with ``derivative-r`` and then with the two operators mixed.
# Each takes the outer and the inner operator (the same one for the one-level ones).

def identity(d, _):
    # ((derivative (lambda (x) x)) 7) ===> 1
    return d(lambda x: x)(7)


def constant(d, _):
    # ((derivative (lambda (x) 3)) 7) ===> 0
    return d(lambda x: 3)(7)


def plus_one(d, _):
    # ((derivative (lambda (x) (+ x 1))) 7) ===> 1
    return d(lambda x: x + 1)(7)


def x_plus_x(d, _):
    # ((derivative (lambda (x) (+ x x))) 7) ===> 2
    return d(lambda x: x + x)(7)


def nested_constant(outer, inner):
    # Nested constant function (don't conflate the perturbations)
    # (define (one x) ((derivative (lambda (y) (+ x y))) 3))
    # ((derivative one) 7) ===> 0
    def one(x):
        return inner(lambda y: x + y)(3)
    return outer(one)(7)


def dont_conflate(outer, inner):
    # Another don't conflate the perturbations
    # ((derivative (lambda (x) (* x (one x)))) 7) ===> 1
    def one(x):
        return inner(lambda y: x + y)(3)
    return outer(lambda x: x * one(x))(7)


def dont_confuse(outer, inner):
    # Don't confuse the perturbations
    # ((derivative (lambda (x) (* x (one (* 2 x))))) 7) ===> 1
    def one(x):
        return inner(lambda y: x + y)(3)
    return outer(lambda x: x * one(2 * x))(7)


def dont_confuse_nested_product(outer, inner):
    # Another don't confuse the perturbations.
    # ((derivative (lambda (y) ((derivative (lambda (x) (* x (* x y)))) (* y 3)))) 5) ===> 60
    return outer(lambda y: inner(lambda x: x * (x * y))(y * 3))(5)


SHARED = [
    (identity, 1), (constant, 0), (plus_one, 1), (x_plus_x, 2),
    (nested_constant, 0), (dont_conflate, 1), (dont_confuse, 1),
    (dont_confuse_nested_product, 60),
]

# (file, outer operator, inner operator) for every appearance of the shared examples.
APPEARANCES = [
    ('derivative-examples.dvl', 'derivative', 'derivative'),
    ('reverse-examples.dvl', 'derivative-r', 'derivative-r'),
]
# "Ditto, but combining forward and reverse in various ways": only the nested
# examples appear there, each with both orders.
MIXED = [
    ('reverse-examples.dvl', 'derivative-r', 'derivative'),
    ('reverse-examples.dvl', 'derivative', 'derivative-r'),
]
NESTED = {nested_constant, dont_conflate, dont_confuse, dont_confuse_nested_product}


def _case(file, outer, inner, example, expected):
    return pytest.param(example, OPERATORS[outer], OPERATORS[inner], expected,
                        id=f"{file}:{example.__name__}[{outer} of {inner}]")


CASES = ([_case(file, outer, inner, example, expected)
          for file, outer, inner in APPEARANCES for example, expected in SHARED]
         + [_case(file, outer, inner, example, expected)
            for file, outer, inner in MIXED for example, expected in SHARED if example in NESTED])


@pytest.mark.parametrize('example, outer, inner, expected', CASES)
def test_shared_example(example, outer, inner, expected):
    got = example(outer, inner)
    assert got == expected
    assert not isinstance(got, (nd.Bundle, nd.TapeCell))


def test_every_shared_example_is_covered():
    # derivative-examples.dvl: 8 examples; reverse-examples.dvl: the same 8 with
    # derivative-r, plus the 4 nested ones in 2 mixed orders.
    assert len(CASES) == 8 + 8 + 4 * 2


# ============================================================== reverse-examples.dvl only

def test_gradient_r_of_sin_at_constant_zero():
    # (gradient-r-at sin 0) ===> 1
    assert gradient_r_at(nd.sin, 0) == 1


def test_gradient_r_of_sin_at_real_zero():
    # (gradient-r-at sin (real 0)) ===> 1
    assert gradient_r_at(nd.sin, 0.0) == 1


def test_gradient_r_of_plus_on_a_pair():
    # (gradient-r-at + (cons 4 7)) ===> (1 . 1)
    got = gradient_r_at(lambda p: p[0] + p[1], (4, 7))
    assert isinstance(got, tuple)
    assert got == (1, 1)


def test_gradient_r_of_times_on_a_pair():
    # (gradient-r-at * (cons 4 7)) ===> (7 . 4)
    got = gradient_r_at(lambda p: p[0] * p[1], (4, 7))
    assert isinstance(got, tuple)
    assert got == (7, 4)


def test_gradient_r_of_times_on_a_pair_of_reals():
    # (gradient-r-at * (cons (real 4) (real 7))) ===> (7 . 4)
    got = gradient_r_at(lambda p: p[0] * p[1], (4.0, 7.0))
    assert got == (7.0, 4.0)


def test_gradient_r_of_product_of_three():
    # (gradient-r-at product (list (real 1) (real 2) (real 3))) ===> (6 3 2)
    got = gradient_r_at(product, [1.0, 2.0, 3.0])
    assert isinstance(got, list)
    assert got == [6, 3, 2]


def test_gradient_r_of_product_of_four():
    # (gradient-r-at product (list (real 1) (real 2) (real 3) (real 4))) ===> (24 12 8 6)
    got = gradient_r_at(product, [1.0, 2.0, 3.0, 4.0])
    assert got == [24, 12, 8, 6]


def test_gradient_r_of_euclidean_norm():
    # (gradient-r-at (lambda (x y) (sqrt (+ (* x x) (* y y)))) (real 3.) (real 4.))
    #   ===> (.6000000000000001 . .8)
    got = gradient_r(lambda x, y: nd.sqrt(x * x + y * y), argnums=(0, 1))(3.0, 4.0)
    # DVL printed 0.6000000000000001 for 0.6 (one ulp of rounding): compare to 1e-15.
    assert got == (pytest.approx(0.6000000000000001, rel=1e-15), pytest.approx(0.8, rel=1e-15))


def test_gradient_r_of_iterated_means():
    # (gradient-r-at (lambda (x y) (+ (means (means (means (means x y)))))) (real 3.) (real 4.))
    #   ===> (1.0775567911016182 . .9328462448535719) ; This answer checked with Mechanics
    def f(x, y):
        a, b = means(*means(*means(*means(x, y))))
        return a + b

    got = gradient_r(f, argnums=(0, 1))(3.0, 4.0)
    # The expected digits are DVL's double-precision result; allow a few ulps.
    assert got == (pytest.approx(1.0775567911016182, rel=1e-14),
                   pytest.approx(0.9328462448535719, rel=1e-14))


def test_iterated_means_closed_form_cross_check():
    """The same gradient from forward mode and from central differences, so the
    expected digits above are confirmed independently of reverse mode."""
    def f(x, y):
        a, b = means(*means(*means(*means(x, y))))
        return a + b

    def f_plain(x, y):
        for _ in range(4):
            x, y = (x + y) / 2, math.sqrt(y * x)
        return x + y

    assert nd.gradient_f(f, argnums=(0, 1))(3.0, 4.0) == (
        pytest.approx(1.0775567911016182, rel=1e-14), pytest.approx(0.9328462448535719, rel=1e-14))
    h = 1e-6
    fd_x = (f_plain(3.0 + h, 4.0) - f_plain(3.0 - h, 4.0)) / (2 * h)
    fd_y = (f_plain(3.0, 4.0 + h) - f_plain(3.0, 4.0 - h)) / (2 * h)
    assert (fd_x, fd_y) == (pytest.approx(1.0775567911016182, rel=1e-7),
                            pytest.approx(0.9328462448535719, rel=1e-7))
