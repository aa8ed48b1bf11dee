"""Loading a checkpoint or a model file runs no code of the file's, on every backend (``--backend``).

Each file of a real checkpoint in turn is replaced by a pickle whose ``__reduce__`` calls
``open(marker, "w")`` (written in the framework's own file format where it has one): resuming
(``run(resume_from=...)``), ``load_checkpoint`` and ``load_model`` refuse it with a clear error and
the marker file is never created. The checksums in ``meta.json`` would reject a planted file
first, so the loaders are also tested with the checksum rewritten to match and with the
checksums removed (as in a checkpoint written before they existed): the loader itself is safe.
A control shows the planted payload does run under an unrestricted loader, so these tests can fail.
"""
from __future__ import annotations

import importlib
import json
import pickle
import shutil
import tempfile
from pathlib import Path

import numpy as np
import xxhash
import pytest

from fastcore_train import Callback
from fastcore_train.checkpoint import (CALLBACK_STATE_FILE, LEGACY_CALLBACK_STATE_FILE, META_FILE,
                                       CheckpointChecksumError, CheckpointError, CheckpointStateError,
                                       file_checksums)
from fastcore_train.utils import json_state
from fastcore_train.utils.rank_state import read_rank_state
from fastcore_train.utils.safe_pickle import UnsafePickleError
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer
from tests.meta_edits import older_format, rewrite_meta


class Plant:
    """Unpickled by a plain unpickler, this creates the file ``marker`` (``open(marker, "w")``; the
    pickle names ``open`` as ``io.open``)."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


class Counter(Callback):
    """A callback with a state holding numpy values."""

    def __init__(self) -> None:
        self.batches, self.seen = 0, np.zeros((2, 3), dtype=np.float32)

    def on_train_batch_end(self, trainer) -> None:
        self.batches += 1
        self.seen += 1

    def on_save_checkpoint(self, trainer) -> dict:
        return {"batches": np.int64(self.batches), "seen": self.seen, "pair": (1, "a")}

    def on_load_checkpoint(self, trainer, states) -> None:
        self.batches, self.seen, self.pair = states["batches"], states["seen"], states["pair"]


def trainer_for(harness, seed: int = 0, callbacks=(), n_epochs: int = 2):
    x, y = make_data(16)
    return make_trainer(harness, harness.make_model(initial_weights(seed=seed)), x, y, n_epochs=n_epochs,
                        callbacks=list(callbacks))


@pytest.fixture
def saved(harness, tmp_path):
    trainer = trainer_for(harness, callbacks=[Counter()])
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    return tmp_path / "ckpt"


def write_payload(backend: str, path, marker, wrap=lambda plant: plant) -> None:
    """Put the planted pickle (``wrap(Plant(marker))``) at ``path``, in the format the framework's
    loader reads there."""
    payload = wrap(Plant(marker))
    if path.name == "pickled_data":  # oneflow: flow.save's pickle inside its folder
        path.write_bytes(pickle.dumps({"protocol_version": 1, "data": payload}))
    elif backend == "torch" and path.suffix == ".pt":
        importlib.import_module("torch").save(payload, path)  # torch's zip format, data.pkl inside
    elif backend == "jittor" and path.suffix == ".pkl":
        importlib.import_module("jittor").save(payload, str(path))  # pickle + jittor's sha1 trailer
    else:
        path.write_bytes(pickle.dumps(payload))


def is_raw_tensor_file(folder, path) -> bool:
    """oneflow's per-tensor files (``tensor_N/meta``, ``tensor_N/out``), read by its C++ reader, no pickle."""
    return any(part.startswith("tensor_") for part in path.relative_to(folder).parts[:-1])


def rewrite_checksums(folder, how: str) -> None:
    meta = json.loads((folder / META_FILE).read_text())
    if how == "match":  # meta.json's own checksum made to match too
        meta["checksums"] = file_checksums(folder)
    else:  # as an old checkpoint (format < 4) without checksums: format 4 on refuses a meta.json without them
        meta = older_format(meta, 3)
        del meta["checksums"]
    rewrite_meta(folder, meta)


def planted_copies(saved, backend, tmp_path, include_meta: bool = True):
    """``(copy of the checkpoint, planted file, marker)`` for each file of the checkpoint in turn."""
    files = sorted(p.relative_to(saved) for p in saved.rglob("*") if p.is_file())
    assert len(files) >= 5
    for index, relative in enumerate(files):
        if relative.as_posix() == META_FILE and not include_meta:
            continue
        copy, marker = tmp_path / f"copy{index}", tmp_path / f"marker{index}"
        shutil.copytree(saved, copy)
        write_payload(backend, copy / relative, marker)
        yield copy, copy / relative, marker


def test_the_payload_runs_under_a_plain_unpickler(tmp_path):
    marker = tmp_path / "marker"
    pickle.loads(pickle.dumps(Plant(marker)))
    assert marker.exists()


