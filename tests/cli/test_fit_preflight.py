"""``fit`` refuses what would fail (or destroy a file) before anything is built: one line naming the
key and where it was set, exit status 2, nothing written. No framework needed: these checks come
before the model is built."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fastcore_train.cli.fit import main_fit
from fastcore_train.cli.resolved_config import config_target_problem, render, write_config, written_by_fit
from tests.cli.test_fit_errors import EXAMPLE
from tests.cli.test_fit_errors import broken as example_with

ROOT = Path(__file__).resolve().parents[2]


def run_fit(capsys, *argv: str) -> tuple[int, list[str]]:
    """``main_fit(argv)``: the exit status and the lines it wrote to stderr."""
    status = main_fit(list(argv), prog="fastcore-train fit")
    return status, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("option, value, says", [
    ("n_epochs", "-3", "n_epochs must be a positive int (or 0), got -3."),
    ("collective_timeout", "-1", "collective_timeout must be a positive number of seconds"),
    ("report_to", "[tensorbord]", "report_to names unknown reporter(s) ['tensorbord']; known: csv, tensorboard"),
    ("accumulation_steps", "0", "accumulation_steps must be a positive int, got 0."),
    ("num_eval_sanity_batch", "-2", "num_eval_sanity_batch must be an int >= 0"),
])
def test_a_value_the_trainer_refuses_is_one_line_on_the_command_line(capsys, tmp_path, option, value, says):
    out = tmp_path / "out"
    status, lines = run_fit(capsys, "--config", str(EXAMPLE), "--output_dir", str(out), f"--trainer.{option}", value)
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith(f"fastcore-train fit: error: command line: key 'trainer.{option}': {says}")
    assert not out.exists()  # refused before anything was built or written


def test_a_value_the_trainer_refuses_names_its_file_line(capsys, tmp_path):
    path, line = example_with(tmp_path, "n_epochs: 5", "n_epochs: -3")
    status, lines = run_fit(capsys, "--config", str(path), "--output_dir", str(tmp_path / "out"))
    assert status == 2
    assert lines == [f"fastcore-train fit: error: {path} line {line}: key 'trainer.n_epochs': "
                     "n_epochs must be a positive int (or 0), got -3."]


def test_resume_from_a_missing_folder_is_one_line(capsys, tmp_path):
    missing = tmp_path / "no_such_checkpoint"
    status, lines = run_fit(capsys, "--config", str(EXAMPLE), "--output_dir", str(tmp_path / "out"),
                            "--trainer.resume_from", str(missing))
    assert status == 2
    assert lines == [f"fastcore-train fit: error: command line: key 'trainer.resume_from': no checkpoint folder at "
                     f"'{missing}': pass the folder fit saved (<output_dir>/checkpoint) or one written by "
                     "save_checkpoint or CheckpointCallback."]
    (tmp_path / "not_a_checkpoint").mkdir()
    status, lines = run_fit(capsys, "--config", str(EXAMPLE), "--output_dir", str(tmp_path / "out"),
                            "--trainer.resume_from", str(tmp_path / "not_a_checkpoint"))
    assert status == 2 and len(lines) == 1 and "is not a fastcore_train checkpoint (it has no meta.json)" in lines[0]


def test_the_command_exits_2_with_one_line_for_a_refused_value(tmp_path):
    completed = subprocess.run([sys.executable, "-m", "fastcore_train", "fit", "--config", str(EXAMPLE),
                                "--output_dir", str(tmp_path / "out"), "--trainer.collective_timeout", "-1"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "python -m fastcore_train fit: error: command line: key 'trainer.collective_timeout': collective_timeout "
        "must be a positive number of seconds (default 600), got -1.0."]


def test_the_users_config_in_output_dir_is_never_overwritten(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp1").mkdir()
    mine = "# my experiment: hidden 128, 5 epochs\n" + EXAMPLE.read_text()
    (tmp_path / "exp1" / "config.yaml").write_text(mine)
    status, lines = run_fit(capsys, "--config", "exp1/config.yaml", "--output_dir", "exp1")
    assert status == 2
    assert lines == ["fastcore-train fit: error: command line: key 'output_dir': fit writes the resolved config to "
                     "'exp1/config.yaml', which is your --config file 'exp1/config.yaml'; fit never replaces a file "
                     "it did not write, so nothing was trained. Pass another --output_dir (or move that file)."]
    assert (tmp_path / "exp1" / "config.yaml").read_text() == mine
    assert sorted(path.name for path in (tmp_path / "exp1").iterdir()) == ["config.yaml"]


def test_output_dir_set_in_the_file_is_named_with_its_line(capsys, tmp_path):
    path, line = example_with(tmp_path, "output_dir: fastcore_runs/digits", f"output_dir: {tmp_path}")
    status, lines = run_fit(capsys, "--config", str(path.rename(tmp_path / "config.yaml")))
    assert status == 2
    assert lines[0].startswith(f"fastcore-train fit: error: {tmp_path / 'config.yaml'} line {line}: key 'output_dir': "
                               f"fit writes the resolved config to '{tmp_path / 'config.yaml'}', which is your "
                               "--config file")


def test_only_an_unchanged_resolved_config_of_ours_may_be_replaced(tmp_path):
    target = tmp_path / "config.yaml"
    assert config_target_problem(target, []) is None  # nothing there
    write_config(target, "trainer:\n  n_epochs: 1\n")
    assert target.read_text() == render("trainer:\n  n_epochs: 1\n") and written_by_fit(target)
    assert config_target_problem(target, [target]) is None  # ours: the resume command reads it, then rewrites it
    target.write_text(target.read_text().replace("n_epochs: 1", "n_epochs: 2  # more"))
    assert not written_by_fit(target)
    assert "a file fit did not write (or one it wrote, edited since)" in config_target_problem(target, [])
    target.unlink()
    target.mkdir()
    assert "which is a folder" in config_target_problem(target, [])


def test_a_checkpoint_folder_holding_user_files_is_refused_before_training(capsys, tmp_path):
    out = tmp_path / "out"
    (out / "checkpoint").mkdir(parents=True)
    (out / "checkpoint" / "notes.txt").write_text("mine")
    status, lines = run_fit(capsys, "--config", str(EXAMPLE), "--output_dir", str(out))
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith(f"fastcore-train fit: error: command line: key 'output_dir': fit saves the trained "
                               f"model to '{out / 'checkpoint'}' when training ends, and cannot: ")
    assert "already holds files and is not a fastcore_train checkpoint" in lines[0]
    assert lines[0].endswith("Or pass --save_checkpoint false. Nothing was trained.")
    assert sorted(path.name for path in out.rglob("*")) == ["checkpoint", "notes.txt"]  # no config.yaml written


HIDE = """
import sys
hidden = set(sys.argv[1].split(","))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
from fastcore_train.__main__ import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("hidden", ["yaml", "jsonargparse", "yaml,jsonargparse"])
def test_without_the_cli_extra_fit_says_what_to_install(tmp_path, hidden):
    completed = subprocess.run([sys.executable, "-c", HIDE, hidden, "fit", "--config", str(EXAMPLE),
                                "--output_dir", str(tmp_path / "out")],
                               capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert completed.returncode == 2
    first = next(name for name in ("jsonargparse", "yaml") if name in hidden.split(","))
    assert completed.stderr.strip().splitlines() == [
        f'fastcore-train fit: error: fit needs the cli extra: pip install "fastcore-train[cli]" ({first} is not '
        "installed)"]


LOCAL_MODULE = '''
def make_model(width: int = 4):
    return {"width": width}
'''


def test_the_console_script_imports_modules_of_the_current_folder(tmp_path):
    script = Path(sys.executable).with_name("fastcore-train")
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable} (fastcore-train is not installed there)")
    (tmp_path / "localmod.py").write_text(LOCAL_MODULE)
    path, _ = example_with(tmp_path, "fastcore_train.demo.config.digits_model", "localmod.make_model")
    path.write_text(path.read_text().replace("    hidden: 128", "    width: 8"))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    for command in ([str(script)], [sys.executable, "-m", "fastcore_train"]):
        completed = subprocess.run([*command, "fit", "--config", path.name, "--print_config"], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        assert "class_path: localmod.make_model" in completed.stdout and "width: 8" in completed.stdout
