"""The neutral weights file: safetensors (its numpy API), tensors under neutral names and
layouts, the model's layout in the file's metadata. Needs ``safetensors`` (the ``convert`` extra)
and numpy only, no framework."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from fastcore_train.convert.layout import Layout

FORMAT = "fastcore_train.neutral_weights.v1"


def _safetensors_numpy() -> Any:
    try:
        import safetensors.numpy
    except ModuleNotFoundError as error:
        raise ImportError("The neutral weights format needs the 'safetensors' package: "
                          "pip install 'fastcore-train[convert]'.") from error
    return safetensors.numpy


def write_neutral_file(path: os.PathLike, tensors: dict[str, np.ndarray], layout: Layout, source: str) -> Path:
    """Write ``tensors`` (neutral names) with ``layout`` and the ``source`` framework in the metadata."""
    path = Path(path)
    metadata = {"format": FORMAT, "layers": json.dumps(layout), "source": source}
    _safetensors_numpy().save_file({name: np.ascontiguousarray(value) for name, value in tensors.items()},
                                   str(path), metadata=metadata)
    return path


def read_neutral_file(path: os.PathLike) -> tuple[dict[str, np.ndarray], Layout]:
    """The tensors and the layout of a file :func:`write_neutral_file` wrote."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No neutral weights file at {str(path)!r}.")
    st = _safetensors_numpy()
    from safetensors import safe_open
    try:
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata() or {}
        tensors = st.load_file(str(path))
    except Exception as error:  # safetensors raises its own SafetensorError for a file that is not one
        raise ValueError(f"{str(path)!r} is not a safetensors file ({error}).") from error
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is a safetensors file but not fastcore_train's neutral weights (its "
                         f"metadata has no format {FORMAT!r}); write it with save_neutral_weights.")
    return tensors, json.loads(metadata["layers"])
