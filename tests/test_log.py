"""The rank-aware package logger: levels per rank, rank in every line, per-rank log files."""
from __future__ import annotations

import logging

import pytest

from fastcore_train import log


@pytest.fixture(autouse=True)
def restore_logger(monkeypatch):
    monkeypatch.delenv(log.LEVEL_ENV, raising=False)
    monkeypatch.delenv(log.ALL_RANKS_ENV, raising=False)
    saved = (log._RankState.rank, log._RankState.world_size, log._RankState.all_ranks,
             log._RankState.level_set_by_user, log.logger.level)
    yield
    monkeypatch.delenv(log.LEVEL_ENV, raising=False)
    log.remove_log_files()
    (log._RankState.rank, log._RankState.world_size, log._RankState.all_ranks,
     log._RankState.level_set_by_user, level) = saved
    log.logger.setLevel(level)
    log.set_rank(saved[0], saved[1])


def test_rank_zero_logs_info_and_other_ranks_warnings_only():
    log.set_rank(0, 2)
    assert log.logger.getEffectiveLevel() == logging.INFO
    log.set_rank(1, 2)
    assert log.logger.getEffectiveLevel() == logging.WARNING
    log.set_rank(1, 2, all_ranks=True)
    assert log.logger.getEffectiveLevel() == logging.INFO


def test_environment_sets_the_level_and_bad_values_are_explained(monkeypatch):
    monkeypatch.setenv(log.LEVEL_ENV, "debug")
    log.set_rank(1, 2)
    assert log.logger.getEffectiveLevel() == logging.DEBUG
    monkeypatch.setenv(log.LEVEL_ENV, "loud")
    with pytest.raises(ValueError, match="not a logging level"):
        log.set_rank(0, 1)


def test_log_files_are_per_rank_and_lines_name_the_rank(tmp_path):
    log.set_rank(0, 2)
    written = log.add_log_file(tmp_path / "run.log")
    assert log.add_log_file(tmp_path / "run.log") == written  # added once
    log.logger.info("hello from zero")
    # A file added before the rank is known moves to the rank's own file once it is.
    log.set_rank(1, 2)
    log.logger.info("info from one")
    log.logger.warning("warning from one")
    log.remove_log_files()
    assert "INFO rank 0 fastcore_train] hello from zero" in (tmp_path / "run.log").read_text()
    rank1 = (tmp_path / "run.rank1.log").read_text()
    assert "WARNING rank 1 fastcore_train] warning from one" in rank1 and "info from one" not in rank1
    assert log.log_file_for_rank(tmp_path / "plain", 3).name == "plain.rank3.log"


def test_set_log_level_wins_over_the_rank_default():
    log.set_log_level("ERROR")
    log.set_rank(0, 1)
    assert log.logger.getEffectiveLevel() == logging.ERROR
    with pytest.raises(ValueError, match="not a logging level"):
        log.set_log_level("chatty")


def test_a_log_file_exists_as_soon_as_it_is_added_and_a_wrong_guess_leaves_nothing(tmp_path):
    log.set_rank(0, 1)
    written = log.add_log_file(tmp_path / "logs" / "train.log")
    assert written.is_file() and written.read_text() == ""
    # Added while the process still looked like rank 0; it turns out to be rank 1 and logged nothing.
    log.set_rank(1, 2)
    assert not written.exists() and (tmp_path / "logs" / "train.rank1.log").is_file()
    # A file that was there before is never removed.
    log.remove_log_files()
    log.set_rank(0, 1)
    (tmp_path / "kept.log").write_text("")
    log.add_log_file(tmp_path / "kept.log")
    log.set_rank(1, 2)
    assert (tmp_path / "kept.log").is_file()
