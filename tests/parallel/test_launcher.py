"""Choosing how a job's ranks start (the launchers themselves run in tests/distributed, self-launched)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fastcore_train.parallel.environment import SINGLE_PROCESS, RankFacts
from fastcore_train.parallel.launcher import (AlreadyLaunched, MpirunReexec, SpawnAllRanks, SpawnWorkers,
                                              choose_launcher, find_mpirun, local_children)
from fastcore_train.parallel.placement import Placement

SELF_LAUNCH = Placement(RankFacts(0, 0, 2, launcher="self-launched"), "cpu", launch=True, devices=["cpu", "cpu"])
VARIABLES = [{"RANK": "0"}, {"RANK": "1"}]


@pytest.mark.parametrize("placement", [Placement(SINGLE_PROCESS, "cpu"),
                                       Placement(RankFacts(1, 1, 2, launcher="torchrun"), "cpu")])
def test_nothing_to_start_unless_this_process_launches(placement):
    for style in ("spawn", "spawn-all", "mpirun"):
        assert type(choose_launcher(placement, style, None)) is AlreadyLaunched


def test_each_style_gets_its_launcher():
    assert type(choose_launcher(SELF_LAUNCH, "spawn", VARIABLES)) is SpawnWorkers
    assert type(choose_launcher(SELF_LAUNCH, "spawn-all", VARIABLES)) is SpawnAllRanks
    mpirun = choose_launcher(SELF_LAUNCH, "mpirun")
    assert type(mpirun) is MpirunReexec and mpirun.world_size == 2


def test_bad_choices_are_clear_errors():
    with pytest.raises(ValueError, match="needs a style among"):
        choose_launcher(SELF_LAUNCH, "telepathy", VARIABLES)
    with pytest.raises(ValueError, match="each rank's variables"):
        choose_launcher(SELF_LAUNCH, "spawn", None)
    with pytest.raises(ValueError, match="output_from_new_proc must be one of"):
        choose_launcher(SELF_LAUNCH, "spawn", VARIABLES, output_from_new_proc="")


def executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def test_mpirun_beside_the_interpreter_comes_before_the_path(tmp_path):
    on_path = executable(tmp_path / "path" / "mpirun")
    assert find_mpirun(prefix=str(tmp_path / "venv"), path=str(tmp_path / "path")) == on_path
    beside = executable(tmp_path / "venv" / "bin" / "mpirun")
    assert find_mpirun(prefix=str(tmp_path / "venv"), path=str(tmp_path / "path")) == beside
    assert find_mpirun(prefix=str(tmp_path / "none"), path=str(tmp_path / "none")) is None


def test_mpirun_missing_says_in_one_line_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # an interpreter with no mpirun beside it
    with pytest.raises(RuntimeError) as raised:
        MpirunReexec(2).command()
    message = str(raised.value)
    assert "'mpirun' was not found" in message and "\n" not in message
    assert 'pip install "fastcore-train[jittor]"' in message and "openmpi-bin" in message


def test_the_ranks_mpirun_started_are_found_by_their_parent():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in local_children(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert child.pid not in local_children(os.getpid())


def test_mpirun_environment_runs_as_root_and_shares_the_cores(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = MpirunReexec(2).environment()
    assert env["FASTCORE_TRAIN_LAUNCHED_RANK"] == "mpi" and int(env["OMP_NUM_THREADS"]) >= 1
    assert env["OMPI_MCA_rmaps_base_oversubscribe"] == "1"
