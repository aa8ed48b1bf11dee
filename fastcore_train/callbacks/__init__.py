"""Ready-made callbacks (and, for code written for fastNLP 1.0, its names for them)."""
from fastcore_train.callbacks.checkpoint_callback import CheckpointCallback
from fastcore_train.callbacks.csv_logger import CSVLoggerCallback
from fastcore_train.callbacks.curves import CurvePlotCallback
from fastcore_train.callbacks.early_stop import EarlyStopCallback
from fastcore_train.callbacks.grad_clip import GradClipCallback, TorchGradClipCallback
from fastcore_train.callbacks.load_best_model import LoadBestModelCallback
from fastcore_train.callbacks.lr_scheduler import LRSchedCallback
from fastcore_train.callbacks.metric_log import MetricLogCallback
from fastcore_train.callbacks.more_evaluate import MoreEvaluateCallback
from fastcore_train.callbacks.nan_guard import NanGuardCallback, NonFiniteLossError
from fastcore_train.controllers.progress import (ProgressCallback, RawTextCallback, RawTextProgress, RichCallback,
                                                 RichProgress, TqdmCallback, TqdmProgress, choose_progress_callback)
from fastcore_train.callbacks.tensorboard_logger import TensorBoardCallback
from fastcore_train.callbacks.timer import TimerCallback
from fastcore_train.callbacks.warmup import (JittorWarmupCallback, OneflowWarmupCallback, PaddleWarmupCallback,
                                             TorchWarmupCallback, WarmupCallback)
from fastcore_train.events import Callback, Event, Filter

__all__ = ["Callback", "CheckpointCallback", "EarlyStopCallback", "Event", "Filter", "GradClipCallback",
           "LoadBestModelCallback", "LRSchedCallback", "ProgressCallback", "RawTextProgress", "RichProgress",
           "TqdmProgress", "CSVLoggerCallback", "CurvePlotCallback", "MetricLogCallback", "MoreEvaluateCallback",
           "NanGuardCallback", "NonFiniteLossError", "TensorBoardCallback", "TimerCallback", "WarmupCallback",
           "choose_progress_callback",
           # fastNLP 1.0's names
           "RichCallback", "TqdmCallback", "RawTextCallback", "TorchGradClipCallback", "TorchWarmupCallback",
           "PaddleWarmupCallback", "JittorWarmupCallback", "OneflowWarmupCallback"]
