"""Predictions cut into per-sample rows, put back together, streamed to shards (numpy, no framework)."""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train.controllers.predict import assemble, split_rows
from fastcore_train.controllers.prediction_shards import PredictionShards, ShardWriter
from fastcore_train.metrics.function_metric import FunctionMetric, interleave


def test_dict_outputs_become_rows_and_back_and_scalars_are_left_out_with_a_warning(caplog):
    warned: set[str] = set()
    outputs = {"pred": np.arange(6.0).reshape(3, 2), "label": np.array([1, 0, 1]), "loss": np.float32(0.5),
               "temperature": np.float32(2.0)}
    rows = split_rows(outputs, warned)
    # the batch's loss (a transformers model given labels returns one) is left out without a word
    assert len(rows) == 3 and set(rows[0]) == {"pred", "label"} and warned == {"temperature"}
    together = assemble(rows)
    np.testing.assert_array_equal(together["pred"], outputs["pred"])
    np.testing.assert_array_equal(together["label"], outputs["label"])


def test_ragged_outputs_stay_lists_of_arrays():
    rows = split_rows({"tokens": [np.arange(2), np.arange(5), np.arange(1)]}, set())
    together = assemble(rows)
    assert isinstance(together["tokens"], list) and [len(t) for t in together["tokens"]] == [2, 5, 1]


def test_a_single_array_output_and_clear_errors():
    np.testing.assert_array_equal(assemble(split_rows(np.eye(3), set())), np.eye(3))
    with pytest.raises(ValueError, match="different numbers of samples"):
        split_rows({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))}, set())
    with pytest.raises(ValueError, match="no output has one entry per sample"):
        split_rows({"loss": np.float32(1.0)}, set())
    with pytest.raises(TypeError, match="returned a str"):
        split_rows("text", set())


def test_shards_of_two_ranks_read_back_in_dataset_order_including_ragged_entries(tmp_path):
    data = {i: {"pred": np.full(2, float(i)), "ids": np.arange(i % 3 + 1)} for i in range(7)}
    for rank in (0, 1):
        writer = ShardWriter(tmp_path, rank)
        mine = list(range(rank, 7, 2))
        for start in range(0, len(mine), 2):
            indices = mine[start:start + 2]
            writer.write(indices, [data[i] for i in indices])
        writer.close()  # its manifest, written last
    shards = PredictionShards(tmp_path, ranks=[0, 1])
    assert len(shards) == 7
    rows = list(shards)
    assert [float(row["pred"][0]) for row in rows] == list(range(7))
    assert [len(row["ids"]) for row in rows] == [i % 3 + 1 for i in range(7)]
    loaded = shards.load()
    assert loaded["pred"].shape == (7, 2) and isinstance(loaded["ids"], list)
    with pytest.raises(FileExistsError):
        ShardWriter(tmp_path, 0)


def test_a_metric_function_over_interleaved_rank_shares_sees_dataset_order():
    assert interleave([[0, 2, 4], [1, 3]]) == [0, 1, 2, 3, 4]
    seen = {}
    metric = FunctionMetric("fn", lambda p, t: seen.setdefault("t", t.tolist()) and {"n": len(t)}, np.asarray)
    metric.update(np.zeros((3, 2)), np.array([0, 2, 4]))
    shares = [(metric.preds, metric.labels), ([np.zeros(2)] * 2, [np.array(1), np.array(3)])]
    assert metric.get_metric(lambda obj: shares) == {"n": 5}
    assert seen["t"] == [0, 1, 2, 3, 4]
