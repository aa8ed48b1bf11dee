"""The package logger, ``logging.getLogger("fastcore_train")``, made rank-aware.

Rank 0 logs at INFO and every other rank at WARNING, so a data-parallel job prints each message
once; ``FASTCORE_TRAIN_LOG_LEVEL`` (e.g. ``DEBUG``) overrides the level of every rank and
``FASTCORE_TRAIN_LOG_ALL_RANKS=1`` keeps the other ranks at rank 0's level. Once a job has more
than one rank, every line names the rank it came from. ``add_log_file`` copies the log to a file
(one per rank).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Optional, Union

LEVEL_ENV = "FASTCORE_TRAIN_LOG_LEVEL"
ALL_RANKS_ENV = "FASTCORE_TRAIN_LOG_ALL_RANKS"
_DATE_FORMAT = "%H:%M:%S"

logger = logging.getLogger("fastcore_train")


class _RankState:
    """Which rank this process is: rank 0 of 1 until the launcher's facts are adopted
    (:func:`adopt_launched_rank`, called by the driver registry when it is imported, before any
    backend or Trainer logs), then what :func:`set_rank` says."""

    rank = 0
    world_size = 1
    all_ranks = False
    level_set_by_user = False
    rank_set = False


def _format(rank: int, world_size: int) -> logging.Formatter:
    where = f" rank {rank}" if world_size > 1 else ""
    return logging.Formatter(f"[%(asctime)s %(levelname)s{where} fastcore_train] %(message)s", _DATE_FORMAT)


def _level_from_env(default: int) -> int:
    name = os.environ.get(LEVEL_ENV, "").strip().upper()
    if not name:
        return default
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        raise ValueError(f"{LEVEL_ENV}={name!r} is not a logging level; use DEBUG, INFO, WARNING or ERROR.")
    return level


def _rank_level() -> int:
    if _RankState.rank == 0 or _RankState.all_ranks or os.environ.get(ALL_RANKS_ENV) == "1":
        return _level_from_env(logging.INFO)
    return _level_from_env(logging.WARNING)


#: Set for the ranks that ``notebook_launcher`` starts from a notebook: their INFO lines go to stdout too.
INFO_TO_STDOUT_ENV = "FASTCORE_TRAIN_LOG_INFO_TO_STDOUT"


def in_a_notebook() -> bool:
    """Whether this process is a Jupyter kernel, or a rank a kernel started (:data:`INFO_TO_STDOUT_ENV`)."""
    if os.environ.get(INFO_TO_STDOUT_ENV) == "1":
        return True
    if "ipykernel" not in sys.modules:
        return False
    from fastcore_train.utils.interpreter import interactive_interpreter
    return interactive_interpreter() == "a Jupyter kernel"


class _ConsoleHandler(logging.StreamHandler):
    """stderr; in a notebook, INFO and below (the model summary, progress lines) go to stdout, since
    Jupyter shows stderr on a red background, which reads as an error."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self._stderr = self.stream

    def emit(self, record: logging.LogRecord) -> None:
        # emit runs under the handler's lock (Handler.handle), so switching the stream here is safe
        self.stream = sys.stdout if record.levelno < logging.WARNING and in_a_notebook() else self._stderr
        super().emit(record)


def _install_console_handler() -> None:
    if not logger.handlers:
        handler = _ConsoleHandler()
        handler.setFormatter(_format(_RankState.rank, _RankState.world_size))
        logger.addHandler(handler)
        logger.setLevel(_rank_level())
        logger.propagate = False


_install_console_handler()


def adopt_launched_rank(rank: int, world_size: int) -> None:
    """The launcher's guess of this process's rank (from its environment variables), so that
    lines logged before the Trainer exists name the right rank; ignored once :func:`set_rank`
    has spoken. The log sits below the parts that know launchers, so they tell it."""
    if not _RankState.rank_set and (rank, world_size) != (_RankState.rank, _RankState.world_size):
        _apply_rank(rank, world_size)


def set_rank(rank: int, world_size: int, all_ranks: Optional[bool] = None) -> None:
    """Tell the logger which rank this process is (the Trainer does this once its driver is set up).

    Non-zero ranks drop to WARNING unless ``all_ranks`` (or ``FASTCORE_TRAIN_LOG_ALL_RANKS=1``)
    asks for every rank's INFO lines; a level given to :func:`set_log_level` is kept.
    """
    _RankState.rank_set = True
    if all_ranks is not None:
        _RankState.all_ranks = bool(all_ranks)
    _apply_rank(rank, world_size)


def _apply_rank(rank: int, world_size: int) -> None:
    _RankState.rank, _RankState.world_size = int(rank), int(world_size)
    if not _RankState.level_set_by_user:
        logger.setLevel(_rank_level())
    for handler in list(logger.handlers):
        base = getattr(handler, _BASE_PATH_ATTRIBUTE, None)
        if base is not None and log_file_for_rank(base, _RankState.rank).resolve() != Path(handler.baseFilename):
            # Added before the rank was known: move it to this rank's own file, and remove the
            # file opened under the wrong name if it was ours and is still empty.
            logger.removeHandler(handler)
            handler.close()
            wrong = Path(handler.baseFilename)
            if getattr(handler, _CREATED_ATTRIBUTE, False) and wrong.is_file() and wrong.stat().st_size == 0:
                wrong.unlink()
            add_log_file(base, handler.level, handler.mode)
            continue
        handler.setFormatter(_format(_RankState.rank, _RankState.world_size))


def set_log_level(level: Union[int, str]) -> None:
    """Set the level of this process's log (``"DEBUG"``, ``logging.INFO``, ...), whatever its rank."""
    if isinstance(level, str):
        resolved = logging.getLevelName(level.upper())
        if not isinstance(resolved, int):
            raise ValueError(f"{level!r} is not a logging level; use DEBUG, INFO, WARNING or ERROR.")
        level = resolved
    _RankState.level_set_by_user = True
    logger.setLevel(level)


def log_file_for_rank(path: Union[str, Path], rank: int) -> Path:
    """Rank 0 writes ``path`` itself; rank r writes ``<stem>.rank<r><suffix>`` beside it."""
    path = Path(path)
    return path if rank == 0 else path.with_name(f"{path.stem}.rank{rank}{path.suffix or '.log'}")


_BASE_PATH_ATTRIBUTE = "fastcore_train_base_path"
_CREATED_ATTRIBUTE = "fastcore_train_created_file"


def add_log_file(path: Union[str, Path], level: Union[int, str] = "INFO", mode: str = "a") -> Path:
    """Also write this process's log to ``path`` (per rank, see :func:`log_file_for_rank`).

    The file gets the lines this rank logs (its level, see the module docstring) that are at
    least ``level``; adding the same file twice adds it once. The file exists once this returns
    (empty until a line is logged), so a script can check it or point a viewer at it. Returns the
    file written.
    """
    target = log_file_for_rank(path, _RankState.rank).resolve()
    for handler in logger.handlers:
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename) == target:
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    existed = target.exists()
    handler = logging.FileHandler(target, mode=mode, encoding="utf-8")
    setattr(handler, _CREATED_ATTRIBUTE, not existed)
    handler.setLevel(level.upper() if isinstance(level, str) else level)
    handler.setFormatter(_format(_RankState.rank, _RankState.world_size))
    setattr(handler, _BASE_PATH_ATTRIBUTE, Path(path))
    logger.addHandler(handler)
    return target


def remove_log_files() -> None:
    """Stop writing every log file added by :func:`add_log_file`."""
    for handler in list(logger.handlers):
        if isinstance(handler, logging.FileHandler):
            logger.removeHandler(handler)
            handler.close()
