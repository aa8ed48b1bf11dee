"""Calling the model on a batch and reading its outputs, shared by the Trainer and Evaluator."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Callable, Optional

from fastcore_train.utils.param_call import ParamBinder


class ModelCaller:
    """Calls one model function on batches: keyword-matched for dict batches, whole otherwise.

    Built once per function so the signature is read once, not per step.
    """

    __slots__ = ("fn", "binder", "pass_whole_batch")

    def __init__(self, fn: Callable[..., Any], signature_fn: Optional[Callable[..., Any]],
                 model_wo_auto_param_call: bool) -> None:
        self.fn = fn
        self.binder = ParamBinder(fn, signature_fn)
        self.pass_whole_batch = model_wo_auto_param_call

    def __call__(self, batch: Any) -> Any:
        if self.pass_whole_batch:
            return self.fn(batch)
        if type(batch) is not dict and not isinstance(batch, Mapping):
            if len(self.binder.required) > 1:
                raise TypeError(whole_batch_problem(self.binder.fn_name, self.binder.required, batch))
            return self.fn(batch)
        return self.binder(batch)


def whole_batch_problem(fn_name: str, required: tuple[str, ...], batch: Any) -> str:
    """Why a batch that is not a dict cannot be given to a function taking several named inputs."""
    size = f" of {len(batch)} items" if isinstance(batch, (list, tuple)) else ""
    naming = ", ".join(f"{index}: {name!r}" for index, name in enumerate(required))
    return (f"{fn_name} takes the named inputs {list(required)}, but the batch is a {type(batch).__name__}{size}, "
            "and a batch that is not a dict is passed whole, as one argument. Make the dataset (or collate_fn) "
            "yield dicts keyed by those names, or name the items with input_mapping, e.g. "
            f"input_mapping={{{naming}}} for items in that order (or a callable returning such a dict); or pass "
            "model_wo_auto_param_call=True to receive the batch whole.")


def outputs_as_mapping(outputs: Any, where: str) -> Mapping[str, Any]:
    """Model outputs as a mapping (dicts as they are, dataclasses field by field)."""
    if isinstance(outputs, Mapping):
        return outputs
    if dataclasses.is_dataclass(outputs) and not isinstance(outputs, type):
        return {field.name: getattr(outputs, field.name) for field in dataclasses.fields(outputs)}
    raise TypeError(
        f"{where} returned a {type(outputs).__name__}, but a dict is needed (e.g. "
        "{'pred': logits} for metrics, {'loss': loss} for training). Return a dict from the model's "
        "method, or convert the output with output_mapping=callable."
    )


def extract_loss(outputs: Any) -> Any:
    """The ``loss`` entry of training outputs, or an error that says how to provide one."""
    if isinstance(outputs, Mapping):
        if "loss" in outputs:
            return outputs["loss"]
        keys = sorted(map(str, outputs))
        raise KeyError(
            f"The training step's output has no 'loss' entry; its keys are {keys}. Return "
            "{'loss': loss, ...} from train_step/forward, or rename the key holding the loss with "
            "output_mapping={'your_key': 'loss'}."
        )
    if hasattr(outputs, "loss"):
        return outputs.loss
    raise TypeError(
        f"The training step returned a {type(outputs).__name__}, which has no 'loss'. Return a dict "
        "{'loss': loss, ...} (or an object with a .loss attribute) from train_step/forward, or turn "
        "the output into one with output_mapping=callable."
    )
