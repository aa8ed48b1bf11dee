"""The progress callbacks, at home in :mod:`fastcore_train.controllers.progress` (the Trainer picks
its default display there); re-exported here with the other callbacks."""
from fastcore_train.controllers.progress import (ProgressCallback, RawTextCallback, RawTextProgress, RichCallback,
                                                 RichProgress, TqdmCallback, TqdmProgress, choose_progress_callback)

__all__ = ["ProgressCallback", "RawTextCallback", "RawTextProgress", "RichCallback", "RichProgress", "TqdmCallback",
           "TqdmProgress", "choose_progress_callback"]
