"""In data parallel, a dataloader is "no data" only when every rank's share is empty, and every rank
decides alike (no rank waits in a collective the others skip)."""
from __future__ import annotations

import json

import pytest

from tests.distributed.launchers import run_pooled
from tests.reliability.jobs import empty_evaluation_job

pytestmark = pytest.mark.distributed


def test_empty_shares_and_empty_dataloaders(tmp_path, rank_pool):
    run_pooled(rank_pool, empty_evaluation_job.main, {"out": str(tmp_path)}, timeout=120)
    ranks = [json.loads((tmp_path / f"rank_{rank}.json").read_text()) for rank in range(2)]
    assert all(rank["world_size"] == 2 and rank["split"] for rank in ranks)  # each rank evaluated a share
    for rank in ranks:
        assert sorted(rank["results"]) == ["acc#acc#dev", "acc#acc#one"]  # "one": rank 0's sample counts
        assert rank["no_data"] == ["empty"] and rank["again"] == rank["results"]
    assert ranks[0]["results"] == ranks[1]["results"]
    assert "'empty' gave no batch" in rank_pool.output("stderr")
