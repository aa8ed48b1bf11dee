"""Metrics on 2 real ranks equal the hand computation over the whole data set, for every backend:
fastcore_train's and fastNLP-style custom metrics (each aggregate method), torchmetrics (torch) and
paddle.metric (paddle), with a data set that does not split evenly (no sample counted twice), with
every rank seeing all of it (nothing gathered), and a fastNLP-style metric used alone."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.compat.metric_suite import by_hand, check_against_hand
from tests.conformance.harnesses.base import initial_weights, make_data, numpy_logits
from tests.distributed.jobs import metrics_job
from tests.distributed.launchers import BACKENDS, run_pooled

pytestmark = pytest.mark.distributed

SAMPLES = 37  # odd: the two ranks evaluate 19 and 18 samples


def test_metrics_on_two_ranks_equal_the_whole_data_set_by_hand(backend_name, tmp_path, rank_pool):
    backend = BACKENDS[backend_name]
    run_pooled(rank_pool, metrics_job.main, {"out": str(tmp_path), "samples": SAMPLES})
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(2)]
    x, y = make_data(SAMPLES, seed=9)
    logits = numpy_logits(initial_weights(), x)
    hand = by_hand(logits, y)
    for rank in ranks:
        assert rank["world_size"] == 2
        split, whole = rank["results"]["split"], rank["results"]["whole"]
        shares = split["per_rank#seen#dev"]
        assert len(shares) == 2 and all(shares) and len(shares[0]) != len(shares[1]), "uneven shares"
        check_against_hand(split, logits, y, backend_name)
        # every rank saw all the data: nothing is gathered, nothing counted twice. (Not jittor: under
        # MPI its own Dataset gives each rank a share even with use_dist_sampler=False.)
        if not backend.global_batch_size:
            assert whole["per_rank#seen#dev"] == [sorted(whole["per_rank#seen#dev"][0])]
            check_against_hand(whole, logits, y, backend_name)
        # alone (no Evaluator): reduced over the framework's process group, local values kept after
        standalone = rank["standalone"]
        assert standalone["total"] == SAMPLES and standalone["acc"] == round(hand["acc"], 6)
        np.testing.assert_allclose([standalone["max"], standalone["min"]], [hand["max"], hand["min"]], rtol=1e-5)
        assert rank["element_type"] != "ndarray"
    assert ranks[0]["results"]["split"] == ranks[1]["results"]["split"]
    assert sorted(rank["local_after"] for rank in ranks) == [SAMPLES // 2, SAMPLES - SAMPLES // 2]
