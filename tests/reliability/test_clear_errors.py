"""Mistakes that used to end in a framework's raw traceback (or train nothing, silently) get an error
saying what was wrong and what to do, before any weight changes. With ``--backend`` every test runs
on that framework's real models, optimizers and files (the conformance harnesses); the tests that
take no harness run in the framework-free ``core`` env.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from fastcore_train import Trainer
from fastcore_train.checkpoint import META_FILE, CheckpointChecksumError, CheckpointError, model_file
from fastcore_train.controllers.loss_check import check_loss
from fastcore_train.drivers.choose import choose_driver
from fastcore_train.drivers.registry import all_backends
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_equal
from tests.meta_edits import older_format, rewrite_meta


def build(harness, model=None, optimizers=None, dataloader=None, **kwargs):
    x, y = make_data(16)
    model = model if model is not None else harness.make_model(initial_weights())
    kwargs.setdefault("n_epochs", 1)
    kwargs.setdefault("driver", harness.driver_name)
    return Trainer(model=model, train_dataloader=dataloader if dataloader is not None else harness.make_dataloader(x, y, 8),
                   optimizers=optimizers if optimizers is not None else harness.make_sgd(model, 0.1),
                   progress_bar=None, **kwargs)


def run_and_keep_weights(harness, trainer, error, match):
    """``trainer.run`` raises ``error`` and has changed no weight."""
    before = harness.get_weights(trainer.model)
    with pytest.raises(error, match=match):
        trainer.run(num_eval_sanity_batch=0)
    assert_weights_equal(harness.get_weights(trainer.model), before)


# ---------------------------------------------------------------- a driver of another framework
def test_a_driver_of_another_framework_is_refused_before_importing_it(harness, backend_name):
    own = next(entry for entry in all_backends() if entry.name == backend_name)
    for entry in all_backends():
        if entry is own:
            continue
        imported = entry.framework_module in sys.modules
        with pytest.raises(ValueError, match=rf"driver='{entry.driver_names[0]}' trains {entry.framework_module} models, "
                                             rf"but the model \(MLP\) is a {own.framework_module} model\. "
                                             rf"Pass driver='{own.driver_names[0]}'"):
            build(harness, driver=entry.driver_names[0])
        assert imported or entry.framework_module not in sys.modules, f"{entry.framework_module} was imported"


@pytest.mark.also_per_backend  # proves something only where the framework is installed
def test_the_framework_is_told_from_the_class_module_alone():
    """Framework-free: a class that merely says it comes from torch is judged a torch model, and
    neither torch nor paddle is imported to say so."""
    fake_torch_model = type("Net", (), {"__module__": "torch.nn.modules.net"})()
    before = {name for name in ("torch", "paddle") if name in sys.modules}
    with pytest.raises(ValueError, match=r"driver='paddle' trains paddle models, but the model \(Net\) is a torch "
                                         r"model\. Pass driver='torch' \(or driver='auto'"):
        choose_driver(fake_torch_model, "paddle")
    assert {name for name in ("torch", "paddle") if name in sys.modules} == before


# ---------------------------------------------------------------- the loss
def test_a_loss_of_several_numbers_is_refused_before_backward(harness):
    trainer = build(harness, train_fn="evaluate_step", output_mapping=lambda outputs: {"loss": outputs["pred"]})
    run_and_keep_weights(harness, trainer, ValueError,
                         r"The training loss has shape \[8, 4\] \(32 numbers\).*loss\.mean\(\)")


def no_grad_step(trainer, batch):
    with trainer.driver.evaluate_context():  # the user's mistake: the loss computed without gradients
        outputs = trainer.train_step(batch)
    trainer.backward(outputs)
    trainer.step()
    trainer.zero_grad()


def test_a_loss_without_gradient_is_refused_before_backward(harness):
    trainer = build(harness, batch_step_fn=no_grad_step)
    run_and_keep_weights(harness, trainer, ValueError,
                         r"The training loss has no gradient.*inside no_grad\(\) or evaluate_context\(\)")


def test_a_loss_that_is_a_python_number_is_refused(harness):
    trainer = build(harness, output_mapping=lambda outputs: {"loss": 0.5})
    run_and_keep_weights(harness, trainer, TypeError, r"The training loss is a float, not a tensor .*\.item\(\)")


def test_only_the_first_loss_is_checked_and_a_good_run_trains(harness):
    trainer = build(harness, n_epochs=2)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4 and trainer._loss_checked


def test_the_shape_check_needs_no_framework():
    check_loss(np.float32(1.0), "no-such-backend")
    check_loss(np.ones([1]), "no-such-backend")  # jittor's losses have shape [1]
    check_loss(object(), "no-such-backend")  # a third-party backend's loss without a shape: not judged
    with pytest.raises(ValueError, match=r"shape \[3, 2\] \(6 numbers\)"):
        check_loss(np.ones([3, 2]), "no-such-backend")
    with pytest.raises(ValueError, match=r"shape \[0\] \(0 numbers\)"):
        check_loss(np.ones([0]), "no-such-backend")


# ---------------------------------------------------------------- the model and its inputs
def test_a_model_without_parameters_is_refused_when_the_trainer_is_built(harness):
    model, other = harness.make_model(initial_weights()), harness.make_model(initial_weights())
    del model.fc1, model.fc2  # as if its layers were kept in a plain list: none is registered
    assert not list(model.parameters())
    with pytest.raises(ValueError, match=r"The model \(MLP\) has no parameters.*plain python list"):
        build(harness, model=model, optimizers=harness.make_sgd(other, 0.1))


class TupleBatches:
    """The harness's dataloader yielding ``(x, y)`` tuples instead of dicts."""

    def __init__(self, dataloader) -> None:
        self.dataloader = dataloader

    def __iter__(self):
        for batch in self.dataloader:
            yield batch["x"], batch["y"]

    def __len__(self) -> int:
        return len(self.dataloader)


