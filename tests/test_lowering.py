"""Code generation reads a lowering table per backend (nestad.staging.lowering): the
Python table the fallback, a backend's own table over it, the plain implementation the
last resort.  A backend is a table and a registration.  (numba's table is tested in
test_staging_numba.py, with the other tests that compile with numba.)"""

import numpy as np
import pytest

import nestad as nd
import nestad.numpy as anp
from nestad import registry
from nestad.staging import codegen, lowering


def _mlp_loss(w, x):
    h = anp.tanh(anp.reshape(w[:6], (2, 3)) @ x)
    return anp.sum(h * h) / 2.0 + anp.max(anp.exp(-x)) + anp.sin(w[0]) * 3.0


W, X = np.linspace(-1.0, 1.0, 6), np.array([0.3, -0.7, 1.1])


def _plain_call(qualname):
    def spell(args, params):
        parts = list(args) + [f"{k}={v}" for k, v in params.items()]
        return f"_prims[{qualname!r}].plain({', '.join(parts)})"
    return spell


@pytest.fixture
def plain_backend():
    # a third backend in one table and one registration: every primitive called through
    # its plain implementation, found by name in the registry
    lowering.register('plain_calls', {q: _plain_call(q) for q in registry.PRIMITIVES},
                      {'_prims': registry.PRIMITIVES})
    yield 'plain_calls'
    del lowering.BACKENDS['plain_calls']


def test_a_new_backend_is_a_table_and_a_registration(plain_backend):
    grad = nd.gradient_r(_mlp_loss)
    staged = nd.stage(grad, backend=plain_backend)
    want = grad(W, X)
    got = staged(W, X)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(staged(W, X), nd.stage(grad)(W, X))   # same numbers as python's
    program = nd.trace(grad, W, X)
    src, glb = codegen.python_source(program, backend=plain_backend)
    used = {e.op.qualname for e in program.eqns if hasattr(e.op, 'qualname')}
    # every primitive by its plain implementation, but the scatters codegen's accumulation
    # pass writes into a buffer (np.zeros, then v[index] += x)
    assert {q for q in used if f"_prims[{q!r}].plain(" not in src} <= {'numpy.scatter_add'}, src
    assert len(used) > 8 and "math." not in src and src.count("np.") == src.count("np.zeros(")
    assert glb['_prims'] is registry.PRIMITIVES
    # the default backend still spells them as numpy calls
    assert "np.tanh(" in codegen.python_source(program)[0]


def test_a_backend_table_overrides_the_python_one_and_falls_back_to_it():
    calls = []

    def my_tanh(x):
        calls.append(1)
        return np.tanh(x)
    lowering.register('mine', {'numpy.tanh': 'MY_TANH({0})'}, {'MY_TANH': my_tanh})
    try:
        program = nd.trace(_mlp_loss, W, X)
        src, _ = codegen.python_source(program, backend='mine')
        assert "MY_TANH(" in src and "np.tanh(" not in src
        assert "np.exp(" in src and "@" in src            # the Python spellings otherwise
        fn, _ = codegen.compile_python(program, backend='mine')
        assert fn(W, X) == nd.stage(_mlp_loss)(W, X) and calls
        assert nd.stage(_mlp_loss, backend='mine')(W, X) == _mlp_loss(W, X)
    finally:
        del lowering.BACKENDS['mine']
    with pytest.raises(nd.InvalidInputError, match="backend must be one of"):
        nd.stage(_mlp_loss, backend='mine')


def test_spellings_live_in_the_tables_not_on_primitives():
    for prim in registry.PRIMITIVES.values():
        assert not hasattr(prim, 'emit'), prim
    python, _ = lowering.spellings()
    assert python['sin'] == 'math.sin({0})' and python['add'] == '{0} + {1}'
    assert python['numpy.sin'] == 'np.sin({0})' and python['numpy.arctan2'] == 'np.arctan2({0}, {1})'
    assert 'numpy.sum_to' not in python                # called through its plain implementation
    numba, _ = lowering.spellings('numba')
    assert numba['numpy.sum_to'].startswith('_nb_sum_to(') and numba['sin'] == python['sin']