def test_every_planted_file_is_refused_by_its_checksum(harness, backend_name, saved, tmp_path):
    for copy, planted, marker in planted_copies(saved, backend_name, tmp_path):
        for load in ("load_checkpoint", "resume"):
            trainer = trainer_for(harness, seed=3, n_epochs=3)
            before = harness.get_weights(trainer.model)
            with pytest.raises(CheckpointError) as raised:
                if load == "resume":
                    trainer.run(num_eval_sanity_batch=0, resume_from=copy)
                else:
                    trainer.load_checkpoint(copy)
            if planted.name != META_FILE:
                assert isinstance(raised.value, CheckpointChecksumError) and str(planted) in str(raised.value)
            assert not marker.exists(), f"loading ran the code planted in {planted}"
            assert_weights_equal(harness.get_weights(trainer.model), before)


@pytest.mark.parametrize("checksums", ["match", "absent"])
def test_the_loaders_refuse_a_planted_pickle_when_checksums_do_not_stop_it(harness, backend_name, saved, tmp_path,
                                                                           checksums):
    for copy, planted, marker in planted_copies(saved, backend_name, tmp_path, include_meta=False):
        rewrite_checksums(copy, checksums)
        for load in ("load_checkpoint", "resume"):
            trainer = trainer_for(harness, seed=3, n_epochs=3)
            with pytest.raises(Exception) as raised:
                if load == "resume":
                    trainer.run(num_eval_sanity_batch=0, resume_from=copy)
                else:
                    trainer.load_checkpoint(copy)
            assert not marker.exists(), f"loading ran the code planted in {planted}"
            if planted.suffix in (".json", ".npz"):  # parsed, never unpickled: refused as damaged
                assert isinstance(raised.value, CheckpointError) and "damaged" in str(raised.value)
            elif not is_raw_tensor_file(copy, planted):
                assert isinstance(raised.value, UnsafePickleError), raised.value
                assert "io.open" in str(raised.value) and "Refused to load" in str(raised.value)


def test_load_model_refuses_a_planted_model_file(harness, backend_name, tmp_path):
    trainer = trainer_for(harness)
    trainer.save_model(tmp_path / "saved")
    model_path = next((tmp_path / "saved").iterdir())
    target = model_path / "pickled_data" if model_path.is_dir() else model_path
    marker = tmp_path / "marker"
    write_payload(backend_name, target, marker)
    other = trainer_for(harness, seed=3)
    before = harness.get_weights(other.model)
    with pytest.raises(UnsafePickleError, match=r"Refused to load .*io\.open"):
        other.load_model(tmp_path / "saved")
    assert not marker.exists()
    assert_weights_equal(harness.get_weights(other.model), before)
    # Control: the framework's own unrestricted loading (weights_only=False: "I trust this file") runs it.
    with pytest.raises(Exception):
        other.load_model(tmp_path / "saved", weights_only=False)
    assert marker.exists()


def test_a_payload_hidden_inside_a_real_state_dict_is_refused(harness, backend_name, tmp_path):
    trainer = trainer_for(harness)
    trainer.save_model(tmp_path / "saved")
    model_path = next((tmp_path / "saved").iterdir())
    weights = {name: np.asarray(value) for name, value in harness.get_weights(trainer.model).items()}
    if backend_name == "torch":  # torch's safe loader refuses numpy arrays too: use its tensors
        weights = {name: importlib.import_module("torch").from_numpy(value) for name, value in weights.items()}
    write_payload(backend_name, model_path / "pickled_data" if model_path.is_dir() else model_path,
                  tmp_path / "m", wrap=lambda plant: {**weights, "extra": [1, {"deep": plant}]})
    with pytest.raises(UnsafePickleError, match=r"io\.open"):
        trainer_for(harness, seed=3).load_model(tmp_path / "saved")
    assert not (tmp_path / "m").exists()


def test_callback_states_are_json_and_numpy_values_come_back(harness, saved):
    assert not (saved / LEGACY_CALLBACK_STATE_FILE).exists()
    stored = json.loads((saved / CALLBACK_STATE_FILE).read_text())
    assert stored["Counter"]["batches"] == 4 and stored["Counter"]["pair"] == [1, "a"]
    counter = Counter()
    trainer_for(harness, seed=3, callbacks=[counter], n_epochs=3).load_checkpoint(saved)
    assert counter.batches == 4 and counter.pair == [1, "a"]
    assert counter.seen.dtype == np.float32 and counter.seen.shape == (2, 3)
    np.testing.assert_array_equal(counter.seen, np.full((2, 3), 4, dtype=np.float32))


def as_format_1(folder, callback_states) -> None:
    """Rewrite ``folder`` as format 1 wrote it: callback states pickled, every rank's random state
    inside trainer_state.json, then fresh checksums."""
    rank_file = folder / "rank_state_00000.npz"
    if rank_file.exists():
        state = json.loads((folder / "trainer_state.json").read_text())
        state["rng"] = [read_rank_state(rank_file)]
        (folder / "trainer_state.json").write_text(json.dumps(state))
        rank_file.unlink()
    (folder / CALLBACK_STATE_FILE).unlink(missing_ok=True)
    (folder / LEGACY_CALLBACK_STATE_FILE).write_bytes(pickle.dumps(callback_states))
    meta = json.loads((folder / META_FILE).read_text())
    meta["format_version"] = 1
    rewrite_meta(folder, meta)
    rewrite_checksums(folder, "match")


