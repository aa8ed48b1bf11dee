"""Which machine each rank runs on and which still answer (parallel/lost_hosts.py), and the watchdog's
message naming them: real sockets on this machine (127.0.0.x), no mocks."""
import socket

from fastcore_train.parallel.lost_hosts import Place, answers, machines, other_machines
from fastcore_train.parallel.watchdog import STEP, diagnosis, laggards, progress_key


def test_ranks_group_by_hostname_and_link_address():
    places = [Place("a", "10.0.0.1"), Place("a", "10.0.0.2"), Place("a", "10.0.0.1"), Place("b", None)]
    assert machines(places) == {places[0]: [0, 2], places[1]: [1], places[3]: [3]}
    assert Place("vm", "10.0.0.2").name() == "10.0.0.2 (vm)" and Place("b").name() == "b"


def test_a_machine_that_refuses_or_accepts_answers_and_one_that_does_not_is_lost():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert answers("127.0.0.1", server.getsockname()[1], 1.0) == "accepted"
        free = server.getsockname()[1]
    assert answers("127.0.0.1", free, 1.0) == "refused"
    assert answers("no-such-host.invalid", free, 1.0) is None


def test_the_message_names_each_other_machine_with_its_ranks():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
    mine, up, unknown = Place("h0", "127.0.0.1"), Place("h1", "127.0.0.2"), Place("h2", None)
    text = other_machines(mine, [mine, up, up, unknown], f"127.0.0.1:{port}", seconds=1.0)
    assert "Still answering: host 127.0.0.2 (h1) (ranks 1, 2)" in text, text
    assert "address unknown (not probed): host h2 (rank 3)" in text, text


def test_a_machines_table_names_its_own_laggards_and_adds_the_other_machines():
    table = [(progress_key(4, STEP), 0.0), (0, 0.0), (progress_key(3, STEP), 0.0)]
    assert laggards(table, [0, 2]) == [2]
    text = diagnosis(0, 5.0, table, "x.py:1 in f", [0, 2], "Lost: host 10.0.0.2 (rank 1): ...")
    assert "Rank 2 did not arrive" in text and "Lost: host 10.0.0.2 (rank 1)" in text, text
    alone = diagnosis(0, 5.0, table, "x.py:1 in f", [0], "Lost: host 10.0.0.2 (rank 1): ...")
    assert "Lost: host 10.0.0.2 (rank 1)" in alone and "did not arrive" not in alone, alone
