"""Predictions and metric functions on 2 real ranks equal one process, for every backend: every
sample once, in dataset order (no padding of the distributed sampler), streamed shards too; the
evaluation loss is the mean over every sample of both ranks."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits
from tests.distributed.jobs import predict_job
from tests.distributed.launchers import run_pooled

pytestmark = pytest.mark.distributed

SAMPLES = 37  # odd: the two ranks predict 19 and 18 samples


def test_predictions_on_two_ranks_equal_one_process_in_dataset_order(tmp_path, rank_pool):
    run_pooled(rank_pool, predict_job.main, {"out": str(tmp_path), "samples": SAMPLES})
    x, y = make_data(SAMPLES, seed=9)
    expected = numpy_logits(initial_weights(), x)
    checksum = int(sum((i + 1) * int(label) for i, label in enumerate(y)))
    logits = expected.astype(np.float64) - expected.max(-1, keepdims=True)
    losses = -(logits - np.log(np.exp(logits).sum(-1, keepdims=True)))[np.arange(SAMPLES), y]
    for rank in range(2):
        with np.load(tmp_path / f"rank_{rank}.npz") as arrays:
            assert arrays["pred"].shape == (SAMPLES, 4)
            np.testing.assert_allclose(arrays["pred"], expected, rtol=1e-4, atol=1e-5)
            np.testing.assert_array_equal(arrays["streamed"], arrays["pred"])
        report = json.loads((tmp_path / f"rank_{rank}.json").read_text())
        assert report["world_size"] == 2 and report["own_shards"] > 0
        assert report["results"] == {"n#seen": SAMPLES, "checksum#seen": checksum,
                                     "n#hf": SAMPLES, "checksum#hf": checksum}
        assert report["loss_results"]["loss"] == pytest.approx(losses.mean(), rel=1e-4)
