"""Predictions: the model's per-sample outputs over a dataloader, in dataset order.

``Trainer.predict`` and ``Evaluator.predict`` run here. The dataloader is re-sampled in dataset
order (each rank of a data-parallel job takes a disjoint share, nothing padded), the model's
``predict_step`` (else ``evaluate_step``, else the forward) runs in eval mode without gradients,
its outputs become numpy arrays on the host and are cut into per-sample rows, and the rows are put
back in dataset order: gathered to every rank in memory, or written by each rank as shards under
``output_dir`` (then nothing beyond one batch is held anywhere, see
:mod:`fastcore_train.controllers.prediction_shards`).
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np

from fastcore_train.controllers.adapted_loaders import AdaptedLoaders
from fastcore_train.controllers.batch_io import ModelCaller
from fastcore_train.controllers.prediction_shards import PredictionShards, ShardWriter
from fastcore_train.log import logger
from fastcore_train.samplers.adapt import ranks_share_batches, unrepeated_share
from fastcore_train.utils.param_call import apply_mapping

_FALLBACK_FNS = ("predict_step", "evaluate_step")


def predict_fn_name(driver: Any, predict_fn: Optional[str]) -> str:
    """The model method predictions call: ``predict_fn`` when given, else ``predict_step`` when the
    model has one, else ``evaluate_step`` (which itself falls back to the forward)."""
    if predict_fn is not None:
        if not isinstance(predict_fn, str):
            raise TypeError(f"predict_fn must be the name of a model method, got {type(predict_fn).__name__}.")
        return predict_fn
    model = driver.unwrap_model()
    return next((name for name in _FALLBACK_FNS if callable(getattr(model, name, None))), "evaluate_step")


def split_rows(outputs: Any, warned: set[str]) -> list[Any]:
    """Per-sample rows of one batch's outputs (numpy already): a dict's per-sample entries, or
    the rows of one array. Entries with no batch dimension are left out, once with a warning naming
    them (silently for ``loss``, the batch's loss); a list is taken as one item per sample (ragged outputs)."""
    if isinstance(outputs, Mapping):
        columns = {}
        for key, value in outputs.items():
            if isinstance(value, np.ndarray) and value.ndim == 0 or np.isscalar(value):
                if key not in warned and key != "loss":  # a batch's loss (a transformers model given labels)
                    warned.add(key)
                    logger.warning("predict: output %r has no batch dimension (one value per batch); it is left "
                                   "out of the predictions.", key)
                continue
            columns[str(key)] = value
        if not columns:
            raise ValueError(f"predict: no output has one entry per sample (outputs: {sorted(map(str, outputs))}); "
                             "return per-sample tensors from predict_step, e.g. {'pred': logits}.")
        lengths = {key: len(value) for key, value in columns.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"predict: outputs of one batch have different numbers of samples: {lengths}.")
        count = next(iter(lengths.values()))
        return [{key: value[i] for key, value in columns.items()} for i in range(count)]
    if isinstance(outputs, np.ndarray) and outputs.ndim > 0 or isinstance(outputs, (list, tuple)):
        return list(outputs)
    raise TypeError(f"predict: the model returned a {type(outputs).__name__}; return a tensor or a dict of "
                    "tensors with one row per sample.")


def assemble(rows: list[Any]) -> Any:
    """Rows in order -> a dict of arrays (or one array); entries whose rows differ in shape stay
    lists of arrays (ragged outputs)."""
    if not rows:
        return {}
    if isinstance(rows[0], Mapping):
        return {key: _stack([row[key] for row in rows]) for key in rows[0]}
    return _stack(rows)


def _stack(items: list[Any]) -> Any:
    arrays = [np.asarray(item) for item in items]
    if len({(array.shape, array.dtype) for array in arrays}) == 1 and arrays[0].dtype != object:
        return np.stack(arrays)
    return arrays


class Predictor:
    """One prediction pass with a driver that is set up (the Trainer's or the Evaluator's)."""

    def __init__(self, driver: Any, predict_fn: Optional[str] = None, input_mapping: Any = None,
                 output_mapping: Any = None, model_wo_auto_param_call: bool = False) -> None:
        self.driver = driver
        fn, signature_fn = driver.get_model_call_fn(predict_fn_name(driver, predict_fn), for_training=False)
        self.call_model = ModelCaller(fn, signature_fn, model_wo_auto_param_call)
        self.input_mapping, self.output_mapping = input_mapping, output_mapping

    def run(self, dataloader: Any, output_dir: Union[str, Path, None] = None,
            on_batch: Optional[Callable[[int], None]] = None) -> Any:
        driver = self.driver
        driver.data.check(dataloader, "the predict dataloader")
        shared = ranks_share_batches(driver)
        share = None if shared else unrepeated_share(driver, dataloader)
        if shared:
            loader, indices = dataloader, None  # every rank of a tensor-parallel group predicts every batch
        elif share is None:
            logger.warning("predict: this dataloader cannot take another sampler, so its own order is kept%s.",
                           " and every rank predicts all of it" if driver.comm.is_distributed() else "")
            loader, indices = dataloader, None
        else:
            loader, indices = share
        adapted = AdaptedLoaders(driver.data)  # the copy's workers stop when this call ends
        adapted.add(loader, dataloader)
        with adapted.held():
            return self._predict(loader, indices, share is not None, output_dir, on_batch)

    def _predict(self, loader: Any, indices: Optional[list[int]], split_in_shares: bool,
                 output_dir: Union[str, Path, None], on_batch: Optional[Callable[[int], None]]) -> Any:
        driver = self.driver
        writer = ShardWriter(output_dir, driver.comm.rank) if output_dir is not None else None
        rows: list[Any] = []
        served = 0
        warned: set[str] = set()
        driver.set_model_mode("eval")
        with driver.evaluate_context():
            for batch_index, batch in enumerate(loader):
                batch = apply_mapping(self.input_mapping, batch)
                batch = driver.data.to_device(batch)
                with driver.precision.forward_context():
                    outputs = self.call_model(batch)
                batch_rows = split_rows(driver.data.to_numpy(apply_mapping(self.output_mapping, outputs)), warned)
                batch_indices = (indices[served:served + len(batch_rows)] if indices is not None
                                 else list(range(served, served + len(batch_rows))))
                served += len(batch_rows)
                if writer is not None:
                    writer.write(batch_indices, batch_rows)
                else:
                    rows.extend(batch_rows)
                if on_batch is not None:
                    on_batch(batch_index)
        if indices is not None and served != len(indices):
            raise RuntimeError(f"predict: the dataloader served {served} samples where its sampler holds "
                               f"{len(indices)}; a collate_fn that drops or adds samples cannot be predicted "
                               "in dataset order.")
        split = split_in_shares and driver.comm.is_distributed()
        if writer is not None:
            writer.close()
            if split:
                driver.comm.barrier()
            return PredictionShards(output_dir, ranks=range(driver.comm.world_size) if split else [driver.comm.rank])
        if not split:
            return assemble(rows)
        everyone = driver.comm.all_gather_object((indices, rows))
        ordered: list[Any] = [None] * sum(len(rank_indices) for rank_indices, _ in everyone)
        for rank_indices, rank_rows in everyone:
            for index, row in zip(rank_indices, rank_rows):
                ordered[index] = row
        return assemble(ordered)