def test_a_format_1_checkpoint_loads_its_pickled_callback_states_safely(harness, saved, tmp_path):
    states = json_state.decode(json.loads((saved / CALLBACK_STATE_FILE).read_text()))
    states["Counter"]["seen"] = np.float32(2.5) * np.ones((2, 3), dtype=np.float32)  # numpy in the pickle
    as_format_1(saved, states)
    counter = Counter()
    trainer_for(harness, seed=3, callbacks=[counter], n_epochs=3).load_checkpoint(saved)
    assert counter.batches == 4
    np.testing.assert_array_equal(counter.seen, np.full((2, 3), 2.5, dtype=np.float32))

    as_format_1(saved, {"Counter": {"batches": Plant(tmp_path / "m"), "seen": 0, "pair": 0}})
    with pytest.raises(UnsafePickleError, match=r"callback_states\.pkl.*io\.open"):
        trainer_for(harness, seed=3, callbacks=[Counter()], n_epochs=3).run(num_eval_sanity_batch=0,
                                                                           resume_from=saved)
    assert not (tmp_path / "m").exists()


class Unsaveable(Callback):
    def __init__(self, state) -> None:
        self.state = state

    def on_save_checkpoint(self, trainer):
        return self.state


@pytest.mark.parametrize("state, where, what", [
    ({"seen": {1, 2}}, "['seen']", "builtins.set"),
    ({"by_step": {3: 0.5}}, "['by_step']", "the key 3"),
    ({"log": [1, object()]}, "['log'][1]", "builtins.object"),
])
def test_a_callback_state_that_is_not_json_is_an_error_when_saving(harness, tmp_path, state, where, what):
    trainer = trainer_for(harness, callbacks=[Unsaveable(state)])
    trainer.run(num_eval_sanity_batch=0)
    with pytest.raises(CheckpointStateError) as raised:
        trainer.save_checkpoint(tmp_path / "ckpt")
    message = str(raised.value)
    assert "'Unsaveable'" in message and where in message and what in message and "JSON" in message
    assert not (tmp_path / "ckpt").exists(), "nothing may be written"


def test_a_whole_pickled_model_needs_weights_only_false(harness, backend_name, tmp_path, recwarn):
    trainer = trainer_for(harness)
    trainer.save_model(tmp_path / "whole", only_state_dict=False)
    other = trainer_for(harness, seed=3)
    if backend_name == "paddle":  # paddle never pickles a Layer: without input_spec it saved the state dict
        other.load_model(tmp_path / "whole", only_state_dict=False)
    else:
        with pytest.raises(UnsafePickleError, match="weights_only=False"):
            other.load_model(tmp_path / "whole", only_state_dict=False)
        other.load_model(tmp_path / "whole", only_state_dict=False, weights_only=False)
    assert_weights_equal(harness.get_weights(other.model), harness.get_weights(trainer.model))


def test_checksums_are_those_of_the_planted_bytes(saved, tmp_path):
    """The 'match' case above really matches: a checkpoint with rewritten checksums passes the check."""
    planted = saved / CALLBACK_STATE_FILE
    planted.write_text(planted.read_text())
    rewrite_checksums(saved, "match")
    meta = json.loads((saved / META_FILE).read_text())
    assert meta["checksum_algorithm"] == "xxh3_128"
    assert meta["checksums"][CALLBACK_STATE_FILE] == xxhash.xxh3_128(planted.read_bytes()).hexdigest()


def test_load_best_model_ignores_a_folder_a_checkpoint_points_elsewhere(tmp_path):
    """A checkpoint's callback state must not make LoadBestModelCallback read (as trusted code) or
    delete a folder that is not its own."""
    from fastcore_train.callbacks import LoadBestModelCallback

    victim = tmp_path / "users_files"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me")
    callback = LoadBestModelCallback(monitor="acc")
    callback.save_folder, callback._made_temporary = Path(tempfile.mkdtemp(prefix="fastcore_best_")), True
    callback.on_load_checkpoint(None, {"best": 0.9, "best_batches": 4, "save_folder": str(victim)})
    assert callback.save_folder != victim and callback.best_batches is None
    own = LoadBestModelCallback(monitor="acc", save_folder=tmp_path / "best")
    own.on_load_checkpoint(None, {"best": 0.9, "best_batches": 4, "save_folder": str(victim)})
    assert own.save_folder == tmp_path / "best" and own.best_batches is None
    (tmp_path / "best").mkdir()
    own.on_load_checkpoint(None, {"best": 0.9, "best_batches": 4, "save_folder": str(tmp_path / "best")})
    assert own.best_batches == 4
    assert (victim / "notes.txt").read_text() == "keep me"
    shutil.rmtree(callback.save_folder)
