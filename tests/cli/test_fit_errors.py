"""A bad config gets one clear message naming the key and the file line (no framework needed:
the errors come before anything is built)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fastcore_train.cli.errors import ConfigError
from fastcore_train.cli.fit import parse

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits.yaml"
LINES = EXAMPLE.read_text().splitlines()


def broken(tmp_path: Path, old: str, new: str) -> tuple[Path, int]:
    """A copy of the example with ``old`` replaced by ``new``; the 1-based line it is on."""
    line = next(number for number, text in enumerate(LINES, 1) if old in text)
    path = tmp_path / "run.yaml"
    path.write_text("\n".join(text.replace(old, new) for text in LINES) + "\n")
    return path, line


@pytest.mark.parametrize("old, new, key, says", [
    ("n_epochs: 5", "n_epoch: 5", "trainer.n_epoch", "Did you mean trainer.n_epochs"),
    ("n_epochs: 5", "n_epochs: five", "trainer.n_epochs", "int"),
    ("hidden: 128", "hidden: lots", "model.init_args.hidden", "int"),
    ("digits_adam", "digits_adamx", "optimizer.class_path", "has no 'digits_adamx'"),
    ("fastcore_train.demo.config.digits_model", "no_such_package.Model", "model.class_path",
     "No module named 'no_such_package'"),
])
def test_a_bad_key_is_named_with_its_file_line(tmp_path, old, new, key, says):
    path, line = broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as caught:
        parse(["--config", str(path)])
    assert caught.value.key == key
    assert caught.value.where == f"{path} line {line}"
    assert says in str(caught.value)


def test_a_bad_command_line_value_says_so(tmp_path):
    with pytest.raises(ConfigError) as caught:
        parse(["--config", str(EXAMPLE), "--optimizer.init_args.lr", "abc"])
    assert (caught.value.key, caught.value.where) == ("optimizer.init_args.lr", "command line")
    with pytest.raises(ConfigError) as caught:
        parse(["--config", str(EXAMPLE), "--trainer.n_epoch", "3"])  # no prefix matching: a typo is an error
    assert caught.value.key == "trainer.n_epoch" and "trainer.n_epochs" in str(caught.value)


def test_a_config_without_a_model_says_what_to_write(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("trainer:\n  n_epochs: 1\n")
    with pytest.raises(ConfigError, match="names no model / data / optimizer"):
        parse(["--config", str(path)])


def test_the_command_prints_one_line_and_exits_2(tmp_path):
    path, line = broken(tmp_path, "n_epochs: 5", "n_epochs: five")
    completed = subprocess.run([sys.executable, "-m", "fastcore_train", "fit", "--config", str(path)],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"python -m fastcore_train fit: error: {path} line {line}: key 'trainer.n_epochs': Expected a <class 'int'>. "
        "Got value: five"]


def test_print_config_writes_the_resolved_config_and_stops(tmp_path):
    completed = subprocess.run([sys.executable, "-m", "fastcore_train", "fit", "--config", str(EXAMPLE),
                                "--trainer.n_epochs", "3", "--output_dir", str(tmp_path / "out"), "--print_config"],
                               capture_output=True, text=True, timeout=120, check=True)
    import yaml
    printed = yaml.safe_load(completed.stdout)
    assert printed["trainer"]["n_epochs"] == 3 and printed["trainer"]["accumulation_steps"] == 1
    assert printed["model"]["init_args"] == {"hidden": 128, "seed": 0}
    assert not (tmp_path / "out").exists()  # nothing was trained


def test_fit_help_lists_trainer_and_section_keys():
    completed = subprocess.run([sys.executable, "-m", "fastcore_train", "fit", "--config", str(EXAMPLE), "--help"],
                               capture_output=True, text=True, timeout=120, check=True)
    for option in ("--trainer.n_epochs", "--model.init_args.hidden", "--optimizer.init_args.lr", "--print_config",
                   "Epochs to train"):
        assert option in completed.stdout
