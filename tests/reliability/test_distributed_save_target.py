"""In data parallel, a refused checkpoint target is the same error on every rank, and nobody waits.

The job's callback catches the save error (as a user's might) and trains on: that only finishes
if every rank got the error at the same save, since a rank that did not would wait in a
collective the others never enter.
"""
from __future__ import annotations

import json

import pytest

from tests.distributed.jobs import train_job
from tests.distributed.launchers import run_pooled

pytestmark = pytest.mark.distributed


def test_every_rank_gets_the_same_error_and_the_users_files_stay(tmp_path, rank_pool):
    users = tmp_path / "my_results"
    users.mkdir()
    (users / "table.csv").write_text("a,b\n1,2\n")
    out = tmp_path / "out"
    out.mkdir()
    run_pooled(rank_pool, train_job.main, {"out": str(out), "save_at": 2, "save_to": str(users),
                                           "save_errors_to": str(out)}, timeout=120)
    errors = [(out / f"rank_{rank}.error").read_text() for rank in range(2)]
    assert errors[0] == errors[1] and errors[0].startswith("CheckpointTargetError:"), errors
    assert all(json.loads((out / f"rank_{rank}.json").read_text())["global_forward_batches"] == 4 for rank in range(2))
    assert sorted(p.name for p in users.iterdir()) == ["table.csv"]
    assert (users / "table.csv").read_text() == "a,b\n1,2\n"
