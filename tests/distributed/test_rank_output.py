"""Rank-aware logging and ``output_from_new_proc`` on every backend, with 2 real self-launched ranks.

Rank 0 keeps the terminal and logs at INFO; the other rank logs at WARNING only, its output goes
where ``output_from_new_proc`` says, its log file is ``<name>.rank1.log``; and only rank 0
writes metric logs.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.distributed import launchers

pytestmark = pytest.mark.distributed

JOB = Path(__file__).parent / "jobs" / "rank_output_job.py"


def run_job(backend_name: str, out: Path, output_from_new_proc: str):
    done = launchers.run_job(launchers.BACKENDS[backend_name], JOB,
                             {"out": str(out), "output_from_new_proc": output_from_new_proc}, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def test_other_ranks_output_goes_to_files_and_logs_are_rank_aware(backend_name, tmp_path):
    rank_logs = tmp_path / "rank_logs"
    done = run_job(backend_name, tmp_path, str(rank_logs))

    assert "STDOUT from rank 0" in done.stdout and "STDOUT from rank 1" not in done.stdout
    assert "INFO from rank 0" in done.stderr and "rank 1" not in done.stderr
    rank1 = (rank_logs / "rank_1.log").read_text()
    for line in ("STDOUT from rank 1", "STDERR from rank 1", "WARNING rank 1 fastcore_train] WARNING from rank 1"):
        assert line in rank1, rank1[-3000:]
    assert "INFO from rank 1" not in rank1  # other ranks log at WARNING

    main_log = (tmp_path / "train.log").read_text()
    rank1_log = (tmp_path / "train.rank1.log").read_text()
    assert "INFO rank 0 fastcore_train] INFO from rank 0" in main_log and "from rank 1" not in main_log
    assert "WARNING from rank 1" in rank1_log and "INFO from rank 1" not in rank1_log

    run_folders = list((tmp_path / "csv").iterdir())
    assert len(run_folders) == 1  # both ranks agreed on one run folder; only rank 0 wrote into it
    with (run_folders[0] / "train_metrics.csv").open() as table:
        steps = [int(row["step"]) for row in csv.DictReader(table)]
    batches = json.loads((tmp_path / "rank_0.json").read_text())["batches"]
    assert batches >= 2 and steps == list(range(1, batches + 1))


@pytest.mark.parametrize("choice", ["ignore", "all"])
def test_ignore_silences_and_all_shows_the_other_ranks(backend_name, tmp_path, choice):
    done = run_job(backend_name, tmp_path, choice)
    shown = "STDOUT from rank 1" in done.stdout and "STDERR from rank 1" in done.stderr
    assert shown == (choice == "all"), (done.stdout[-2000:], done.stderr[-2000:])
    assert "STDOUT from rank 0" in done.stdout
