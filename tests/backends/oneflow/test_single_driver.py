"""OneFlow-specific behaviour of the single-process driver and the dataloader adaptation."""
from __future__ import annotations

import logging

import numpy as np
import oneflow as flow
import pytest
from oneflow.utils.data import BatchSampler, DataLoader, SequentialSampler

from fastcore_train import Trainer
from fastcore_train.backends.oneflow import OneflowSingleDriver, create_driver
from fastcore_train.backends.oneflow.dataloader import get_dataloader_args, replace_batch_sampler
from fastcore_train.samplers.adapt import make_reproducible_dataloader
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.harnesses.oneflow import ArrayDataset, Harness

HARNESS = Harness()


def test_auto_picks_oneflow_and_builds_a_single_driver():
    x, y = make_data(16)
    model = HARNESS.make_model(initial_weights())
    trainer = Trainer(model, HARNESS.make_dataloader(x, y, 8), HARNESS.make_sgd(model, 0.1), driver="auto",
                      progress_bar=None)
    assert isinstance(trainer.driver, OneflowSingleDriver) and trainer.driver.backend == "oneflow"


def test_fp16_on_cpu_warns_and_trains_in_float32(caplog):
    model = HARNESS.make_model(initial_weights())
    driver = create_driver("oneflow", model, device="cpu", fp16=True)
    with caplog.at_level(logging.WARNING, logger="fastcore_train"):
        driver.setup()
    assert "oneflow.autocast is disabled on CPU" in caplog.text
    assert driver.precision.scaler is None


@pytest.mark.parametrize("device, message", [("tpu", "not a oneflow device"), ("cuda:0", "needs CUDA"),
                                             (-3, "not a GPU index")])
def test_bad_devices_say_what_to_do(device, message):
    if device == "cuda:0" and flow.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match=message):
        create_driver("oneflow", HARNESS.make_model(initial_weights()), device=device)


def test_save_model_writes_a_folder_that_load_model_reads(tmp_path):
    model = HARNESS.make_model(initial_weights())
    driver = create_driver("oneflow", model)
    driver.setup()
    driver.io.save_model(tmp_path / "m.oneflow")
    assert (tmp_path / "m.oneflow").is_dir()
    other = create_driver("oneflow", HARNESS.make_model(initial_weights(seed=3)))
    other.io.load_model(tmp_path / "m.oneflow")
    x, _ = make_data(5)
    np.testing.assert_array_equal(HARNESS.predict(other.model, x), HARNESS.predict(model, x))
    with pytest.raises(FileNotFoundError, match="not a folder written by oneflow.save"):
        other.io.load_model(tmp_path / "missing")


def test_rng_state_round_trip_repeats_dropout_masks():
    """OneFlow 0.9's own get_state/set_state do not repeat dropout draws; the driver's state does."""
    flow.manual_seed(7)
    model = HARNESS.make_model(initial_weights(), dropout=0.5)
    driver = create_driver("oneflow", model)
    driver.setup()
    model.train()
    x = flow.from_numpy(make_data(8)[0])
    driver.backward(model(x).sum())
    state = driver.io.rng_state()
    assert isinstance(state["base"], int) and state["count"] == 1
    first = model(x).numpy()
    driver.io.load_rng_state(state)
    np.testing.assert_array_equal(model(x).numpy(), first)
    with pytest.raises(ValueError, match="not written by fastcore_train's oneflow driver"):
        driver.io.load_rng_state({"cpu": [1, 2, 3]})


def test_reproducible_dataloader_leaves_the_users_loader_untouched():
    x, y = make_data(20)
    user = DataLoader(ArrayDataset(x, y, with_index=True), batch_size=6, shuffle=True, drop_last=True)
    args = get_dataloader_args(user)
    assert args.sampler_kind == "random" and args.batch_size == 6 and args.drop_last and args.default_batching
    driver = create_driver("oneflow", HARNESS.make_model(initial_weights()))
    replaced = make_reproducible_dataloader(driver, user, seed=3, num_replicas=2, rank=1)
    assert type(replaced) is DataLoader and replaced is not user
    assert type(user.batch_sampler) is BatchSampler
    indices = [i for batch in replaced for i in HARNESS.indices_of(batch)]
    assert len(indices) == 6 and len(set(indices)) == 6  # this rank's half of 3 full batches


def test_a_custom_batch_sampler_is_replayed_and_a_subclass_without_batch_sampler_is_refused():
    x, y = make_data(10)
    custom = BatchSampler(SequentialSampler(range(10)), 4, False)
    loader = DataLoader(ArrayDataset(x, y), batch_sampler=custom)
    assert get_dataloader_args(loader).default_batching

    class Fixed(DataLoader):
        def __init__(self, dataset):
            super().__init__(dataset, batch_size=2)

    with pytest.raises(TypeError, match="takes no batch_sampler"):
        replace_batch_sampler(Fixed(ArrayDataset(x, y)), custom)


