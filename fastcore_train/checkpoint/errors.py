"""The errors a checkpoint can raise; :mod:`fastcore_train.checkpoint` re-exports them (kept apart so
that the checksum module can raise them without importing the whole checkpoint module)."""
from __future__ import annotations


class CheckpointError(ValueError):
    """A folder that is not a loadable checkpoint for this trainer."""


class CheckpointTargetError(CheckpointError):
    """A place a checkpoint must not be written to (it holds something that is not ours)."""


class CheckpointChecksumError(CheckpointError):
    """A checkpoint file whose content is not what was saved (changed or damaged since)."""


class CheckpointStateError(CheckpointError, TypeError):
    """A callback state that cannot be written as JSON (raised when saving, before any write)."""
