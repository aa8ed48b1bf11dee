"""A controller releases every loader it adapted when its run ends, however it ends, and only
then: holds nest (an evaluation inside ``Trainer.run`` keeps its loaders until that run ends)."""
from __future__ import annotations

import pytest

from fastcore_train.controllers.adapted_loaders import AdaptedLoaders
from fastcore_train.drivers.data import DataAdapter


class Releases(DataAdapter):
    """The data layer of a driver, noting each release; ``failing`` loaders raise."""

    def __init__(self, failing: tuple = ()) -> None:
        super().__init__()
        self.released: list = []
        self.failing = failing

    def release(self, dataloader) -> None:
        self.released.append(dataloader)
        if dataloader in self.failing:
            raise OSError(f"cannot stop {dataloader}")


def test_the_users_own_loader_is_not_ours_and_a_loader_is_noted_once():
    data = Releases()
    loaders = AdaptedLoaders(data)
    assert loaders.add("given", "given") == "given" and len(loaders) == 0
    loaders.add("copy", "given")
    loaders.add("copy", "given")
    with loaders.held():
        pass
    assert data.released == ["copy"]


def test_nested_holds_release_once_when_the_outermost_ends():
    data = Releases()
    loaders = AdaptedLoaders(data)
    loaders.add("copy", "given")
    with loaders.held():
        for _ in range(2):  # two evaluations inside one run
            with loaders.held():
                pass
        assert data.released == []
    assert data.released == ["copy"]


def test_a_failing_release_does_not_stop_the_others_and_is_raised_or_logged(caplog):
    data = Releases(failing=("a",))
    loaders = AdaptedLoaders(data)
    loaders.add("a", None)
    loaders.add("b", None)
    with pytest.raises(OSError, match="cannot stop a"):
        with loaders.held():
            pass
    assert data.released == ["a", "b"]
    data.released.clear()
    with pytest.raises(KeyError):  # the run's own error is the one raised; the release's is logged
        with loaders.held():
            raise KeyError("the run failed")
    assert data.released == ["a", "b"] and "cannot stop a" in caplog.text
