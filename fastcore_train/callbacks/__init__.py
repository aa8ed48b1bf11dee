"""Ready-made callbacks."""
from fastcore_train.callbacks.checkpoint_callback import CheckpointCallback
from fastcore_train.callbacks.early_stop import EarlyStopCallback
from fastcore_train.callbacks.load_best_model import LoadBestModelCallback
from fastcore_train.callbacks.lr_scheduler import LRSchedCallback
from fastcore_train.callbacks.progress import ProgressCallback, RawTextProgress, RichProgress, TqdmProgress

__all__ = ["CheckpointCallback", "EarlyStopCallback", "LoadBestModelCallback", "LRSchedCallback",
           "ProgressCallback", "RawTextProgress", "RichProgress", "TqdmProgress"]
