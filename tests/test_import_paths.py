"""The module paths ported code writes (autograd's and scipy's layout) import, and a
nestad path that does not exist names the nearest one that does."""
import importlib
import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import nestad as nd

# Every module path docs/migrating.md documents.
DOCUMENTED = ['nestad', 'nestad.numpy', 'nestad.numpy.linalg', 'nestad.numpy.random',
              'nestad.scipy', 'nestad.scipy.special', 'nestad.scipy.stats',
              'nestad.scipy.stats.norm', 'nestad.scipy.stats.t', 'nestad.scipy.stats.gamma',
              'nestad.scipy.stats.beta', 'nestad.scipy.stats.poisson', 'nestad.scipy.stats.chi2',
              'nestad.scipy.stats.multivariate_normal', 'nestad.scipy.stats.dirichlet',
              'nestad.scipy.linalg', 'nestad.scipy.signal', 'nestad.scipy.integrate']


@pytest.mark.parametrize('path', DOCUMENTED)
def test_documented_paths_import(path):
    module = importlib.import_module(path)
    assert module.__name__ == path


def test_import_as_statements_of_ported_code():
    import nestad.numpy.random as npr
    import nestad.scipy.stats.multivariate_normal as mvn
    import nestad.scipy.stats.norm as norm
    from nestad.scipy.stats import norm as norm2
    assert norm is norm2 and npr.RandomState is np.random.RandomState
    npr.seed(3)
    a = npr.randn(2)
    np.random.seed(3)
    assert np.all(a == np.random.randn(2))      # numpy's generator and state
    g = nd.gradient_r(lambda m: mvn.logpdf(np.zeros(2), m, np.eye(2)))(np.array([0.5, -1.0]))
    assert np.allclose(g, [-0.5, 1.0])
    assert nd.derivative(norm.logpdf)(0.5) == -0.5


def test_a_fresh_interpreter_imports_the_paths():
    """No path depends on another having been imported first."""
    for path in ['nestad.numpy.random', 'nestad.scipy.stats.multivariate_normal',
                 'nestad.scipy.linalg', 'nestad.scipy.signal', 'nestad.scipy.integrate']:
        run = subprocess.run([sys.executable, '-c', f'import {path} as m; print(m.__name__)'],
                             capture_output=True, text=True)
        assert run.stdout.strip() == path, run.stderr


@pytest.mark.parametrize('wrong, nearest', [
    ('nestad.scipy.stat', 'nestad.scipy.stats'),
    ('nestad.numpy.randm', 'nestad.numpy.random'),
    ('nestad.scipy.stats.multivariate_norml', 'nestad.scipy.stats.multivariate_normal'),
    ('nestad.scipy.integrat', 'nestad.scipy.integrate'),
    ('nestad.numpy.linalgg', 'nestad.numpy.linalg'),
])
def test_a_missing_path_names_the_nearest(wrong, nearest):
    with pytest.raises(ModuleNotFoundError) as e:
        importlib.import_module(wrong)
    assert e.value.name == wrong
    assert f"No module named {wrong!r}" in str(e.value)
    assert f"the nearest nestad module is {nearest!r}" in str(e.value)


def test_the_first_missing_part_is_named():
    with pytest.raises(ModuleNotFoundError, match="No module named 'nestad.autograd'; the nearest nestad module is"):
        importlib.import_module('nestad.autograd.misc.optimizers')


def test_find_spec_still_answers_none_for_a_missing_module():
    assert importlib.util.find_spec('nestad.scipy.stat') is None
    assert importlib.util.find_spec('nestad.scipy.stats') is not None


def test_other_packages_keep_pythons_message():
    with pytest.raises(ModuleNotFoundError, match=r"^No module named 'nestadx'$"):
        importlib.import_module('nestadx')
