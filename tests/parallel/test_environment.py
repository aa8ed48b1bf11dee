"""Rank facts from each way of being launched, read by one piece of code (no framework needed)."""
from __future__ import annotations

import pytest

from fastcore_train.drivers.registry import launch_environments
from fastcore_train.parallel.environment import (LAUNCHED_RANK_ENV, MPIRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH,
                                                 SINGLE_PROCESS, TORCHRUN, RankFacts, UnlaunchedNodeError,
                                                 detect_rank_facts)

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


# Kubeflow training operator (kubeflow/training-operator pkg/controller.v1/pytorch/envvar.go, master.go and
# paddlepaddle/envvar.go): what each pod's container gets, plus Kubernetes' own service variables.
KUBERNETES_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "PYTHONUNBUFFERED": "0"}
# The second worker pod of a Master + 2 Workers job (workers count from 1): RANK is the pod's index,
# WORLD_SIZE the pods times nprocPerNode, PET_* torchrun's options.
PYTORCHJOB_WORKER_1 = {**KUBERNETES_POD, "MASTER_ADDR": "train-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "3",
                       "RANK": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "2", "PET_NNODES": "3"}
PYTORCHJOB_TORCHRUN_POD = {**PYTORCHJOB_WORKER_1, "WORLD_SIZE": "12", "PET_NPROC_PER_NODE": "4"}
PADDLEJOB_WORKER_1 = {**KUBERNETES_POD, "PADDLE_MASTER": "train-worker-0:37777", "PADDLE_NNODES": "2",
                      "PADDLE_JOB_ID": "train"}


def test_a_pytorchjob_pod_without_a_launcher_is_one_rank_on_a_node_of_its_own():
    facts = detect_rank_facts(launch_environments(), PYTORCHJOB_WORKER_1)
    assert facts == RankFacts(rank=2, local_rank=0, world_size=3, node_rank=2, master_address="train-master-0:23456",
                              launcher="torchrun")  # local rank 0: the pod's own device, not cuda:2
    # outside Kubernetes the same variables are ranks on one machine (set by hand, or self-launched)
    outside = {key: value for key, value in PYTORCHJOB_WORKER_1.items() if not key.startswith("KUBERNETES_")}
    assert detect_rank_facts(launch_environments(), outside).local_rank == 2


def test_torchrun_inside_a_pytorchjob_pod_wins_over_the_pods_variables():
    # torchrun reads PET_* as its options and gives each of its 4 processes its own variables
    worker = {**PYTORCHJOB_TORCHRUN_POD, **TORCHRUN.variables_for(1, 4, "train-master-0", 23456),
              "RANK": "9", "WORLD_SIZE": "12", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "2"}
    assert detect_rank_facts(launch_environments(), worker) == RankFacts(
        rank=9, local_rank=1, world_size=12, node_rank=2, master_address="train-master-0:23456", launcher="torchrun")


def test_a_paddlejob_pod_is_a_rank_only_under_paddles_launcher():
    # the operator names the master and the node count (paddle's launcher reads them as --master / --nnodes):
    # without the launcher the pod is no rank, and training it alone would be a separate run per pod ...
    with pytest.raises(UnlaunchedNodeError, match=r"PADDLE_NNODES=2 .* python -m paddle.distributed.launch"):
        detect_rank_facts(launch_environments(), PADDLEJOB_WORKER_1)
    assert detect_rank_facts(launch_environments(), {**PADDLEJOB_WORKER_1, "PADDLE_NNODES": "1"}) == SINGLE_PROCESS
    # ... and the launcher started in the pod numbers the ranks: the second pod's second process of 2 + 2
    worker = {**PADDLEJOB_WORKER_1, "PADDLE_TRAINER_ID": "3", "PADDLE_TRAINERS_NUM": "4", "PADDLE_LOCAL_RANK": "1",
              "PADDLE_LOCAL_SIZE": "2", "PADDLE_MASTER": "train-worker-0:37777"}
    assert detect_rank_facts(launch_environments(), worker) == RankFacts(
        rank=3, local_rank=1, world_size=4, node_rank=1, master_address="train-worker-0:37777",
        launcher="paddle.distributed.launch")
