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
from fastcore_train.convert.safetensors_header import read_header
from fastcore_train.utils.file_mode import new_file_mode

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
    os.chmod(path, new_file_mode())  # safetensors creates it 0600; saved files here follow the umask (0644)
    return path


def _checked_metadata(path: Path) -> dict[str, str]:
    """The metadata of the neutral weights file at ``path``, read from its header alone, once the
    header's size claims fit the file (:func:`~fastcore_train.convert.safetensors_header.read_header`)."""
    if not path.is_file():
        raise FileNotFoundError(f"No neutral weights file at {str(path)!r}.")
    metadata = read_header(path).get("__metadata__") or {}
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is a safetensors file but not fastcore_train's neutral weights (its "
                         f"metadata has no format {FORMAT!r}); write it with save_neutral_weights.")
    return metadata


def neutral_file_layout(path: os.PathLike) -> Layout:
    """The layout recorded in a neutral weights file, read from its header alone (no tensor is read)."""
    return json.loads(_checked_metadata(Path(path))["layers"])


def read_neutral_file(path: os.PathLike) -> tuple[dict[str, np.ndarray], Layout]:
    """The tensors and the layout of a file :func:`write_neutral_file` wrote."""
    path = Path(path)
    metadata = _checked_metadata(path)  # every size claim checked before any tensor is read
    st = _safetensors_numpy()
    try:
        tensors = st.load_file(str(path))
    except Exception as error:  # safetensors raises its own SafetensorError for a file that is not one
        raise ValueError(f"{str(path)!r} is not a safetensors file ({error}).") from error
    return tensors, json.loads(metadata["layers"])
