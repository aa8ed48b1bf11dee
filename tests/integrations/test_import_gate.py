"""A framework import held until rank 0 listens (integrations/import_gate.py): real sockets, a real import."""
from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from fastcore_train.integrations.import_gate import _ImportGate, hold_import_until_listening


@pytest.fixture
def module(tmp_path, monkeypatch):
    """A fresh importable module's name; the gates and the module are gone afterwards."""
    name = f"gated_{time.monotonic_ns()}"
    Path(tmp_path, f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(sys.meta_path)
    yield name
    sys.meta_path[:] = [finder for finder in sys.meta_path if finder in before or not isinstance(finder, _ImportGate)]
    sys.modules.pop(name, None)


def test_the_first_import_waits_until_rank_0_listens(module):
    with socket.socket() as rank_0:
        rank_0.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused until listen()
        assert hold_import_until_listening(module, f"127.0.0.1:{rank_0.getsockname()[1]}", timeout=30) is None
        opened = threading.Timer(0.6, rank_0.listen)
        started = time.monotonic()
        opened.start()
        imported = __import__(module)
        waited = time.monotonic() - started
        opened.join()
    assert imported.VALUE == 1 and 0.5 < waited < 10, waited


def test_without_a_listener_the_import_goes_on_after_the_timeout(module):
    with socket.socket() as nobody:
        nobody.bind(("127.0.0.1", 0))
        hold_import_until_listening(module, f"127.0.0.1:{nobody.getsockname()[1]}", timeout=0.4)
        started = time.monotonic()
        assert __import__(module).VALUE == 1
    assert 0.3 < time.monotonic() - started < 5


def test_other_imports_and_an_imported_module_are_not_held(module):
    with socket.socket() as nobody:
        nobody.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{nobody.getsockname()[1]}"
        hold_import_until_listening(module, address, timeout=30)
        started = time.monotonic()
        import json.tool  # noqa: F401  (another module passes straight through)
        assert time.monotonic() - started < 5
        assert hold_import_until_listening("json", address) == "json is imported already"
