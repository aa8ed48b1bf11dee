"""Progress display: epoch, batch, smoothed loss, throughput and ETA, plus evaluation results.

Renders are throttled by wall time: a batch costs one clock read unless a refresh is due, so a
progress bar never slows training measurably. The loss shown at a refresh is the one whose read
began at the refresh before (each epoch's end shows its last), so a refresh never waits for the
device. Only rank 0 shows progress.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any, Optional, Union

from fastcore_train.controllers.evaluator import format_results
from fastcore_train.events.callback import Callback


def _format_seconds(seconds: Optional[float]) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class ProgressCallback(Callback):
    """Shared bookkeeping for the progress displays; subclasses implement the ``_show_*`` methods."""

    def __init__(self, refresh_interval: float, loss_smoothing: float = 0.3) -> None:
        self.refresh_interval = refresh_interval
        self.loss_smoothing = loss_smoothing
        #: refresh every this many batches instead of by wall time (fastNLP 1.0's ``print_every``)
        self.every_n_batches: Optional[int] = None
        self.loss_digits = 4
        self.smoothed_loss: Optional[float] = None
        self._reading: Any = None  # the loss being read since the last refresh
        self._next_refresh = 0.0
        self._start_time = 0.0
        self._start_batches = 0

    @property
    def callback_name(self) -> str:
        return "progress"

    # -- measurements
    def _throughput(self, trainer: Any, now: float) -> float:
        elapsed = now - self._start_time
        return (trainer.global_forward_batches - self._start_batches) / elapsed if elapsed > 0 else 0.0

    def _eta(self, trainer: Any, rate: float) -> Optional[float]:
        total = trainer.total_batches
        if total is None or rate <= 0:
            return None
        return (total - trainer.global_forward_batches) / rate

    def _update_loss(self, trainer: Any, lagged: bool) -> None:
        """Fold a loss into the smoothed one. ``lagged``: the loss whose read began at the previous
        refresh (long done), while this batch's begins, so that a refresh never waits for the work
        just queued on an asynchronous device; else (an epoch's end) this batch's, now."""
        previous, self._reading = self._reading, None
        current = trainer.last_loss
        if current is not None:
            self._reading = trainer.driver.data.start_read(current)
        if previous is None:  # the first refresh has no earlier read: this batch's, once
            lagged = False
        for reading in (previous,) if lagged else (previous, self._reading):
            if reading is None:
                continue
            value = float(reading.result())
            if self.smoothed_loss is None:
                self.smoothed_loss = value
            else:
                self.smoothed_loss += self.loss_smoothing * (value - self.smoothed_loss)
        if not lagged:
            self._reading = None

    def _summary(self, trainer: Any, now: float, lagged: bool = True) -> dict[str, Any]:
        self._update_loss(trainer, lagged)
        rate = self._throughput(trainer, now)
        return {"epoch": trainer.cur_epoch_idx + 1, "n_epochs": trainer.n_epochs,
                "batch": trainer.batch_idx_in_epoch, "per_epoch": trainer.num_batches_per_epoch,
                "loss": self.smoothed_loss, "rate": rate, "eta": _format_seconds(self._eta(trainer, rate)),
                "digits": self.loss_digits}

    # -- events
    def on_train_begin(self, trainer: Any) -> None:
        self._start_time = time.monotonic()
        self._start_batches = trainer.global_forward_batches
        self._next_refresh = self._start_time + self.refresh_interval
        self._show_begin(trainer)

    def on_train_batch_end(self, trainer: Any) -> None:
        if self.every_n_batches is not None:
            if trainer.global_forward_batches % self.every_n_batches:
                return
            # a cadence you chose (fastNLP's print_every) shows each printed batch's own loss
            self._show_progress(trainer, self._summary(trainer, time.monotonic(), lagged=False))
            return
        now = time.monotonic()
        if now < self._next_refresh:
            return
        self._next_refresh = now + self.refresh_interval
        self._show_progress(trainer, self._summary(trainer, now))

    def on_train_epoch_end(self, trainer: Any) -> None:
        summary = self._summary(trainer, time.monotonic(), lagged=False)
        summary["epoch"] = trainer.cur_epoch_idx  # already counted as finished
        summary["batch"] = summary["per_epoch"] or summary["batch"]
        self._show_epoch_end(trainer, summary)

    def on_evaluate_end(self, trainer: Any, results: dict) -> None:
        self._show_results(trainer, results)

    def on_train_end(self, trainer: Any) -> None:
        self._show_end(trainer)

    def on_exception(self, trainer: Any, exception: BaseException) -> None:
        self._show_end(trainer)

    # -- display, overridden by each style
    def _show_begin(self, trainer: Any) -> None: ...
    def _show_progress(self, trainer: Any, summary: dict[str, Any]) -> None: ...
    def _show_epoch_end(self, trainer: Any, summary: dict[str, Any]) -> None:
        self._show_progress(trainer, summary)
    def _show_results(self, trainer: Any, results: dict) -> None:
        print(format_results(results), flush=True)
    def _show_end(self, trainer: Any) -> None: ...


def _line(summary: dict[str, Any]) -> str:
    per_epoch = summary["per_epoch"] or "?"
    loss = "-" if summary["loss"] is None else f"{summary['loss']:.{summary.get('digits', 4)}f}"
    return (f"Epoch {summary['epoch']}/{summary['n_epochs']} | batch {summary['batch']}/{per_epoch} | "
            f"loss {loss} | {summary['rate']:.1f} batch/s | ETA {summary['eta']}")


class RawTextProgress(ProgressCallback):
    """Plain lines, for logs and non-interactive output (CI, files): one per interval and epoch."""

    def __init__(self, refresh_interval: float = 10.0) -> None:
        super().__init__(refresh_interval)

    def _show_progress(self, trainer: Any, summary: dict[str, Any]) -> None:
        print(_line(summary), flush=True)


class TqdmProgress(ProgressCallback):
    """A tqdm bar over the whole run."""

    def __init__(self, refresh_interval: float = 0.2) -> None:
        super().__init__(refresh_interval)
        if importlib.util.find_spec("tqdm") is None:  # fail at construction, with the hint below
            raise ImportError("TqdmProgress needs tqdm: pip install tqdm")
        self._bar: Any = None

    def _show_begin(self, trainer: Any) -> None:
        from tqdm.auto import tqdm
        self._bar = tqdm(total=trainer.total_batches, initial=trainer.global_forward_batches, unit="batch",
                         dynamic_ncols=True)

    def _show_progress(self, trainer: Any, summary: dict[str, Any]) -> None:
        if self._bar is None:
            return
        self._bar.set_description(f"Epoch {summary['epoch']}/{summary['n_epochs']}", refresh=False)
        if summary["loss"] is not None:
            self._bar.set_postfix(loss=f"{summary['loss']:.{summary['digits']}f}", refresh=False)
        self._bar.update(trainer.global_forward_batches - self._bar.n)

    def _show_results(self, trainer: Any, results: dict) -> None:
        from tqdm.auto import tqdm
        tqdm.write(format_results(results))

    def _show_end(self, trainer: Any) -> None:
        if self._bar is not None:
            self._bar.update(trainer.global_forward_batches - self._bar.n)
            self._bar.close()
            self._bar = None


class RichProgress(ProgressCallback):
    """A rich progress bar (the default in an interactive terminal)."""

    def __init__(self, refresh_interval: float = 0.2) -> None:
        super().__init__(refresh_interval)
        self._progress: Any = None
        self._task: Any = None

    def _show_begin(self, trainer: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[info]}"), TimeRemainingColumn(), auto_refresh=False)
        self._progress.start()
        self._task = self._progress.add_task("Training", total=trainer.total_batches,
                                             completed=trainer.global_forward_batches, info="")

    def _show_progress(self, trainer: Any, summary: dict[str, Any]) -> None:
        if self._progress is None:
            return
        loss = "" if summary["loss"] is None else f"loss {summary['loss']:.{summary['digits']}f} "
        self._progress.update(self._task, completed=trainer.global_forward_batches,
                              description=f"Epoch {summary['epoch']}/{summary['n_epochs']} "
                                          f"batch {summary['batch']}/{summary['per_epoch'] or '?'}",
                              info=f"{loss}{summary['rate']:.1f} batch/s", refresh=True)

    def _show_results(self, trainer: Any, results: dict) -> None:
        if self._progress is None:
            print(format_results(results), flush=True)
        else:
            self._progress.console.print(format_results(results), highlight=False)

    def _show_end(self, trainer: Any) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=trainer.global_forward_batches, refresh=True)
            self._progress.stop()
            self._progress = None


def _fastnlp_style(callback: ProgressCallback, print_every: int, loss_round_ndigit: int) -> None:
    """Apply fastNLP 1.0's progress arguments: refresh every ``print_every`` batches, loss digits."""
    if isinstance(print_every, bool) or not isinstance(print_every, int) or print_every < 1:
        raise ValueError(f"print_every must be a positive int, got {print_every!r}.")
    callback.every_n_batches = print_every
    callback.loss_digits = int(loss_round_ndigit)


class RichCallback(RichProgress):
    """fastNLP 1.0's name and arguments for :class:`RichProgress`: refresh every ``print_every``
    batches, show the loss with ``loss_round_ndigit`` digits. ``monitor``, ``larger_better`` and
    ``format_json`` are accepted and not used: evaluation results are printed whole."""

    def __init__(self, print_every: int = 1, loss_round_ndigit: int = 6, monitor: Any = None,
                 larger_better: bool = True, format_json: bool = True) -> None:
        super().__init__()
        _fastnlp_style(self, print_every, loss_round_ndigit)


class TqdmCallback(TqdmProgress):
    """fastNLP 1.0's name and arguments for :class:`TqdmProgress` (see :class:`RichCallback`)."""

    def __init__(self, print_every: int = 1, loss_round_ndigit: int = 6, monitor: Any = None,
                 larger_better: bool = True, format_json: bool = True) -> None:
        super().__init__()
        _fastnlp_style(self, print_every, loss_round_ndigit)


class RawTextCallback(RawTextProgress):
    """fastNLP 1.0's name and arguments for :class:`RawTextProgress` (see :class:`RichCallback`)."""

    def __init__(self, print_every: int = 1, loss_round_ndigit: int = 6, monitor: Any = None,
                 larger_better: bool = True, format_json: bool = True) -> None:
        super().__init__()
        _fastnlp_style(self, print_every, loss_round_ndigit)


PROGRESS_BARS = ("auto", "rich", "tqdm", "raw", None)


def choose_progress_callback(progress_bar: Union[str, ProgressCallback, None],
                             is_rank_zero: bool) -> Optional[ProgressCallback]:
    """Build the progress callback ``progress_bar`` names (rank 0 only)."""
    if isinstance(progress_bar, ProgressCallback):
        return progress_bar if is_rank_zero else None
    if progress_bar not in PROGRESS_BARS:
        raise ValueError(f"progress_bar must be one of {PROGRESS_BARS} or a ProgressCallback, got {progress_bar!r}.")
    if progress_bar is None or not is_rank_zero:
        return None
    if progress_bar == "auto":
        progress_bar = "rich" if sys.stdout.isatty() else "raw"
    if progress_bar == "tqdm":
        try:
            return TqdmProgress()
        except ImportError as error:
            raise ImportError("progress_bar='tqdm' needs tqdm: pip install tqdm") from error
    return RichProgress() if progress_bar == "rich" else RawTextProgress()
