"""Reading a checkpoint back: its ``meta.json`` (checked against the driver, and its checksums), the
trainer's and the callbacks' states, and each rank's random state. Nothing read runs code."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fastcore_train.checkpoint.checksums import META_FILE, verify_checksums
from fastcore_train.checkpoint.errors import CheckpointChecksumError, CheckpointError
from fastcore_train.checkpoint.layout import (CALLBACK_STATE_FILE, FORMAT_VERSION, LEGACY_CALLBACK_STATE_FILE,
                                              RANK_STATE_FILE, READABLE_FORMATS, TRAINER_STATE_FILE)
from fastcore_train.checkpoint.meta import load_meta
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.registry import all_backends
from fastcore_train.log import logger
from fastcore_train.utils import json_state, safe_pickle
from fastcore_train.utils.atomic import recover_folder
from fastcore_train.utils.rank_state import read_rank_state


def read_meta(folder: os.PathLike, driver: Driver, verify: bool = True) -> dict[str, Any]:
    """Check that ``folder`` is a checkpoint this driver can load and return its metadata.

    Every file's checksum is verified too (see :func:`verify_checksums`), unless ``verify=False``:
    the caller then verifies with a :class:`~fastcore_train.checkpoint.checksums.Verification`
    beside its reads (``load_checkpoint``)."""
    folder = recover_folder(folder, notify=logger.warning)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"No checkpoint folder at {str(folder)!r}. Pass the folder given to save_checkpoint "
            "(or one written by CheckpointCallback)."
        )
    meta = load_meta(folder)
    if meta.get("format_version") not in READABLE_FORMATS:
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} has format version {meta.get('format_version')!r}; this "
            f"fastcore_train reads versions {', '.join(map(str, READABLE_FORMATS))}. Load it with the "
            "fastcore_train version that wrote it (meta.json's fastcore_train_version)."
        )
    known = [entry.name for entry in all_backends()]
    if meta["backend"] not in known:
        raise CheckpointChecksumError(
            f"{str(folder / META_FILE)!r} names backend {meta['backend']!r}, which is none of {', '.join(known)}: "
            "the file was damaged or edited, and nothing of the checkpoint was loaded. Resume from another checkpoint.")
    if meta["backend"] != driver.backend:
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} was written by the {meta.get('backend')!r} backend; this "
            f"trainer uses {driver.backend!r}. Load it with a {meta.get('backend')} model and driver."
        )
    if verify:
        verify_checksums(folder, meta)
    meta["folder"] = str(folder)
    return meta


def read_rank_random_state(folder: Path, meta: dict[str, Any], rank: int, world_size: int) -> Any:
    """This rank's random state from a checkpoint: its own file, or rank 0's (with a warning) when
    the checkpoint was written by another number of ranks; None for checkpoints of format < 3
    (their states are in the trainer state)."""
    if meta.get("format_version", FORMAT_VERSION) < 3:
        return None
    saved_world = int(meta.get("world_size", 1))
    if saved_world != world_size:
        logger.warning("The checkpoint was written by %d rank(s) and is resumed on %d: random streams restart "
                       "from rank 0's state.", saved_world, world_size)
        rank = 0
    path = require_file(folder / RANK_STATE_FILE.format(rank=rank), f"random state of rank {rank}")
    try:
        return read_rank_state(path)
    except (OSError, ValueError, KeyError) as error:
        raise CheckpointError(f"Cannot read {str(path)!r} ({error}); the checkpoint is damaged.") from error


def read_trainer_state(folder: Path) -> dict[str, Any]:
    """``trainer_state.json``: the counters, the sampler's position and the event filters' states."""
    path = folder / TRAINER_STATE_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"Cannot read {str(path)!r} ({error}); the checkpoint is damaged.") from error


def read_callback_states(folder: Path, format_version: int = FORMAT_VERSION) -> dict[str, Any]:
    """The callback states: JSON, or for a format-1 checkpoint its pickle read through
    :mod:`~fastcore_train.utils.safe_pickle` (plain data only; anything else is refused unrun)."""
    if format_version == 1:
        path = require_file(folder / LEGACY_CALLBACK_STATE_FILE, "callback states")
        try:
            states = safe_pickle.load_file(path, hint="A format-1 callback_states.pkl holds plain data only.")
        except safe_pickle.UnsafePickleError:
            raise
        except Exception as error:
            raise CheckpointError(f"Cannot read {str(path)!r} ({error}); the checkpoint is damaged.") from error
    else:
        path = require_file(folder / CALLBACK_STATE_FILE, "callback states")
        try:
            states = json_state.decode(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            raise CheckpointError(f"Cannot read {str(path)!r} ({error}); the checkpoint is damaged.") from error
    if not isinstance(states, dict):
        raise CheckpointError(f"{str(path)!r} holds a {type(states).__name__}, not callback states; "
                              "the checkpoint is damaged.")
    return states


def require_file(path: Path, what: str) -> Path:
    """``path``, or :class:`CheckpointError` naming ``what`` the checkpoint misses."""
    if not path.exists():
        raise CheckpointError(f"The checkpoint misses its {what} ({str(path)!r}); it is damaged or incomplete.")
    return path
