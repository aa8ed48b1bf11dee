"""Writing a checkpoint: what each rank writes (:class:`CheckpointContent`), then ``meta.json`` last,
with the checksum of every file (see :mod:`~fastcore_train.checkpoint.layout` for the folder)."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Optional

from fastcore_train.checkpoint.checksums import BackgroundHashes, file_checksums, write_hashed
from fastcore_train.checkpoint.json_files import json_text, write_json
from fastcore_train.checkpoint.layout import (CALLBACK_STATE_FILE, FORMAT_VERSION, META_FILE, MODEL_STEM,
                                              RANK_STATE_FILE, TRAINER_STATE_FILE, TRAINING_STATE_STEM)
from fastcore_train.checkpoint.meta import sealed_meta
from fastcore_train.checkpoint.staging import staged_path
from fastcore_train.checkpoint.target import check_checkpoint_target
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.persistence import HostSnapshot
from fastcore_train.checkpoint.user_files import backend_files, carry_user_files
from fastcore_train.utils.atomic import flush_to_disk, through_link
from fastcore_train.utils.rank_state import write_rank_state
from fastcore_train.version import __version__


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
        write_json(staging / META_FILE, sealed_meta(self.meta, checksums))


def keep_user_files(target: Path, staging: Path, driver: Driver) -> None:
    """Before ``staging`` replaces the checkpoint at ``target``: the files in it that the checkpoint did
    not write go into ``staging`` too (see :mod:`~fastcore_train.checkpoint.user_files`). Rank 0, after
    ``meta.json`` is written (so they are not listed in it)."""
    try:
        current = through_link(target)
    except FileNotFoundError:
        return  # a link to nothing: the target check says so
    if current.is_dir():
        carry_user_files(current, staging, backend_files(driver.io.model_file_suffix))


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
        keep_user_files(folder, staging, driver)
        if previous is None:
            flush_to_disk(staging)

    with staged_path(folder, driver, make_dir=True, check_target=check_checkpoint_target,
                     finish=finish, every_rank=True, previous=previous) as staging:
        content.write(staging)
    return folder
