"""What a rank of a function job (:func:`fastcore_train.notebook_launcher`) reports when it fails.

The process that started the ranks gives each one a folder in :data:`FUNCTION_JOB_ENV`. A rank
that raises, in the user's function or inside ``Trainer.run`` (whose run guard ends the rank at
once), writes ``error_<rank>.json`` there: the exception's type, message, traceback and the time,
so the caller can raise the first failure's message instead of "rank 1 exited with code 1".
"""
from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Optional

#: Names the folder of a function job (payload, result, the ranks' error records).
FUNCTION_JOB_ENV = "FASTCORE_TRAIN_FUNCTION_JOB"
#: The pid of the process that started the ranks (each rank dies with it: no rank outlives a dead kernel).
PARENT_ENV = "FASTCORE_TRAIN_FUNCTION_JOB_PARENT"


class RankFailedError(RuntimeError):
    """A rank of a function job failed; ``rank`` names it, ``remote_traceback`` is its traceback."""

    def __init__(self, message: str, rank: Optional[int] = None, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.remote_traceback = remote_traceback


def record_failure(rank: int, exception: BaseException) -> bool:
    """In a rank of a function job: write what ``exception`` was for the caller (a no-op elsewhere;
    the first record of a rank stays). True when the caller will report it (so the rank need not
    print it: the caller shows the first failure first, and the ones it caused folded under it)."""
    folder = os.environ.get(FUNCTION_JOB_ENV)
    if not folder or not os.path.isdir(folder):
        return False
    path = Path(folder, f"error_{rank}.json")
    if path.exists():
        return True
    record = {"rank": rank, "type": type(exception).__name__, "message": str(exception), "time": time.time(),
              "traceback": "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))}
    try:
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(record), encoding="utf-8")
        partial.replace(path)
    except OSError:
        return False
    return True


def read_failures(folder: str) -> list[dict]:
    """The error records the ranks wrote into ``folder``, the earliest first."""
    records = []
    for path in Path(folder).glob("error_*.json"):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda record: record["time"])
