"""fastNLP 0.x's ``DistTrainer`` on every backend whose dataloader can be built from a dataset:
one test per group of its parameters, each against our Trainer doing the same run by hand.
The 2-rank run under ``torch.distributed.launch`` is tests/distributed/test_dist_trainer.py."""
from __future__ import annotations

import os
import sys

import pytest

from fastcore_train import Accuracy, Callback, DistTrainer, RawTextProgress, Trainer
from fastcore_train.compat.fastnlp0 import get_local_rank, nested_results
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import assert_weights_close, assert_weights_equal

EVALUATE = {"evaluate_input_mapping": {"y": "target"}}


@pytest.fixture
def data(harness, backend_name):
    if backend_name == "jittor":
        pytest.skip("a jittor Dataset is its own loader: DistTrainer builds torch, paddle and oneflow dataloaders")
    x, y = make_data(36)
    dev_x, dev_y = make_data(20, seed=2)
    return harness.make_dataloader(x, y, 4).dataset, harness.make_dataloader(dev_x, dev_y, 4).dataset


def dist_trainer(harness, train_data, lr=0.1, **kwargs):
    model = harness.make_model(initial_weights())
    kwargs.setdefault("num_workers", 0)
    kwargs.setdefault("use_tqdm", False)
    return DistTrainer(train_data, model, harness.make_sgd(model, lr), device="cpu", **kwargs)


class Snapshots(Callback):
    """Every evaluation's results and the weights it saw."""

    def __init__(self, harness, name: str = "snapshots") -> None:
        self.harness = harness
        self.name = name
        self.seen: list[tuple[int, dict, dict]] = []

    @property
    def callback_name(self) -> str:
        return self.name

    def on_evaluate_end(self, trainer, results):
        self.seen.append((trainer.global_forward_batches, dict(results),
                          self.harness.get_weights(trainer.driver.unwrap_model())))


