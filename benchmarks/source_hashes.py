"""A pytest plugin that hashes every source code generation writes, test by test: the
check that a change to tracing or code generation leaves the generated code the same.

    HASH_OUT=before.txt PYTHONPATH=$PWD:benchmarks python -m pytest -q -p source_hashes \\
        -p no:cacheprovider tests/test_staging*.py tests/test_loops.py ...
    (the same in the changed checkout, into after.txt; then compare the two, test by test)

Each line is a test's node id and the hash of one source it compiled (or, ``ps:``, of
the definitions ``python_sources`` returned).  Tests drawn by hypothesis pick other
programs in each run: compare those by whether one run's hashes contain the other's.
"""
import builtins
import hashlib
import os

import pytest

_current = ['?']
_records = []


def _digest(text):
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def pytest_configure(config):
    import nestad.staging.codegen as codegen
    real_compile, real_sources = builtins.compile, codegen.python_sources

    def compile_hashed(source, *args, **kwargs):
        if isinstance(source, str):
            _records.append((_current[0], _digest(source)))
        return real_compile(source, *args, **kwargs)

    def sources_hashed(*args, **kwargs):
        sources, glb = real_sources(*args, **kwargs)
        _records.append((_current[0], 'ps:' + _digest(repr(sources))))
        return sources, glb
    codegen.compile = compile_hashed          # (codegen's own name: the module global wins)
    codegen.python_sources = sources_hashed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _current[0] = item.nodeid
    yield


def pytest_unconfigure(config):
    with open(os.environ.get('HASH_OUT', 'source_hashes.txt'), 'w') as f:
        f.writelines(f'{name} {digest}\n' for name, digest in _records)
