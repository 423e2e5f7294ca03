import pytest


@pytest.fixture(autouse=True, scope="session")
def _nestad_cache_dir(tmp_path_factory):
    """Compiled numba code (stage(backend="numba") caches it on disk) goes to a temporary
    directory, not the user's cache."""
    patch = pytest.MonkeyPatch()
    patch.setenv("NESTAD_CACHE_DIR", str(tmp_path_factory.mktemp("nestad-cache")))
    yield
    patch.undo()
