"""``trainer.predict(..., output_dir=...)`` stopped by a full disk leaves no temporary shard behind and
says which file it could not write; its output has no manifest (written last), so reading it back
is an error naming what is missing, never part of the rows. The full disk is our shard writer's
``OSError(ENOSPC)`` after half a shard's bytes reached the file. Runs on every backend (``--backend``)."""
from __future__ import annotations

import errno

import numpy as np
import pytest

from fastcore_train.controllers import prediction_shards
from fastcore_train.controllers.prediction_shards import (IncompletePredictionsError, PredictionShards,
                                                          PredictionWriteError)
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import make_trainer

SAMPLES, BATCH = 40, 8


def test_a_full_disk_leaves_no_temporary_and_a_partial_output_is_refused(harness, tmp_path, monkeypatch):
    x, y = make_data(SAMPLES)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    save, written = prediction_shards._save_npz, []

    def disk_fills_at_the_fourth_shard(path, arrays):
        if len(written) == 3:
            with open(path, "wb") as handle:
                handle.write(b"PK\x03\x04" + b"\0" * 100)  # what reached the disk before it was full
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(path)
        save(path, arrays)

    monkeypatch.setattr(prediction_shards, "_save_npz", disk_fills_at_the_fourth_shard)
    out = tmp_path / "preds"
    with pytest.raises(PredictionWriteError, match=r"could not write '.*predictions-rank00000-0000003.npz': No space "
                                                   r"left on device \(the disk is full\)\. Its temporary file was "
                                                   r"removed") as raised:
        trainer.predict(harness.make_dataloader(x, y, BATCH), output_dir=out)
    assert raised.value.errno == errno.ENOSPC and isinstance(raised.value, OSError)
    assert sorted(p.name for p in out.iterdir()) == [f"predictions-rank00000-{b:07d}.npz" for b in range(3)]
    with pytest.raises(IncompletePredictionsError, match=r"unfinished predict: rank 0 has no manifest "
                                                         r"\(predictions-rank00000-manifest.json.*and 3 shard\(s\)"):
        PredictionShards(out).load()
    with pytest.raises(IncompletePredictionsError):
        len(PredictionShards(out))

    monkeypatch.setattr(prediction_shards, "_save_npz", save)  # space again: a whole output reads back
    whole = trainer.predict(harness.make_dataloader(x, y, BATCH), output_dir=tmp_path / "again")
    assert (tmp_path / "again" / "predictions-rank00000-manifest.json").is_file()
    assert len(whole) == SAMPLES and len(whole.load()["pred"]) == SAMPLES
    (tmp_path / "again" / "predictions-rank00000-0000002.npz").unlink()  # a shard lost afterwards
    with pytest.raises(IncompletePredictionsError, match=r"lists 5 shard\(s\), but 4 are there \(missing: "
                                                         r"predictions-rank00000-0000002.npz\)"):
        PredictionShards(tmp_path / "again").load()
    np.testing.assert_array_equal(trainer.predict(harness.make_dataloader(x, y, BATCH))["pred"].shape, (SAMPLES, 4))
