"""Rank facts from each way of being launched, read by one piece of code (no framework needed)."""
from __future__ import annotations

import pytest

from fastcore_train.drivers.registry import launch_environments
from fastcore_train.parallel.environment import (LAUNCHED_RANK_ENV, MPIRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH,
                                                 SINGLE_PROCESS, TORCHRUN, RankFacts, detect_rank_facts)

# The variables each launcher sets for rank 3 of 4 (two nodes of two ranks).
TORCHRUN_RANK_3 = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
                   "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"}
PADDLE_RANK_3 = {"PADDLE_TRAINER_ID": "3", "PADDLE_TRAINERS_NUM": "4", "PADDLE_LOCAL_RANK": "1",
                 "PADDLE_LOCAL_SIZE": "2", "PADDLE_MASTER": "10.0.0.1:6170", "PADDLE_DISTRI_BACKEND": "gloo"}
OPENMPI_RANK_3 = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                  "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1"}
MPICH_RANK_3 = {"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}


@pytest.mark.parametrize("environment, variables, master, name", [
    (TORCHRUN, TORCHRUN_RANK_3, "10.0.0.1:29500", "torchrun"),
    (PADDLE_LAUNCH, PADDLE_RANK_3, "10.0.0.1:6170", "paddle.distributed.launch"),
    (MPIRUN, OPENMPI_RANK_3, None, "mpirun"),
    (MPIRUN, MPICH_RANK_3, None, "mpirun"),
])
def test_each_launcher_gives_the_same_facts(environment, variables, master, name):
    assert environment.detect(variables) == RankFacts(rank=3, local_rank=1, world_size=4, node_rank=1,
                                                      master_address=master, launcher=name)


def test_a_plain_process_is_not_launched():
    for environment in (TORCHRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH, MPIRUN):
        assert environment.detect({}) is None
    # ``import oneflow`` writes these into a plain process: they must not read as a launch.
    assert ONEFLOW_LAUNCH.detect({"RANK": "-1", "WORLD_SIZE": "1"}) is None
    assert detect_rank_facts(launch_environments(), {"PATH": "/bin"}) == SINGLE_PROCESS
    assert not SINGLE_PROCESS.is_distributed


@pytest.mark.parametrize("variables", [{"RANK": "x", "WORLD_SIZE": "2"}, {"RANK": "2", "WORLD_SIZE": "2"},
                                       {"RANK": "0"}, {"WORLD_SIZE": "2"}])
def test_incomplete_or_impossible_variables_are_not_a_launch(variables):
    assert TORCHRUN.detect(variables) is None


def test_self_launched_ranks_read_as_such_and_round_trip():
    variables = {**TORCHRUN.variables_for(1, 2, "127.0.0.1", 4321), LAUNCHED_RANK_ENV: "1"}
    assert TORCHRUN.detect(variables) == RankFacts(rank=1, local_rank=1, world_size=2, node_rank=0,
                                                   master_address="127.0.0.1:4321", launcher="self-launched")
    paddle = PADDLE_LAUNCH.variables_for(1, 2, "127.0.0.1", 6170)
    assert PADDLE_LAUNCH.detect(paddle).master_address == "127.0.0.1:6170"


def test_the_registered_backends_launchers_are_asked_in_order():
    assert launch_environments() == [TORCHRUN, PADDLE_LAUNCH, MPIRUN, ONEFLOW_LAUNCH]
    assert detect_rank_facts(launch_environments(), PADDLE_RANK_3).launcher == "paddle.distributed.launch"
    assert detect_rank_facts(launch_environments(), OPENMPI_RANK_3).rank == 3
