"""Predictions streamed to disk: each rank writes one ``.npz`` shard per batch, a reader merges them.

For outputs too large to hold, ``predict(..., output_dir=...)`` writes every batch as soon as it is
predicted (``predictions-rank<r>-<k>.npz``: the dataset indices of its rows and one array per output,
or one array per sample for ragged outputs), so no rank keeps more than one batch. The files are
plain numpy archives read with ``allow_pickle=False``: reading them runs no code.
:class:`PredictionShards` reads them back in dataset order, a shard per rank at a time.

Each shard is written under a temporary name and renamed into place; a write that fails (a full
disk) removes its temporary and is a :class:`PredictionWriteError` naming the shard. When a rank has
written every batch it writes its manifest last (``predictions-rank<r>-manifest.json``: its shards
and rows), so an output cut short has none, and reading it is an :class:`IncompletePredictionsError`
naming what is missing rather than part of the rows.
"""
from __future__ import annotations

import errno
import heapq
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Union

import numpy as np

INDICES = "__indices__"
SINGLE = "__output__"  # the key of a model output that is one array, not a dict
_RAGGED = "::"  # ragged outputs are stored one array per sample, as "<key>::<row>"
_PATTERN = "predictions-rank{rank:05d}-{batch:07d}.npz"
_MANIFEST = "predictions-rank{rank:05d}-manifest.json"


class PredictionWriteError(OSError):
    """A shard (or the manifest) of ``predict(output_dir=...)`` could not be written; nothing of it is left."""


class IncompletePredictionsError(ValueError):
    """A ``predict(output_dir=...)`` folder whose predict did not finish (a rank's manifest or shards missing)."""


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _publish(target: Path, write: Any) -> None:
    """``write(temporary)`` then rename it to ``target``; on failure the temporary is removed and a
    :class:`PredictionWriteError` names ``target``."""
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        write(temporary)
        os.replace(temporary, target)
    except OSError as error:
        try:
            os.remove(temporary)
        except FileNotFoundError:
            pass
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        raise PredictionWriteError(
            error.errno, f"predict(output_dir=...) could not write {str(target)!r}: {error.strerror or error}"
            f"{' (the disk is full)' if full else ''}. Its temporary file was removed; the shards written before it "
            "stay, but the output has no manifest and reads as incomplete. Free space (or fix the cause) and "
            "predict again into an empty folder.") from error


class ShardWriter:
    """Writes this rank's predictions, one shard per batch, each published atomically."""

    def __init__(self, folder: Union[str, Path], rank: int) -> None:
        self.folder, self.rank, self.batches, self.rows = Path(folder), rank, 0, 0
        if self.folder.exists() and not self.folder.is_dir():
            raise NotADirectoryError(f"predict(output_dir={str(folder)!r}): that path is a file; give a folder.")
        self.folder.mkdir(parents=True, exist_ok=True)
        if any(self.folder.glob(f"predictions-rank{rank:05d}-*")):
            raise FileExistsError(f"predict(output_dir={str(folder)!r}) already holds predictions of rank {rank}; "
                                  "give an empty folder (existing shards are never overwritten or deleted).")

    def write(self, indices: list[int], rows: list[Any]) -> None:
        arrays: dict[str, np.ndarray] = {INDICES: np.asarray(indices, dtype=np.int64)}
        if rows and isinstance(rows[0], Mapping):
            check_output_keys(list(rows[0]))
            columns = [(key, [row[key] for row in rows]) for key in rows[0]]
        else:
            columns = [(SINGLE, rows)]
        for key, values in columns:
            items = [np.asarray(value) for value in values]
            if len({(item.shape, item.dtype) for item in items}) <= 1 and (not items or items[0].dtype != object):
                arrays[key] = np.stack(items) if items else np.empty((0,))
            else:  # ragged: one array per sample
                arrays.update({f"{key}{_RAGGED}{i}": item for i, item in enumerate(items)})
        target = self.folder / _PATTERN.format(rank=self.rank, batch=self.batches)
        _publish(target, lambda path: _save_npz(path, arrays))
        self.batches += 1
        self.rows += len(indices)

    def close(self) -> None:
        """Write this rank's manifest, last: the output of this rank is complete."""
        manifest = json.dumps({"rank": self.rank, "shards": self.batches, "rows": self.rows})
        _publish(self.folder / _MANIFEST.format(rank=self.rank), lambda path: _write_text(path, manifest))


