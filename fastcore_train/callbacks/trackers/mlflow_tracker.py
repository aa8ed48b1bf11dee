"""``MLflowCallback``: the training loss and evaluation results as MLflow metrics.

No server is needed: by default the metrics go to a local SQLite database, ``<folder>/mlflow.db``
(MLflow's recommended local store; its file store is in maintenance mode); read them with MLflow's
own client or ``mlflow ui --backend-store-uri sqlite:///<folder>/mlflow.db``. A tracking
server or database works too (``tracking_uri=``, or the ``MLFLOW_TRACKING_URI`` variable).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional, Union

from fastcore_train.callbacks.tensorboard_logger import tag_for
from fastcore_train.callbacks.trackers.run_tracker import RunTrackerCallback

INSTALL_HINT = ("MLflowCallback needs mlflow (and sqlalchemy, alembic for the local store): "
                "pip install 'fastcore-train[trackers]'")


def local_store(folder: Union[str, Path]) -> str:
    """The tracking URI of the SQLite store in ``folder`` (the folder is created)."""
    path = Path(folder).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path / 'mlflow.db'}"


class MLflowCallback(RunTrackerCallback):
    """Log ``train/loss`` and ``evaluate/<result>`` (``#`` becomes ``_``) to an MLflow run, at
    step = batches trained. Rank 0 only; the run id is kept in checkpoints, so a resumed training
    logs into the same run (values the interrupted run logged after its checkpoint stay in
    MLflow's history: it cannot delete points).

    ``tracking_uri``: where runs are stored (default ``MLFLOW_TRACKING_URI``, else the file store
    ``sqlite:///<folder>/mlflow.db``); ``experiment_name``: the MLflow experiment (created when missing);
    ``run_name``: the run's name (default: the run folder's name, i.e. its start time).
    """

    package = "mlflow"
    install_hint = INSTALL_HINT

    def __init__(self, folder: Union[str, Path] = "logs", log_every_n_batches: int = 50,
                 run_name: Optional[str] = None, tracking_uri: Optional[str] = None,
                 experiment_name: str = "fastcore_train") -> None:
        super().__init__(folder, log_every_n_batches, run_name)
        #: None until the run opens: then the given URI, MLFLOW_TRACKING_URI, or the local store.
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        self.experiment_name = experiment_name
        self._client: Any = None

    def open(self, trainer: Any, resumed_at: int) -> None:
        from mlflow.tracking import MlflowClient
        if self.tracking_uri is None:  # rank 0 only: the other ranks never open
            self.tracking_uri = local_store(self.folder)
        self._client = MlflowClient(tracking_uri=self.tracking_uri)
        if self.run_id is not None:  # resuming: reopen the interrupted run
            self._client.update_run(self.run_id, status="RUNNING")
            return
        experiment = self._client.get_experiment_by_name(self.experiment_name)
        experiment_id = experiment.experiment_id if experiment is not None else \
            self._client.create_experiment(self.experiment_name)
        self.run_id = self._client.create_run(experiment_id, run_name=self.display_name()).info.run_id

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        metrics = [Metric(tag_for(kind, name), value, now, step) for name, value in values.items()]
        metrics.append(Metric("epoch", float(epoch), now, step))
        self._client.log_batch(self.run_id, metrics=metrics)

    def close(self, trainer: Any) -> None:
        if self._client is not None and self.run_id is not None:
            self._client.set_terminated(self.run_id)
        self._client = None
