"""The check the socket tests share (tests/distributed/open_sockets.py) fails where it must: a socket wider
than loopback and the host's link address that no allowlist entry names, an entry naming more than its
``at_most``, another host's address; and passes loopback, the link address and what an entry names."""
from __future__ import annotations

from tests.distributed.listening import Listening
from tests.distributed.open_sockets import OpenByFramework, Place, problems, wildcard

LINK, OTHER = "10.9.9.1", "10.9.9.2"
STORE = OpenByFramework("a store on every interface", lambda listening, place: listening.command == "store", 1)
PER_RANK = OpenByFramework("two a rank", lambda listening, place: listening.command == "rank" and wildcard(listening),
                           2, per_rank=True)


def socket(address: str, port: int, command: str = "python", pid: int = 10) -> Listening:
    return Listening("tcp", address, port, pid, command)


def test_loopback_and_the_hosts_own_link_address_pass() -> None:
    sockets = [socket("127.0.0.1", 1), socket("::1", 2), socket(LINK, 3), socket(f"::ffff:{LINK}", 4)]
    assert problems("job", sockets, Place(link=LINK)) == []


def test_a_wider_socket_no_entry_names_fails_and_is_named() -> None:
    for address in ("0.0.0.0", "::", OTHER):
        found = problems("job", [socket(LINK, 3), socket(address, 5)], Place(link=LINK), (STORE,))
        assert len(found) == 1 and ":5 (python, pid 10)" in found[0] and "beyond loopback and its link" in found[0]


def test_on_one_machine_the_link_address_is_wide_too() -> None:
    assert problems("job", [socket(LINK, 3)], Place(root=1)) != []


def test_an_entry_passes_up_to_at_most_and_fails_past_it() -> None:
    assert problems("job", [socket("::", 7, "store")], Place(link=LINK), (STORE,)) == []
    found = problems("job", [socket("::", 7, "store"), socket("0.0.0.0", 8, "store")], Place(link=LINK), (STORE,))
    assert len(found) == 1 and "more sockets open than a store on every interface (1)" in found[0]


def test_a_per_rank_entry_scales_with_the_ranks_on_the_host() -> None:
    sockets = [socket(address, port, "rank", pid) for pid, port in ((1, 1024), (2, 1025)) for address in ("0.0.0.0", "::")]
    assert problems("job", sockets, Place(link=LINK, ranks=2), (PER_RANK,)) == []
    assert problems("job", sockets, Place(link=LINK, ranks=1), (PER_RANK,)) != []
