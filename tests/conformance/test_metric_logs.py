"""CSV, TensorBoard and curve logs on a real backend: the files hold exactly the logged values,
read back with the readers users would use (csv, tensorboard's EventAccumulator, PIL)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from fastcore_train import (Accuracy, CSVLoggerCallback, CurvePlotCallback, Event, LRSchedCallback,
                            TensorBoardCallback, Trainer, seed_everything)
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.conformance.helpers import SaveAndStop, StopRun


def build(harness, callbacks, losses=None, evaluations=None, n_epochs=3, lrs=None):
    """Shuffled data, dropout and an LR schedule, evaluated every epoch; records what it logs."""
    x, y = make_data(60, seed=4)
    ex, ey = make_data(20, seed=5)
    model = harness.make_model(initial_weights(), dropout=0.3)
    optimizer = harness.make_sgd(model, 0.2, momentum=0.9)
    trainer = Trainer(model, harness.make_dataloader(x, y, 8, shuffle=True), optimizer,
                      driver=harness.driver_name, n_epochs=n_epochs, progress_bar=None,
                      evaluate_dataloaders=harness.make_dataloader(ex, ey, 10), metrics={"acc": Accuracy()},
                      evaluate_input_mapping={"y": "target"},
                      callbacks=[LRSchedCallback(harness.make_lr_scheduler(optimizer), step_on="batch"),
                                 *callbacks])
    if losses is not None:
        trainer.add_callback_fn(Event.on_train_batch_end(every=2), lambda t: losses.__setitem__(
            t.global_forward_batches, float(t.driver.data.to_numeric(t.last_loss))))
    if lrs is not None:
        trainer.add_callback_fn(Event.on_train_batch_end(every=2), lambda t: lrs.__setitem__(
            t.global_forward_batches, harness.lr_of(optimizer)))
    if evaluations is not None:
        trainer.add_callback_fn(Event.on_evaluate_end(), lambda t, results: evaluations.__setitem__(
            t.global_forward_batches, dict(results)))
    return trainer


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as table:
        return list(csv.DictReader(table))


def read_tensorboard(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_csv_tensorboard_and_curves_hold_the_logged_values(harness, tmp_path):
    csv_log = CSVLoggerCallback(tmp_path / "csv", log_every_n_batches=2)
    board = TensorBoardCallback(tmp_path / "tb", log_every_n_batches=2)
    curves = CurvePlotCallback(tmp_path / "png", log_every_n_batches=2)
    losses: dict[int, float] = {}
    lrs: dict[int, float] = {}
    evaluations: dict[int, dict] = {}
    seed_everything(3)
    build(harness, [csv_log, board, curves], losses, evaluations, lrs=lrs).run(num_eval_sanity_batch=0)
    assert sorted(losses) == list(range(2, 25, 2)) and sorted(evaluations) == [8, 16, 24]

    train_rows = read_csv(csv_log.table_path("train"))
    assert [int(row["step"]) for row in train_rows] == sorted(losses)
    assert [int(row["epoch"]) for row in train_rows] == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    np.testing.assert_array_equal([float(row["loss"]) for row in train_rows], [losses[s] for s in sorted(losses)])
    # the learning rate, read with the framework's own API, logged beside the loss (the schedule halves it)
    logged_lrs = [float(row["lr"]) for row in train_rows]
    np.testing.assert_allclose(logged_lrs, [lrs[s] for s in sorted(losses)], rtol=1e-6)
    assert logged_lrs[0] > logged_lrs[-1] > 0
    evaluate_rows = read_csv(csv_log.table_path("evaluate"))
    assert [(int(row["step"]), int(row["epoch"])) for row in evaluate_rows] == [(8, 1), (16, 2), (24, 3)]
    assert [float(row["acc#acc"]) for row in evaluate_rows] == [evaluations[s]["acc#acc"] for s in (8, 16, 24)]

    scalars = read_tensorboard(board.run_folder)
    assert sorted(scalars) == ["evaluate/acc_acc", "train/loss", "train/lr"]
    assert [step for step, _ in scalars["train/loss"]] == sorted(losses)
    np.testing.assert_allclose([value for _, value in scalars["train/loss"]], [losses[s] for s in sorted(losses)],
                               rtol=1e-6)  # TensorBoard stores float32
    np.testing.assert_allclose([value for _, value in scalars["train/lr"]], logged_lrs, rtol=1e-6)
    np.testing.assert_allclose([value for _, value in scalars["evaluate/acc_acc"]],
                               [evaluations[s]["acc#acc"] for s in (8, 16, 24)], rtol=1e-6)

    from PIL import Image
    assert curves.path == curves.run_folder / "curves.png"
    assert curves.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(curves.path) as image:
        image.verify()
    with Image.open(curves.path) as image:
        assert image.format == "PNG" and image.size[0] > 300 and image.size[1] > 200
    assert curves.history[("train", "loss")] == (sorted(losses), [losses[s] for s in sorted(losses)])


def test_logs_of_a_resumed_run_equal_those_of_an_uninterrupted_one(harness, tmp_path):
    seed_everything(11)
    straight_csv = CSVLoggerCallback(tmp_path / "straight", log_every_n_batches=1, run_subfolder=False)
    build(harness, [straight_csv]).run(num_eval_sanity_batch=0)

    # Interrupted at batch 13 with a checkpoint taken at batch 10: the rows of batches 11-13 are
    # dropped on resume and written again by the resumed run.
    seed_everything(11)
    csv_log = CSVLoggerCallback(tmp_path / "csv", log_every_n_batches=1)
    board = TensorBoardCallback(tmp_path / "tb", log_every_n_batches=1)
    curves = CurvePlotCallback(tmp_path / "png", log_every_n_batches=1)
    trainer = build(harness, [csv_log, board, curves, SaveAndStop(10, tmp_path / "ckpt")])
    with pytest.raises(StopRun):
        trainer.run(num_eval_sanity_batch=0)
    first_folders = (csv_log.run_folder, board.run_folder, curves.run_folder)
    trainer = build(harness, [csv_log, board, curves, SaveAndStop(13, tmp_path / "later")])
    with pytest.raises(StopRun):
        trainer.run(num_eval_sanity_batch=0, resume_from=tmp_path / "ckpt")

    resumed_csv = CSVLoggerCallback(tmp_path / "csv", log_every_n_batches=1)
    resumed_board = TensorBoardCallback(tmp_path / "tb", log_every_n_batches=1)
    resumed_curves = CurvePlotCallback(tmp_path / "png", log_every_n_batches=1)
    build(harness, [resumed_csv, resumed_board, resumed_curves]).run(num_eval_sanity_batch=0,
                                                                     resume_from=tmp_path / "ckpt")
    assert (resumed_csv.run_folder, resumed_board.run_folder, resumed_curves.run_folder) == first_folders
    assert len(list((tmp_path / "csv").iterdir())) == 1

    for kind in ("train", "evaluate"):
        assert read_csv(resumed_csv.table_path(kind)) == read_csv(straight_csv.table_path(kind)), kind
    straight_losses = [float(row["loss"]) for row in read_csv(straight_csv.table_path("train"))]
    scalars = read_tensorboard(resumed_board.run_folder)
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, 25))
    np.testing.assert_allclose([value for _, value in scalars["train/loss"]], straight_losses, rtol=1e-6)
    assert resumed_curves.history[("train", "loss")] == (list(range(1, 25)), straight_losses)


def test_metric_logs_validate_their_arguments(tmp_path):
    with pytest.raises(ValueError, match="log_every_n_batches"):
        CSVLoggerCallback(tmp_path, log_every_n_batches=-1)


def test_curves_default_to_the_checkpoint_folder(harness, tmp_path, monkeypatch):
    from fastcore_train import CheckpointCallback
    monkeypatch.chdir(tmp_path)
    saver = CheckpointCallback(tmp_path / "ckpt", last=True)
    curves = CurvePlotCallback(log_every_n_batches=4)
    build(harness, [curves, saver], n_epochs=1).run(num_eval_sanity_batch=0)
    assert curves.path == saver.run_folder / "curves.png" and curves.path.is_file()
    assert not (tmp_path / "logs").exists()


def test_the_logs_and_checkpoints_of_one_run_share_one_run_folder(harness, tmp_path, monkeypatch):
    from fastcore_train import CheckpointCallback
    monkeypatch.chdir(tmp_path)
    csv_log = CSVLoggerCallback("logs", log_every_n_batches=4)
    board = TensorBoardCallback("logs", log_every_n_batches=4)
    curves = CurvePlotCallback(log_every_n_batches=4)
    saver = CheckpointCallback("checkpoints", last=True)
    build(harness, [csv_log, board, curves, saver], n_epochs=1).run(num_eval_sanity_batch=0)
    run = saver.run_folder.name
    assert [p.name for p in (tmp_path / "logs").iterdir()] == [run]
    files = {p.name for p in (tmp_path / "logs" / run).iterdir()}
    assert {"train_metrics.csv", "evaluate_metrics.csv"} <= files
    assert any(name.startswith("events.out.tfevents") for name in files)
    assert curves.path == Path("checkpoints", run, "curves.png") and curves.path.is_file()

    # The next Trainer is another run: a new folder name, again shared by its callbacks.
    later_csv, later_board = CSVLoggerCallback("logs"), TensorBoardCallback("logs")
    build(harness, [later_csv, later_board], n_epochs=1).run(num_eval_sanity_batch=0)
    assert later_csv.run_folder == later_board.run_folder != csv_log.run_folder
