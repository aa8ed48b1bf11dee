"""Driver conformance: save/load of models and checkpoints round-trips exactly."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer, resumed_and_uninterrupted
from tests.meta_edits import older_format, rewrite_meta


@pytest.mark.parametrize("only_state_dict", [True, False])
def test_save_model_then_load_model_gives_identical_predictions(harness, tmp_path, only_state_dict):
    x, y = make_data(24)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_model(tmp_path / "saved", only_state_dict=only_state_dict)
    expected = harness.predict(model, x)

    other = harness.make_model(initial_weights(seed=7))
    assert not np.array_equal(harness.predict(other, x), expected)
    loader = make_trainer(harness, other, x, y)
    # A whole pickled model is code: loading it is an explicit "I trust this file" (weights_only=False).
    trust = {} if only_state_dict else {"weights_only": False}
    loader.load_model(tmp_path / "saved", only_state_dict=only_state_dict, **trust)
    np.testing.assert_array_equal(harness.predict(other, x), expected)


def test_load_model_from_missing_folder_says_what_to_pass(harness, tmp_path):
    x, y = make_data(8)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    with pytest.raises(FileNotFoundError, match="folder given to save_model"):
        trainer.load_model(tmp_path / "nothing-here")


def test_checkpoint_at_epoch_end_resumes_like_an_uninterrupted_run(harness, tmp_path):
    trainer, resumed, uninterrupted = resumed_and_uninterrupted(
        harness, tmp_path, lambda model: harness.make_sgd(model, 0.1, momentum=0.9))
    assert trainer.cur_epoch_idx == 3 and trainer.global_forward_batches == 12
    assert_weights_equal(harness.get_weights(resumed), harness.get_weights(uninterrupted))


def test_checkpoint_folder_layout_and_metadata(harness, tmp_path):
    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    names = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    suffix = trainer.driver.io.model_file_suffix
    assert names == sorted(["meta.json", f"model{suffix}", f"training_state{suffix}", "trainer_state.json",
                            "callback_states.json", "rank_state_00000.npz"])
    meta = json.loads((tmp_path / "ckpt" / "meta.json").read_text())
    assert meta["backend"] == harness.driver_name and meta["world_size"] == 1 and meta["format_version"] == 5
    state = json.loads((tmp_path / "ckpt" / "trainer_state.json").read_text())
    assert state["state"]["global_forward_batches"] == 2 and "rng" not in state
    assert (tmp_path / "ckpt" / "rank_state_00000.npz").stat().st_size < 16_000  # compact: ~10 KB
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"], "no temporary folder may be left behind"

    # Saving again over it replaces it whole; the replaced one stays beside it until the new one is
    # on disk (a power cut in between leaves it), then the background flush deletes it.
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.wait_for_checkpoint()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_loading_a_damaged_or_foreign_folder_is_a_clear_error(harness, tmp_path):
    from fastcore_train.checkpoint import CheckpointError
    x, y = make_data(8)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    with pytest.raises(FileNotFoundError, match="No checkpoint folder"):
        trainer.load_checkpoint(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="not a fastcore_train checkpoint"):
        trainer.load_checkpoint(tmp_path / "empty")
    trainer.save_checkpoint(tmp_path / "ckpt")
    meta = json.loads((tmp_path / "ckpt" / "meta.json").read_text())
    other = "paddle" if harness.driver_name != "paddle" else "torch"
    meta["backend"] = other  # another framework's checkpoint
    rewrite_meta(tmp_path / "ckpt", meta)
    with pytest.raises(CheckpointError, match=f"written by the '{other}' backend"):
        trainer.load_checkpoint(tmp_path / "ckpt")
    meta["backend"] = harness.driver_name
    rewrite_meta(tmp_path / "ckpt", meta)
    model_path = tmp_path / "ckpt" / f"model{trainer.driver.io.model_file_suffix}"
    shutil.rmtree(model_path) if model_path.is_dir() else model_path.unlink()  # oneflow.save writes a folder
    with pytest.raises(CheckpointError, match="misses its model file"):
        trainer.load_checkpoint(tmp_path / "ckpt")


def test_a_format_2_checkpoint_with_every_rank_state_inside_resumes_as_format_3_does(harness, tmp_path):
    """Before format 3 every rank's random state sat in trainer_state.json; such checkpoints load,
    and resume exactly as the same checkpoint in format 3 (dropout draws from the random state)."""
    import hashlib

    from fastcore_train.utils.rank_state import read_rank_state

    x, y = make_data(24)
    saver = make_trainer(harness, harness.make_model(initial_weights(), dropout=0.3), x, y, n_epochs=1)
    saver.run(num_eval_sanity_batch=0)
    new, old = tmp_path / "format3", tmp_path / "format2"
    saver.save_checkpoint(new)
    shutil.copytree(new, old)
    state = json.loads((old / "trainer_state.json").read_text())
    state["rng"] = [read_rank_state(old / "rank_state_00000.npz")]
    (old / "trainer_state.json").write_text(json.dumps(state))
    (old / "rank_state_00000.npz").unlink()
    meta = older_format(json.loads((old / "meta.json").read_text()), 2)  # format 2 recorded sha256, verified with it
    meta["checksums"] = {name: hashlib.sha256((old / name).read_bytes()).hexdigest()
                         for name in meta["checksums"] if (old / name).is_file()}
    (old / "meta.json").write_text(json.dumps(meta))
    weights = []
    for folder in (new, old):
        resumed = harness.make_model(initial_weights(seed=5), dropout=0.3)
        make_trainer(harness, resumed, x, y, n_epochs=3).run(num_eval_sanity_batch=0, resume_from=folder)
        weights.append(harness.get_weights(resumed))
    assert_weights_equal(weights[1], weights[0])


def test_the_checkpoints_framework_files_are_what_the_frameworks_own_save_writes(harness, tmp_path):
    """Checkpoint files are hashed while written, through a file object: paddle's ``paddle.save``
    into a BytesIO passing its writes on, jittor's format written by the backend itself. The bytes
    must still be those of the framework's own save to a path (what ``paddle.load``/``jt.load``
    and other tools read)."""
    if harness.driver_name not in ("paddle", "jittor"):
        pytest.skip("torch.save names the archive after the file it is given, and flow.save its tensor "
                    "folders after a counter: their checkpoint files are not compared byte for byte")
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y, optimizers=harness.make_adam(model, 0.01))
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    io, suffix = trainer.driver.io, trainer.driver.io.model_file_suffix
    for name, state in (("model", io.model_state()), ("training_state", io.training_state_object())):
        io.write_object(state, tmp_path / f"{name}{suffix}")  # a path: the framework's own save
        saved = (tmp_path / "ckpt" / f"{name}{suffix}").read_bytes()
        assert saved == (tmp_path / f"{name}{suffix}").read_bytes(), f"{name}{suffix} differs"
