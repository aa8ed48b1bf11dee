"""Checking the Trainer's constructor and ``run()`` arguments before any work starts.

A wrong value (``n_epochs=-1``, metrics without a dataloader to compute them on, ...) is reported
at once with what is accepted, instead of surfacing as an obscure failure deep in training.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional, Sequence

#: The extra keywords the Trainer reads from ``**kwargs`` (the driver's own ones aside).
TRAINER_OPTIONS = frozenset({
    "train_input_mapping", "train_output_mapping", "evaluate_input_mapping", "evaluate_output_mapping",
    "progress_bar", "model_use_eval_mode", "use_dist_sampler", "evaluate_use_dist_sampler", "sampler_seed",
    "log_file", "model_summary", "report_to", "report_dir", "report_every_n_batches", "run_name", "nan_guard",
    "activation_checkpointing",
})


def check_nan_guard(value: Any) -> int:
    """How often the default NaN guard checks the loss (0: no guard), from ``Trainer(nan_guard=...)``."""
    from fastcore_train.controllers.nan_guard import DEFAULT_CHECK_EVERY

    if value is True:
        return DEFAULT_CHECK_EVERY
    if value is False or value is None:
        return 0
    if isinstance(value, int) and value > 0:
        return value
    raise ValueError(f"nan_guard must be True (check the loss every {DEFAULT_CHECK_EVERY} batches and at each "
                     f"epoch's last), False (no check) or a positive int n (every n batches), got {value!r}.")


def positive_int(name: str, value: Any, allow: Sequence[int] = ()) -> int:
    """Return ``value`` if it is an int > 0 (or one of ``allow``); raise ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or (value <= 0 and value not in allow):
        extra = f" (or {', '.join(map(str, allow))})" if allow else ""
        raise ValueError(f"{name} must be a positive int{extra}, got {value!r}.")
    return value


def check_trainer_arguments(train_dataloader: Any, n_epochs: Any, evaluate_dataloaders: Any, metrics: Any,
                            evaluate_batch_step_fn: Any, batch_step_fn: Any, evaluate_every: Any,
                            accumulation_steps: Any, n_batches: Any, overfit_batches: Any, monitor: Any) -> None:
    """Raise ValueError for a Trainer constructor argument that cannot work."""
    if train_dataloader is None:
        raise ValueError("train_dataloader is required.")
    positive_int("n_epochs", n_epochs, allow=(0,))  # 0: only the evaluation before training (fastNLP 1.0)
    positive_int("accumulation_steps", accumulation_steps)
    positive_int("n_batches", n_batches, allow=(-1,))
    if isinstance(overfit_batches, bool) or not isinstance(overfit_batches, int) or overfit_batches < -1:
        raise ValueError(f"overfit_batches must be 0 (off), -1 (all) or a positive int, got {overfit_batches!r}.")
    if not callable(evaluate_every) and (
            isinstance(evaluate_every, bool) or not isinstance(evaluate_every, int) or evaluate_every == 0):
        raise ValueError(
            f"evaluate_every must be a non-zero int (>0: every n batches, <0: every n epochs) or "
            f"callable(trainer) -> bool, got {evaluate_every!r}."
        )
    if metrics and evaluate_dataloaders is None and not overfit_batches:
        raise ValueError("metrics were given but no evaluate_dataloaders to compute them on; pass "
                         "evaluate_dataloaders=... (a dataloader or a dict of them).")
    if evaluate_dataloaders is not None and not metrics and evaluate_batch_step_fn is None:
        raise ValueError("evaluate_dataloaders were given without metrics: pass metrics={'name': Metric} "
                         "(or an evaluate_batch_step_fn) so evaluation has something to compute.")
    if n_epochs == 0 and n_batches == -1 and evaluate_dataloaders is None and not (overfit_batches and metrics):
        raise ValueError("n_epochs=0 trains no batch, and with no evaluate_dataloaders there is no evaluation to run "
                         "either, so run() would do nothing. Pass n_epochs >= 1 (or n_batches=N) to train, or "
                         "evaluate_dataloaders and metrics to only evaluate (or use an Evaluator).")
    if batch_step_fn is not None and not callable(batch_step_fn):
        raise ValueError("batch_step_fn must be callable(trainer, batch).")
    if monitor is not None and not (isinstance(monitor, str) or callable(monitor)):
        raise ValueError(f"monitor must be a result name (str) or callable(results) -> float, got {monitor!r}.")


def check_train_dataloader(dataloader: Any, num_batches: Optional[int], n_epochs: int, n_batches: int) -> None:
    """Raise ValueError for a training dataloader that would train nothing (in some epochs).

    ``num_batches`` is its length (None when unsized). A one-shot iterator (a generator, or any
    object that is its own iterator) is used up by the first epoch, so it is refused when more
    epochs are asked for, unless ``n_batches`` bounds the run instead.
    """
    if num_batches == 0:
        raise ValueError(
            f"train_dataloader has no batch (len() is 0, a {type(dataloader).__name__}): training would "
            "do nothing. Check that its dataset is not empty, and that batch_size is not larger than "
            "the dataset when drop_last=True (which then drops the only, incomplete batch).")
    if isinstance(dataloader, Iterator) and n_epochs > 1 and n_batches <= 0:
        raise ValueError(
            f"train_dataloader is a one-shot iterator ({type(dataloader).__name__}, e.g. a generator): it "
            f"is used up by the first epoch, so epochs 2 to {n_epochs} would train nothing. Pass a "
            "dataloader that can be iterated again each epoch (a framework DataLoader, a list of "
            "batches, or an object whose __iter__ starts a new pass), or n_epochs=1, or n_batches=N "
            "to stop after N batches.")


def empty_epoch_message(epoch: int, batches_before: int) -> str:
    """What to say when the training dataloader yields no batch in (1-based) ``epoch``."""
    if batches_before:
        return (f"train_dataloader yielded no batch in epoch {epoch}, after {batches_before} batch(es) in "
                "the epochs before: it is a one-shot iterable, used up by its first pass, so the "
                "remaining epochs would train nothing. Pass a dataloader whose __iter__ starts a new "
                "pass each time (a framework DataLoader, a list of batches), or n_epochs=1.")
    return (f"train_dataloader yielded no batch in epoch {epoch}: it is empty, so training would do "
            "nothing. Check that its dataset is not empty (and, for an iterable dataset, that it yields "
            "samples on this rank).")


def check_run_arguments(num_train_batch_per_epoch: Any, num_eval_batch_per_dl: Any,
                        num_eval_sanity_batch: Any) -> None:
    """Raise ValueError for a ``Trainer.run`` batch cap that cannot work."""
    positive_int("num_train_batch_per_epoch", num_train_batch_per_epoch, allow=(-1,))
    positive_int("num_eval_batch_per_dl", num_eval_batch_per_dl, allow=(-1,))
    if isinstance(num_eval_sanity_batch, bool) or not isinstance(num_eval_sanity_batch, int) \
            or num_eval_sanity_batch < -1:
        raise ValueError(f"num_eval_sanity_batch must be an int >= 0 (or -1: every batch), got {num_eval_sanity_batch!r}.")
