"""A save target or a ``convert`` destination that is a symbolic link to a folder (a mounted disk, a
``latest`` link) is written through: the link stays and the folder it points to gets the checkpoint.
A link to nothing is a one-line error. Runs on every backend (``--backend``)."""
from __future__ import annotations

import json
import os

import pytest

from fastcore_train.checkpoint import META_FILE, CheckpointTargetError
from fastcore_train.convert.checkpoint import _convert
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer


def trained(harness, seed=0):
    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights(seed=seed)), x, y, n_epochs=1)
    trainer.run(num_eval_sanity_batch=0)
    return trainer


def batches_in(folder) -> int:
    return json.loads((folder / "trainer_state.json").read_text())["state"]["global_forward_batches"]


@pytest.mark.parametrize("blocking", [True, False])
def test_a_save_through_a_link_to_a_folder_keeps_the_link(harness, tmp_path, blocking):
    disk = tmp_path / "mounted" / "checkpoints"  # the link's target: another place, as a mounted disk
    disk.mkdir(parents=True)
    link = tmp_path / "run" / "latest"
    link.parent.mkdir()
    os.symlink(disk, link)
    trainer = trained(harness)
    for batches in (2, 7):  # into the empty folder, then over the checkpoint there
        trainer.state.global_forward_batches = batches
        trainer.save_checkpoint(link, blocking=blocking)
        trainer.wait_for_checkpoint()
        assert link.is_symlink() and os.readlink(link) == str(disk)
        assert (disk / META_FILE).is_file() and batches_in(disk) == batches
    assert sorted(p.name for p in link.parent.iterdir()) == ["latest"]  # nothing left beside the link
    assert sorted(p.name for p in disk.parent.iterdir()) == ["checkpoints"]
    loaded = trained(harness, seed=3)
    loaded.load_checkpoint(link)
    assert loaded.global_forward_batches == 7
    assert_weights_equal(harness.get_weights(loaded.model), harness.get_weights(trainer.model))


def test_a_converted_checkpoint_goes_through_a_link_to_a_folder(harness, tmp_path):
    trainer = trained(harness)
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.wait_for_checkpoint()
    disk = tmp_path / "mounted"
    disk.mkdir()
    link = tmp_path / "converted"
    os.symlink(disk, link)
    _convert(tmp_path / "ckpt", link, to=harness.driver_name, weights_only=False, same_backend=True)
    assert link.is_symlink() and (disk / META_FILE).is_file()
    resumed = trained(harness, seed=3)
    resumed.load_checkpoint(link)
    assert_weights_equal(harness.get_weights(resumed.model), harness.get_weights(trainer.model))


def test_a_link_to_nothing_is_a_one_line_error(harness, tmp_path, capsys):
    from fastcore_train.__main__ import main

    trainer = trained(harness)
    dangling = tmp_path / "dangling"
    os.symlink(tmp_path / "not-mounted" / "disk", dangling)
    with pytest.raises(CheckpointTargetError, match=r"'.*dangling' is a symbolic link to '.*disk', which does not "
                                                    r"exist; nothing was written"):
        trainer.save_checkpoint(dangling)
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.wait_for_checkpoint()
    with pytest.raises(CheckpointTargetError, match="which does not exist"):
        _convert(tmp_path / "ckpt", dangling, to=harness.driver_name, weights_only=False, same_backend=True)
    assert main(["convert", str(tmp_path / "ckpt"), str(dangling), "--to", "neutral"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a symbolic link to" in err and "Traceback" not in err, err
    assert dangling.is_symlink() and not (tmp_path / "not-mounted").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "dangling"]
