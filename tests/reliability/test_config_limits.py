"""``fastcore-train fit --config`` reads YAML within limits: an alias bomb (9 levels of 9 aliases), a
recursive alias, deep nesting or a huge file is refused in one line naming the file, at once and in
little memory, before anything is imported or built. Framework-free (the core env)."""
from __future__ import annotations

import resource
import time

import pytest

from fastcore_train.cli.fit import main_fit


def bomb(levels: int = 9, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "\n".join(lines) + "\nmodel: {class_path: torch.nn.Linear, init_args: {in_features: *l8}}\n"


CASES = {
    "alias bomb": (bomb(), "its aliases expand it to more than 1,000,000 values"),
    "recursive alias": ("a: &a [1, *a]\n", "recursive alias|refers to a value that contains it"),
    "deep nesting": ("a: " + "[" * 200 + "]" * 200 + "\n", "nest"),
    "huge file": ("# " + "x" * (11 * 1024 * 1024) + "\n", "the file has 11,534,339 bytes"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_config_over_the_limits_is_refused_in_one_line(tmp_path, capsys, case):
    text, expected = CASES[case]
    path = tmp_path / "run.yaml"
    path.write_text(text)
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    assert main_fit(["--config", str(path)]) == 2
    assert time.monotonic() - started < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - max_rss < 300 * 1024  # KiB: no expansion
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err, err
    assert __import__("re").search(expected, err), err


def test_aliases_within_the_limits_still_work(tmp_path, capsys):
    from fastcore_train.cli.yaml_limits import check_yaml_limits

    check_yaml_limits("base: &b {lr: 0.1}\noptimizer: {init_args: *b}\nother: *b\n", tmp_path / "ok.yaml")
    check_yaml_limits(bomb(levels=4), tmp_path / "ok.yaml")  # 9^4 values: fine
