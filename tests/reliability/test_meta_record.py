"""A checkpoint's ``meta.json`` is read only whole: its file record (``files`` and ``checksums``) may
lose no entry and name nothing but plain files inside the folder, and its own checksum catches any
changed byte, so a flipped byte is an error naming ``meta.json``, never damaged weights loaded or a
"None backend". Runs on every backend (``--backend``)."""
from __future__ import annotations

import json
import os

import pytest

from fastcore_train.checkpoint import META_FILE, CheckpointChecksumError, CheckpointError, checksums, model_file
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal, make_trainer
from tests.meta_edits import older_format, read_meta, reseal, rewrite_meta



def fresh(harness):
    x, y = make_data(16)
    return make_trainer(harness, harness.make_model(initial_weights(seed=3)), x, y, n_epochs=3)


def model_entry(trainer, folder):
    """The model's file, or for oneflow's model folder its largest file: ``(path, name in the record)``."""
    entry = model_file(folder, trainer.driver)
    path = entry if entry.is_file() else max((p for p in entry.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    return path, path.relative_to(folder).as_posix()


def damage(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def refused(harness, folder, match):
    """Loading ``folder`` raises a CheckpointError matching ``match``, naming meta.json, the model unchanged."""
    other = fresh(harness)
    before = harness.get_weights(other.model)
    with pytest.raises(CheckpointError, match=match) as raised:
        other.load_checkpoint(folder)
    assert META_FILE in str(raised.value), raised.value
    assert_weights_equal(harness.get_weights(other.model), before)
    return raised.value


@pytest.mark.parametrize("fmt", [5, 4])
def test_a_lost_checksum_entry_is_refused_not_skipped(harness, saved, fmt):
    """Format 5 lists its files beside their checksums; format 4 had no list, but every file that
    loading reads must still have a checksum. Either way the damaged weights are never loaded."""
    trainer, folder = saved
    path, name = model_entry(trainer, folder)
    meta = read_meta(folder)
    del meta["checksums"][name]
    reseal(folder, meta) if fmt == 5 else rewrite_meta(folder, older_format(meta, 4))
    damage(path)
    message = "lists .* without a checksum" if fmt == 5 else "has no checksum for .*which the checkpoint holds"
    refused(harness, folder, rf"{message}.*damaged or edited")


def test_a_checksum_for_no_listed_file_or_a_damaged_name_is_refused(harness, saved):
    """Its own checksum made to match each time, so that the record's check is what finds it."""
    trainer, folder = saved
    path, name = model_entry(trainer, folder)
    original = read_meta(folder)
    meta = json.loads(json.dumps(original))
    meta["checksums"]["notes.txt"] = "0" * 32
    reseal(folder, meta)
    refused(harness, folder, r"has a checksum for 'notes.txt', which it does not list")
    meta = json.loads(json.dumps(original))
    damaged = name[:-1] + chr(ord(name[-1]) ^ 1)  # one flipped byte in the name, inside "checksums"
    meta["checksums"] = {(damaged if key == name else key): value for key, value in meta["checksums"].items()}
    reseal(folder, meta)
    damage(path)
    refused(harness, folder, rf"lists '{name}' without a checksum")


@pytest.mark.parametrize("name", ["../victim.txt", "ABSOLUTE", "SYMLINK"])
def test_a_name_outside_the_folder_is_an_error_before_anything_is_opened(harness, saved, name, monkeypatch):
    """``../victim.txt``, an absolute path, a file of the checkpoint replaced by a symbolic link to a copy
    outside it (its checksum still matches): refused naming meta.json, and no file outside is hashed."""
    trainer, folder = saved
    victim = folder.parent / "victim.txt"
    victim.write_text("not part of the checkpoint")
    meta = read_meta(folder)
    if name == "SYMLINK":
        path, name = model_entry(trainer, folder)
        outside = folder.parent / "outside.bin"
        os.replace(path, outside)
        os.symlink(outside, path)
    else:
        name = str(victim) if name == "ABSOLUTE" else name
        meta["checksums"][name] = checksums.digest_of_file(victim)
    rewrite_meta(folder, meta)
    opened = []
    hash_file = checksums.digest_of_file
    monkeypatch.setattr(checksums, "digest_of_file", lambda path, *args: (opened.append(str(path)),
                                                                           hash_file(path, *args))[1])
    error = refused(harness, folder, "names '.*' (is an absolute path|leads out of the folder|is a symbolic link)")
    assert name in str(error)
    assert opened == [], opened
    with pytest.raises(CheckpointError, match="names '"):
        fresh(harness).run(num_eval_sanity_batch=0, resume_from=folder)
    from fastcore_train.checkpoint.resume import get_last_checkpoint
    assert get_last_checkpoint(folder.parent) is None  # resume_from="auto" passes it over


@pytest.mark.parametrize("resealed", [False, True])
def test_a_damaged_backend_entry_is_a_damaged_meta_json_never_a_none_backend(harness, saved, resealed):
    _, folder = saved
    text = (folder / META_FILE).read_text()
    for edit in ('"backend"', f'"{harness.driver_name}"'):  # a flipped byte in the key, then in its value
        at = text.index(edit) + 2
        damaged = text[:at] + chr(ord(text[at]) ^ 1) + text[at + 1:]
        (folder / META_FILE).write_text(damaged)
        if resealed:
            rewrite_meta(folder, json.loads(damaged))
        expected = ("does not match its own checksum" if not resealed else
                    "has no 'backend' entry" if edit == '"backend"' else "names backend '.*', which is none of")
        error = refused(harness, folder, rf"{expected}.*damaged or edited")
        assert "None" not in str(error)
        (folder / META_FILE).write_text(text)
    fresh(harness).load_checkpoint(folder)  # the original loads


def test_every_flipped_byte_of_meta_json_is_an_error(harness, saved):
    """The sweep of the issue: each byte of meta.json flipped in turn (a bit, as a disk error would),
    then loaded. Before meta.json carried its own checksum, 231 of 698 flips loaded without a word."""
    _, folder = saved
    original = (folder / META_FILE).read_bytes()
    other = fresh(harness)
    silent = []
    for at in range(len(original)):
        data = bytearray(original)
        data[at] ^= 0x01
        (folder / META_FILE).write_bytes(bytes(data))
        try:
            other.load_checkpoint(folder)
        except CheckpointError:
            continue
        silent.append(original[max(0, at - 10):at + 10])
    assert silent == [], f"{len(silent)} of {len(original)} flips loaded: {silent[:5]}"
    (folder / META_FILE).write_bytes(original)
    other.load_checkpoint(folder)


def test_a_re_indented_meta_json_still_loads(harness, saved):
    """Its own checksum is over what it says, not its spacing."""
    _, folder = saved
    (folder / META_FILE).write_text(json.dumps(read_meta(folder), indent=4))
    fresh(harness).load_checkpoint(folder)


def test_a_format_4_checkpoint_without_the_seal_still_loads(harness, saved):
    _, folder = saved
    rewrite_meta(folder, older_format(read_meta(folder), 4))
    other = fresh(harness)
    other.load_checkpoint(folder)
    assert other.global_forward_batches == 4
    with pytest.raises(CheckpointChecksumError):
        meta = read_meta(folder)
        meta["format_version"] = 5  # a format-5 meta.json must carry its checksum
        rewrite_meta(folder, meta)
        fresh(harness).load_checkpoint(folder)