class FunctionalDropout(flow.nn.Module):
    """The harness MLP with ``flow.nn.functional.dropout`` in its forward (no module owns a generator)."""

    def __init__(self, inner: flow.nn.Module) -> None:
        super().__init__()
        self.fc1, self.fc2 = inner.fc1, inner.fc2

    def train_step(self, x, y):
        hidden = flow.nn.functional.dropout(flow.relu(self.fc1(x)), p=0.4, training=self.training)
        return {"loss": flow.nn.functional.cross_entropy(self.fc2(hidden), y)}


def _stop_and_resume(tmp_path, dropout: float, oneflow_kwargs: dict, wrap=lambda model: model) -> tuple[dict, dict, int]:
    """Losses and final weights of a straight run and of one stopped at batch 5 and resumed."""
    from fastcore_train import Event, seed_everything
    from tests.conformance.helpers import SaveAndStop, StopRun
    x, y = make_data(40, seed=4)
    results = []
    for stop in (None, 5):
        losses: dict = {}
        seed_everything(3)
        runs = [[SaveAndStop(stop, tmp_path / "ckpt")], []] if stop else [[]]
        for i, callbacks in enumerate(runs):
            model = wrap(HARNESS.make_model(initial_weights(), dropout=dropout))
            trainer = Trainer(model, HARNESS.make_dataloader(x, y, 8, shuffle=True), HARNESS.make_sgd(model, 0.2),
                              driver="oneflow", n_epochs=2, progress_bar=None, callbacks=callbacks,
                              oneflow_kwargs=oneflow_kwargs)
            trainer.add_callback_fn(Event.on_after_backward(), lambda t: losses.__setitem__(
                t.global_forward_batches, t.driver.data.to_numeric(t.last_loss)))
            try:
                trainer.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt" if i else None)
            except StopRun:
                pass
        results.append((losses, HARNESS.get_weights(model)))
    return results[0], results[1], flow.default_generator.initial_seed()


def test_reseed_on_load_skips_the_per_step_reseed_and_resumes_a_model_without_randomness_exactly(tmp_path):
    (straight_losses, straight), (losses, resumed), last_seed = _stop_and_resume(tmp_path, 0.0, {"reseed": "on_load"})
    assert losses == straight_losses
    for name in straight:
        np.testing.assert_array_equal(resumed[name], straight[name])
    # Only the load at resume reseeded (a per-step reseed would leave the seed of the last backward).
    driver = create_driver("oneflow", HARNESS.make_model(initial_weights()), oneflow_kwargs={"reseed": "on_load"})
    driver.setup()
    base = driver.reseeder().base
    driver.backward(HARNESS.make_model(initial_weights())(flow.from_numpy(make_data(4)[0])).sum())
    assert driver.reseeder().count == 1 and flow.default_generator.initial_seed() == base


def _reseeds_per_step(model, **kwargs) -> bool:
    """Whether the driver reseeded after the first backward (the seed then differs from the base)."""
    driver = create_driver("oneflow", model, **kwargs)
    driver.setup()
    base = driver.reseeder().base
    loss = model.train_step(*(flow.from_numpy(a) for a in make_data(8)))["loss"]
    driver.backward(loss)
    return flow.default_generator.initial_seed() != base


def test_reseed_auto_pays_the_per_step_reseed_only_for_a_model_that_draws(tmp_path):
    assert not _reseeds_per_step(HARNESS.make_model(initial_weights()))
    assert _reseeds_per_step(HARNESS.make_model(initial_weights(), dropout=0.3))  # an nn.Dropout
    assert not _reseeds_per_step(FunctionalDropout(HARNESS.make_model(initial_weights())))  # no module to see
    assert _reseeds_per_step(FunctionalDropout(HARNESS.make_model(initial_weights())),
                             oneflow_kwargs={"reseed": "every_backward"})


@pytest.mark.parametrize("dropout, wrap, options", [
    (0.0, lambda model: model, {}), (0.3, lambda model: model, {}),
    (0.0, FunctionalDropout, {"reseed": "every_backward"})], ids=["no-draws", "nn.Dropout", "functional"])
def test_reseed_auto_resumes_exactly(tmp_path, dropout, wrap, options):
    """The default for models without draws and with nn.Dropout; functional draws need every_backward."""
    (straight_losses, straight), (losses, resumed), _ = _stop_and_resume(tmp_path, dropout, options, wrap)
    assert losses == straight_losses
    for name in straight:
        np.testing.assert_array_equal(resumed[name], straight[name])


def test_reseed_option_is_checked_and_on_load_warns_for_a_model_with_dropout(caplog):
    with pytest.raises(ValueError, match="'auto'.*'every_backward'.*'on_load'"):
        create_driver("oneflow", HARNESS.make_model(initial_weights()), oneflow_kwargs={"reseed": "sometimes"})
    with caplog.at_level(logging.WARNING, logger="fastcore_train"):
        create_driver("oneflow", HARNESS.make_model(initial_weights(), dropout=0.3),
                      oneflow_kwargs={"reseed": "on_load"}).setup()
    assert "will not repeat their draws" in caplog.text and "dropout" in caplog.text
