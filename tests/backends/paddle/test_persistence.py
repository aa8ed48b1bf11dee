"""Paddle saving: whole models through paddle.jit.save, and optimizer state that loads anywhere."""
from __future__ import annotations

import logging

import numpy as np
import paddle
import pytest
from paddle.static import InputSpec

from fastcore_train import LRSchedCallback, Trainer
from fastcore_train.backends.paddle.persistence import load_optimizer_state, save_optimizer_state
from fastcore_train.backends.paddle.persistence import STATE_FILE
from fastcore_train.log import logger
from tests.conformance.harnesses.base import IN, initial_weights, make_data
from tests.conformance.harnesses.paddle import Harness
from tests.conformance.helpers import assert_weights_equal, batches_of

HARNESS = Harness()
SPEC = [InputSpec([None, IN], "float32", name="x")]


def trained(seed: int = 0, **kwargs):
    x, y = make_data(24)
    model = HARNESS.make_model(initial_weights(seed), dropout=0.2)
    trainer = Trainer(model, HARNESS.make_dataloader(x, y, 8), HARNESS.make_sgd(model, 0.1), driver="paddle",
                      n_epochs=1, progress_bar=None, **kwargs)
    trainer.run(num_eval_sanity_batch=0)
    return trainer, model, x


def test_a_whole_model_is_exported_with_jit_save_and_reloads(tmp_path):
    trainer, model, x = trained()
    trainer.save_model(tmp_path / "saved", only_state_dict=False, input_spec=SPEC)
    folder = tmp_path / "saved" / "model.pdparams"
    assert sorted(p.name for p in folder.iterdir()) == ["model.json", "model.pdiparams", STATE_FILE]
    assert model.training, "exporting switches to eval mode only while it runs"
    expected = HARNESS.predict(model, x)

    exported = paddle.jit.load(str(folder / "model"))  # the inference export, usable without the class
    exported.eval()
    np.testing.assert_allclose(exported(paddle.to_tensor(x)).numpy(), expected, rtol=1e-6, atol=1e-6)

    other = HARNESS.make_model(initial_weights(seed=7))
    loader = Trainer(other, HARNESS.make_dataloader(x, x[:, 0].astype("int64"), 8), HARNESS.make_sgd(other, 0.1),
                     driver="paddle", progress_bar=None)
    loader.driver.io.load_model(folder, only_state_dict=False)
    np.testing.assert_array_equal(HARNESS.predict(other, x), expected)


def test_exporting_does_not_change_training():
    x, y = make_data(32)

    def run(export_folder=None):
        model = HARNESS.make_model(initial_weights())
        trainer = Trainer(model, HARNESS.make_dataloader(x, y, 8), HARNESS.make_sgd(model, 0.1), driver="paddle",
                          n_epochs=2, progress_bar=None)
        trainer.run(num_eval_sanity_batch=0, num_train_batch_per_epoch=2)
        if export_folder is not None:
            trainer.save_model(export_folder, only_state_dict=False, input_spec=SPEC)
        trainer.n_epochs = 4
        trainer.run(num_eval_sanity_batch=0)
        return HARNESS.get_weights(model)

    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        assert_weights_equal(run(folder), run())


def test_input_spec_from_paddle_kwargs_exports_checkpoints_too(tmp_path):
    trainer, model, x = trained(paddle_kwargs={"input_spec": SPEC})
    trainer.save_checkpoint(tmp_path / "ckpt", only_state_dict=False)
    assert (tmp_path / "ckpt" / "model.pdparams" / "model.json").is_file()
    expected = HARNESS.predict(model, x)

    fresh, other, _ = trained(seed=5)
    fresh.load_checkpoint(tmp_path / "ckpt")
    np.testing.assert_array_equal(HARNESS.predict(other, x), expected)