def test_a_primitive_without_a_spelling_calls_its_plain_implementation():
    program = nd.trace(lambda x: anp.sum_to(anp.broadcast_to(x, (4, 3)), (1, 3)), X)
    src, glb = codegen.python_source(program)
    name = next(k for k in glb if k.startswith('_p_sum_to'))
    assert f"{name}(" in src and glb[name] is registry.PRIMITIVES['numpy.sum_to'].plain
    assert "np.broadcast_to(" in src


def test_the_python_backend_spells_reductions_and_reshapes_without_numpys_wrappers():
    """np.max/np.min are ufunc reductions and np.reshape/np.transpose array methods behind
    numpy's Python wrappers: the Python backend calls those directly (np.asarray first: a
    reshape's argument may be a Python number), numba's table keeps numpy's functions."""
    def f(x, a):
        r = anp.reshape(x * 2.0, (1, 1))                     # a Python float reshaped
        return (anp.max(a, axis=0, keepdims=True) + anp.min(a) + r
                + anp.sum(anp.transpose(a, (1, 0)) * anp.max(a)))
    a = np.array([[1.0, -2.0, 3.0], [0.5, np.nan, -1.0]])
    program = nd.trace(f, 0.25, a)
    src, _ = codegen.python_source(program)
    assert "np.maximum.reduce(" in src and "np.minimum.reduce(" in src
    assert ".reshape(" in src and ".transpose(" in src and "np.max(" not in src
    staged = nd.stage(f)
    for x, b in ((0.25, a), (-1.5, np.abs(a) + 1.0), (0.25, a)):    # (traced, then compiled)
        got, want = staged(x, b), f(x, b)
        np.testing.assert_array_equal(got, want)
    numba, _ = lowering.spellings('numba')
    assert numba['numpy.max'].startswith('np.max(') and numba['numpy.reshape'].startswith('np.reshape(')


def test_the_python_backend_spells_a_gather_by_one_integer_array_as_take():
    """``x[i]``, ``x[:, i]`` with one integer array among full slices is ``x.take(i,
    axis=...)`` in the Python backend (faster, and C-ordered where the subscript keeps a
    transposed operand's order); a boolean mask, two index arrays, a 0-d index or an
    index beside a partial slice stay subscripts.  Every one gives eager's numbers,
    negative indices too."""
    i = np.array([2, 0, -1, 1, 2])
    cases = {
        'rows': (lambda a: a[i] * 2.0, True),
        'middle axis': (lambda a: anp.transpose(a, (1, 0, 2))[:, i] + 1.0, True),
        'last axis, tuple': (lambda a: a[(slice(None), slice(None), np.array([1, 0]))], True),
        'mask': (lambda a: a[np.array([True, False, True])] * 3.0, False),
        'two arrays': (lambda a: a[np.array([0, 2]), np.array([1, 1])], False),
        'partial slice': (lambda a: a[1:, np.array([0, 1])], False),
        '0-d index': (lambda a: a[np.array(1)] - 1.0, False),
    }
    a = np.arange(27.0).reshape(3, 3, 3) / 7.0
    for name, (f, takes) in cases.items():
        src, _ = codegen.python_source(nd.trace(f, a))
        assert (".take(" in src) == takes, (name, src)
        staged = nd.stage(f)
        for b in (a, -a[::-1], a):                  # (traced, then compiled)
            np.testing.assert_array_equal(staged(b), f(b), err_msg=name)
        # and under a derivative: the gather's transpose (a scatter) and its jet
        g = nd.stage(nd.gradient_r(lambda b: anp.sum(anp.sin(f(b)))))
        np.testing.assert_allclose(g(a), nd.gradient_r(lambda b: anp.sum(anp.sin(f(b))))(a),
                                   rtol=1e-14, err_msg=name)
    numba, _ = lowering.spellings('numba')
    assert 'numpy.take' not in numba             # (numba keeps the subscript)
