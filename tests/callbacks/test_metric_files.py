"""The framework-free parts of the metric logs: CSV tables, numeric filtering, the curve image."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from fastcore_train.callbacks.csv_logger import _CSVTable
from fastcore_train.callbacks.metric_log import numeric_values
from fastcore_train.callbacks.tensorboard_logger import tag_for


def rows(path):
    with path.open(newline="") as table:
        return list(csv.DictReader(table))


def test_a_new_result_name_widens_the_table_and_keeps_earlier_rows(tmp_path):
    table = _CSVTable(tmp_path / "t.csv")
    table.open(None)
    table.write({"step": 1, "epoch": 1, "acc": 0.5})
    table.write({"step": 2, "epoch": 1, "acc": 0.6, "f1": 0.7})
    table.close()
    assert rows(tmp_path / "t.csv") == [{"step": "1", "epoch": "1", "acc": "0.5", "f1": ""},
                                        {"step": "2", "epoch": "1", "acc": "0.6", "f1": "0.7"}]


def test_resuming_drops_rows_after_the_checkpoint_and_a_fresh_start_replaces_the_file(tmp_path):
    table = _CSVTable(tmp_path / "t.csv")
    table.open(None)
    for step in range(1, 6):
        table.write({"step": step, "epoch": 1, "loss": step / 10})
    table.close()
    resumed = _CSVTable(tmp_path / "t.csv")
    resumed.open(keep_until_step=3)
    resumed.write({"step": 4, "epoch": 1, "loss": 9.0})
    resumed.close()
    assert [(r["step"], r["loss"]) for r in rows(tmp_path / "t.csv")] == [("1", "0.1"), ("2", "0.2"), ("3", "0.3"),
                                                                          ("4", "9.0")]
    fresh = _CSVTable(tmp_path / "t.csv")
    fresh.open(None)
    fresh.close()
    assert rows(tmp_path / "t.csv") == []


def test_only_real_numbers_are_logged():
    values = {"a": 1, "b": 2.5, "c": np.float32(0.25), "d": np.array(3.0), "e": "text", "f": True,
              "g": np.array([1.0, 2.0]), "h": float("nan")}
    logged = numeric_values(values)
    assert set(logged) == {"a", "b", "c", "d", "h"} and logged["c"] == 0.25 and logged["d"] == 3.0
    assert all(type(value) is float for value in logged.values())


def test_tensorboard_tags_are_sanitised():
    assert tag_for("evaluate", "acc#acc#dev set") == "evaluate/acc_acc_dev_set"


def test_the_curve_image_is_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    from PIL import Image

    from fastcore_train.callbacks.curves import draw_curves
    history = {("train", "loss"): ([1, 2, 3], [1.0, 0.5, 0.25]), ("evaluate", "acc"): ([3], [0.9]),
               ("evaluate", "f1"): ([3], [0.8]), ("more_evaluate", "acc"): ([3], [0.7])}
    draw_curves(history, tmp_path / "c.png")
    with Image.open(tmp_path / "c.png") as image:
        image.verify()
    with Image.open(tmp_path / "c.png") as image:
        assert image.format == "PNG" and image.size == (1260, 640)  # 3 x 2 panels at 100 dpi
