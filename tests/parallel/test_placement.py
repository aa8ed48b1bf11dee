"""Reading ``device=`` once for every backend: one process, a launched rank, or ranks to start."""
from __future__ import annotations

import pytest

from fastcore_train.parallel.environment import SINGLE_PROCESS, RankFacts
from fastcore_train.parallel.placement import device_name, place_ranks


class Rules:
    """The device rules of a framework with ``gpus`` visible GPUs."""

    framework = "testframework"

    def __init__(self, gpus: int = 0) -> None:
        self.gpus = gpus

    def all_gpus(self):
        return [f"cuda:{i}" for i in range(self.gpus)]

    def default_rank_device(self, facts):
        return f"cuda:{facts.local_rank}" if self.gpus else "cpu"


RANK_3_OF_4 = RankFacts(rank=3, local_rank=1, world_size=4, node_rank=1, launcher="torchrun")


def test_one_device_is_one_process():
    for device in ("cpu", None, "cuda:1", ["cpu"]):
        placement = place_ranks(device, None, Rules())
        assert placement.facts == SINGLE_PROCESS and not placement.launch
        assert placement.device == (device[0] if isinstance(device, list) else device)


def test_a_device_list_makes_this_process_rank_zero_of_a_job_it_starts():
    placement = place_ranks(["cpu", "cpu", "cpu"], None, Rules())
    assert placement.launch and placement.devices == ["cpu", "cpu", "cpu"] and placement.device == "cpu"
    assert placement.facts == RankFacts(rank=0, local_rank=0, world_size=3, launcher="self-launched")
    assert place_ranks(-1, None, Rules(gpus=2)).devices == ["cuda:0", "cuda:1"]


def test_a_launched_rank_takes_its_device_by_local_rank_or_the_default():
    assert place_ranks(["cuda:0", "cuda:1", "cuda:0", "cuda:1"], RANK_3_OF_4, Rules(2)).device == "cuda:1"
    assert place_ranks(None, RANK_3_OF_4, Rules(2)).device == "cuda:1"
    assert place_ranks("cpu", RANK_3_OF_4, Rules(2)).device == "cpu"
    assert place_ranks(["cpu"], RANK_3_OF_4, Rules()).device == "cpu"
    launched = place_ranks(None, RANK_3_OF_4, Rules())
    assert launched.facts is RANK_3_OF_4 and not launched.launch and launched.is_distributed
    # A launcher's job of one rank is one process.
    assert not place_ranks("cpu", RankFacts(0, 0, 1, launcher="torchrun"), Rules()).is_distributed


@pytest.mark.parametrize("device, launched, gpus, message", [
    ([], None, 0, "device=\\[\\] lists no device"),
    (-1, None, 0, "none is visible \\(this testframework sees none\\)"),
    (-3, None, 2, "pass -1 for every GPU"),
    (["cpu", "cuda:0"], None, 1, "mixes CPU and GPU"),
    (["cuda:0", 0], None, 1, "repeats a GPU"),
    (["cpu", "cpu"], RANK_3_OF_4, 0, "device lists 2 devices but the launcher started 4 ranks"),
])
def test_the_same_errors_for_every_backend(device, launched, gpus, message):
    with pytest.raises(ValueError, match=message):
        place_ranks(device, launched, Rules(gpus))


def test_device_names_compare_across_spellings():
    assert device_name("CUDA:1") == device_name(1) == device_name("Place(gpu:1)") == "gpu:1"
    assert device_name("cpu") == "cpu"
