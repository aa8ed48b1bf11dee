"""The checkpoint folder layout, written once for every backend.

A checkpoint is a folder::

    meta.json            format version, backend, driver, world size, package version, and the
                         checksum of every other file of the checkpoint (checked when it is loaded)
    model<suffix>        the model, written by the driver (or by a user's model_save_fn)
    training_state<suffix>  optimizers and grad scaler, written by the driver
    trainer_state.json   trainer counters, sampler state, event-filter counters, RNG states
    callback_states.json what each Callback returned from on_save_checkpoint (JSON, see
                         :mod:`fastcore_train.utils.json_state`; format 1 pickled it)

The folder is written under a temporary name and renamed into place, so a process killed
mid-write leaves the previous checkpoint complete and loadable. Once in place, it is flushed to
disk (every file and folder fsynced) by the trainer's background writer, and only then is the
previous checkpoint at that name deleted: a power cut before the flush leaves the previous one
beside it (``<name>.old-*``), so the training thread does not wait for the disk. Only a folder that is itself a
checkpoint (it has our ``meta.json``) or an empty folder is ever replaced: anything else at the
target is the user's, and saving there is an error that leaves it untouched.

``meta.json`` is written last, once every file is in the temporary folder, with the checksum of
each of them (:mod:`~fastcore_train.checkpoint.checksums`: XXH3-128, computed while writing where
the framework saves to a file object) (folders, such as oneflow's model folder, file by file); loading checks them first,
so a file changed or damaged after saving is an error naming it, not weights loaded silently.

Loading runs no code of the checkpoint's: the JSON files are parsed, the framework files are
read by the driver's safe loaders (``driver.io``), and a format-1 ``callback_states.pkl`` through
:mod:`fastcore_train.utils.safe_pickle`, which rebuilds plain data only.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from fastcore_train.checkpoint.checksums import (ALGORITHM, ALGORITHM_KEY, META_FILE, BackgroundHashes, Verification,
                                                 file_checksums, verify_checksums, write_hashed)
from fastcore_train.checkpoint.errors import CheckpointError, CheckpointStateError
from fastcore_train.checkpoint.target import check_checkpoint_target
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.persistence import HostSnapshot
from fastcore_train.log import logger
from fastcore_train.utils import json_state, safe_pickle
from fastcore_train.utils.atomic import atomic_path, flush_to_disk, recover_folder
from fastcore_train.utils.rank_state import read_rank_state, write_rank_state
from fastcore_train.version import __version__

#: 4: XXH3-128 checksums (``checksum_algorithm`` in meta.json). 3: a random-state file per rank.
#: 2: callback states in JSON. 1: pickled (still read, through the restricted unpickler).
FORMAT_VERSION = 4
READABLE_FORMATS = (1, 2, 3, 4)
TRAINER_STATE_FILE = "trainer_state.json"
CALLBACK_STATE_FILE = "callback_states.json"
LEGACY_CALLBACK_STATE_FILE = "callback_states.pkl"
MODEL_STEM = "model"
TRAINING_STATE_STEM = "training_state"
#: Each rank's random state (format 3 on), written by that rank: see utils/rank_state.py.
RANK_STATE_FILE = "rank_state_{rank:05d}.npz"
#: ``meta.json``'s record of the optimizer classes (checked on resume, read by ``convert``).
OPTIMIZERS_KEY = "optimizers"
#: The key under which ``LRSchedCallback``'s state records the scheduler's position (read by ``convert``).
LR_POSITION = "__lr_position__"


def encode_callback_states(states: dict[str, Any]) -> dict[str, Any]:
    """``{callback name: state}`` as JSON-able data (:func:`fastcore_train.utils.json_state.encode`),
    or :class:`CheckpointStateError` naming the callback and the entry that is not."""
    encoded = {}
    for name, state in states.items():
        try:
            encoded[name] = json_state.encode(state)
        except json_state.StateNotJSONError as error:
            raise CheckpointStateError(
                f"Cannot save a checkpoint: callback {name!r} returned a state from on_save_checkpoint in which "
                f"{error} Checkpoints keep callback states as JSON so that loading one runs no code. Nothing "
                "was written.") from None
    return encoded


def model_file(folder: Path, driver: Driver) -> Path:
    return folder / f"{MODEL_STEM}{driver.io.model_file_suffix}"


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    raise TypeError(
        f"Checkpoint state must be JSON-able (dicts, lists, numbers, strings); got a "
        f"{type(value).__name__}. Return plain data from Callback.on_save_checkpoint."
    )


def json_text(data: Any) -> str:
    """``data`` as the text :func:`write_json` writes."""
    return json.dumps(data, default=_json_default, indent=1)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (a checkpoint's files are flushed to disk together once it is
    published, see :func:`~fastcore_train.utils.atomic.make_durable`)."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_json(path: Path, data: Any) -> None:
    write_text(path, json_text(data))


@contextlib.contextmanager
def staged_path(target: Path, driver: Driver, make_dir: bool,
                check_target: Optional[Callable[[Path], None]] = None,
                finish: Optional[Callable[[Path], None]] = None, every_rank: bool = False,
                previous: Optional[list[Path]] = None) -> Iterator[Path]:
    """A temporary path that replaces ``target`` atomically on success.

    Entered by rank 0 alone, or, for a driver whose saving is collective, by every rank: rank 0
    picks the path and shares it, and renames it into place only after every rank has written.
    ``every_rank``: every rank enters (each writes a file of its own) whatever the driver.
    ``check_target`` (see :func:`~fastcore_train.utils.atomic.atomic_path`) runs on rank 0;
    ``finish(staging)`` runs on rank 0 once every rank has written, just before the rename.
    ``previous``: the replaced version is not deleted but moved aside and appended to it (see
    :func:`~fastcore_train.utils.atomic.publish`).
    """
    collective = (every_rank or driver.io.collective_save) and driver.comm.is_distributed()
    is_zero = driver.comm.is_global_zero()
    with atomic_path(target, check_target, previous) if is_zero else contextlib.nullcontext() as staging:
        if is_zero and make_dir:
            staging.mkdir(parents=True)
        if collective:
            staging = Path(driver.comm.broadcast_object(str(staging) if is_zero else None))
            driver.comm.barrier()  # the folder exists before anyone writes into it
        yield staging
        if collective:
            driver.comm.barrier()  # everyone has written before rank 0 renames
        if is_zero and finish is not None:
            finish(staging)


def write_model_file(folder: Path, driver: Driver, only_state_dict: bool = True, **kwargs: Any) -> Path:
    """Write ``folder/model<suffix>`` atomically (rank 0, or every rank for collective saving)."""
    if driver.comm.is_global_zero():
        folder.mkdir(parents=True, exist_ok=True)
    with staged_path(model_file(folder, driver), driver, make_dir=False) as staging:
        driver.io.save_model(staging, only_state_dict=only_state_dict, **kwargs)
    return model_file(folder, driver)


@dataclasses.dataclass
class CheckpointContent:
    """What this rank writes into a checkpoint folder: ``files`` are ``(name, write(path))`` in
    order (``write`` returns the file's checksum when it computed it while writing, else None),
    and rank 0 adds ``meta.json`` last (:meth:`write_meta`) once every rank has written.
    ``snapshot``: an asynchronous checkpoint's host copies, completed first where the files are
    written (a background copy, see :mod:`~fastcore_train.checkpoint.async_writer`)."""

    meta: dict[str, Any]
    files: list[tuple[str, Callable[[Path], Optional[str]]]]
    digests: dict[str, str] = dataclasses.field(default_factory=dict)
    snapshot: Optional[HostSnapshot] = None
    #: the files written by path (no checksum from the write), hashed on helper threads meanwhile
    background: Optional[BackgroundHashes] = None
    #: False for collective saving: other ranks may still be writing into the same folders, so
    #: those files are hashed by rank 0 only once every rank has written (:meth:`write_meta`)
    hash_beside_writes: bool = True

    def write(self, staging: Path) -> None:
        if self.snapshot is not None:
            self.snapshot.complete()
        self.background = BackgroundHashes(staging)
        try:
            for name, write in self.files:
                digest = write(staging / name)
                if digest is not None:
                    self.digests[name] = digest
                elif name and self.hash_beside_writes and (staging / name).exists():  # (while the next is written)
                    self.background.add(staging / name)
        except BaseException:
            self.background.close()
            raise

    def write_meta(self, staging: Path) -> None:
        if self.background is not None:
            self.digests.update(self.background.result())
        checksums = file_checksums(staging, known=self.digests)
        write_json(staging / META_FILE, dict(self.meta, checksums=checksums, **{ALGORITHM_KEY: ALGORITHM}))


def check_snapshot_options(model_save_fn: Optional[Callable[[Path], None]], only_state_dict: bool) -> None:
    """A ValueError for options an asynchronous checkpoint cannot take (they write the live model)."""
    if model_save_fn is not None or not only_state_dict:
        raise ValueError("An asynchronous checkpoint holds the model's state dict: it cannot be taken with "
                         "model_save_fn or only_state_dict=False (they write the live model). Save with "
                         "blocking=True for those.")


def _framework_file(driver: Driver, write: Callable[[Any], None],
                    to_file_object: bool = True) -> Callable[[Path], Optional[str]]:
    """A file writer for ``write(target)`` (a framework's save): through a
    :class:`~fastcore_train.checkpoint.checksums.HashingFile` when the backend saves to file
    objects (its checksum is then known when the write ends), else to the path."""
    if driver.io.hashes_while_writing and to_file_object:
        return lambda path: write_hashed(path, write)

    def to_path(path: Path) -> None:  # (no checksum yet: the file is hashed when meta.json is written)
        write(path)
    return to_path


def _no_checksum(_: Any) -> None:
    return None


def _text_file(text: str) -> Callable[[Path], Optional[str]]:
    data = text.encode("utf-8")
    return lambda path: write_hashed(path, lambda handle: handle.write(data))


def checkpoint_content(driver: Driver, trainer_state: dict[str, Any], callback_states: dict[str, Any],
                       only_state_dict: bool = True, model_save_fn: Optional[Callable[[Path], None]] = None,
                       extra_json: Optional[dict[str, Any]] = None, rank_state: Any = None,
                       extra_meta: Optional[dict[str, Any]] = None, snapshot: bool = False) -> CheckpointContent:
    """This rank's part of a checkpoint (see :func:`write_checkpoint` for who writes what).

    ``snapshot=False`` writes the live state when the files are written; ``snapshot=True`` copies
    everything first (tensors to host memory with ``driver.io.begin_snapshot()``, JSON to text),
    so the files can be written later, in the background, while training changes the live state.
    Both write the same objects with the same calls, so the files are the same byte for byte.
    """
    is_zero = driver.comm.is_global_zero()
    io = driver.io
    meta = {
        "format_version": FORMAT_VERSION, "backend": driver.backend,
        "driver": type(driver).__name__, "world_size": driver.comm.world_size,
        "only_state_dict": only_state_dict, "custom_model_save": model_save_fn is not None,
        "fastcore_train_version": __version__, **(extra_meta or {}),
    }
    files: list[tuple[str, Callable[[Path], Optional[str]]]] = []
    writes_model = is_zero or io.collective_save
    model_name = f"{MODEL_STEM}{io.model_file_suffix}"
    state_name = f"{TRAINING_STATE_STEM}{io.model_file_suffix}"
    host = None
    if snapshot:
        check_snapshot_options(model_save_fn, only_state_dict)
        if writes_model:
            host = io.begin_snapshot()
            files += [(model_name, _framework_file(driver, lambda target: io.write_object(host.model, target))),
                      (state_name, _framework_file(driver, lambda target: io.write_object(host.state, target)))]
    else:
        if model_save_fn is not None:
            if is_zero:
                files.append(("", lambda path: _no_checksum(model_save_fn(path))))
        elif writes_model:
            files.append((model_name, _framework_file(
                driver, lambda target: io.save_model(target, only_state_dict=only_state_dict),
                to_file_object=only_state_dict or io.saves_whole_model_to_file_objects)))
        if writes_model:
            files.append((state_name, _framework_file(driver, io.save_training_state)))
    if rank_state is not None:
        files.append((RANK_STATE_FILE.format(rank=driver.comm.rank),
                      lambda path: write_hashed(path, lambda handle: write_rank_state(handle, rank_state))))
    if is_zero:
        json_files = {TRAINER_STATE_FILE: trainer_state, CALLBACK_STATE_FILE: callback_states, **(extra_json or {})}
        for name, data in json_files.items():
            if snapshot:
                files.append((name, _text_file(json_text(data))))
            else:
                files.append((name, lambda path, data=data: _text_file(json_text(data))(path)))
    return CheckpointContent(meta, files, snapshot=host, hash_beside_writes=not io.collective_save)


def write_checkpoint(folder: os.PathLike, driver: Driver, trainer_state: dict[str, Any],
                     callback_states: dict[str, Any], only_state_dict: bool = True,
                     model_save_fn: Optional[Callable[[Path], None]] = None,
                     extra_json: Optional[dict[str, Any]] = None, rank_state: Any = None,
                     extra_meta: Optional[dict[str, Any]] = None,
                     previous: Optional[list[Path]] = None) -> Path:
    """Write a complete checkpoint folder atomically.

    Call on every rank: each writes its ``rank_state`` (its random state) to a file of its own;
    the model and training state are written by rank 0, or by every rank when
    ``driver.io.collective_save``; the JSON files by rank 0. ``callback_states``
    is what :func:`encode_callback_states` returned. ``extra_json`` maps
    file names to data written beside the checkpoint in the same atomic step (e.g. the
    evaluation results a checkpoint was selected by); ``extra_meta`` is added to ``meta.json``
    (e.g. the optimizer classes, checked when it is loaded). Raises
    :class:`~fastcore_train.checkpoint.errors.CheckpointTargetError`
    (before writing anything) when ``folder`` holds something that is not a checkpoint.
    ``previous``: a checkpoint replaced at ``folder`` is moved aside, not deleted, and its path
    appended to this list; the caller deletes it once the new one is on disk
    (:func:`~fastcore_train.utils.atomic.make_durable`). Without it the files are fsynced before
    the rename and the replaced one deleted at once.
    :mod:`fastcore_train.checkpoint.async_writer` writes the same files in the background.
    """
    folder = Path(folder)
    content = checkpoint_content(driver, trainer_state, callback_states, only_state_dict, model_save_fn,
                                 extra_json, rank_state, extra_meta)

    def finish(staging: Path) -> None:
        content.write_meta(staging)
        if previous is None:
            flush_to_disk(staging)

    with staged_path(folder, driver, make_dir=True, check_target=check_checkpoint_target,
                     finish=finish, every_rank=True, previous=previous) as staging:
        content.write(staging)
    return folder


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
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise CheckpointError(
            f"{str(folder)!r} is not a fastcore_train checkpoint (it has no {META_FILE}); it may be "
            "damaged or written by another tool. Pick a complete checkpoint folder."
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise CheckpointError(f"{str(meta_path)!r} is damaged ({error}); pick another checkpoint.") from error
    if meta.get("format_version") not in READABLE_FORMATS:
        raise CheckpointError(
            f"Checkpoint {str(folder)!r} has format version {meta.get('format_version')!r}; this "
            f"fastcore_train reads versions {', '.join(map(str, READABLE_FORMATS))}. Load it with the "
            "fastcore_train version that wrote it (meta.json's fastcore_train_version)."
        )
    if meta.get("backend") != driver.backend:
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
    if not path.exists():
        raise CheckpointError(f"The checkpoint misses its {what} ({str(path)!r}); it is damaged or incomplete.")
    return path
