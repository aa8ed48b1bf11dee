"""Which progress display ``progress_bar`` picks: by name, and for ``"auto"`` by whether stdout is a TTY."""
from __future__ import annotations

import io
import sys

import pytest

from fastcore_train.controllers.progress import (RawTextProgress, RichProgress, TqdmProgress,
                                               choose_progress_callback)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_rich_in_a_terminal_and_plain_lines_otherwise(monkeypatch):
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert isinstance(choose_progress_callback("auto", True), RichProgress)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert isinstance(choose_progress_callback("auto", True), RawTextProgress)


def test_names_pick_their_display_and_only_rank_zero_shows_one():
    assert isinstance(choose_progress_callback("rich", True), RichProgress)
    assert isinstance(choose_progress_callback("raw", True), RawTextProgress)
    assert choose_progress_callback(None, True) is None
    assert choose_progress_callback("raw", False) is None
    custom = RawTextProgress(refresh_interval=1.0)
    assert choose_progress_callback(custom, True) is custom
    assert choose_progress_callback(custom, False) is None


def test_tqdm_when_installed_and_a_clear_error_for_unknown_names():
    pytest.importorskip("tqdm")
    assert isinstance(choose_progress_callback("tqdm", True), TqdmProgress)
    with pytest.raises(ValueError, match="progress_bar must be one of"):
        choose_progress_callback("fancy", True)
