"""The one-machine rules of fastcore_train.parallel.loopback (issue 39): which masters are loopback, which
interface is the loopback one, and that a user's own settings always win."""
from __future__ import annotations

import socket

from fastcore_train.parallel.loopback import (keep_mpi_rank_off_tcp, keep_on_loopback, loopback_address,
                                              loopback_interface, mpi_one_machine_settings, on_one_machine)


def test_the_loopback_interface_is_the_one_holding_127_0_0_1():
    name = loopback_interface()
    assert (name, socket.if_nametoindex(name)) in [(n, i) for i, n in socket.if_nameindex()]
    with socket.socket() as probe:  # binding to that interface reaches 127.0.0.1 (Linux: SO_BINDTODEVICE)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, name.encode())
        probe.bind(("127.0.0.1", 0))


def test_a_master_is_loopback_only_when_it_names_one_loopback_address():
    assert loopback_address("127.0.0.1") == "127.0.0.1"
    assert loopback_address("127.0.0.2") == "127.0.0.2"
    assert loopback_address("::1") == "::1"
    assert loopback_address("192.0.2.7") is None  # another host, even if unreachable
    assert loopback_address("no-such-host.invalid") is None
    assert loopback_address(None) is None and loopback_address("") is None


def test_one_machine_from_the_master_or_the_launchers_local_size():
    assert on_one_machine("127.0.0.1", 2, None)
    assert on_one_machine("192.0.2.7", 4, 4)  # torchrun --nnodes 1 with the machine's own address
    assert not on_one_machine("192.0.2.7", 4, 2)
    assert not on_one_machine(None, 2, None)


def test_interface_variables_are_set_only_where_the_user_did_not():
    environ = {"GLOO_SOCKET_IFNAME": "eth1"}
    chosen = keep_on_loopback(("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"), environ)
    assert chosen == {"TP_SOCKET_IFNAME": loopback_interface()}
    assert environ["GLOO_SOCKET_IFNAME"] == "eth1"


def test_mpi_ranks_on_one_machine_leave_tcp_out_unless_the_user_chose():
    assert mpi_one_machine_settings({}) == {"OMPI_MCA_btl": "^tcp"}
    assert mpi_one_machine_settings({"OMPI_MCA_btl": "self,tcp"}) == {}
    assert mpi_one_machine_settings({"PRTE_MCA_prte_default_hostfile": "hosts"}) == {}
    here = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert keep_mpi_rank_off_tcp(here) == {"OMPI_MCA_btl": "^tcp"} and here["OMPI_MCA_btl"] == "^tcp"
    across = {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert keep_mpi_rank_off_tcp(across) == {} and "OMPI_MCA_btl" not in across
    assert keep_mpi_rank_off_tcp({}) == {}


def test_each_launchers_variables_choose_the_same_way():
    """torch's and oneflow's MASTER_ADDR/LOCAL_WORLD_SIZE and paddle's PADDLE_MASTER (with its port) and
    PADDLE_LOCAL_SIZE lead to the same choice; a value the user set is kept."""
    from fastcore_train.parallel.loopback import choose_interfaces_from_environment, loopback_interface

    torch_like = {"MASTER_ADDR": "127.0.0.1", "LOCAL_WORLD_SIZE": "2"}
    assert choose_interfaces_from_environment(["GLOO_SOCKET_IFNAME"], 2, environ=torch_like) == \
        {"GLOO_SOCKET_IFNAME": loopback_interface()}
    paddle_like = {"PADDLE_MASTER": "127.0.0.1:8090", "PADDLE_LOCAL_SIZE": "2", "NCCL_SOCKET_IFNAME": "eth7"}
    chosen = choose_interfaces_from_environment(["GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"], 2, "PADDLE_MASTER",
                                                "PADDLE_LOCAL_SIZE", environ=paddle_like)
    assert chosen == {"GLOO_SOCKET_IFNAME": loopback_interface()} and paddle_like["NCCL_SOCKET_IFNAME"] == "eth7"
