"""The interface of this machine's route toward a master (parallel/route.py), on this machine's own
interfaces: loopback leads to the loopback interface; a name that does not resolve has no route."""
from __future__ import annotations

import sys

import pytest

from fastcore_train.parallel.route import interface_toward, interface_with, source_address

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's interface table")


def test_loopback_leads_to_the_loopback_interface():
    name, address = interface_toward("127.0.0.1")
    assert address == "127.0.0.1" and interface_with(address) == name and name.startswith("lo")


def test_no_route_for_a_name_that_does_not_resolve():
    assert source_address("no-such-host.invalid") is None and interface_toward("no-such-host.invalid") is None
    assert interface_with("not an address") is None
