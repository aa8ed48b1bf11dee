"""Driver conformance: the neutral weights format (safetensors, torch's names and layouts).

A neutral file written with numpy alone loads into every backend's model in that framework's own
layout, and saving the model again gives the very same bytes per tensor: neutral -> framework ->
neutral is the identity on every backend, so a round trip torch -> paddle -> jittor -> oneflow ->
torch returns bit-identical weights. Checkpoints record the model's layout, so they convert to the
neutral file from their files alone; bad input is refused with nothing written.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from fastcore_train import convert_checkpoint, load_neutral_weights, save_neutral_weights
from fastcore_train.convert import ConversionError, layout_of
from fastcore_train.convert.checkpoint import _convert
from fastcore_train.convert.neutral_file import read_neutral_file, write_neutral_file
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import make_trainer, resumed_and_uninterrupted

LAYOUT = [["fc1", "linear", {}], ["fc2", "linear", {}]]


def neutral_tensors(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The harness weights ([in, out] canonical) as the neutral format holds them (torch's [out, in])."""
    return {"fc1.weight": weights["w1"].T.copy(), "fc1.bias": weights["b1"],
            "fc2.weight": weights["w2"].T.copy(), "fc2.bias": weights["b2"]}


def test_neutral_file_loads_in_the_framework_layout_and_saves_back_bit_identical(harness, tmp_path):
    weights = initial_weights(seed=5)
    write_neutral_file(tmp_path / "numpy.safetensors", neutral_tensors(weights), LAYOUT, source="numpy")
    model = harness.make_model(initial_weights(seed=0), dropout=0.2)  # dropout has no tensors: not a layer
    assert [row[:2] for row in layout_of(model)] == [row[:2] for row in LAYOUT]

    load_neutral_weights(model, tmp_path / "numpy.safetensors")
    loaded = harness.get_weights(model)
    for name, value in weights.items():
        np.testing.assert_array_equal(loaded[name], value)

    save_neutral_weights(model, tmp_path / "again.safetensors")
    again, layout = read_neutral_file(tmp_path / "again.safetensors")
    original, _ = read_neutral_file(tmp_path / "numpy.safetensors")
    assert [row[:2] for row in layout] == [row[:2] for row in LAYOUT] and sorted(again) == sorted(original)
    for name, value in original.items():
        assert again[name].dtype == value.dtype and again[name].tobytes() == value.tobytes(), name


def test_checkpoint_converts_to_the_neutral_file_from_its_files(harness, tmp_path):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    trainer = make_trainer(harness, model, x, y)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    meta = json.loads((tmp_path / "ckpt" / "meta.json").read_text())
    assert [row[:2] for row in meta["layers"]["layout"]] == [row[:2] for row in LAYOUT]

    convert_checkpoint(tmp_path / "ckpt", tmp_path / "weights.safetensors", to="neutral")
    tensors, _ = read_neutral_file(tmp_path / "weights.safetensors")
    expected = neutral_tensors(harness.get_weights(model))
    assert sorted(tensors) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(tensors[name], value)


def test_bad_conversions_say_what_is_wrong_and_write_nothing(harness, backend_name, tmp_path):
    x, y = make_data(8)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not a checkpoint")
    before = sorted(path.name for path in tmp_path.iterdir())

    with pytest.raises(ValueError, match="Unknown framework 'tensorflow'.*torch.*paddle"):
        convert_checkpoint(tmp_path / "ckpt", tmp_path / "out", to="tensorflow")
    with pytest.raises(ConversionError, match="not a fastcore_train checkpoint"):
        convert_checkpoint(tmp_path / "plain", tmp_path / "out", to="neutral")
    with pytest.raises(ConversionError, match=f"already a {backend_name} checkpoint"):
        convert_checkpoint(tmp_path / "ckpt", tmp_path / "out", to=backend_name)
    with pytest.raises(FileNotFoundError, match="No checkpoint folder"):
        convert_checkpoint(tmp_path / "missing", tmp_path / "out", to="neutral")
    assert sorted(path.name for path in tmp_path.iterdir()) == before
    assert sorted(path.name for path in (tmp_path / "plain").iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_checkpoint_rewritten_through_the_neutral_form_resumes_like_an_uninterrupted_run(harness, tmp_path,
                                                                                         optimizer):
    """Reading this backend's model and optimizer files into the neutral form and writing them back
    (what every conversion to or from it does) loses nothing: the run resumed from the rewritten
    checkpoint ends where the uninterrupted one does (the framework's random state is re-seeded,
    which changes nothing without dropout)."""
    def make_optimizer(model):
        return harness.make_sgd(model, 0.1, momentum=0.9) if optimizer == "sgd" else harness.make_adam(model, 0.01)

    def rewrite(folder):
        _convert(folder, folder.with_name("rewritten"), to=backend_of(folder), weights_only=False, same_backend=True)
        return folder.with_name("rewritten")

    trainer, resumed, uninterrupted = resumed_and_uninterrupted(harness, tmp_path, make_optimizer, rewrite)
    assert trainer.global_forward_batches == 12
    expected, actual = harness.get_weights(uninterrupted), harness.get_weights(resumed)
    for name in expected:  # Adam's step count is rebuilt as a power of beta on paddle: equal to rounding
        np.testing.assert_allclose(actual[name], expected[name], rtol=0, atol=1e-6, err_msg=name)


def backend_of(folder):
    return json.loads((folder / "meta.json").read_text())["backend"]
