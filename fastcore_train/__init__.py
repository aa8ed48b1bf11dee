"""fastcore_train: one Trainer for models written in PyTorch, PaddlePaddle, Jittor or OneFlow.

Importing the package is cheap and loads no framework: public names are resolved on first use.
Under ``srun`` (several tasks, no other launcher) it writes the ``env://`` variables (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``...) from SLURM's first, so a framework imported after it (oneflow
reads them at import) sees the job: see :mod:`fastcore_train.parallel.slurm`. Under ``mpirun`` with every
rank on this machine it leaves Open MPI's TCP transport out, before a framework starts MPI: see
:mod:`fastcore_train.parallel.loopback`; on several hosts it sends on the interface toward mpirun's host:
see :mod:`fastcore_train.parallel.mpi_hosts`.
"""
from __future__ import annotations

import importlib
from typing import Any

from fastcore_train.utils import moved_modules
from fastcore_train.version import __version__

moved_modules.install()  # old paths of modules that moved (fastcore_train.demo_config, ...) keep working


def _export_slurm_variables() -> None:
    from fastcore_train.parallel.environment import MPIRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH, TORCHRUN
    from fastcore_train.parallel.slurm import export_env_variables

    export_env_variables((TORCHRUN, PADDLE_LAUNCH, MPIRUN, ONEFLOW_LAUNCH))  # the built-in backends' launchers


_export_slurm_variables()


def _keep_mpi_ranks_off_tcp() -> None:
    from fastcore_train.parallel.loopback import keep_mpi_rank_off_tcp

    if not keep_mpi_rank_off_tcp():  # under mpirun on one machine: no listening TCP transport (read at MPI_Init)
        from fastcore_train.parallel.mpi_hosts import choose_mpi_interface

        choose_mpi_interface()  # on several hosts: the interface toward mpirun's host


_keep_mpi_ranks_off_tcp()

_EXPORTS = {
    "Trainer": "fastcore_train.controllers.trainer",
    "DistTrainer": "fastcore_train.compat.fastnlp0",
    "Evaluator": "fastcore_train.controllers.evaluator",
    "TrainerState": "fastcore_train.controllers.state",
    "Event": "fastcore_train.events.event",
    "EventFilter": "fastcore_train.events.event",
    "Filter": "fastcore_train.events.event",
    "Callback": "fastcore_train.events.callback",
    "CallbackManager": "fastcore_train.events.manager",
    "Driver": "fastcore_train.drivers.driver",
    "choose_driver": "fastcore_train.drivers.choose",
    "notebook_launcher": "fastcore_train.drivers.function_launcher",
    "launch": "fastcore_train.drivers.function_launcher",
    "RankFailedError": "fastcore_train.drivers.function_launcher",
    "available_driver_names": "fastcore_train.drivers.registry",
    "Metric": "fastcore_train.metrics",
    "Accuracy": "fastcore_train.metrics",
    "ClassifyFPreRecMetric": "fastcore_train.metrics",
    "SpanFPreRecMetric": "fastcore_train.metrics",
    "ProgressCallback": "fastcore_train.controllers.progress",
    "RichProgress": "fastcore_train.controllers.progress",
    "TqdmProgress": "fastcore_train.controllers.progress",
    "RawTextProgress": "fastcore_train.controllers.progress",
    "CheckpointCallback": "fastcore_train.callbacks.checkpoint_callback",
    "LoadBestModelCallback": "fastcore_train.callbacks.load_best_model",
    "EarlyStopCallback": "fastcore_train.callbacks.early_stop",
    "LRSchedCallback": "fastcore_train.callbacks.lr_scheduler",
    "MetricLogCallback": "fastcore_train.callbacks.metric_log",
    "CSVLoggerCallback": "fastcore_train.callbacks.csv_logger",
    "TensorBoardCallback": "fastcore_train.callbacks.tensorboard_logger",
    "CurvePlotCallback": "fastcore_train.callbacks.curves",
    "TimerCallback": "fastcore_train.callbacks.timer",
    "MoreEvaluateCallback": "fastcore_train.callbacks.more_evaluate",
    "NanGuardCallback": "fastcore_train.controllers.nan_guard",
    "NonFiniteLossError": "fastcore_train.controllers.nan_guard",
    "TrainingTerminated": "fastcore_train.controllers.run_guard",
    "TrainingRequeued": "fastcore_train.controllers.run_guard",
    "REQUEUE_EXIT_CODE": "fastcore_train.controllers.run_guard",
    "GradClipCallback": "fastcore_train.callbacks.grad_clip",
    "TorchGradClipCallback": "fastcore_train.callbacks.grad_clip",
    "WarmupCallback": "fastcore_train.callbacks.warmup",
    "TorchWarmupCallback": "fastcore_train.callbacks.warmup",
    "PaddleWarmupCallback": "fastcore_train.callbacks.warmup",
    "JittorWarmupCallback": "fastcore_train.callbacks.warmup",
    "OneflowWarmupCallback": "fastcore_train.callbacks.warmup",
    "RichCallback": "fastcore_train.controllers.progress",
    "TqdmCallback": "fastcore_train.controllers.progress",
    "RawTextCallback": "fastcore_train.controllers.progress",
    "RandomSampler": "fastcore_train.samplers",
    "SequentialSampler": "fastcore_train.samplers",
    "SortedSampler": "fastcore_train.samplers",
    "ReproduceBatchSampler": "fastcore_train.samplers",
    "RandomBatchSampler": "fastcore_train.samplers",
    "BucketedBatchSampler": "fastcore_train.samplers",
    "UnrepeatedRandomSampler": "fastcore_train.samplers",
    "UnrepeatedSequentialSampler": "fastcore_train.samplers",
    "UnrepeatedSortedSampler": "fastcore_train.samplers",
    "seed_everything": "fastcore_train.seeding",
    "summarize": "fastcore_train.summary",
    "ModelSummary": "fastcore_train.summary",
    "PredictionShards": "fastcore_train.controllers.prediction_shards",
    "logger": "fastcore_train.log",
    "convert_checkpoint": "fastcore_train.convert",
    "save_neutral_weights": "fastcore_train.convert",
    "load_neutral_weights": "fastcore_train.convert",
    "add_log_file": "fastcore_train.log",
    "get_last_checkpoint": "fastcore_train.checkpoint.resume",
    "EvalPrediction": "fastcore_train.metrics.function_metric",
    "TrainOutput": "fastcore_train.controllers.train_output",
    "set_log_level": "fastcore_train.log",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fastcore_train' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
