"""HostBuffers: a snapshot copies into the previous snapshot's buffers whose key matches; the rest is freed."""
from __future__ import annotations

from fastcore_train.drivers.host_buffers import HostBuffers


def test_the_next_round_reuses_matching_buffers_and_keeps_only_its_own():
    buffers = HostBuffers()
    with buffers.reuse() as first:
        a, a_new = first.take("a", lambda: ["a1"])
        b, b_new = first.take("b", lambda: ["b1"])
    assert a_new and b_new
    with buffers.reuse() as second:
        again, again_new = second.take("a", lambda: ["a2"])
        c, c_new = second.take("c", lambda: ["c2"])
    assert again is a and not again_new, "a matching key gets the previous snapshot's buffer"
    assert c == ["c2"] and c_new
    with buffers.reuse() as third:
        b_again, b_new = third.take("b", lambda: ["b3"])
    assert b_again == ["b3"] and b_again is not b and b_new, "a buffer the last round did not take is freed"


def test_a_key_taken_twice_in_one_round_gets_a_new_buffer_the_second_time():
    buffers = HostBuffers()
    with buffers.reuse() as first:
        first.take("k", lambda: ["one"])
    with buffers.reuse() as second:
        reused, reused_new = second.take("k", lambda: ["x"])
        other, other_new = second.take("k", lambda: ["y"])
    assert (reused, reused_new) == (["one"], False) and (other, other_new) == (["y"], True)
