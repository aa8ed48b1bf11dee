"""One folder per training run, named by its start time, for callbacks that write files."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Union


def new_run_folder(folder: Union[str, Path], driver: Any) -> Path:
    """``folder/<YYYY-mm-dd-HH_MM_SS_micro>``, the same on every rank (rank 0's clock decides).

    A collective call: every rank must make it. Runs never share a folder, so a new run cannot
    overwrite an earlier one's files.
    """
    stamp = time.strftime("%Y-%m-%d-%H_%M_%S") + f"_{int(time.time() * 1e6) % 1_000_000:06d}"
    return Path(folder) / driver.comm.broadcast_object(stamp)
