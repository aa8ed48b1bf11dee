"""Loading ``last`` while another save replaces it is no damage: the load notices the folder changed
under it and reads it again, whole (a bounded number of times, then an error saying it was being
replaced). The replace is a real save of another Trainer, made at the moment the loader has read
``meta.json`` (our reader is wrapped to make it then). Runs on every backend (``--backend``)."""
from __future__ import annotations

import pytest

from fastcore_train import checkpoint as ckpt
from fastcore_train.checkpoint.replacement import CheckpointReplacedError
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer


def trained(harness, seed, n_epochs=1):
    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights(seed=seed)), x, y, n_epochs=n_epochs)
    trainer.run(num_eval_sanity_batch=0)
    return trainer


@pytest.mark.parametrize("replacements", [1, 99])
def test_a_concurrent_replace_is_read_again_not_reported_as_damage(harness, tmp_path, monkeypatch, replacements):
    last = tmp_path / "last"
    old, new = trained(harness, seed=0), trained(harness, seed=5, n_epochs=2)
    old.save_checkpoint(last)
    old.wait_for_checkpoint()
    read_meta, done = ckpt.read_meta, []

    def replaced_after_meta_is_read(folder, driver, verify=True):
        meta = read_meta(folder, driver, verify)
        if len(done) < replacements:  # another process saves `last` again right now
            saver = (new, old)[len(done) % 2]
            saver.save_checkpoint(last)
            saver.wait_for_checkpoint()
            done.append(saver)
        return meta

    monkeypatch.setattr(ckpt, "read_meta", replaced_after_meta_is_read)
    loader = trained(harness, seed=9)
    if replacements > 1:  # replaced at every read: said so, and nothing loaded
        before = harness.get_weights(loader.model)
        with pytest.raises(CheckpointReplacedError, match=r"was being replaced by another save each of the 5 times it "
                                                          r"was read .*nothing is damaged\. Load it again"):
            loader.load_checkpoint(last)
        assert_weights_equal(harness.get_weights(loader.model), before)
        return
    loader.load_checkpoint(last)  # the version in place when it was read again: the new one, whole
    assert loader.global_forward_batches == new.global_forward_batches == 4
    assert_weights_equal(harness.get_weights(loader.model), harness.get_weights(new.model))


def test_real_damage_is_still_reported_at_once(harness, tmp_path):
    last = tmp_path / "last"
    trainer = trained(harness, seed=0)
    trainer.save_checkpoint(last)
    trainer.wait_for_checkpoint()
    state = last / ckpt.TRAINER_STATE_FILE
    state.write_text(state.read_text().replace("2", "3"))
    with pytest.raises(ckpt.CheckpointChecksumError, match="is not the file that was saved"):
        trained(harness, seed=9).load_checkpoint(last)
