"""One folder per training run, named by its start time, for callbacks that write files."""
from __future__ import annotations

import time
import weakref
from pathlib import Path
from typing import Any, Union

#: trainer -> the name of its run folder, chosen once so that every callback of a run shares it.
_RUN_NAMES: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def run_name(trainer: Any, driver: Any) -> str:
    """``YYYY-mm-dd-HH_MM_SS_micro``: the start time of ``trainer``'s run, the same on every rank.

    Chosen at the first call for a trainer (rank 0's clock decides, so that call is collective:
    every rank makes it, as callbacks do in ``on_after_trainer_initialized``) and the same for
    every later call, so checkpoints, CSV logs, TensorBoard events and curves of one run land in
    folders of one name.
    """
    name = _RUN_NAMES.get(trainer)
    if name is None:
        stamp = time.strftime("%Y-%m-%d-%H_%M_%S") + f"_{int(time.time() * 1e6) % 1_000_000:06d}"
        name = _RUN_NAMES[trainer] = driver.comm.broadcast_object(stamp)
    return name


def new_run_folder(folder: Union[str, Path], driver: Any, trainer: Any) -> Path:
    """``folder/<run name>`` (see :func:`run_name`): callbacks given the same ``folder`` share it.

    Runs never share a folder, so a new run cannot overwrite an earlier one's files.
    """
    return Path(folder) / run_name(trainer, driver)
