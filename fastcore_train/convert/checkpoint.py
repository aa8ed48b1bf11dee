"""``convert_checkpoint``: a checkpoint written on one framework, made loadable by another.

The source's files are read by its backend's ``neutral_weights`` module into numpy arrays under
neutral names and layouts (:mod:`~fastcore_train.convert.weights`,
:mod:`~fastcore_train.convert.optimizer_state`), and written by the target's. Both frameworks must
therefore be importable in the converting process; with one of them, go through the neutral
weights file (``to="neutral"``, then :func:`~fastcore_train.convert.weights.load_neutral_weights`).
The model's structure comes from the layout recorded in the checkpoint's ``meta.json``, so no
model is built.

What moves: the weights; SGD's momentum and Adam's/AdamW's moments and step count; the LR
scheduler's position (of an ``LRSchedCallback``, replayed on loading); trainer counters, sampler
position, event-filter and other callback states as they are; python's and numpy's random
state. What cannot: the framework's random state (its generators differ): the resumed run
re-seeds the framework from the checkpoint's numpy state, the same on every resume. Every
problem is found before anything is written.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Optional

from fastcore_train import checkpoint as ckpt
from fastcore_train.checkpoint import LR_POSITION, OPTIMIZERS_KEY
from fastcore_train.checkpoint.meta import load_meta, sealed_meta
from fastcore_train.convert import optimizer_state as optim
from fastcore_train.convert.layout import Layout, UnmappableLayerError, layout_tensors, parameter_order
from fastcore_train.convert.neutral_file import write_neutral_file
from fastcore_train.convert.weights import LAYERS_KEY, from_neutral, read_model_file, to_neutral, write_model_file
from fastcore_train.drivers.registry import all_backends, get_backend, load_backend_part
from fastcore_train.log import logger
from fastcore_train.utils.atomic import atomic_path, recover_folder
from fastcore_train.utils.rank_state import read_rank_state, write_rank_state

NEUTRAL = "neutral"
#: The ``meta.json`` key of a converted checkpoint: where it came from and what did not move.
CONVERTED_KEY = "converted_from"
#: The callback-state name under which a converted LR schedule position travels.
LR_CALLBACK = "LRSchedCallback"

RNG_NOTE = ("the framework's random state (each framework's generators differ): the resumed run re-seeds the "
            "framework from the checkpoint's numpy random state, the same way on every resume")


class ConversionError(ckpt.CheckpointError):
    """A checkpoint that cannot be converted as asked (nothing was written)."""


def _targets() -> list[str]:
    return [entry.name for entry in all_backends()] + [NEUTRAL]


def _read_source_meta(src: Path) -> dict[str, Any]:
    folder = recover_folder(src)
    if not folder.is_dir():
        raise FileNotFoundError(f"No checkpoint folder at {str(src)!r}: pass a folder written by save_checkpoint.")
    if not ckpt.is_checkpoint_folder(folder):
        raise ConversionError(f"{str(src)!r} is not a fastcore_train checkpoint (no valid {ckpt.META_FILE}); pass a "
                              "folder written by trainer.save_checkpoint or CheckpointCallback(save_object='checkpoint').")
    meta = load_meta(folder)
    if meta.get("format_version") not in ckpt.READABLE_FORMATS or meta["format_version"] < 3:
        raise ConversionError(f"{str(src)!r} has checkpoint format {meta.get('format_version')!r}; the converter reads "
                              "format 3. Resume it with the fastcore_train that wrote it and save it again.")
    ckpt.verify_checksums(folder, meta)
    backends = [entry.name for entry in all_backends()]
    if meta.get("backend") not in backends:
        what = "names no backend" if "backend" not in meta else f"names backend {meta.get('backend')!r}"
        raise ConversionError(f"{str(src)!r}: its {ckpt.META_FILE} {what} (one of {', '.join(backends)}), so the "
                              "framework that wrote its files is unknown; the file is damaged or was edited. Convert "
                              "another checkpoint, or restore its meta.json.")
    if meta.get("custom_model_save") or not meta.get("only_state_dict", True):
        raise ConversionError(f"{str(src)!r} holds a model written by a model_save_fn or as a whole model object; the "
                              "converter reads state dicts only. Save the checkpoint with only_state_dict=True.")
    return meta


def _source_layout(src: Path, meta: dict[str, Any]) -> Layout:
    record = meta.get(LAYERS_KEY)
    if isinstance(record, dict) and "unmapped" in record:
        raise UnmappableLayerError(f"Cannot convert {str(src)!r}: {record['unmapped']}")
    if not isinstance(record, dict) or "layout" not in record:
        raise ConversionError(
            f"{str(src)!r} records no layer layout in its {ckpt.META_FILE} (written by an older fastcore_train, by a "
            "sharded driver, or by a backend without a neutral mapping). Resume it with this version on a single "
            "process and save it again, then convert that checkpoint.")
    return record["layout"]


def _lr_position(callback_states: dict[str, Any]) -> Optional[int]:
    """How many steps the LRSchedCallback's scheduler has taken (torch's and paddle's
    ``last_epoch``; jittor's plain attributes), None without one."""
    for name, state in callback_states.items():
        if name.split("#")[0] == LR_CALLBACK and isinstance(state, dict):
            if LR_POSITION in state:
                return int(state[LR_POSITION])
            if "last_epoch" in state:
                return int(state["last_epoch"])
            plain = state.get("__plain_attributes__", {})
            for key in ("last_epoch", "cur_epoch"):
                if key in plain:
                    return int(plain[key])
    return None


