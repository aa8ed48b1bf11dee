"""Run markers: how a launcher tells a rank that finished from one that left in the middle of training.

A rank that ends with exit code 0 is not always done: ``os._exit(0)`` (or ``sys.exit(0)`` from a
callback) in the middle of an epoch leaves the other ranks waiting in a collective, and all they
can say is the framework's "Connection reset by peer". So a launcher that starts the ranks itself
(the self-launched job's rank 0, oneflow's supervising process) gives each rank a folder in
:data:`RUN_MARKERS_ENV`; while ``Trainer.run`` runs on a rank, a file ``rank_<r>`` marks it there
(:class:`RunMarker`, entered by the run's guard), removed when ``run()`` returns or raises. A rank
that exits with code 0 while its marker is still there ended before the job finished
(:func:`ended_inside_run`), and the launcher reports it as the failure it is.
"""
from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import Optional

#: Names the folder where ranks started by fastcore_train mark that ``Trainer.run`` is running on them.
RUN_MARKERS_ENV = "FASTCORE_TRAIN_RUN_MARKERS"


def marker_path(folder: str, rank: int) -> Path:
    """The marker file of ``rank`` in ``folder``."""
    return Path(folder, f"rank_{rank}")


def ended_inside_run(folder: Optional[str], rank: int) -> bool:
    """Whether ``rank``'s marker is still there: it was inside ``Trainer.run`` when it ended."""
    return folder is not None and marker_path(folder, rank).exists()


class RunMarker:
    """Marks ``Trainer.run`` running on ``rank`` for the launcher that started it (a no-op when no
    launcher of ours gave a folder: one process, or torchrun's, paddle's, mpirun's ranks)."""

    def __init__(self, rank: int) -> None:
        folder = os.environ.get(RUN_MARKERS_ENV)
        self.path = marker_path(folder, rank) if folder and os.path.isdir(folder) else None

    def __enter__(self) -> "RunMarker":
        if self.path is not None:
            self.path.write_text(str(os.getpid()))
        return self

    def __exit__(self, kind: Optional[type], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> None:
        if self.path is not None:
            try:
                self.path.unlink()
            except OSError:
                pass
