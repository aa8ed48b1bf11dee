"""The rank pool's mechanics, framework-free (the core env): one plain worker process stands in for a
rank. A body that fails, dies, hangs or leaves state behind fails (or warns) alone; what can be put back
is put back in place, and the rest gets the next body a fresh process. ``test_pool.py`` shows the same
with every backend's real ranks."""
from __future__ import annotations

import os
import pickle
import time

import pytest

from tests.rankpool import bodies
from tests.rankpool.pool import BodyFailed, BodyTimedOut, RankPool, RankPoolWarning


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    pool = RankPool(None, 1, tmp_path_factory.mktemp("plain_pool"))
    yield pool
    pool.stop()


def state(pool) -> dict:
    (answer,) = pool.run(bodies.who_am_i)
    return answer


def test_bodies_share_the_process_and_each_runs_in_a_folder_of_its_own(pool, tmp_path):
    first, second = state(pool), state(pool)
    assert first == second and first["pid"] != os.getpid()
    (cwd,) = pool.run(os.getcwd, folder=tmp_path)
    assert cwd == str(tmp_path)
    pool.run(print, "to stdout")
    assert pool.output("stdout") == "to stdout\n"


def test_a_failing_body_fails_with_its_traceback_and_the_next_body_gets_a_fresh_process(pool):
    before = state(pool)
    with pytest.raises(BodyFailed) as failed:
        pool.run(bodies.fail_on, 0)
    assert "=== rank 0: raised" in str(failed.value) and "ValueError: boom from rank 0" in str(failed.value)
    assert state(pool)["pid"] != before["pid"]


def test_a_body_that_ends_its_process_fails_naming_it(pool):
    with pytest.raises(BodyFailed, match="rank 0: ended without answering"):
        pool.run(bodies.die_on, 0)
    assert state(pool)["leftover_variable"] is None


def test_a_hanging_body_hits_its_own_timeout_showing_where_it_hangs(pool):
    before = state(pool)
    started = time.monotonic()
    with pytest.raises(BodyTimedOut) as timed_out:
        pool.run(bodies.hang_on, 0, timeout=1)
    assert time.monotonic() - started < 1 + 15, "the pool took too long to give up"
    text = str(timed_out.value)
    assert "=== rank 0: did not finish within 1 s" in text and "sleep_for_good" in text, text[-3000:]
    assert state(pool)["pid"] != before["pid"]


def test_a_return_value_that_cannot_travel_fails_the_body(pool):
    with pytest.raises(BodyFailed, match="could not be sent"):
        pool.run(bodies.unpicklable)
    pickle.dumps(state(pool))


@pytest.mark.parametrize("what", sorted(bodies.LEFTOVERS))
def test_state_left_behind_is_put_back_or_the_process_is_replaced(pool, what):
    if what == "process group":
        pytest.skip("a framework's process group: test_pool.py, with torch's and paddle's real ranks")
    put_back = bodies.LEFTOVERS[what]
    before = state(pool)
    with pytest.warns(RankPoolWarning, match="the body changed what was put back" if put_back else
                      "cannot be put back, so the next body gets fresh ranks"):
        pool.run(bodies.leave_behind, None, what)
    after = state(pool)
    assert (after["pid"] == before["pid"]) == put_back, (what, before, after)
    if put_back:
        assert after == before, what