def _convert_callback_states(folder: Path) -> dict[str, Any]:
    states = json.loads((folder / ckpt.CALLBACK_STATE_FILE).read_text(encoding="utf-8"))
    position = _lr_position(states)
    schedulers = [name for name in states if name.split("#")[0] == LR_CALLBACK]
    if len(schedulers) > 1:
        raise ConversionError(f"The checkpoint holds {len(schedulers)} LR schedulers' states ({', '.join(schedulers)}); "
                              "the converter moves one. Convert with weights_only=True and restart the schedules.")
    for name in schedulers:
        del states[name]
    if position is not None:
        states[LR_CALLBACK] = {LR_POSITION: position}
    return states


def convert_checkpoint(src: os.PathLike, dst: os.PathLike, to: str, weights_only: bool = False) -> Path:
    """Convert the checkpoint folder ``src`` (written on any backend) into ``dst`` for the backend
    ``to`` (``"torch"``, ``"paddle"``, ``"jittor"``, ``"oneflow"``), which
    ``Trainer.run(resume_from=dst)`` or ``trainer.load_model(dst)`` on that backend accepts.

    ``to="neutral"`` writes ``dst`` as a neutral weights file (safetensors) instead: the weights
    only, loadable with :func:`~fastcore_train.convert.weights.load_neutral_weights`.
    ``weights_only=True`` writes the model file and meta alone (for ``load_model``). Needs the
    source's and the target's frameworks. Raises before writing anything: ``ValueError`` for an
    unknown target, :class:`ConversionError` for a folder that is not a (convertible) checkpoint,
    :class:`~fastcore_train.convert.layout.UnmappableLayerError` for a model with a layer the
    neutral format does not map, :class:`~fastcore_train.checkpoint.CheckpointTargetError` for a
    ``dst`` holding something else.
    """
    return _convert(Path(src), Path(dst), to, weights_only, same_backend=False)


