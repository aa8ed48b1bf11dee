"""Writing under a temporary name and renaming into place, for one rank or all of them."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from fastcore_train.checkpoint.layout import model_file
from fastcore_train.drivers.driver import Driver
from fastcore_train.utils.atomic import atomic_path


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
