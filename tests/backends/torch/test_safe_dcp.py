"""A sharded (torch.distributed.checkpoint) folder is checked before ``dcp.load`` unpickles its
``.metadata`` with plain pickle: a real folder passes, a planted one is refused unrun."""
from __future__ import annotations

import pickle

import pytest
import torch
import torch.distributed.checkpoint as dcp

from fastcore_train.backends.torch.persistence import DCP_METADATA, check_dcp_metadata
from fastcore_train.utils.safe_pickle import UnsafePickleError


class Plant:
    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def sharded(tmp_path):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    folder = tmp_path / "sharded"
    dcp.save({"model": model.state_dict(), "optimizer_0": optimizer.state_dict()}, checkpoint_id=folder)
    return folder


def test_a_real_sharded_folder_passes_and_loads(sharded):
    check_dcp_metadata(sharded)
    state = {"model": torch.nn.Linear(3, 2).state_dict()}
    dcp.load(state, checkpoint_id=sharded)


def test_a_planted_metadata_is_refused_unrun(sharded, tmp_path):
    marker = tmp_path / "marker"
    (sharded / DCP_METADATA).write_bytes(pickle.dumps(Plant(marker)))
    with pytest.raises(UnsafePickleError, match=r"\.metadata'?: it refers to io\.open"):
        check_dcp_metadata(sharded)
    assert not marker.exists()
    with pytest.raises(BaseException):  # control: dcp.load itself runs it (CheckpointException is no Exception)
        dcp.load({"model": torch.nn.Linear(3, 2).state_dict()}, checkpoint_id=sharded)
    assert marker.exists()
