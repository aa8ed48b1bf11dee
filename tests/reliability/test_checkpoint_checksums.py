"""A checkpoint file changed after saving (bytes flipped inside, yet still loadable) is an error naming
it, not weights loaded silently: ``meta.json`` records the checksum (XXH3-128) of every other file,
and loading checks them. Runs on every backend (``--backend``); oneflow's model is a folder, hashed file by file.
"""
from __future__ import annotations

import hashlib
import json
import logging

import pytest
import xxhash

from fastcore_train.checkpoint import (META_FILE, TRAINING_STATE_STEM, CheckpointChecksumError, CheckpointError,
                                       model_file)
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer
from tests.meta_edits import older_format, rewrite_meta
from tests.reliability.conftest import messages



def fresh(harness):
    x, y = make_data(16)
    return make_trainer(harness, harness.make_model(initial_weights(seed=3)), x, y, n_epochs=3)


def largest_file(path):
    return path if path.is_file() else max((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def flip_a_byte(path, at=None):
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if at is None else at] ^= 0x01
    path.write_bytes(bytes(data))


def test_meta_records_the_checksum_of_every_other_file(saved):
    """Computed while writing where the framework saves to a file object (torch), else read back:
    either way they are the checksums of the bytes on disk."""
    _, folder = saved
    meta = json.loads((folder / META_FILE).read_text())
    checksums = meta["checksums"]
    files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file() and p.name != META_FILE}
    assert meta["checksum_algorithm"] == "xxh3_128"
    assert set(checksums) == set(files)
    assert {name: xxhash.xxh3_128(files[name].read_bytes()).hexdigest() for name in checksums} == checksums


def test_a_checkpoint_with_sha256_checksums_is_verified_with_them(harness, saved):
    """Checkpoints of format < 4 recorded sha256 (no checksum_algorithm): still loaded, still checked."""
    trainer, folder = saved
    meta = older_format(json.loads((folder / META_FILE).read_text()), 3)
    meta["checksums"] = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in meta["checksums"]}
    (folder / META_FILE).write_text(json.dumps(meta))
    other = fresh(harness)
    other.load_checkpoint(folder)
    assert_weights_equal(harness.get_weights(other.model), harness.get_weights(trainer.model))
    flip_a_byte(largest_file(model_file(folder, trainer.driver)))
    with pytest.raises(CheckpointChecksumError, match="sha256"):
        fresh(harness).load_checkpoint(folder)


def test_an_unmodified_checkpoint_loads(harness, saved):
    trainer, folder = saved
    other = fresh(harness)
    other.load_checkpoint(folder)
    assert other.global_forward_batches == 4
    assert_weights_equal(harness.get_weights(other.model), harness.get_weights(trainer.model))


def test_files_added_to_the_folder_later_are_not_checked(harness, saved):
    _, folder = saved
    (folder / "notes.txt").write_text("added by hand")
    other = fresh(harness)
    other.load_checkpoint(folder)
    assert other.global_forward_batches == 4


@pytest.mark.parametrize("which", ["model", "training_state"])
def test_a_flipped_byte_is_an_error_naming_the_file(harness, saved, which):
    trainer, folder = saved
    damaged = largest_file(model_file(folder, trainer.driver) if which == "model" else
                           folder / f"{TRAINING_STATE_STEM}{trainer.driver.io.model_file_suffix}")
    flip_a_byte(damaged)
    other = fresh(harness)
    before = harness.get_weights(other.model)
    with pytest.raises(CheckpointChecksumError, match=rf"{damaged.name}'? is not the file that was saved"):
        other.load_checkpoint(folder)
    with pytest.raises(CheckpointChecksumError) as raised:
        other.run(num_eval_sanity_batch=0, resume_from=folder)
    assert str(damaged) in str(raised.value) and isinstance(raised.value, CheckpointError)
    assert_weights_equal(harness.get_weights(other.model), before)  # nothing was loaded


def test_a_file_the_framework_cannot_read_is_blamed_on_its_checksum(harness, saved):
    """The checksums are verified on helper threads while the framework reads the files: a damaged
    file that its reader fails on (its first byte flipped: the pickle or zip header) is still the
    checksum error naming it, and nothing of the checkpoint reaches the model."""
    trainer, folder = saved
    state = folder / f"{TRAINING_STATE_STEM}{trainer.driver.io.model_file_suffix}"
    damaged = state / "pickled_data" if state.is_dir() else state  # oneflow: the folder's pickle
    flip_a_byte(damaged, at=0)
    other = fresh(harness)
    before = harness.get_weights(other.model)
    with pytest.raises(CheckpointChecksumError, match=rf"{damaged.name}'? is not the file that was saved"):
        other.load_checkpoint(folder)
    assert_weights_equal(harness.get_weights(other.model), before)  # the model file was intact, yet not applied


def test_a_missing_file_is_named(harness, saved):
    trainer, folder = saved
    entry = model_file(folder, trainer.driver)
    gone = largest_file(entry)  # oneflow: a file inside the model folder
    gone.unlink()
    message = r"misses its file .*" if entry.is_dir() else r"misses its model file .*"
    with pytest.raises(CheckpointError, match=message + gone.name):
        fresh(harness).load_checkpoint(folder)


def test_a_checkpoint_without_checksums_still_loads(harness, saved, log_records):
    _, folder = saved
    meta = older_format(json.loads((folder / META_FILE).read_text()), 3)
    del meta["checksums"]  # as written before checksums existed (format < 4)
    (folder / META_FILE).write_text(json.dumps(meta))
    other = fresh(harness)
    other.load_checkpoint(folder)
    assert other.global_forward_batches == 4
    lines = [line for line in messages(log_records, logging.INFO) if "has no checksums" in line]
    assert len(lines) == 1 and str(folder) in lines[0]


@pytest.mark.parametrize("edit", ["checksums removed", "algorithm key damaged", "algorithm value damaged",
                                  "checksums damaged"])
@pytest.mark.parametrize("resealed", [False, True])
def test_a_current_meta_json_without_its_checksums_is_refused_naming_it(harness, saved, edit, resealed):
    """Format 4 on always records its checksums: a meta.json that lost them (an edit, a flipped byte in
    a key) is never a silent downgrade to loading unchecked, nor blamed on an intact file; found by
    meta.json's own checksum, and by the record's checks when that checksum was made to match."""
    trainer, folder = saved
    meta_path = folder / META_FILE
    text = meta_path.read_text()
    if edit == "checksums removed":
        meta = json.loads(text)
        del meta["checksums"]
        text = json.dumps(meta)
    elif edit == "algorithm key damaged":  # one flipped byte in the key's name
        text = text.replace('"checksum_algorithm"', '"checksum_algorithn"')
    elif edit == "algorithm value damaged":
        text = text.replace('"xxh3_128"', '"xxh3_1:8"')
    else:
        meta = json.loads(text)
        meta["checksums"] = ["not", "a", "record"]
        text = json.dumps(meta)
    meta_path.write_text(text)
    if resealed:
        rewrite_meta(folder, json.loads(text))
    flip_a_byte(largest_file(model_file(folder, trainer.driver)))  # and the weights changed too
    other = fresh(harness)
    before = harness.get_weights(other.model)
    with pytest.raises(CheckpointError) as raised:
        other.load_checkpoint(folder)
    message = str(raised.value)
    assert str(meta_path) in message or "meta.json" in message, message
    assert "damaged or" in message and "callback_states" not in message, message
    assert_weights_equal(harness.get_weights(other.model), before)
