"""Checks that make a checkpoint or model file that cannot be loaded say why, before training.

* The optimizer classes a checkpoint was saved with are recorded in its ``meta.json``
  (``"optimizers"``) and compared, on loading, with the Trainer's: another class has another state
  (Adam's moments are not SGD's momentum), which torch loads without a word and then fails on at
  the first step (``KeyError: 'betas'``), and other frameworks restore wrongly or not at all.
* A model or training-state file that the framework cannot read (cut short, damaged, another
  model's) is a :class:`~fastcore_train.checkpoint.CheckpointError` naming the file, not the
  framework's raw unpickling or zip error.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar

from fastcore_train.checkpoint import OPTIMIZERS_KEY, CheckpointError  # noqa: F401 (OPTIMIZERS_KEY: its old home)
from fastcore_train.utils.safe_pickle import UnsafePickleError


def optimizer_classes(optimizers: Sequence[Any]) -> list[str]:
    """``module.ClassName`` of each optimizer, as recorded in a checkpoint's meta."""
    return [f"{type(optimizer).__module__}.{type(optimizer).__qualname__}" for optimizer in optimizers]


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def check_optimizer_classes(meta: dict[str, Any], optimizers: Sequence[Any], folder: Path) -> None:
    """A CheckpointError when the checkpoint's optimizers are not as many, or not of the same
    classes, as ``optimizers``.

    Classes are compared by name, not module path (a framework moving its optimizer to another
    module between versions still loads). A checkpoint without the record (older) is not checked
    here (the persistence still checks the count).
    """
    saved: Optional[list[str]] = meta.get(OPTIMIZERS_KEY)
    if saved is None:
        return
    current = optimizer_classes(optimizers)
    if len(saved) != len(current):
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} holds the state of {len(saved)} optimizer(s) ({', '.join(saved)}), but "
            f"this trainer has {len(current)} ({', '.join(current)}); nothing was loaded. Pass the same "
            f"optimizers as when it was saved, or load only its weights with trainer.load_model({str(folder)!r}).")
    for index, (was, now) in enumerate(zip(saved, current)):
        if _short(was) != _short(now):
            which = f"optimizer #{index}" if len(current) > 1 else "optimizer"
            raise CheckpointError(
                f"Checkpoint {str(folder)!r} holds the state of a {was} {which}, but this trainer's {which} "
                f"is a {now}: their states differ, so it cannot be resumed with it (nothing was loaded). "
                f"Build the Trainer with a {_short(was)} optimizer to resume this checkpoint, or load only "
                f"its weights with trainer.load_model({str(folder)!r}) and start the {_short(now)} "
                "optimizer afresh.")


def load_checked(path: Path, what: str, load: Callable[[], None]) -> None:
    """Run ``load()`` (reading ``path``); an error of the framework's reader becomes a
    CheckpointError naming the file. Our own CheckpointErrors, a refused unsafe pickle (its own
    message names the file and what it would have run) and OS errors (a missing file, no
    permission) pass unchanged."""
    try:
        load()
    except (CheckpointError, UnsafePickleError, OSError):
        raise
    except Exception as error:
        raise CheckpointError(
            f"Cannot load the {what} from {str(path)!r} ({type(error).__name__}: {error}). Either the file is "
            "damaged or incomplete (a copy or a save cut short, a full disk), or it was not written for this "
            "model and optimizer (another model, other layer shapes). Save it again, or load another "
            "checkpoint.") from error


Read = TypeVar("Read")


def read_checked(path: Path, what: str, read: Callable[[], Read]) -> Read:
    """``read()``'s result, its errors turned into CheckpointErrors as :func:`load_checked` does."""
    result: list[Read] = []
    load_checked(path, what, lambda: result.append(read()))
    return result[0]
