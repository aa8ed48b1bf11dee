"""The JSON files of a checkpoint (trainer and callback states, evaluation results): encoded so that
loading them runs no code, and written as text."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastcore_train.checkpoint.errors import CheckpointStateError
from fastcore_train.utils import json_state


def encode_callback_states(states: dict[str, Any]) -> dict[str, Any]:
    """``{callback name: state}`` as JSON-able data (:func:`fastcore_train.utils.json_state.encode`),
    or :class:`CheckpointStateError` naming the callback and the entry that is not."""
    encoded = {}
    for name, state in states.items():
        try:
            encoded[name] = json_state.encode(state)
        except json_state.StateNotJSONError as error:
            raise CheckpointStateError(
                f"Cannot save a checkpoint: callback {name!r} returned a state from on_save_checkpoint in which "
                f"{error} Checkpoints keep callback states as JSON so that loading one runs no code. Nothing "
                "was written.") from None
    return encoded


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    raise TypeError(
        f"Checkpoint state must be JSON-able (dicts, lists, numbers, strings); got a "
        f"{type(value).__name__}. Return plain data from Callback.on_save_checkpoint."
    )


def json_text(data: Any) -> str:
    """``data`` as the text :func:`write_json` writes."""
    return json.dumps(data, default=_json_default, indent=1)


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (a checkpoint's files are flushed to disk together once it is
    published, see :func:`~fastcore_train.utils.atomic.make_durable`)."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` as JSON (:func:`json_text`)."""
    write_text(path, json_text(data))