def _convert(src: Path, dst: Path, to: str, weights_only: bool, same_backend: bool) -> Path:
    """:func:`convert_checkpoint`; ``same_backend=True`` also rewrites a checkpoint for its own
    backend through the neutral form (the conformance suite's check that nothing is lost)."""
    if to not in _targets():
        raise ValueError(f"Unknown framework {to!r} to convert to; choose one of {', '.join(_targets())}.")
    meta = _read_source_meta(src)
    folder = recover_folder(src)
    layout = _source_layout(src, meta)
    source = get_backend(meta["backend"])
    if to == meta["backend"] and not same_backend:
        raise ConversionError(f"{str(src)!r} is already a {to} checkpoint; copy it instead of converting it.")
    if dst.resolve() == folder.resolve():
        raise ConversionError("The converted checkpoint must go to another folder than the source.")
    reader = load_backend_part(source, "neutral_weights")
    suffix = reader.MODEL_SUFFIX
    model_path = ckpt.require_file(folder / f"{ckpt.MODEL_STEM}{suffix}", "model file")
    neutral = to_neutral(read_model_file(reader, model_path), layout, reader.tensor_specs,
                         f"The model file of {str(src)!r}")
    if to == NEUTRAL:
        if dst.exists():
            raise ckpt.CheckpointTargetError(f"{str(dst)!r} exists; the neutral weights file is written only to a "
                                             "new path, nothing was replaced.")
        dst.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(dst) as staging:
            write_neutral_file(staging, neutral, layout, source=source.name)
        return dst
    ckpt.check_checkpoint_target(dst)
    target = get_backend(to)
    writer = load_backend_part(target, "neutral_weights")
    state = from_neutral(neutral, layout, writer.tensor_specs, to)
    optimizers: list[optim.NeutralOptimizer] = []
    if not weights_only:
        classes = meta.get(OPTIMIZERS_KEY)
        if classes is None:
            raise ConversionError(f"{str(src)!r} does not record its optimizer classes; convert it with "
                                  "weights_only=True.")
        saved = reader.read_optimizers(ckpt.require_file(folder / f"{ckpt.TRAINING_STATE_STEM}{suffix}",
                                                         "optimizer state"), classes)
        source_order = parameter_order(layout, reader.tensor_specs, getattr(reader, "OPTIMIZER_COVERS_BUFFERS", False))
        target_order = parameter_order(layout, writer.tensor_specs, getattr(writer, "OPTIMIZER_COVERS_BUFFERS", False))
        target_names = {neutral: name for name, neutral, _ in layout_tensors(layout, writer.tensor_specs)}
        shapes = [tuple(state[target_names[name]].shape) for name in target_order]
        for optimizer in saved:
            moved = optim.to_neutral(optimizer, source_order, layout, reader.tensor_specs)
            optimizers.append(optim.from_neutral(moved, target_order, layout, writer.tensor_specs))
        callback_states = _convert_callback_states(folder)
        rank_files = sorted(folder.glob("rank_state_*.npz"))
        rank_states = {path.name: read_rank_state(path) for path in rank_files}
    target_meta = {key: value for key, value in meta.items()
                   if key not in ("checksums", "folder", ckpt.FILES_KEY, ckpt.META_CHECKSUM_KEY, ckpt.ALGORITHM_KEY)}
    target_meta.update(backend=to, driver=f"converted ({meta.get('driver')})", **{LAYERS_KEY: {"layout": layout}},
                       **{CONVERTED_KEY: {"backend": source.name, "not_converted": [] if weights_only else [RNG_NOTE],
                                          "weights_only": weights_only}})
    target_meta[OPTIMIZERS_KEY] = [writer.optimizer_class(optimizer) for optimizer in optimizers]
    target_suffix = writer.MODEL_SUFFIX
    with atomic_path(dst, ckpt.check_checkpoint_target) as staging:
        staging.mkdir(parents=True)
        write_model_file(writer, state, staging / f"{ckpt.MODEL_STEM}{target_suffix}")
        if not weights_only:
            writer.write_optimizers(optimizers, staging / f"{ckpt.TRAINING_STATE_STEM}{target_suffix}", shapes)
            shutil.copyfile(folder / ckpt.TRAINER_STATE_FILE, staging / ckpt.TRAINER_STATE_FILE)
            ckpt.write_json(staging / ckpt.CALLBACK_STATE_FILE, callback_states)
            for name, rank_state in rank_states.items():
                write_rank_state(staging / name, dict(rank_state, framework=None))
        ckpt.write_json(staging / ckpt.META_FILE, sealed_meta(dict(target_meta, format_version=ckpt.FORMAT_VERSION),
                                                              ckpt.file_checksums(staging)))
    if not weights_only:
        logger.warning("Converted %r (%s) to %r (%s). Not converted: %s.", str(src), source.name, str(dst), to, RNG_NOTE)
    return dst

