"""The loaders a controller built from the user's (copies drawing from our batch samplers), released
when the controller's run ends.

A backend's copy may keep something running between epochs (jittor's: its loader worker
processes, :mod:`fastcore_train.backends.jittor.batch_workers`), which ``driver.data.release``
stops. A controller holds its loaders for as long as one of its runs lasts
(:meth:`AdaptedLoaders.held`) and releases every one when it ends, however it ends. Holds nest: an
evaluation inside ``Trainer.run`` keeps the evaluation loaders (and their workers) from one epoch
to the next, and they are released when ``Trainer.run`` ends; a standalone ``Evaluator.run``
releases them when it ends. The next run starts them again.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

from fastcore_train.log import logger


class AdaptedLoaders:
    """The loaders one controller adapted, released through ``data`` (its driver's ``driver.data``)."""

    def __init__(self, data: Any) -> None:
        self._data = data
        self._loaders: list[Any] = []
        self._depth = 0

    def __len__(self) -> int:
        return len(self._loaders)

    def add(self, loader: Any, given: Any) -> Any:
        """Note ``loader`` as ours unless it is the user's ``given`` loader itself; returns ``loader``."""
        if loader is not given and all(loader is not known for known in self._loaders):
            self._loaders.append(loader)
        return loader

    @contextmanager
    def held(self) -> Iterator[None]:
        """Keep the loaders for the block; the outermost hold releases them when it ends."""
        self._depth += 1
        failed = True
        try:
            yield
            failed = False
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.release(quiet=failed)

    def release(self, quiet: bool = False) -> None:
        """Release every loader (the next epoch of each starts what it needs again). A release that
        fails does not stop the others; its error is raised after them, or only logged when
        ``quiet`` (the run is ending with an exception of its own, which is the one to raise)."""
        first: Optional[BaseException] = None
        for loader in self._loaders:
            try:
                self._data.release(loader)
            except Exception as error:  # noqa: BLE001 - the others are released first
                if quiet:
                    logger.error("Releasing the %s the run adapted failed: %s", type(loader).__name__, error)
                elif first is None:
                    first = error
        if first is not None:
            raise first
