"""The rank facts and launcher variables written into an engine's workers (no engine, no framework)."""
from __future__ import annotations

import pytest

from fastcore_train.integrations.worker_ranks import WorkersCannotJoinError, check_joinable, worker_variables
from fastcore_train.parallel.environment import MPIRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH, TORCHRUN


def test_workers_on_two_nodes_get_local_ranks_and_node_ranks_in_order():
    nodes, hosts = ["a", "a", "b", "b", "a"], ["10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2", "10.0.0.1"]
    variables = worker_variables(TORCHRUN, nodes, hosts, "10.0.0.1:2950", "ray")
    assert [v["RANK"] for v in variables] == ["0", "1", "2", "3", "4"]
    assert [v["LOCAL_RANK"] for v in variables] == ["0", "1", "0", "1", "2"]
    assert [v["LOCAL_WORLD_SIZE"] for v in variables] == ["3", "3", "2", "2", "3"]
    assert [v["GROUP_RANK"] for v in variables] == ["0", "0", "1", "1", "0"]
    assert {(v["WORLD_SIZE"], v["MASTER_ADDR"], v["MASTER_PORT"]) for v in variables} == {("5", "10.0.0.1", "2950")}
    # What the framework's launcher detection reads back is what was written.
    facts = [TORCHRUN.detect(v) for v in variables]
    assert [(f.rank, f.local_rank, f.node_rank, f.launcher) for f in facts] == [
        (0, 0, 0, "ray"), (1, 1, 0, "ray"), (2, 0, 1, "ray"), (3, 1, 1, "ray"), (4, 2, 0, "ray")]


def test_paddle_workers_get_every_rank_endpoint_and_their_own():
    variables = worker_variables(PADDLE_LAUNCH, ["a", "b"], ["10.0.0.1", "10.0.0.2"], "10.0.0.1:2950", "ray")
    assert variables[1]["PADDLE_TRAINER_ENDPOINTS"] == "10.0.0.1:2951,10.0.0.2:2951"
    assert [v["PADDLE_CURRENT_ENDPOINT"] for v in variables] == ["10.0.0.1:2951", "10.0.0.2:2951"]
    assert [v["PADDLE_TRAINER_ID"] for v in variables] == ["0", "1"]
    assert {v["PADDLE_MASTER"] for v in variables} == {"10.0.0.1:2950"}
    assert PADDLE_LAUNCH.detect(variables[1]).rank == 1


def test_oneflow_workers_get_its_launchers_variables():
    variables = worker_variables(ONEFLOW_LAUNCH, ["a", "a"], ["h", "h"], "h:7", "ray")
    assert [(v["RANK"], v["LOCAL_RANK"], v["WORLD_SIZE"], v["MASTER_ADDR"], v["MASTER_PORT"]) for v in variables] == [
        ("0", "0", "2", "h", "7"), ("1", "1", "2", "h", "7")]


def test_a_launcher_without_a_rendezvous_address_cannot_take_other_processes():
    with pytest.raises(WorkersCannotJoinError, match=r"jittor cannot run as one job over Ray's workers.*mpirun.*MPI"):
        check_joinable(MPIRUN, "jittor", "Ray", "Use one worker.")
    check_joinable(TORCHRUN, "torch", "Ray", "")  # one with a master address is joinable


def test_mismatched_host_list_is_an_error():
    with pytest.raises(ValueError, match="2 workers but 1 host"):
        worker_variables(TORCHRUN, ["a", "a"], ["h"], "h:1", "ray")
