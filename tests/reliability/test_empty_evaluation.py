"""Evaluating a dataloader with no batch gives no result for it (not 0.0), with a warning naming it;
monitors, top-k checkpoints and early stopping see "no value". Runs on every backend (``--backend``)."""
from __future__ import annotations

from fastcore_train import Accuracy, CheckpointCallback, EarlyStopCallback, Evaluator, LoadBestModelCallback, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data
from tests.reliability.conftest import messages


def loaders(harness, sizes):
    out = {}
    for name, size in sizes.items():
        x, y = make_data(max(size, 1), seed=3)
        out[name] = harness.make_dataloader(x[:size], y[:size], 4)
    return out


def test_an_empty_dataloader_has_no_result_and_a_warning_names_it(harness, log_records):
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, loaders(harness, {"dev": 8, "empty": 0}), metrics={"acc": Accuracy()},
                          driver=harness.driver_name, verbose=0, input_mapping={"y": "target"})
    results = evaluator.run()
    assert list(results) == ["acc#acc#dev"] and results.no_data == ("empty",)
    assert any("'empty' gave no batch" in line and "not reported as 0" in line for line in messages(log_records))
    assert not any("'dev'" in line for line in messages(log_records))


def test_a_single_empty_dataloader_gives_no_results(harness, log_records):
    model = harness.make_model(initial_weights())
    evaluator = Evaluator(model, loaders(harness, {"only": 0})["only"], metrics={"acc": Accuracy()},
                          driver=harness.driver_name, verbose=0, input_mapping={"y": "target"})
    results = evaluator.run()
    assert results == {} and results.no_data == (None,)
    assert any("The evaluate dataloader gave no batch" in line for line in messages(log_records))


def test_monitors_see_no_value_for_an_empty_dataloader(harness, tmp_path, log_records):
    x, y = make_data(16)
    model = harness.make_model(initial_weights())
    saver = CheckpointCallback(tmp_path, topk=2, monitor="acc#acc#empty")
    stopper = EarlyStopCallback(monitor="acc#acc#empty", patience=1)
    best = LoadBestModelCallback(monitor="acc#acc#empty")
    trainer = Trainer(model, harness.make_dataloader(x, y, 4), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=3, progress_bar=None,
                      evaluate_dataloaders=loaders(harness, {"dev": 8, "empty": 0}), metrics={"acc": Accuracy()},
                      evaluate_input_mapping={"y": "target"}, callbacks=[saver, stopper, best])
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.cur_epoch_idx == 3  # never stopped early on a 0.0 that was never measured
    assert "acc#acc#empty" not in trainer.evaluate_results and "acc#acc#dev" in trainer.evaluate_results
    assert saver.topk_saved == [] and not [p for p in tmp_path.rglob("*") if p.is_file()]  # no top-k save
    assert stopper.tracker.best is None and best.best_batches is None
    assert not best.save_folder.exists(), "the temporary folder goes even when nothing was kept in it"
    assert sum("'empty' gave no batch" in line for line in messages(log_records)) == 3
