"""In data parallel, a dataloader is "no data" only when every rank's share is empty, and every rank
decides alike (no rank waits in a collective the others skip)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.distributed.launchers import BACKENDS, run_job

pytestmark = pytest.mark.distributed
JOB = Path(__file__).parent / "jobs" / "empty_evaluation_job.py"


def test_empty_shares_and_empty_dataloaders(backend_name, tmp_path):
    done = run_job(BACKENDS[backend_name], JOB, {"out": str(tmp_path)}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank_{rank}.json").read_text()) for rank in range(2)]
    assert all(rank["world_size"] == 2 and rank["split"] for rank in ranks)  # each rank evaluated a share
    for rank in ranks:
        assert sorted(rank["results"]) == ["acc#acc#dev", "acc#acc#one"]  # "one": rank 0's sample counts
        assert rank["no_data"] == ["empty"] and rank["again"] == rank["results"]
    assert ranks[0]["results"] == ranks[1]["results"]
    assert "'empty' gave no batch" in done.stderr
