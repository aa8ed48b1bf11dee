"""Writing and reading a paddle model file: a state dict, or a folder with a ``paddle.jit.save`` export.

Paddle cannot pickle a ``paddle.nn.Layer`` (``paddle.save`` refuses it); a whole model is its
static-graph export, which needs the input signature (``input_spec``). So:

- state dict (default): ``paddle.save(model.state_dict(), path)``, one file;
- whole model: ``path`` becomes a folder holding ``model.json`` + ``model.pdiparams`` (load them
  for inference with ``paddle.jit.load(str(path / "model"))``) and ``state_dict.pdparams``, which
  :func:`load_model_file` restores into a Layer (an export's parameters are renamed, so they cannot
  be matched to a Layer reliably).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import paddle

from fastcore_train.log import logger

EXPORT_PREFIX = "model"
STATE_FILE = "state_dict.pdparams"


def _is_static_forward(model: paddle.nn.Layer) -> bool:
    """True when ``forward`` is decorated with ``paddle.jit.to_static`` (it knows its inputs)."""
    return type(model.forward).__name__ == "StaticFunction"


def save_model_file(model: paddle.nn.Layer, path: Path, whole_model: bool = False,
                    input_spec: Optional[Sequence[Any]] = None, **kwargs: Any) -> None:
    """Write ``model`` to ``path`` (see the module docstring for the two layouts)."""
    if whole_model and input_spec is None and not _is_static_forward(model):
        logger.warning(
            "only_state_dict=False: paddle can only save a whole model as a paddle.jit.save export, which "
            "needs the model's input_spec; saved the state dict only. Pass paddle_kwargs={'input_spec': "
            "[paddle.static.InputSpec(shape, dtype, name), ...]} (or save_model(..., input_spec=...)) to "
            "export the model too.")
        whole_model = False
    if not whole_model:
        paddle.save(model.state_dict(), str(path), **kwargs)
        return
    path.mkdir(parents=True, exist_ok=True)
    paddle.save(model.state_dict(), str(path / STATE_FILE))
    was_training = model.training
    model.eval()  # the export is for inference: dropout off, batch norm on running statistics
    try:
        paddle.jit.save(model, str(path / EXPORT_PREFIX), input_spec=input_spec, **kwargs)
    finally:
        if was_training:
            model.train()


def load_model_file(model: paddle.nn.Layer, path: Path, **kwargs: Any) -> None:
    """Restore into ``model`` what :func:`save_model_file` wrote; parameter names must match."""
    file = path / STATE_FILE if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} is a folder without {STATE_FILE}, so it was not written by fastcore_train; "
            f"load a paddle.jit.save export with paddle.jit.load instead.")
    state = paddle.load(str(file), **kwargs)
    if not isinstance(state, dict):
        raise TypeError(f"{str(file)!r} holds a {type(state).__name__}, not a paddle state dict.")
    expected = set(model.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(
            f"{str(file)!r} does not fit the model {type(model).__name__}: missing {missing}, unexpected "
            f"{unexpected}. Load it into a model of the same structure as the one saved.")
    model.set_state_dict(state)