def test_data_and_steps_train_as_the_trainer_does(harness, data):
    """train_data, batch_size_per_gpu, drop_last, n_epochs, update_every: the same weights as
    our Trainer on a shuffled dataloader of that batch size with accumulation_steps."""
    train_data, _ = data
    ours = dist_trainer(harness, train_data, batch_size_per_gpu=5, drop_last=True, n_epochs=2, update_every=2)
    output = ours.train()
    assert set(output) == {"seconds"} and output["seconds"] >= 0
    model = harness.make_model(initial_weights())
    dataloader_class = type(harness.make_dataloader(*make_data(4), 4))
    reference = Trainer(model, dataloader_class(train_data, batch_size=5, shuffle=True, drop_last=True),
                        harness.make_sgd(model, 0.1), driver=harness.driver_name, device="cpu", n_epochs=2,
                        accumulation_steps=2, progress_bar=None)
    reference.run()
    assert ours.trainer.global_forward_batches == 2 * (36 // 5)
    assert_weights_equal(harness.get_weights(ours.model), harness.get_weights(model))


def test_a_loss_function_gets_outputs_and_batch_by_name(harness, data):
    """loss=fn: its parameters come from the model's output dict and the batch; None reads 'loss'."""
    train_data, _ = data
    seen = {}

    def half(loss, y):
        seen["batch"] = len(y)
        return loss * 0.5

    with_fn = dist_trainer(harness, train_data, lr=0.2, loss=half, batch_size_per_gpu=6)
    with_fn.train()
    in_forward = dist_trainer(harness, train_data, lr=0.1, batch_size_per_gpu=6)
    in_forward.train()
    assert seen["batch"] == 6
    assert_weights_close(harness.get_weights(with_fn.model), harness.get_weights(in_forward.model))


def test_a_loss_function_needs_a_dict_from_the_model(harness, data):
    train_data, _ = data
    trainer = dist_trainer(harness, train_data, loss=lambda loss: loss, output_mapping=lambda outputs: [outputs])
    with pytest.raises(TypeError, match="must return a dict"):
        trainer.train()


@pytest.mark.parametrize("metric_key, best", [("acc", max), ("-acc", min), (None, max)])
def test_evaluation_returns_the_best_as_0x_did(harness, data, metric_key, best):
    """dev_data, metrics, metric_key (with '-'), validate_every: best_eval, best_epoch, best_step."""
    train_data, dev_data = data
    snapshots = Snapshots(harness)
    ours = dist_trainer(harness, train_data, lr=0.3, batch_size_per_gpu=4, n_epochs=3, dev_data=dev_data,
                        metrics=[Accuracy()], metric_key=metric_key, validate_every=4, callbacks_all=[snapshots],
                        **EVALUATE)
    output = ours.train()
    steps = [step for step, _, _ in snapshots.seen]
    assert steps == list(range(4, 28, 4)) and len(set(r["acc#Accuracy"] for _, r, _ in snapshots.seen)) > 1
    values = [results["acc#Accuracy"] for _, results, _ in snapshots.seen]
    first_best = values.index(best(values))
    assert set(output) == {"seconds", "best_eval", "best_epoch", "best_step"}
    assert output["best_eval"] == {"Accuracy": {"acc": values[first_best]}}
    assert output["best_step"] == steps[first_best]
    assert output["best_epoch"] == (steps[first_best] - 1) // 9 + 1


def test_validate_every_minus_one_evaluates_each_epoch(harness, data):
    train_data, dev_data = data
    snapshots = Snapshots(harness)
    dist_trainer(harness, train_data, batch_size_per_gpu=4, n_epochs=2, dev_data=dev_data, metrics=Accuracy(),
                 callbacks_all=[snapshots], **EVALUATE).train()
    assert [step for step, _, _ in snapshots.seen] == [9, 18]


def test_save_path_keeps_the_best_model_and_train_loads_it(harness, data, tmp_path):
    train_data, dev_data = data
    snapshots = Snapshots(harness)
    ours = dist_trainer(harness, train_data, lr=0.3, batch_size_per_gpu=4, n_epochs=3, dev_data=dev_data,
                        metrics={"accuracy": Accuracy()}, metric_key="-acc", validate_every=4,
                        save_path=tmp_path, callbacks_all=[snapshots], **EVALUATE)
    output = ours.train()
    assert (tmp_path / f"best_{type(ours.model).__name__}_-acc").is_dir()
    at_best = next(weights for step, _, weights in snapshots.seen if step == output["best_step"])
    assert output["best_step"] != snapshots.seen[-1][0]  # the last weights are not the best ones here
    assert_weights_equal(harness.get_weights(ours.model), at_best)


def test_without_load_best_model_the_last_weights_stay(harness, data, tmp_path):
    train_data, dev_data = data
    arguments = dict(lr=0.3, batch_size_per_gpu=4, n_epochs=3, dev_data=dev_data, metrics=Accuracy(), metric_key="-acc",
                     validate_every=4, **EVALUATE)
    saving = dist_trainer(harness, train_data, save_path=tmp_path, **arguments)
    saving.train(load_best_model=False)
    not_saving = dist_trainer(harness, train_data, **arguments)
    not_saving.train()
    assert (tmp_path / f"best_{type(saving.model).__name__}_-acc").is_dir()
    assert_weights_equal(harness.get_weights(saving.model), harness.get_weights(not_saving.model))


def test_callbacks_all_and_master_run_on_rank_zero(harness, data):
    train_data, _ = data
    every, master = Snapshots(harness, "all"), Snapshots(harness, "master")
    ours = dist_trainer(harness, train_data, callbacks_all=[every], callbacks_master=[master])
    assert every in ours.trainer.callback_manager.callbacks and master in ours.trainer.callback_manager.callbacks


def test_progress_follows_use_tqdm_and_print_every(harness, data):
    train_data, _ = data
    ours = dist_trainer(harness, train_data, use_tqdm=False, print_every=3)
    progress = [cb for cb in ours.trainer.callback_manager.callbacks if isinstance(cb, RawTextProgress)]
    assert len(progress) == 1 and progress[0].every_n_batches == 3


@pytest.mark.parametrize("fp16, on", [("", False), ("O0", False), ("O1", True), ("O2", True)])
def test_fp16_opt_levels_mean_mixed_precision(fp16, on):
    from fastcore_train.compat.fastnlp0 import _fp16
    assert _fp16(fp16) is on


@pytest.mark.parametrize("bad, message", [({"fp16": "O4"}, "opt level"), ({"metric_key": "-"}, "metric_key"),
                                          ({"device": "gpu"}, "device must be"), ({"optimizer": None}, "lr=4e-3")])
def test_bad_values_say_what_to_pass(harness, data, bad, message):
    train_data, _ = data
    model = harness.make_model(initial_weights())
    arguments = {"optimizer": harness.make_sgd(model, 0.1), "dev_data": data[1], "metrics": Accuracy(),
                 "num_workers": 0, **bad}
    with pytest.raises(ValueError, match=message):
        DistTrainer(train_data, model, **arguments)


def test_local_rank_comes_from_the_launchers_argument(monkeypatch):
    """torch.distributed.launch without --use-env passes --local_rank=N (newer torch: --local-rank)."""
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(sys, "argv", ["train.py", "--local-rank=1", "--lr", "3"])
    assert get_local_rank() == 1 and os.environ["LOCAL_RANK"] == "1"
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.setattr(sys, "argv", ["train.py"])
    assert get_local_rank() is None


def test_nested_results_are_keyed_by_metric_then_key():
    assert nested_results({"acc#Accuracy": 0.5, "f#F1": 0.2, "pre#F1": 0.1, "loss": 1.0}) == {
        "Accuracy": {"acc": 0.5}, "F1": {"f": 0.2, "pre": 0.1}, "loss": {"loss": 1.0}}
