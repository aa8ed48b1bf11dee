"""Where an mpirun rank on several hosts finds mpirun's host before MPI_Init (parallel/mpi_hosts.py):
its parent's command (Open MPI's daemon's ``prte_hnp_uri``, or mpirun's own ``--host``/``--hostfile``)."""
from __future__ import annotations

import os
import sys

import pytest

from fastcore_train.parallel.mpi_hosts import choose_mpi_interface, hnp_addresses, master_interface, named_hosts

ACROSS = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}


def test_a_daemons_command_names_mpiruns_addresses():
    argv = ["prted", "--prtemca", "ess_base_vpid", "1", "--prtemca", "prte_hnp_uri",
            "prterun-vm-1@0.0;tcp://10.0.0.1,172.17.0.1:56839:24,16", "--prtemca", "prte_parent_uri",
            "prterun-vm-1@0.0;tcp://10.0.0.1:56839:24"]
    assert hnp_addresses(argv) == ["10.0.0.1", "172.17.0.1"]
    assert hnp_addresses(["prted", "--tree-spawn"]) == []


def test_mpiruns_command_names_its_hosts(tmp_path):
    (tmp_path / "hosts").write_text("# the cluster\n10.0.0.1 slots=8\n\nnode1 slots=8  # second\n")
    argv = ["prterun", "-np", "16", "--hostfile", "hosts", "-H", "node2:4,10.0.0.1", "python", "train.py"]
    assert named_hosts(argv, tmp_path) == ["10.0.0.1", "node1", "node2"]
    assert named_hosts(["prterun", "--hostfile", "missing"], tmp_path) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's interface table")
def test_loopback_is_never_the_answer(tmp_path):
    assert master_interface(["prted", "prte_hnp_uri", "x@0.0;tcp://127.0.0.1:5:8"], tmp_path) is None
    assert master_interface(["prterun", "--host", "127.0.0.1,localhost"], tmp_path) is None


def test_only_a_job_across_hosts_without_the_users_choice():
    for environ in ({}, {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
                    {**ACROSS, "OMPI_MCA_btl_tcp_if_include": "eth1"}, {**ACROSS, "OMPI_MCA_btl_tcp_if_exclude": "lo"}):
        before = dict(environ)
        assert choose_mpi_interface(environ, pid=os.getpid()) == {} and environ == before
