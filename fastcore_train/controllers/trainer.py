"""The Trainer: the framework-neutral training loop.

It keeps fastNLP 1.0's constructor and ``run()`` parameters (same names, same meaning), talks to
the framework only through a :class:`~fastcore_train.drivers.Driver`, and fires the events of
:mod:`fastcore_train.events` at each step. Events nobody listens to cost nothing: the loop reads
a ``None`` and skips the call.

This module builds the Trainer and drives a run; the Trainer's other parts are mixins beside it:
the step primitives (:mod:`~fastcore_train.controllers.batch_step`), the epoch loop
(:mod:`~fastcore_train.controllers.train_loop`), a run's course and its end
(:mod:`~fastcore_train.controllers.run_control`), transformers' method names
(:mod:`~fastcore_train.controllers.transformers_methods`), saving and loading
(:mod:`~fastcore_train.controllers.persistence`), the RNG states
(:mod:`~fastcore_train.controllers.random_state`) and the state attributes
(:mod:`~fastcore_train.controllers.state_view`); :mod:`~fastcore_train.controllers.arguments`
checks the arguments.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

from fastcore_train import log
from fastcore_train.controllers.adapted_loaders import AdaptedLoaders
from fastcore_train.controllers.arguments import (TRAINER_OPTIONS, check_nan_guard, check_run_arguments,
                                                  check_train_dataloader, check_trainer_arguments)
from fastcore_train.controllers.batch_io import ModelCaller
from fastcore_train.controllers.batch_step import BatchStepMixin
from fastcore_train.controllers.evaluator import Evaluator
from fastcore_train.controllers.monitor import Monitor
from fastcore_train.controllers.options import split_backend_kwargs
from fastcore_train.controllers.overfit import OverfitDataLoader
from fastcore_train.controllers.persistence import PersistenceMixin
from fastcore_train.controllers.predict import Predictor
from fastcore_train.controllers.run_control import RunControlMixin
from fastcore_train.controllers.run_guard import RunGuard
from fastcore_train.controllers.transformers_methods import TransformersMethodsMixin
from fastcore_train.controllers.random_state import RandomStateMixin
from fastcore_train.controllers.state import TrainerState
from fastcore_train.controllers.state_view import StateViewMixin
from fastcore_train.controllers.train_loop import TrainLoopMixin
from fastcore_train.controllers.train_output import LossTally, TrainOutput
from fastcore_train.drivers.activation_checkpointing import apply_activation_checkpointing
from fastcore_train.drivers.choose import choose_driver
from fastcore_train.drivers.driver import Driver
from fastcore_train.events.callback import Callback
from fastcore_train.events.event import Event
from fastcore_train.events.manager import CallbackManager
from fastcore_train.log import logger
from fastcore_train.samplers.adapt import make_reproducible_dataloader
from fastcore_train.summary import summarize
from fastcore_train.utils.parameters import model_without_parameters, optimizers_miss_the_model

BatchStepFn = Callable[["Trainer", Any], None]


def default_batch_step(trainer: "Trainer", batch: Any) -> None:
    """One training step: forward, backward, optimizer step, zero grad (accumulation-aware)."""
    outputs = trainer.train_step(batch)
    trainer.backward(outputs)
    trainer.step()
    trainer.zero_grad()


def _default_if_none(value: Any, default: Any) -> Any:
    return default if value is None else value


class Trainer(BatchStepMixin, TrainLoopMixin, RunControlMixin, PersistenceMixin, RandomStateMixin, StateViewMixin,
              TransformersMethodsMixin):
    """Train ``model`` on ``train_dataloader`` with ``optimizers`` through a framework driver.

    See the docs for every parameter; the ones a fastNLP 1.0 user knows keep their meaning:
    ``evaluate_every`` (>0: every n batches, <0: every n epochs, or callable(trainer) -> bool),
    ``input_mapping``/``output_mapping`` (dict renaming keys, or callable), ``accumulation_steps``,
    ``n_batches`` (stop after this many batches), ``overfit_batches`` (train and evaluate on the
    first n batches; -1: the whole training set), ``marker`` (which ``Trainer.on`` functions apply).
    """

    # Functions registered with @Trainer.on, by marker: None (the next Trainer built), "all", a name.
    _custom_callbacks: ClassVar[dict[Optional[str], list[tuple[Event, Callable[..., Any]]]]] = defaultdict(list)

    def __init__(self, model: Any, train_dataloader: Any, optimizers: Any,
                 driver: Union[str, Driver] = "auto", device: Any = "cpu", n_epochs: int = 20,
                 evaluate_dataloaders: Any = None, batch_step_fn: Optional[BatchStepFn] = None,
                 evaluate_batch_step_fn: Optional[Callable[[Evaluator, Any], None]] = None,
                 train_fn: Optional[str] = None, evaluate_fn: Optional[str] = None,
                 callbacks: Optional[Sequence[Callback]] = None, metrics: Any = None,
                 evaluate_every: Union[int, Callable[["Trainer"], bool]] = -1,
                 input_mapping: Any = None, output_mapping: Any = None,
                 model_wo_auto_param_call: bool = False, accumulation_steps: int = 1,
                 fp16: bool = False, monitor: Monitor = None, larger_better: bool = True,
                 n_batches: int = -1, overfit_batches: int = 0, marker: Optional[str] = None,
                 **kwargs: Any) -> None:
        driver_kwargs, options = split_backend_kwargs(kwargs, TRAINER_OPTIONS)
        nan_guard = options.get("nan_guard", True)
        nan_check_every = check_nan_guard(nan_guard)
        check_trainer_arguments(train_dataloader, n_epochs, evaluate_dataloaders, metrics,
                                evaluate_batch_step_fn, batch_step_fn, evaluate_every,
                                accumulation_steps, n_batches, overfit_batches, monitor)
        self.marker = marker
        self.monitor = monitor
        self.larger_better = larger_better
        self.fp16 = fp16
        self.accumulation_steps = accumulation_steps
        self.evaluate_every = evaluate_every
        self.model_wo_auto_param_call = model_wo_auto_param_call
        self.train_input_mapping = options.get("train_input_mapping", input_mapping)
        self.train_output_mapping = options.get("train_output_mapping", output_mapping)
        self._model_summary = bool(options.get("model_summary", True))
        self._evaluate_mappings = (options.get("evaluate_input_mapping", input_mapping),
                                   options.get("evaluate_output_mapping", output_mapping))
        # None means the default, as in fastNLP 1.0; evaluation follows use_dist_sampler unless told otherwise.
        self.use_dist_sampler = _default_if_none(options.get("use_dist_sampler"), True)
        self.evaluate_use_dist_sampler = _default_if_none(options.get("evaluate_use_dist_sampler"),
                                                          self.use_dist_sampler)

        self.driver: Driver = choose_driver(model, driver, device, fp16=fp16, **driver_kwargs)
        self.driver.set_optimizers(optimizers)
        # None: a driver that builds its own optimizer (DeepSpeed's config section) accepted it
        listed = [] if optimizers is None else optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]
        self._user_optimizers = list(listed)
        # before set-up: the user's own objects
        problem = model_without_parameters(model) or (
            None if optimizers is None else optimizers_miss_the_model(model, listed))
        if problem is not None:
            raise ValueError(problem)
        # before set-up, so the data-parallel wrappers the driver builds see the wrapped layers
        self.activation_checkpointed = apply_activation_checkpointing(model, options.get("activation_checkpointing"))
        self.driver.ensure_setup()
        if optimizers is None:  # record what the driver built
            self._user_optimizers = list(self.driver.optimizers)
        log.set_rank(self.driver.comm.rank, self.driver.comm.world_size)
        if options.get("log_file") is not None:
            log.add_log_file(options["log_file"])
        self.driver.data.check(train_dataloader, "train_dataloader")

        if overfit_batches:
            self.dataloader = OverfitDataLoader(train_dataloader, overfit_batches)
            evaluate_dataloaders = self.dataloader if metrics else evaluate_dataloaders
        else:
            distribute = self.driver.comm.is_distributed() and self.use_dist_sampler
            shards, shard = self.driver.data_shard() if distribute else (1, 0)
            self.dataloader = make_reproducible_dataloader(
                self.driver, train_dataloader, seed=options.get("sampler_seed", 0), num_replicas=shards, rank=shard)

        #: The training loader built here (a copy of the given one), released when run() ends.
        self.adapted_loaders = AdaptedLoaders(self.driver.data)
        self.adapted_loaders.add(self.dataloader, train_dataloader)

        fn, signature_fn = self.driver.get_model_call_fn(train_fn or "train_step", for_training=True)
        self._call_model = ModelCaller(fn, signature_fn, model_wo_auto_param_call)
        self.batch_step_fn: BatchStepFn = batch_step_fn or default_batch_step

        num_batches = self.driver.data.length(self.dataloader)
        check_train_dataloader(self.dataloader, num_batches, n_epochs, n_batches)
        if n_batches > 0 and num_batches:
            n_epochs = math.ceil(n_batches / num_batches)
        self.state = TrainerState(n_epochs=n_epochs, num_batches_per_epoch=num_batches, n_batches=n_batches)

        self.evaluator: Optional[Evaluator] = None
        if evaluate_dataloaders is not None and (metrics or evaluate_batch_step_fn):
            self.evaluator = Evaluator(
                model, evaluate_dataloaders, metrics, driver=self.driver,
                evaluate_batch_step_fn=evaluate_batch_step_fn, evaluate_fn=evaluate_fn,
                input_mapping=options.get("evaluate_input_mapping", input_mapping),
                output_mapping=options.get("evaluate_output_mapping", output_mapping),
                model_wo_auto_param_call=model_wo_auto_param_call, fp16=fp16, verbose=0,
                model_use_eval_mode=options.get("model_use_eval_mode", True),
                use_dist_sampler=self.evaluate_use_dist_sampler,
            )

        # Set per batch by the loop; True whenever accumulation_steps == 1.
        self._update_now = True
        #: The last training loss seen (undivided by accumulation); read by progress callbacks.
        self.last_loss: Any = None
        # this run()'s losses, for its TrainOutput (not on a lazy framework, where it would change the rounding)
        self._loss_tally = self._new_loss_tally()
        self._batches_at_start = 0  # global_forward_batches when this run() began training (after a resume)
        self.evaluate_results: dict[str, Any] = {}
        self._num_eval_batch_per_dl = -1
        self._stop_requested = False
        self._batch_cap: Optional[int] = None  # run(num_train_batch_per_epoch=...)
        # Batches of the current epoch done before the dataloader's current iteration began
        # (non-zero after a mid-epoch resume); the sampler state counts from there.
        self._batches_before_iter = 0
        # RNG states loaded from a checkpoint, applied once the resumed epoch's iterator exists
        # (creating a dataloader iterator may itself draw from the framework's generator).
        self._pending_rng_state: Optional[dict[str, Any]] = None
        # True while an epoch's iterator is in use: a run that ends then leaves the epoch open (_keep_epoch_open).
        self._epoch_iterating = False

        all_callbacks = list(callbacks or ())
        from fastcore_train.controllers.progress import ProgressCallback, choose_progress_callback
        if any(isinstance(callback, ProgressCallback) for callback in all_callbacks):
            if options.get("progress_bar", "auto") not in ("auto", None):
                logger.warning("A progress callback is among the callbacks, so progress_bar=%r is not used.",
                               options["progress_bar"])
            if not self.driver.comm.is_global_zero():  # only rank 0 shows progress
                all_callbacks = [cb for cb in all_callbacks if not isinstance(cb, ProgressCallback)]
        else:
            progress = choose_progress_callback(options.get("progress_bar", "auto"), self.driver.comm.is_global_zero())
            if progress is not None:
                all_callbacks.append(progress)
        from fastcore_train.controllers.nan_guard import NanGuardCallback
        # nan_guard=True is "on where reading the loss changes nothing": on a lazy framework (jittor) a read
        # runs the graph in pieces, which changes float rounding and so exact resume; an int forces it on.
        lazy = nan_guard is True and self.driver.data.reading_changes_results
        if nan_check_every and not lazy and not any(isinstance(cb, NanGuardCallback) for cb in all_callbacks):
            # yours, if given, replaces it; first, so that it stops a run before any other callback sees the batch end
            # nan_guard=True reads after the step (never waiting for the device); a cadence you chose checks before it
            all_callbacks.insert(0, NanGuardCallback(check_every=nan_check_every, deferred=nan_guard is True))
        if options.get("report_to") is not None:  # a wrong value (report_to=0) is an error, not "none"
            from fastcore_train.controllers.report_to import report_callbacks
            all_callbacks += report_callbacks(options["report_to"], options.get("report_dir", "logs"),
                                              options.get("report_every_n_batches", 50), options.get("run_name"))
        self.callback_manager = CallbackManager(all_callbacks)
        for event, fn in self._take_custom_callbacks(marker):
            self.callback_manager.add_fn(event, fn)
        self._fire("on_after_trainer_initialized", self.driver)

    def _new_loss_tally(self) -> LossTally:
        """This run's loss tally (none tracked on a lazy framework, where it would change the rounding)."""
        data = self.driver.data
        return LossTally(data.to_numeric, tracks=not data.reading_changes_results, start_read=data.start_read)

    # ------------------------------------------------------------------ Trainer.on / listeners
    @classmethod
    def on(cls, event: Event, marker: Optional[str] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering ``fn`` for ``event`` on Trainers built afterwards.

        ``marker=None``: only the next Trainer built; ``"all"``: every Trainer; any other string:
        Trainers built with the same ``marker``.
        """
        if not isinstance(event, Event):
            raise TypeError(f"Trainer.on needs an Event such as Event.on_train_begin(), got {event!r}.")

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            from fastcore_train.events.manager import _check_listener_arity
            _check_listener_arity(event, fn)
            cls._custom_callbacks[marker].append((event, fn))
            return fn

        return register

    @classmethod
    def _take_custom_callbacks(cls, marker: Optional[str]) -> list[tuple[Event, Callable[..., Any]]]:
        taken = list(cls._custom_callbacks["all"]) + cls._custom_callbacks.pop(None, [])
        if marker is not None and marker != "all":
            taken += cls._custom_callbacks.get(marker, [])
        return taken

    def add_callback_fn(self, event: Event, fn: Callable[..., Any]) -> None:
        """Register ``fn`` for ``event`` on this trainer."""
        self.callback_manager.add_fn(event, fn)

    def _fire(self, name: str, *args: Any) -> None:
        listener = getattr(self.callback_manager, name)
        if listener is not None:
            listener(self, *args)

    # ------------------------------------------------------------------ run
    def run(self, num_train_batch_per_epoch: int = -1, num_eval_batch_per_dl: int = -1,
            num_eval_sanity_batch: int = 2, resume_from: Optional[Union[str, Path]] = None,
            resume_training: bool = True, catch_KeyboardInterrupt: Optional[bool] = None) -> TrainOutput:
        """Train for ``n_epochs`` (or ``n_batches``), evaluating as ``evaluate_every`` says.

        ``num_train_batch_per_epoch``/``num_eval_batch_per_dl`` cap batches (-1: all);
        ``num_eval_sanity_batch`` batches are evaluated before training to catch errors early
        (0: none, -1: every batch; with ``n_epochs=0`` that evaluation is all a run does);
        ``resume_from`` is a checkpoint folder to continue from; ``"auto"`` continues from the newest
        complete checkpoint of the Trainer's ``CheckpointCallback(save_object="checkpoint")`` and
        ``"auto:<folder>"`` from the newest in ``<folder>``, each a fresh start when there is none
        (for preemptible jobs: the same command restarts or resumes; see docs/checkpoints.md).

        Returns a :class:`~fastcore_train.controllers.train_output.TrainOutput` (``global_step``,
        ``training_loss``, ``metrics``), as transformers' ``Trainer.train()`` does; also after a
        caught Ctrl-C.
        """
        check_run_arguments(num_train_batch_per_epoch, num_eval_batch_per_dl, num_eval_sanity_batch)
        if self.state.n_epochs == 0 and self.state.n_batches <= 0 and num_eval_sanity_batch == 0:
            raise ValueError("n_epochs=0 trains no batch, and num_eval_sanity_batch=0 skips the evaluation before "
                             "training, which is all such a run does: run() would do nothing. Pass "
                             "num_eval_sanity_batch=-1 (every batch) or N to evaluate, or build the Trainer with "
                             "n_epochs >= 1 to train.")
        if catch_KeyboardInterrupt is None:
            catch_KeyboardInterrupt = not self.driver.comm.is_distributed()
        self._num_eval_batch_per_dl = num_eval_batch_per_dl
        self._batch_cap = num_train_batch_per_epoch if num_train_batch_per_epoch > 0 else None
        if self._batch_cap is not None and self.state.num_batches_per_epoch is not None:
            # known before on_train_begin, so callbacks that plan over the run (WarmupCallback) see the cap
            self.state.num_batches_per_epoch = min(self.state.num_batches_per_epoch, self._batch_cap)
        if self._model_summary and self.driver.comm.is_global_zero():
            self._log_model_summary()
        started = time.perf_counter()
        self._loss_tally = self._new_loss_tally()
        self._batches_at_start = self.state.global_forward_batches
        requeue_signals = sorted({number for callback in self.callback_manager.callbacks
                                  for number in getattr(callback, "requeue_signals", ())})
        # the loaders built from the user's (and the evaluator's) keep their workers between epochs and
        # evaluations; released before the guard ends: a worker forked during the run holds the guard's
        # watcher's pipe, whose end the watcher waits for
        with RunGuard(self.driver, requeue_signals) as self._guard, self.adapted_loaders.held(), \
                self._evaluation_loaders_held():
            self._run_guarded(num_eval_sanity_batch, resume_from, resume_training, catch_KeyboardInterrupt)
        return self._train_output(time.perf_counter() - started)

    def _evaluation_loaders_held(self) -> Any:
        return self.evaluator.adapted_loaders.held() if self.evaluator is not None else nullcontext()

    def stop_training(self) -> None:
        """Ask the loop to stop after the current batch (e.g. early stopping). In data parallel one rank's
        request is enough: every rank stops at the same optimizer step (the end of an accumulation group)."""
        self._stop_requested = True

    def _log_model_summary(self) -> None:
        try:
            logger.info("Model summary:\n%s", summarize(self.driver.unwrap_model()))
        except (TypeError, NotImplementedError) as error:  # a backend without a modules part
            logger.info("No model summary: %s", error)

    def predict(self, dataloader: Any, output_dir: Union[str, Path, None] = None,
                predict_fn: Optional[str] = None) -> Any:
        """The model's per-sample outputs over ``dataloader``, in dataset order, on every rank.

        Runs ``predict_fn`` (default: the model's ``predict_step``, else ``evaluate_step``, else its
        forward) in eval mode without gradients, with the evaluation input/output mappings. Returns
        a dict of numpy arrays (or one array; ragged outputs as lists of arrays); with
        ``output_dir``, each rank streams shards there and a
        :class:`~fastcore_train.controllers.prediction_shards.PredictionShards` reader is returned.
        See the Inference page of the docs.
        """
        input_mapping, output_mapping = self._evaluate_mappings
        predictor = Predictor(self.driver, predict_fn, input_mapping, output_mapping, self.model_wo_auto_param_call)
        with self._rng_preserved():
            predictions = predictor.run(dataloader, output_dir)
        self.driver.set_model_mode("train")
        return predictions

    def evaluates_at_epoch_end(self) -> bool:
        """Whether an evaluation follows the end of the epoch just finished (``evaluate_every=-n``:
        every n-th epoch); read from ``on_train_epoch_end``, which fires before it."""
        return self.evaluator is not None and not callable(self.evaluate_every) and self.evaluate_every < 0 \
            and self.state.cur_epoch_idx % -self.evaluate_every == 0

    def run_evaluate(self) -> dict[str, Any]:
        """Evaluate now (firing the evaluate events) and return the flat results."""
        if self.evaluator is None:
            raise RuntimeError("This trainer has no evaluator: pass evaluate_dataloaders and metrics.")
        self._fire("on_evaluate_begin")
        with self._rng_preserved():
            results = self.evaluator.run(num_eval_batch_per_dl=self._num_eval_batch_per_dl)
        self.driver.set_model_mode("train")
        self.evaluate_results = results
        self._fire("on_evaluate_end", results)
        return results
