"""Holding a framework's import until rank 0 listens, in the workers an engine started (issue 39).

OneFlow's ranks meet inside ``import oneflow``, at rank 0's ``MASTER_ADDR:MASTER_PORT``, and a rank that
finds rank 0 not yet listening there tries again only 10 s later. Ranks we start ourselves avoid it: the
others start once rank 0 listens (:func:`~fastcore_train.parallel.launch.spawn_workers`). An engine
(Ray) starts every worker at once and the training function imports the framework itself, so there every
worker but rank 0 holds that import, through a ``sys.meta_path`` finder, until rank 0 listens; measured
across two hosts under Ray, each job's start was 10 s shorter. Nothing here imports a framework.
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any, Optional

from fastcore_train.parallel.launch import RENDEZVOUS_WAIT, wait_until_listening


class _ImportGate(importlib.abc.MetaPathFinder):
    """A finder that, the first time ``module`` is imported, waits for ``address`` to listen and finds nothing
    itself (the import then goes on as usual). It stays in ``sys.meta_path``, inert afterwards: removing it
    while the import machinery walks that list would skip the next finder."""

    def __init__(self, module: str, address: str, timeout: float) -> None:
        self.module, self.address, self.timeout = module, address, timeout
        self._done = threading.Event()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == self.module and not self._done.is_set():
            self._done.set()
            wait_until_listening(self.address, None, self.timeout)
        return None


def hold_import_until_listening(module: str, address: str, timeout: float = RENDEZVOUS_WAIT) -> Optional[str]:
    """Make this process's first ``import <module>`` wait until ``address`` (``host:port``) accepts
    connections, or ``timeout`` seconds (then the framework reports what it finds). Returns why nothing was
    held (the module is imported already), else None."""
    if module in sys.modules:
        return f"{module} is imported already"
    sys.meta_path.insert(0, _ImportGate(module, address, timeout))
    return None
