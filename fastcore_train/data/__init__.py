"""Small data sets shipped with the package (for the demo and the tests)."""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np


@dataclass(frozen=True)
class DigitsData:
    """Handwritten digits (8x8 images flattened to 64 floats in [0, 1], 10 classes).

    The UCI optical-recognition digits as distributed by scikit-learn's ``load_digits``
    (1797 samples), split once with a fixed seed into 1437 training and 360 test samples.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    num_features: int = 64
    num_classes: int = 10


def load_digits() -> DigitsData:
    with resources.files(__package__).joinpath("digits.npz").open("rb") as handle:
        arrays = np.load(handle)
        scale = np.float32(1.0 / 16.0)
        return DigitsData(
            x_train=arrays["x_train"].astype(np.float32) * scale, y_train=arrays["y_train"].astype(np.int64),
            x_test=arrays["x_test"].astype(np.float32) * scale, y_test=arrays["y_test"].astype(np.int64),
        )
