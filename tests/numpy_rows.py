"""A plain dataset (no framework base class) whose samples are dicts of numpy arrays; shared by the
plain-data conformance tests and the parity suite (which mixes it into each framework's Dataset)."""
from __future__ import annotations

import numpy as np


class NumpyRows:
    """Samples ``{"x": x[i], "y": y[i]}``: every framework's default collate stacks them."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {"x": self.x[index], "y": self.y[index]}
