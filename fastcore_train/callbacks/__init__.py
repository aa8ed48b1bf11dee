"""Ready-made callbacks."""
from fastcore_train.callbacks.checkpoint_callback import CheckpointCallback
from fastcore_train.callbacks.csv_logger import CSVLoggerCallback
from fastcore_train.callbacks.curves import CurvePlotCallback
from fastcore_train.callbacks.early_stop import EarlyStopCallback
from fastcore_train.callbacks.grad_clip import GradClipCallback
from fastcore_train.callbacks.load_best_model import LoadBestModelCallback
from fastcore_train.callbacks.lr_scheduler import LRSchedCallback
from fastcore_train.callbacks.metric_log import MetricLogCallback
from fastcore_train.callbacks.more_evaluate import MoreEvaluateCallback
from fastcore_train.callbacks.nan_guard import NanGuardCallback, NonFiniteLossError
from fastcore_train.callbacks.progress import ProgressCallback, RawTextProgress, RichProgress, TqdmProgress
from fastcore_train.callbacks.tensorboard_logger import TensorBoardCallback
from fastcore_train.callbacks.timer import TimerCallback

__all__ = ["CheckpointCallback", "EarlyStopCallback", "GradClipCallback", "LoadBestModelCallback", "LRSchedCallback",
           "ProgressCallback", "RawTextProgress", "RichProgress", "TqdmProgress",
           "CSVLoggerCallback", "CurvePlotCallback", "MetricLogCallback", "MoreEvaluateCallback", "NanGuardCallback",
           "NonFiniteLossError", "TensorBoardCallback", "TimerCallback"]
