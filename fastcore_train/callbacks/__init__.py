"""Ready-made callbacks."""
from fastcore_train.callbacks.progress import ProgressCallback, RawTextProgress, RichProgress, TqdmProgress

__all__ = ["ProgressCallback", "RawTextProgress", "RichProgress", "TqdmProgress"]
