"""Test-suite options: ``--backend NAME`` selects the framework the conformance suite runs on.

Without ``--backend`` only the framework-free tests run (the ``core`` tox env); with it, the
conformance suite, ``tests/distributed`` (multi-process checks written once for every backend)
and ``tests/backends/NAME`` run too, and a missing framework is an error, not a
skip, so CI cannot silently test nothing.
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--backend``, leave out the tests that need one (they use ``harness`` or ``backend_name``)."""
    if config.getoption("--backend") is not None:
        return
    needs_backend = [item for item in items if {"harness", "backend_name"} & set(getattr(item, "fixturenames", ()))]
    if needs_backend:
        config.hook.pytest_deselected(items=needs_backend)
        items[:] = [item for item in items if item not in needs_backend]


@pytest.fixture(scope="session")
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--backend")


@pytest.fixture(scope="session")
def harness(backend_name: str):
    """The backend's conformance harness (tests/conformance/harnesses/<backend>.py)."""
    module = importlib.import_module(f"tests.conformance.harnesses.{backend_name}")
    return module.Harness()
