"""Test-suite options: ``--backend NAME`` selects the framework the conformance suite runs on.

Without ``--backend`` only the framework-free tests run (the ``core`` tox env); with it, the
conformance suite, ``tests/distributed`` (multi-process checks written once for every backend),
``tests/backends/NAME`` and every other test that uses the backend's fixtures run instead, and a
missing framework is an error, not a skip, so CI cannot silently test nothing. A framework-free
test runs once, in the core env, unless it is marked ``also_per_backend``.
"""
from __future__ import annotations

import importlib
import os

import pytest

BACKENDS = ("torch", "paddle", "jittor", "oneflow")
HERE = os.path.dirname(__file__)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", choices=BACKENDS, default=None,
                     help="framework to run the driver conformance suite and backend tests on")
    parser.addoption("--parity", action="store_true",
                     help="run tests/parity (needs torch and paddle in one env: tox -e parity)")


def pytest_ignore_collect(collection_path, config: pytest.Config) -> bool | None:
    backend = config.getoption("--backend")
    relative = os.path.relpath(str(collection_path), HERE).split(os.sep)
    if relative[0] in ("conformance", "distributed") and backend is None:
        return True
    if relative[0] == "parity" and not config.getoption("--parity"):
        return True
    if relative[0] == "backends" and len(relative) > 1 and relative[1] != backend:
        return True
    return None


#: Folders whose tests all run on a backend (the conformance suite, the multi-process checks, per backend).
BACKEND_FOLDERS = ("conformance", "distributed", "backends")
BACKEND_FIXTURES = {"harness", "backend_name"}


def needs_backend(item: pytest.Item) -> bool:
    """Whether ``item`` runs on a backend: it uses the backend's fixtures (``harness``, ``backend_name``,
    or one built on them, such as ``rank_pool``), lives in a backend folder, or is marked ``needs_backend``."""
    if item.get_closest_marker("needs_backend") or BACKEND_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    return os.path.relpath(str(item.path), HERE).split(os.sep)[0] in BACKEND_FOLDERS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test runs where it proves something: without ``--backend`` (the core env) the framework-free
    tests; with it, the tests that need that backend, plus the framework-free ones marked
    ``also_per_backend`` (they prove more where a framework is installed: that it is not imported, ...)."""
    if config.getoption("--backend") is None:
        left_out = [item for item in items if needs_backend(item)]
    else:
        left_out = [item for item in items
                    if not needs_backend(item) and not item.get_closest_marker("also_per_backend")]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        dropped = set(left_out)
        items[:] = [item for item in items if item not in dropped]


@pytest.fixture(scope="session")
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--backend")


@pytest.fixture(scope="session")
def harness(backend_name: str):
    """The backend's conformance harness (tests/conformance/harnesses/<backend>.py)."""
    module = importlib.import_module(f"tests.conformance.harnesses.{backend_name}")
    return module.Harness()


@pytest.fixture(scope="session")
def backend(backend_name: str):
    """How the backend's data-parallel jobs start (tests/distributed/launchers.py)."""
    from tests.distributed.launchers import BACKENDS

    return BACKENDS[backend_name]


@pytest.fixture(scope="session")
def rank_pools(backend, tmp_path_factory: pytest.TempPathFactory):
    """The session's rank pools of the backend, one per world size (tests/README.md)."""
    from tests.rankpool.pool import RankPools

    pools = RankPools(backend, tmp_path_factory.mktemp("rank_pools"))
    yield pools
    pools.close()


@pytest.fixture
def rank_pool(rank_pools):
    """Two real ranks of the backend, started by its launcher once and shared by the tests that ask for
    them: ``rank_pool.run(function, *args)`` calls a module-level function on both (tests/README.md)."""
    return rank_pools.get(2)


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster of 2 CPUs, this machine only, for the whole session: the Ray tests and the
    docs/ray.md examples (which join it: ``ray.init()`` reads ``RAY_ADDRESS``) share it. Without Ray the
    tests asking for it skip, except where tox requires it (``FASTCORE_TRAIN_REQUIRE_RAY=1`` in the -dist
    envs, which install the ray extra): there a missing Ray fails."""
    if os.environ.get("FASTCORE_TRAIN_REQUIRE_RAY"):
        import ray.train  # noqa: F401  (an ImportError here is the failure tox must show)
    ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    pytest.importorskip("ray.train", reason='Ray Train is not installed (pip install -e ".[ray]")')
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
