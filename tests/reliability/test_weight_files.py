"""Weight files: a safetensors header's size claims are checked against the file before anything
is read (a 16 GB or 1 GB claim in a small file is a ValueError naming it, at once, in no memory), and
``convert --to neutral`` writes its file with the mode the umask gives (0644 under 022), as every
other saved file. The header checks need no framework (core env); the conversion runs on every
backend (``--backend``)."""
from __future__ import annotations

import json
import os
import resource
import struct

import pytest

from fastcore_train.convert.neutral_file import FORMAT, read_neutral_file

GB = 1 << 30


def safetensors_file(path, header, data=b""):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def tensor(shape, begin=0, dtype="F32"):
    count = 1
    for side in shape:
        count *= side
    return {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, begin + 4 * count]}


METADATA = {"__metadata__": {"format": FORMAT, "layers": "[]", "source": "torch"}}


@pytest.mark.parametrize("claim", [16 * GB, GB], ids=["16GB", "1GB"])
def test_a_header_claiming_more_than_the_file_holds_is_refused_before_reading(tmp_path, claim):
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # (KiB)
    lying_length = tmp_path / "length.safetensors"  # the header length itself
    lying_length.write_bytes(struct.pack("<Q", claim) + b"{}")
    with pytest.raises(ValueError, match=rf"'{lying_length}' is damaged or not a safetensors file: its header claims "
                                         rf"{claim:,} bytes, but the file has 10"):
        read_neutral_file(lying_length)
    consistent = safetensors_file(tmp_path / "tensor.safetensors",  # dtype x shape = offsets, the data missing
                                  {**METADATA, "w": tensor([claim // 4])}, data=b"\0" * 64)
    with pytest.raises(ValueError, match=rf"'{consistent}' is damaged .*: its header claims {claim:,} bytes of tensor "
                                         r"data \('w' ends there\), but the file holds 64 after its header"):
        read_neutral_file(consistent)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - max_rss < 200 * 1024  # nothing of the claim read


def test_inconsistent_entries_are_named(tmp_path):
    path = safetensors_file(tmp_path / "w.safetensors", {**METADATA, "w": {"dtype": "F32", "shape": [4],
                                                                          "data_offsets": [0, 8]}}, b"\0" * 16)
    with pytest.raises(ValueError, match=r"gives 'w' 8 bytes for a F32 tensor of shape \[4\], which takes 16"):
        read_neutral_file(path)
    path.write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="fewer than the 8 of a header length"):
        read_neutral_file(path)


def test_convert_to_neutral_writes_a_file_the_umask_opens(harness, tmp_path):
    pytest.importorskip("safetensors", reason="the convert extra (safetensors) is not installed here")
    from fastcore_train.__main__ import main
    from tests.conformance.harnesses.base import initial_weights, make_data
    from tests.conformance.helpers import make_trainer

    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.wait_for_checkpoint()
    before = os.umask(0o022)
    try:
        assert main(["convert", str(tmp_path / "ckpt"), str(tmp_path / "w.safetensors"), "--to", "neutral"]) == 0
        os.umask(0o077)
        assert main(["convert", str(tmp_path / "ckpt"), str(tmp_path / "private.safetensors"), "--to", "neutral"]) == 0
    finally:
        os.umask(before)
    assert oct((tmp_path / "w.safetensors").stat().st_mode & 0o777) == oct(0o644)
    assert oct((tmp_path / "private.safetensors").stat().st_mode & 0o777) == oct(0o600)
    assert oct((tmp_path / "ckpt" / "meta.json").stat().st_mode & 0o777) == oct(0o644)