def test_tuple_batches_for_named_inputs_say_how_to_name_them(harness):
    x, y = make_data(16)
    trainer = build(harness, dataloader=TupleBatches(harness.make_dataloader(x, y, 8)))
    run_and_keep_weights(harness, trainer, TypeError,
                         r"MLP\.train_step takes the named inputs \['x', 'y'\], but the batch is a tuple of 2 items.*"
                         r"input_mapping=\{0: 'x', 1: 'y'\}")
    named = build(harness, dataloader=TupleBatches(harness.make_dataloader(x, y, 8)), input_mapping={0: "x", 1: "y"})
    named.run(num_eval_sanity_batch=0)  # the fix the message gives
    assert named.global_forward_batches == 2


# ---------------------------------------------------------------- checkpoints and model files
@pytest.fixture
def sgd_checkpoint(harness, tmp_path):
    trainer = build(harness)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    return trainer, tmp_path / "ckpt"


def test_the_checkpoint_records_its_optimizer_classes(sgd_checkpoint):
    trainer, folder = sgd_checkpoint
    recorded = json.loads((folder / META_FILE).read_text())["optimizers"]
    optimizer = trainer._user_optimizers[0]
    assert recorded == [f"{type(optimizer).__module__}.{type(optimizer).__qualname__}"]


def test_a_checkpoint_of_another_optimizer_type_is_refused_before_loading(harness, sgd_checkpoint):
    _, folder = sgd_checkpoint
    model = harness.make_model(initial_weights(seed=5))
    trainer = build(harness, model=model, optimizers=harness.make_adam(model, 0.01), n_epochs=2)
    before = harness.get_weights(model)
    with pytest.raises(CheckpointError, match=r"holds the state of a [\w.]*\.SGD optimizer, but this trainer's "
                                              r"optimizer is a [\w.]*\.Adam.*Build the Trainer with a SGD optimizer.*"
                                              r"trainer\.load_model"):
        trainer.run(num_eval_sanity_batch=0, resume_from=folder)
    assert_weights_equal(harness.get_weights(model), before)  # nothing was loaded
    trainer.load_model(folder)  # the way out the message gives: the weights, a fresh Adam
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4


def test_a_checkpoint_of_another_number_of_optimizers_is_refused_before_loading(harness, sgd_checkpoint):
    _, folder = sgd_checkpoint
    model = harness.make_model(initial_weights(seed=5))
    trainer = build(harness, model=model, optimizers=[harness.make_sgd(model, 0.1), harness.make_sgd(model, 0.1)])
    before = harness.get_weights(model)
    with pytest.raises(CheckpointError, match=r"holds the state of 1 optimizer\(s\) \([\w.]*SGD\), but this trainer "
                                              r"has 2 .*nothing was loaded"):
        trainer.load_checkpoint(folder)
    assert_weights_equal(harness.get_weights(model), before)


def test_a_checkpoint_without_the_record_is_not_checked(harness, sgd_checkpoint):
    _, folder = sgd_checkpoint
    meta = json.loads((folder / META_FILE).read_text())
    del meta["optimizers"]  # written before the record existed
    rewrite_meta(folder, meta)
    trainer = build(harness, n_epochs=2)
    trainer.run(num_eval_sanity_batch=0, resume_from=folder)
    assert trainer.global_forward_batches == 4


def cut_in_half(entry):
    """Truncate ``entry`` (or, for a folder such as oneflow's model, its largest file)."""
    path = entry if entry.is_file() else max((p for p in entry.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


def test_a_truncated_model_file_is_a_checkpoint_error_naming_it(harness, tmp_path):
    trainer = build(harness)
    trainer.save_model(tmp_path / "model")
    entry = model_file(tmp_path / "model", trainer.driver)
    cut_in_half(entry)
    with pytest.raises(CheckpointError, match=r"(?s)Cannot load the model from .*damaged or incomplete") as raised:
        build(harness).load_model(tmp_path / "model")
    assert str(entry) in str(raised.value)


def test_a_truncated_file_inside_a_checkpoint_is_named(harness, sgd_checkpoint):
    trainer, folder = sgd_checkpoint
    cut = cut_in_half(model_file(folder, trainer.driver))
    with pytest.raises(CheckpointChecksumError, match="is not the file that was saved") as raised:
        build(harness, n_epochs=2).run(num_eval_sanity_batch=0, resume_from=folder)
    assert str(cut) in str(raised.value)
    meta = older_format(json.loads((folder / META_FILE).read_text()), 3)
    del meta["checksums"]  # an older checkpoint (format 3): no checksum to catch it, the loader names the file
    (folder / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"(?s)Cannot load the model from .*damaged or incomplete") as raised:
        build(harness, n_epochs=2).run(num_eval_sanity_batch=0, resume_from=folder)
    assert str(model_file(folder, trainer.driver)) in str(raised.value)
