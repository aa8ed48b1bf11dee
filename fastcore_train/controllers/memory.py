"""Out-of-memory errors of a training step, said in the words of the run.

A batch that does not fit (in host or device memory) fails deep in the framework's allocator
("DefaultCPUAllocator: can't allocate memory", "CUDA out of memory", paddle's ``ResourceExhausted``)
with no word of which batch or what to change. The training loop re-raises such an error as
:class:`BatchOutOfMemoryError`, naming the batch and its tensors' shapes, chained to the original.
Recognised by type and message only, so no framework is imported here.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Words of the frameworks' allocation failures (lower case).
_MESSAGES = ("out of memory", "can't allocate memory", "cannot allocate memory", "fail to alloc memory",
             "failed to allocate memory", "resourceexhausted", "resource exhausted")
_TYPE_NAMES = {"OutOfMemoryError", "ResourceExhaustedError"}
_MAX_SHAPES = 8


class BatchOutOfMemoryError(MemoryError):
    """A training step ran out of memory; the message names the batch, ``__cause__`` is the framework's error."""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is an allocation failure (a ``MemoryError``, or a framework's out-of-memory error)."""
    if isinstance(error, BatchOutOfMemoryError):
        return False  # already said
    if isinstance(error, MemoryError) or any(cls.__name__ in _TYPE_NAMES for cls in type(error).__mro__):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(words in text for words in _MESSAGES)


def batch_shapes(batch: Any) -> str:
    """``"x: [32, 6], y: [32]"``: the shapes of the batch's tensors (anything with a ``shape``), a few at most."""
    found: list[str] = []

    def visit(value: Any, name: str) -> None:
        if len(found) > _MAX_SHAPES:
            return
        shape = getattr(value, "shape", None)
        if shape is not None and not isinstance(value, (str, bytes)):
            try:
                found.append(f"{name or 'batch'}: {[int(size) for size in shape]}")
            except (TypeError, ValueError):
                pass
        elif isinstance(value, Mapping):
            for key, item in value.items():
                visit(item, f"{name}.{key}" if name else str(key))
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                visit(item, f"{name}[{index}]")

    visit(batch, "")
    if len(found) > _MAX_SHAPES:
        found = found[:_MAX_SHAPES] + ["..."]
    return ", ".join(found)


#: Top-level modules whose frames are not the user's (for naming where a dataloader ran out of memory).
_NOT_USER = {"torch", "paddle", "jittor", "oneflow", "numpy", "fastcore_train", "jittor_utils"}


def _user_frame(error: BaseException) -> str:
    """`` (in my_collate, train.py line 12)``: the innermost frame of the traceback outside the
    frameworks, numpy, the standard library and fastcore_train; empty when there is none."""
    import os
    import sys
    found = ""
    trace = error.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        top = str(frame.f_globals.get("__name__", "")).split(".")[0]
        if top and top not in _NOT_USER and top not in getattr(sys, "stdlib_module_names", ()):
            found = (f" (in {frame.f_code.co_name}, {os.path.basename(frame.f_code.co_filename)} line "
                     f"{trace.tb_lineno})")
        trace = trace.tb_next
    return found


def fetch_out_of_memory_error(error: BaseException, epoch: int, batch_in_epoch: int,
                              overall: int) -> BatchOutOfMemoryError:
    """The error to raise in place of ``error`` met while the dataloader made a batch (its
    ``collate_fn``, the dataset's ``__getitem__``); chain it with ``from error``."""
    return BatchOutOfMemoryError(
        f"Out of memory while the dataloader made batch {batch_in_epoch} of epoch {epoch} (batch {overall} overall), "
        f"in its collate_fn or the dataset's __getitem__{_user_frame(error)}, before the training step. Make the "
        "batches smaller (a smaller batch_size, and accumulation_steps=k to keep the effective batch size), or make "
        "collate_fn allocate less (pad to the batch's longest sample rather than a fixed length). "
        f"The framework said: {type(error).__name__}: {error}")


def out_of_memory_error(error: BaseException, epoch: int, batch_in_epoch: int, overall: int, batch: Any,
                        accumulation_steps: int) -> BatchOutOfMemoryError:
    """The error to raise in place of ``error`` (chain it with ``from error``)."""
    shapes = batch_shapes(batch)
    holding = f"; the batch holds {shapes}" if shapes else ""
    accumulate = (f"raise accumulation_steps (now {accumulation_steps}) by the same factor"
                  if accumulation_steps > 1 else "pass accumulation_steps=k")
    return BatchOutOfMemoryError(
        f"Out of memory in the training step of epoch {epoch}, batch {batch_in_epoch} of the epoch (batch {overall} "
        f"overall){holding}. Make the batches smaller: a smaller batch_size (and {accumulate} to keep the "
        "effective batch size), shorter sequences, or a smaller model; on a GPU fp16=True also saves memory. "
        f"The framework said: {type(error).__name__}: {error}")
