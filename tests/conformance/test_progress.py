"""Progress displays on a real backend: what they show, and that refreshes are throttled."""
from __future__ import annotations

import re

import pytest

from fastcore_train import Accuracy, RawTextProgress, Trainer
from tests.conformance.harnesses.base import initial_weights, make_data


def run(harness, progress_bar, n_epochs=2):
    x, y = make_data(40, seed=4)
    model = harness.make_model(initial_weights())
    trainer = Trainer(model, harness.make_dataloader(x, y, 8), harness.make_sgd(model, 0.1),
                      driver=harness.driver_name, n_epochs=n_epochs, progress_bar=progress_bar,
                      evaluate_dataloaders=harness.make_dataloader(x, y, 20), metrics={"acc": Accuracy()},
                      evaluate_input_mapping={"y": "target"})
    trainer.run(num_eval_sanity_batch=0)
    return trainer


LINE = re.compile(r"^Epoch (\d)/2 \| batch (\d)/5 \| loss (\d+\.\d{4}) \| (\d+\.\d) batch/s \| ETA (\d\d:\d\d|--:--)$")


def test_raw_lines_show_epoch_batch_loss_throughput_eta_and_results(harness, capsys):
    run(harness, RawTextProgress(refresh_interval=0.0))
    lines = capsys.readouterr().out.splitlines()
    progress = [LINE.match(line) for line in lines if line.startswith("Epoch ")]
    assert all(progress) and len(progress) == 2 * 5 + 2  # every batch, plus one line per epoch end
    assert progress[-1].group(1, 2) == ("2", "5")
    assert sum(line.startswith("Evaluation results:") for line in lines) == 2
    assert any(line.strip().startswith("acc#acc") for line in lines)


def test_refreshes_are_throttled(harness, capsys):
    run(harness, RawTextProgress(refresh_interval=3600.0))
    progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Epoch ")]
    assert len(progress) == 2  # only the epoch ends: no batch was due a refresh


@pytest.mark.parametrize("style", ["rich", "tqdm"])
def test_bars_run_and_still_print_results(harness, capsys, style):
    pytest.importorskip(style)
    trainer = run(harness, style)
    captured = capsys.readouterr()
    assert trainer.global_forward_batches == 10
    assert "acc#acc" in captured.out + captured.err
