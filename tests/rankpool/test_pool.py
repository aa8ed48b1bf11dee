"""The rank pool's guarantees with every backend's real ranks (started by the framework's launcher): a
body that fails or hangs fails alone, one that leaves an environment variable and a process group
behind warns, and the body after each trains to one process's weights. The framework-free mechanics
(every kind of leftover, a dying body, ...) are tested in ``test_pool_mechanics.py``."""
from __future__ import annotations

import time

import pytest

from tests.distributed.test_data_parallel import assert_close, launched, single_process_weights
from tests.rankpool import bodies
from tests.rankpool.pool import BodyFailed, BodyTimedOut, RankPoolWarning

pytestmark = pytest.mark.distributed

#: The backends with a call that makes a second process group (jittor's MPI and oneflow set up one world
#: at import and have none).
MAKE_GROUPS = ("torch", "paddle")


def trains_correctly(backend, harness, pool, folder) -> None:
    """A real two-rank training in the pool: every rank ends with one process's weights on the global batch."""
    folder.mkdir()
    for rank in launched(backend, {"out": str(folder), "shuffle": True}, pool=pool):
        assert rank["world_size"] == 2 and rank["driver"] == backend.distributed_driver
        assert_close(rank["weights"], single_process_weights(harness, 16, shuffle=True))


def ranks(pool, backend_name) -> list[dict]:
    return pool.run(bodies.who_am_i, backend_name)


def pids(pool, backend_name) -> list[int]:
    return [rank["pid"] for rank in ranks(pool, backend_name)]


def test_bodies_share_the_ranks(rank_pool, backend, harness, backend_name, tmp_path):
    before = pids(rank_pool, backend_name)
    trains_correctly(backend, harness, rank_pool, tmp_path / "first")
    trains_correctly(backend, harness, rank_pool, tmp_path / "second")
    assert pids(rank_pool, backend_name) == before, "the ranks were started again"


def test_a_failing_body_fails_alone_and_the_next_body_passes_on_fresh_ranks(rank_pool, backend, harness,
                                                                              backend_name, tmp_path):
    before = pids(rank_pool, backend_name)
    with pytest.raises(BodyFailed) as failed:
        rank_pool.run(bodies.fail_on, 1)
    text = str(failed.value)
    assert "=== rank 1: raised" in text and "ValueError: boom from rank 1" in text, text[-3000:]
    assert "=== rank 0: finished" in text, text[-3000:]
    trains_correctly(backend, harness, rank_pool, tmp_path / "after")
    assert not set(pids(rank_pool, backend_name)) & set(before), "the failed body's ranks were reused"


def test_a_hanging_body_hits_its_own_timeout_and_the_next_body_passes(rank_pool, backend, harness, tmp_path):
    rank_pool.run(bodies.who_am_i, backend.name)  # the ranks are up: the timeout is the body's alone
    started = time.monotonic()
    with pytest.raises(BodyTimedOut) as timed_out:
        rank_pool.run(bodies.hang_on, 0, timeout=2)
    assert time.monotonic() - started < 2 + 15, "the pool took too long to give up"
    text = str(timed_out.value)
    assert "=== rank 0: did not finish within 2 s" in text and "=== rank 1: finished" in text, text[-3000:]
    assert "sleep_for_good" in text, f"rank 0's stack is not shown:\n{text[-3000:]}"
    trains_correctly(backend, harness, rank_pool, tmp_path / "after")


def test_a_body_leaving_a_variable_and_a_process_group_warns_and_the_next_body_passes(rank_pool, backend, harness,
                                                                                     backend_name, tmp_path):
    """The variable is put back in place; a process group cannot be, so the next body gets fresh ranks
    (jittor and oneflow have no call that makes one: there the variable alone, and the ranks stay)."""
    before = ranks(rank_pool, backend_name)
    makes_group = backend_name in MAKE_GROUPS
    leftovers = ["environment variable"] + (["process group"] if makes_group else [])
    with pytest.warns(RankPoolWarning) as warned:
        rank_pool.run(bodies.leave_behind, backend_name, *leftovers)
    said = " ".join(str(warning.message) for warning in warned)
    assert bodies.LEFTOVER_VARIABLE in said and ("process group" in said) == makes_group, said
    after = ranks(rank_pool, backend_name)
    for rank_before, rank_after in zip(before, after):
        assert (rank_after["pid"] != rank_before["pid"]) == makes_group, (before, after)
        assert rank_after["leftover_variable"] is None and rank_after["groups"] == rank_before["groups"]
    trains_correctly(backend, harness, rank_pool, tmp_path / "after")
