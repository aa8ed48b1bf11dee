"""The paddle driver's words for paddle 3.3's gloo start-up race, and nothing else rewritten."""
from __future__ import annotations

from fastcore_train.backends.paddle.world import explain_gloo_start_failure

# As paddle 3.3.1 raised it from fleet.init with 4 CPU ranks on 2 cores (fleet/base/topology.py, new_group).
REFUSED = RuntimeError("[/paddle/third_party/gloo/gloo/transport/tcp/pair.cc:784] connect [127.0.0.1]:9141: "
                       "Connection refused")


def test_the_gloo_race_is_named_with_what_to_do():
    clearer = explain_gloo_start_failure(REFUSED, 4)
    assert isinstance(clearer, RuntimeError) and clearer is not REFUSED
    message = str(clearer)
    assert "4 gloo (CPU) ranks" in message and "pair.cc:784" in message and "Connection refused" in message
    assert "twice on the same store keys" in message and "2 CPU ranks" in message and "docs/backends/paddle.md" in message


def test_other_errors_are_left_as_they_are():
    other = RuntimeError("The unique key 0 already exists in the map.")
    assert explain_gloo_start_failure(other, 4) is other
