"""SLURM's rank facts, host lists and the launcher variables made from them (no framework needed)."""
from __future__ import annotations

import logging

import pytest

from fastcore_train.parallel.environment import (MPIRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH, SLURM_EXPORTED_ENV, TORCHRUN,
                                                 RankFacts, detect_rank_facts)
from fastcore_train.parallel.slurm import (SlurmLaunchError, expand_hostlist, expand_tasks_per_node,
                                           export_env_variables, launched_or_slurm, master_port_for,
                                           refuse_slurm_only, slurm_facts, task_hosts)

BUILT_IN = (TORCHRUN, PADDLE_LAUNCH, MPIRUN, ONEFLOW_LAUNCH)


def srun_task(rank: int = 3, local: int = 1, node: int = 1, ntasks: int = 4, **more: str) -> dict[str, str]:
    """What srun sets for task ``rank`` of a job of 2 nodes of 2 tasks each."""
    return {"SLURM_JOB_ID": "123457", "SLURM_JOB_NAME": "train", "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(local), "SLURM_NODEID": str(node), "SLURM_NTASKS": str(ntasks),
            "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_STEP_NODELIST": "gpu[07-08]",
            "SLURM_TASKS_PER_NODE": "2(x2)", **more}


@pytest.mark.parametrize("text, hosts", [
    ("node01", ["node01"]),
    ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
    ("a[1-2],b3", ["a1", "a2", "b3"]),
    ("gpu[008-011]", ["gpu008", "gpu009", "gpu010", "gpu011"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("x,y[3],z", ["x", "y3", "z"]),
    ("10.0.0.[5-6]", ["10.0.0.5", "10.0.0.6"]),
])
def test_host_lists_expand_in_order_with_zero_padding(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["node[01-", "node]1[", "n[a-b]", "n[4-2]", "a,,b", "n[[1]]"])
def test_a_malformed_host_list_is_an_error_naming_it(text):
    with pytest.raises(ValueError, match="SLURM host list"):
        expand_hostlist(text)


def test_tasks_per_node_expand():
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    with pytest.raises(ValueError):
        expand_tasks_per_node("2(x")


def test_an_srun_task_gives_the_facts_with_master_from_the_node_list_and_port_from_the_job():
    facts = slurm_facts(srun_task())
    assert facts == RankFacts(rank=3, local_rank=1, world_size=4, node_rank=1,
                              master_address=f"gpu07:{master_port_for(123457)}", launcher="srun")
    assert master_port_for(123457) == 10000 + 123457 % 20000
    assert all(10000 <= master_port_for(job) < 30000 for job in (0, 19999, 20000, 987654321))


def test_master_addr_and_port_when_set_win():
    facts = slurm_facts(srun_task(MASTER_ADDR="10.1.1.1", MASTER_PORT="29400"))
    assert facts.master_address == "10.1.1.1:29400"


@pytest.mark.parametrize("environ", [
    {},  # not under SLURM
    {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
     "SLURM_NODEID": "0"},  # srun -n 1: one process
])
def test_no_job_or_one_task_is_not_distributed(environ):
    assert slurm_facts(environ) is None


@pytest.mark.parametrize("environ, words", [
    ({**srun_task(), "SLURM_JOB_NAME": "interactive"}, "interactive allocation"),
    ({**srun_task(), "SLURM_JOB_NAME": "bash"}, "interactive allocation"),
    # salloc's shell: the allocation's variables, no step and no task id
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NAME": "job"},
     "srun did not start it"),
    # the sbatch script itself: task 0 of the batch step, no SLURM_STEP_ID
    ({"SLURM_JOB_ID": "8", "SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
      "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NAME": "job", "ENVIRONMENT": "BATCH"}, "srun did not start it"),
])
def test_a_process_srun_did_not_start_is_not_a_rank_and_says_so(environ, words, caplog):
    with caplog.at_level(logging.INFO, logger="fastcore_train"):
        assert slurm_facts(environ) is None
    assert words in caplog.text


@pytest.mark.parametrize("change, words", [
    ({"SLURM_NTASKS": None}, "no task count"),
    ({"SLURM_PROCID": "4"}, "is not a rank of a job of SLURM_NTASKS=4"),
    ({"SLURM_PROCID": None}, "has no SLURM_PROCID"),
    ({"SLURM_LOCALID": None}, "no SLURM_LOCALID"),
    ({"SLURM_JOB_NODELIST": None, "SLURM_STEP_NODELIST": None}, "set MASTER_ADDR"),
    ({"SLURM_JOB_NODELIST": "n[1-", "SLURM_STEP_NODELIST": None}, "leaves a bracket open"),
    ({"SLURM_JOB_ID": None}, "set MASTER_PORT"),
    ({"SLURM_PROCID": "x"}, "is not a number"),
])
def test_a_half_launched_task_is_a_clear_error(change, words):
    environ = {key: value for key, value in {**srun_task(), **change}.items() if value is not None}
    with pytest.raises(SlurmLaunchError, match=words):
        slurm_facts(environ)


def test_export_writes_the_env_variables_that_torchrun_would_have():
    environ = srun_task()
    facts = export_env_variables(BUILT_IN, environ)
    port = str(master_port_for(123457))
    assert {key: environ[key] for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                          "MASTER_ADDR", "MASTER_PORT")} == {
        "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
        "MASTER_ADDR": "gpu07", "MASTER_PORT": port}
    # every reader of the launch variables now agrees with SLURM, and names srun
    assert TORCHRUN.detect(environ) == facts == detect_rank_facts(BUILT_IN, environ)
    assert facts.launcher == "srun"