def check_output_keys(keys: list[str]) -> None:
    """Refuse output names the shard format cannot read back, before anything is written."""
    for key in keys:
        if _RAGGED in key or key in (INDICES, SINGLE):
            problem = (f"contains {_RAGGED!r}, which the shards use to store ragged outputs one sample at a time"
                       if _RAGGED in key else "is a name the shards reserve for themselves")
            raise ValueError(f"predict(output_dir=...): the output name {key!r} {problem}, so the shards could not be "
                             f"read back. Rename that output (in predict_step, or with output_mapping); nothing was "
                             "written.")


def _read_shard(path: Path) -> tuple[np.ndarray, list[Any]]:
    """A shard's indices and its rows (dicts for dict outputs, arrays otherwise)."""
    with np.load(path, allow_pickle=False) as archive:
        indices = archive[INDICES]
        count = len(indices)
        columns: dict[str, list[Any]] = {}
        for name in archive.files:
            if name == INDICES:
                continue
            key, _, position = name.rpartition(_RAGGED) if _RAGGED in name else (name, "", "")
            if position:
                columns.setdefault(key, [None] * count)[int(position)] = archive[name]
            else:
                columns[key] = list(archive[name])
    if set(columns) == {SINGLE}:
        return indices, columns[SINGLE]
    return indices, [{key: values[i] for key, values in columns.items()} for i in range(count)]


class PredictionShards:
    """The predictions written under ``folder`` by ``ranks``, read back in dataset order.

    Iterating yields one row (a dict of arrays, or an array) per sample in dataset order, holding
    one shard per rank at a time; :meth:`load` assembles everything in memory, exactly what
    ``predict`` without ``output_dir`` returns.
    """

    def __init__(self, folder: Union[str, Path], ranks: Iterable[int] = (0,)) -> None:
        self.folder = Path(folder)
        self.ranks = list(ranks)
        self.files = {rank: sorted(self.folder.glob(f"predictions-rank{rank:05d}-*.npz")) for rank in self.ranks}

    def check_complete(self) -> None:
        """Raise :class:`IncompletePredictionsError` naming what is missing unless every rank's
        manifest is there and lists the shards found."""
        for rank in self.ranks:
            path = self.folder / _MANIFEST.format(rank=rank)
            found = len(self.files[rank])
            try:
                manifest = json.loads(path.read_text(encoding="utf-8"))
                expected = int(manifest["shards"])
            except FileNotFoundError:
                raise IncompletePredictionsError(
                    f"{str(self.folder)!r} holds the predictions of an unfinished predict: rank {rank} has no manifest "
                    f"({path.name}, written last, once every batch is written), and {found} shard(s). The predict "
                    "was stopped (a full disk, a crash) before its end; predict again into an empty folder.") from None
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise IncompletePredictionsError(f"{str(path)!r} is damaged ({error}); predict again into an empty "
                                                 "folder.") from error
            if found != expected:
                names = {p.name for p in self.files[rank]}
                missing = [_PATTERN.format(rank=rank, batch=b) for b in range(expected)
                           if _PATTERN.format(rank=rank, batch=b) not in names]
                raise IncompletePredictionsError(
                    f"{str(self.folder)!r}: rank {rank}'s manifest lists {expected} shard(s), but {found} are there"
                    f"{' (missing: ' + ', '.join(missing[:5]) + ')' if missing else ''}; predict again into an empty "
                    "folder.")

    def __len__(self) -> int:
        self.check_complete()
        total = 0
        for files in self.files.values():
            for path in files:
                with np.load(path, allow_pickle=False) as archive:
                    total += len(archive[INDICES])
        return total

    def _rank_rows(self, rank: int) -> Iterator[tuple[int, Any]]:
        for path in self.files[rank]:
            indices, rows = _read_shard(path)
            yield from zip(indices.tolist(), rows)

    def __iter__(self) -> Iterator[Any]:
        self.check_complete()
        merged = heapq.merge(*(self._rank_rows(rank) for rank in self.ranks), key=lambda pair: pair[0])
        return (row for _, row in merged)

    def load(self) -> Any:
        """Every prediction in memory, as ``predict`` without ``output_dir`` returns them."""
        from fastcore_train.controllers.predict import assemble

        return assemble(list(self))

    def __repr__(self) -> str:
        return f"PredictionShards({str(self.folder)!r}, ranks={self.ranks})"
