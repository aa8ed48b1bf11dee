"""``output_from_new_proc`` applied by a worker to itself (ranks started by mpirun)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fastcore_train.parallel.launch import check_output_choice

SCRIPT = textwrap.dedent("""
    import sys
    from fastcore_train.parallel.launch import redirect_own_output
    redirect_own_output(sys.argv[1], int(sys.argv[2]))
    print("to stdout", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
""")


def run(choice: str, rank: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, choice, str(rank)], capture_output=True, text=True,
                          check=True)


@pytest.mark.parametrize("choice, stdout, stderr", [("all", True, True), ("ignore", False, False),
                                                    ("only_error", False, True)])
def test_worker_output_follows_the_choice(choice, stdout, stderr):
    done = run(choice, 1)
    assert ("to stdout" in done.stdout, "to stderr" in done.stderr) == (stdout, stderr)


def test_rank_zero_keeps_the_terminal():
    done = run("ignore", 0)
    assert "to stdout" in done.stdout and "to stderr" in done.stderr


def test_a_folder_gets_one_log_per_rank(tmp_path):
    done = run(str(tmp_path / "logs"), 2)
    assert done.stdout == "" and done.stderr == ""
    assert (tmp_path / "logs" / "rank_2.log").read_text().split() == ["to", "stdout", "to", "stderr"]


@pytest.mark.parametrize("bad", [None, "", 3])
def test_bad_choices_are_explained(bad):
    with pytest.raises(ValueError, match="output_from_new_proc must be one of"):
        check_output_choice(bad)