def test_import_ignores_what_oneflow_wrote_in_a_plain_process():
    environ = {**srun_task(), "RANK": "-1", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "LOCAL_RANK": "0"}
    facts = export_env_variables(BUILT_IN, environ)
    assert environ["RANK"] == "3" and environ["WORLD_SIZE"] == "4" and facts.rank == 3


@pytest.mark.parametrize("launcher_variables", [
    {"RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"},  # torchrun
    {"PADDLE_TRAINER_ID": "0", "PADDLE_TRAINERS_NUM": "8", "PADDLE_MASTER": "h:1"},  # paddle's launcher
    {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "8"},  # mpirun
])
def test_a_launchers_own_variables_win_over_slurms(launcher_variables):
    """srun starting one launcher per node: the launcher's ranks are the job's."""
    environ = {**srun_task(rank=1, local=0, node=1, ntasks=2), **launcher_variables}
    before = dict(environ)
    assert export_env_variables(BUILT_IN, environ) is None
    assert environ == before
    facts = detect_rank_facts(BUILT_IN, environ)
    assert facts.world_size == 8 and facts.launcher != "srun"


def test_a_backend_reading_after_import_still_gets_the_job_and_half_launched_errors():
    environ = srun_task(rank=0, local=0, node=0)
    facts = launched_or_slurm(TORCHRUN, environ)
    assert facts.rank == 0 and facts.world_size == 4 and environ["MASTER_ADDR"] == "gpu07"
    assert environ[SLURM_EXPORTED_ENV] == "0"
    half = {key: value for key, value in srun_task().items() if key != "SLURM_NTASKS"}
    assert export_env_variables(BUILT_IN, dict(half)) is None  # import stays quiet ...
    with pytest.raises(SlurmLaunchError, match="no task count"):  # ... the backend says what is wrong
        launched_or_slurm(TORCHRUN, half)


def test_task_hosts_follow_the_block_distribution():
    facts = slurm_facts(srun_task())
    assert task_hosts(srun_task(), facts) == ["gpu07", "gpu07", "gpu08", "gpu08"]
    # counts that do not add up: every task is named by the master's host
    assert task_hosts(srun_task(SLURM_TASKS_PER_NODE="3,2"), facts) == ["gpu07"] * 4


def test_a_framework_that_cannot_take_slurm_ranks_refuses_with_the_remedy():
    with pytest.raises(SlurmLaunchError, match=r"task 3 of 4, but jittor cannot .*mpirun -np"):
        refuse_slurm_only("jittor", "run `mpirun -np $SLURM_NTASKS python train.py`.", srun_task())
    refuse_slurm_only("jittor", "unused", {})  # not under srun: nothing to refuse
