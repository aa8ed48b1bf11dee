"""``CSVLoggerCallback``: the training loss and evaluation results as CSV files, one row per log."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional, TextIO, Union

from fastcore_train.callbacks.metric_log import MetricLogCallback

FIXED_COLUMNS = ("step", "epoch")


class _CSVTable:
    """One append-only CSV file whose columns grow when a record brings a new name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.columns: list[str] = []
        self._file: Optional[TextIO] = None
        self._writer: Any = None

    def open(self, keep_until_step: Optional[int]) -> None:
        """Start the file afresh, or (``keep_until_step``) keep the existing rows up to that step."""
        rows: list[dict[str, str]] = []
        if keep_until_step is not None and self.path.exists():
            with self.path.open(newline="", encoding="utf-8") as existing:
                reader = csv.DictReader(existing)
                self.columns = [name for name in (reader.fieldnames or []) if name not in FIXED_COLUMNS]
                rows = [row for row in reader if int(row["step"]) <= keep_until_step]
        self._rewrite(rows)

    def write(self, row: dict[str, Any]) -> None:
        new_names = [name for name in row if name not in FIXED_COLUMNS and name not in self.columns]
        if new_names:
            # A new result name: rewrite the file once with the wider header.
            self.close()
            with self.path.open(newline="", encoding="utf-8") as existing:
                rows = list(csv.DictReader(existing))
            self.columns += new_names
            self._rewrite(rows)
        self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=[*FIXED_COLUMNS, *self.columns], restval="")
            writer.writeheader()
            writer.writerows(rows)
        temporary.replace(self.path)  # atomic: a crash leaves the old file or the new one
        self._file = self.path.open("a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=[*FIXED_COLUMNS, *self.columns], restval="")


class CSVLoggerCallback(MetricLogCallback):
    """Write ``train_metrics.csv`` (step, epoch, loss) and ``evaluate_metrics.csv`` (step, epoch, one
    column per evaluation result) into ``folder/<run start time>/``.

    Rows are flushed as they are written, so the files can be read while training runs (e.g.
    ``pandas.read_csv``). Only rank 0 writes.
    """

    def __init__(self, folder: Union[str, Path] = "logs", log_every_n_batches: int = 50, run_subfolder: bool = True) -> None:
        super().__init__(folder, log_every_n_batches, run_subfolder)
        self._tables: dict[str, _CSVTable] = {}

    def table_path(self, kind: str) -> Path:
        """The file records of ``kind`` (``"train"``, ``"evaluate"``, ...) go to."""
        assert self.run_folder is not None, "the run folder is chosen when the Trainer is built"
        return self.run_folder / f"{kind}_metrics.csv"

    def open(self, trainer: Any, resumed_at: int) -> None:
        self._resumed_at = resumed_at if resumed_at > 0 else None

    def write(self, kind: str, step: int, epoch: int, values: dict[str, float]) -> None:
        table = self._tables.get(kind)
        if table is None:
            table = self._tables[kind] = _CSVTable(self.table_path(kind))
            table.open(self._resumed_at)
        table.write({"step": step, "epoch": epoch, **values})

    def close(self, trainer: Any) -> None:
        for table in self._tables.values():
            table.close()
        self._tables.clear()