def test_a_whole_model_without_input_spec_is_saved_as_a_state_dict_with_a_warning(tmp_path):
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        trainer, model, x = trained()
        trainer.save_model(tmp_path, only_state_dict=False)
    finally:
        logger.removeHandler(handler)
    assert any("input_spec" in record.getMessage() for record in records)
    assert (tmp_path / "model.pdparams").is_file()
    assert set(paddle.load(str(tmp_path / "model.pdparams"))) == set(model.state_dict())


def test_loading_a_state_dict_of_another_model_names_the_mismatch(tmp_path):
    paddle.save({"weight": paddle.zeros([2, 2])}, str(tmp_path / "model.pdparams"))
    trainer, _, _ = trained()
    with pytest.raises(ValueError, match=r"missing \['fc1.bias'.*unexpected \['weight'\]"):
        trainer.load_model(tmp_path)


@pytest.mark.parametrize("make_optimizer", [
    lambda params: paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=params),
    lambda params: paddle.optimizer.Adam(learning_rate=0.01, parameters=params),
    lambda params: paddle.optimizer.AdamW(learning_rate=0.01, parameters=[
        {"params": params[:2], "weight_decay": 0.1}, {"params": params[2:], "learning_rate": 0.5}]),
], ids=["momentum", "adam", "adamw-groups"])
def test_optimizer_state_loads_into_an_optimizer_built_later(make_optimizer):
    """Paddle names optimizer state after per-process counters; models built later get other names."""
    x, y = make_data(48)
    batches = batches_of(x, y, 8)

    straight = HARNESS.make_model(initial_weights())
    optimizer = make_optimizer(straight.parameters())
    HARNESS.hand_train(straight, optimizer, batches)

    first = HARNESS.make_model(initial_weights())
    optimizer = make_optimizer(first.parameters())
    HARNESS.hand_train(first, optimizer, batches[:3])
    saved_weights = first.state_dict()
    state = save_optimizer_state(optimizer)
    assert set(state["accumulators"]) and all(set(v) <= set(range(4)) for v in state["accumulators"].values())

    resumed = HARNESS.make_model(initial_weights(seed=4))  # built later: other generated parameter names
    resumed.set_state_dict(saved_weights)
    optimizer = make_optimizer(resumed.parameters())
    load_optimizer_state(optimizer, state)
    HARNESS.hand_train(resumed, optimizer, batches[3:])
    assert_weights_equal(HARNESS.get_weights(resumed), HARNESS.get_weights(straight))


def test_optimizer_state_of_other_parameters_is_a_clear_error():
    model = HARNESS.make_model(initial_weights())
    optimizer = paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=model.parameters())
    x, y = make_data(8)
    HARNESS.hand_train(model, optimizer, [(x, y)])
    state = save_optimizer_state(optimizer)
    fewer = paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=model.parameters()[:2])
    with pytest.raises(ValueError, match="covers 4 parameters but this optimizer has 2"):
        load_optimizer_state(fewer, state)
    plain = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
    with pytest.raises(ValueError, match="'velocity' for parameter.*does not keep"):
        load_optimizer_state(plain, state)
    with pytest.raises(ValueError, match="not written by fastcore_train"):
        load_optimizer_state(plain, optimizer.state_dict())


def test_lr_scheduler_state_travels_with_the_checkpoint(tmp_path):
    x, y = make_data(32)

    def trainer_for(n_epochs):
        model = HARNESS.make_model(initial_weights())
        optimizer = HARNESS.make_sgd(model, 0.2)
        scheduler = HARNESS.make_lr_scheduler(optimizer)
        return Trainer(model, HARNESS.make_dataloader(x, y, 8), optimizer, driver="paddle", n_epochs=n_epochs,
                       progress_bar=None, callbacks=[LRSchedCallback(scheduler)]), optimizer

    trainer, _ = trainer_for(1)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    resumed, optimizer = trainer_for(2)
    resumed.load_checkpoint(tmp_path / "ckpt")
    assert optimizer.get_lr() == pytest.approx(0.2 * 0.5 ** 2)
