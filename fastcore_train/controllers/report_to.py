"""``report_to``: the Trainer option naming metric logs and experiment trackers, as in HF's Trainer.

``Trainer(..., report_to=["tensorboard", "mlflow"])`` adds one callback per name, each writing
under ``report_dir`` every ``report_every_n_batches`` batches; for finer settings pass the callback
itself in ``callbacks``. Callbacks are imported only when named, so naming none costs nothing.
"""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any, Optional, Sequence, Union

#: name -> (module, class, the package it needs)
REPORTERS: dict[str, tuple[str, str, Optional[str]]] = {
    "csv": ("fastcore_train.callbacks.csv_logger", "CSVLoggerCallback", None),
    "tensorboard": ("fastcore_train.callbacks.tensorboard_logger", "TensorBoardCallback", "tensorboardX"),
    "mlflow": ("fastcore_train.callbacks.trackers.mlflow_tracker", "MLflowCallback", "mlflow"),
    "wandb": ("fastcore_train.callbacks.trackers.wandb_tracker", "WandbCallback", "wandb"),
    "swanlab": ("fastcore_train.callbacks.trackers.swanlab_tracker", "SwanLabCallback", "swanlab"),
}


def report_names(report_to: Union[str, Sequence[str], None]) -> list[str]:
    """The reporter names ``report_to`` asks for: ``"all"`` is every one whose package is installed,
    ``"none"`` (or an empty list) is none; an unknown name is a ValueError listing the known ones."""
    if report_to is None:
        return []
    if isinstance(report_to, str):
        names = [report_to]
    elif isinstance(report_to, (list, tuple)) and all(isinstance(name, str) for name in report_to):
        names = list(report_to)
    else:
        raise TypeError(f"report_to must be a reporter name or a list of them ({', '.join(map(repr, REPORTERS))}, "
                        f"'all' or 'none'), got {report_to!r} (a {type(report_to).__name__}).")
    if names in (["none"], []):
        return []
    if names == ["all"]:
        return [name for name, (_, _, package) in REPORTERS.items()
                if package is None or importlib.util.find_spec(package) is not None]
    unknown = [name for name in names if name not in REPORTERS]
    if unknown:
        raise ValueError(f"report_to names unknown reporter(s) {unknown}; known: {', '.join(REPORTERS)}, "
                         "'all' (every installed one) or 'none'.")
    return names


def report_callbacks(report_to: Union[str, Sequence[str], None], folder: Union[str, Path] = "logs",
                     every_n_batches: int = 50, run_name: Optional[str] = None) -> list[Any]:
    """One callback per name in ``report_to``, writing under ``folder``."""
    callbacks = []
    for name in report_names(report_to):
        module, cls, _ = REPORTERS[name]
        kind = getattr(importlib.import_module(module), cls)
        if name in ("csv", "tensorboard"):
            callbacks.append(kind(folder, log_every_n_batches=every_n_batches))
        else:
            callbacks.append(kind(folder, log_every_n_batches=every_n_batches, run_name=run_name))
    return callbacks
