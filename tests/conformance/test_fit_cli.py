"""``fastcore-train fit --config``: a YAML run is the same run as the Python it stands for, with
this backend; command-line overrides win over the file; the saved config resumes the run."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from fastcore_train import Accuracy, Trainer
from fastcore_train.cli.errors import ConfigError
from fastcore_train.cli.fit import build_and_run, parse
from fastcore_train.demo.config import digits_adam, digits_dataloaders, digits_model
from fastcore_train.seeding import seed_everything

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits.yaml"


def weights(model) -> list[np.ndarray]:
    return [np.array(getattr(p, "detach", lambda: p)().numpy()) for p in model.parameters()]


def fit(driver: str, output: Path, *extra: str) -> Trainer:
    argv = ["--config", str(EXAMPLE), "--trainer.driver", driver, "--trainer.progress_bar", "null",
            "--trainer.model_summary", "false", "--output_dir", str(output), *extra]
    return build_and_run(*parse(argv))


def python_run(driver: str, n_epochs: int) -> Trainer:
    seed_everything(0)
    model = digits_model(driver, hidden=128, seed=0)
    data = digits_dataloaders(driver, batch_size=32, seed=0)
    optimizer = digits_adam(model, driver, lr=0.003)
    trainer = Trainer(model, data["train_dataloader"], optimizer, driver=driver, device="cpu", n_epochs=n_epochs,
                      evaluate_dataloaders=data["evaluate_dataloaders"], metrics={"acc": Accuracy()},
                      evaluate_every=-1, monitor="acc", progress_bar=None, model_summary=False)
    trainer.run(num_eval_sanity_batch=1)
    return trainer


def test_yaml_run_equals_the_same_run_in_python(harness, tmp_path):
    from_yaml = fit(harness.driver_name, tmp_path / "run", "--trainer.n_epochs", "2")
    by_hand = python_run(harness.driver_name, n_epochs=2)
    for got, expected in zip(weights(from_yaml.driver.unwrap_model()), weights(by_hand.driver.unwrap_model()),
                             strict=True):
        np.testing.assert_array_equal(got, expected)
    assert from_yaml.evaluate_results == by_hand.evaluate_results


def test_command_line_overrides_win_and_the_resolved_config_is_saved(harness, tmp_path):
    trainer = fit(harness.driver_name, tmp_path / "run", "--trainer.n_epochs", "1",
                  "--trainer.num_train_batch_per_epoch", "3", "--data.init_args.batch_size", "16")
    assert trainer.global_forward_batches == 3
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["trainer"]["n_epochs"] == 1 and saved["data"]["init_args"]["batch_size"] == 16
    assert saved["optimizer"]["init_args"]["lr"] == 0.003  # from the file, resolved
    assert saved["model"]["init_args"] == {"hidden": 128, "seed": 0}  # defaults filled in
    assert (tmp_path / "run" / "checkpoint").is_dir()


def test_the_saved_config_resumes_the_run_exactly(harness, tmp_path):
    run = tmp_path / "run"
    fit(harness.driver_name, run, "--trainer.n_epochs", "1")
    resumed = build_and_run(*parse(["--config", str(run / "config.yaml"), "--trainer.n_epochs", "2",
                                    "--trainer.resume_from", str(run / "checkpoint")]))
    straight = fit(harness.driver_name, tmp_path / "straight", "--trainer.n_epochs", "2")
    assert resumed.global_forward_batches == straight.global_forward_batches
    for got, expected in zip(weights(resumed.driver.unwrap_model()), weights(straight.driver.unwrap_model()),
                             strict=True):
        np.testing.assert_array_equal(got, expected)


def test_a_device_the_driver_refuses_is_a_config_error_naming_the_key(harness, tmp_path):
    argv = ["--config", str(EXAMPLE), "--trainer.driver", harness.driver_name, "--trainer.device", "gpu0",
            "--output_dir", str(tmp_path / "run")]
    with pytest.raises(ConfigError) as caught:
        build_and_run(*parse(argv), argv)
    assert (caught.value.key, caught.value.where) == ("trainer.device", "command line")
    assert str(caught.value).startswith("command line: key 'trainer.device': device='gpu0' ")
    assert "\n" not in str(caught.value) and not (tmp_path / "run").exists()


TARGETS = '''
import numpy as np
from fastcore_train.demo.config import digits_model

_MLP = type(digits_model({driver!r}, hidden=8))


class DigitsNet(_MLP):
    """The demo MLP with its sizes fixed: a model class without init arguments."""

    def __init__(self):
        super().__init__(64, 16, 10)


def accuracy(preds, labels):
    return {{"acc": float((np.asarray(preds).argmax(-1) == np.asarray(labels)).mean())}}
'''

CONFIG = '''
model:
  class_path: {module}.DigitsNet
data:
  class_path: fastcore_train.demo.config.digits_dataloaders
optimizer:
  class_path: fastcore_train.demo.config.digits_adam
metrics:
  by_function: {module}.accuracy
  by_class: {{class_path: fastcore_train.metrics.Accuracy}}
trainer:
  n_epochs: 1
  num_train_batch_per_epoch: 3
  num_eval_sanity_batch: 0
'''


def test_a_model_class_without_arguments_and_a_metric_function(harness, tmp_path, monkeypatch):
    module = f"fit_targets_{harness.driver_name}"
    (tmp_path / f"{module}.py").write_text(TARGETS.format(driver=harness.driver_name))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "run.yaml").write_text(CONFIG.format(module=module))
    trainer = build_and_run(*parse(["--config", str(tmp_path / "run.yaml"), "--trainer.driver", harness.driver_name,
                                    "--trainer.progress_bar", "null", "--output_dir", str(tmp_path / "run")]))
    results = trainer.evaluate_results
    by_function = [value for key, value in results.items() if key.startswith("acc#by_function")]
    by_class = [value for key, value in results.items() if key.startswith("acc#by_class")]
    assert by_function and by_function == pytest.approx(by_class, abs=1e-5)  # what Accuracy computes (rounded)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["model"] == {"class_path": f"{module}.DigitsNet"}
    assert saved["metrics"]["by_function"] == f"{module}.accuracy"
