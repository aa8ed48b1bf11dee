"""The Trainer: the framework-neutral training loop.

It keeps fastNLP 1.0's constructor and ``run()`` parameters (same names, same meaning), talks to
the framework only through a :class:`~fastcore_train.drivers.Driver`, and fires the events of
:mod:`fastcore_train.events` at each step. Events nobody listens to cost nothing: the loop reads
a ``None`` and skips the call.
"""
from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Optional, Sequence, Union

from fastcore_train import checkpoint as ckpt
from fastcore_train import log
from fastcore_train.controllers.batch_io import ModelCaller, extract_loss
from fastcore_train.controllers.evaluator import Evaluator
from fastcore_train.controllers.monitor import Monitor
from fastcore_train.controllers.options import split_backend_kwargs
from fastcore_train.controllers.overfit import OverfitDataLoader
from fastcore_train.controllers.state import TrainerState
from fastcore_train.drivers.choose import choose_driver
from fastcore_train.drivers.driver import Driver
from fastcore_train.events.callback import Callback
from fastcore_train.events.event import Event
from fastcore_train.events.manager import CallbackManager
from fastcore_train.log import logger
from fastcore_train.samplers.adapt import find_reproducible_batch_sampler, make_reproducible_dataloader
from fastcore_train.utils.rng import get_host_rng_state, set_host_rng_state
from fastcore_train.utils.param_call import apply_mapping

BatchStepFn = Callable[["Trainer", Any], None]

_TRAINER_OPTIONS = {
    "train_input_mapping", "train_output_mapping", "evaluate_input_mapping", "evaluate_output_mapping",
    "progress_bar", "model_use_eval_mode", "use_dist_sampler", "evaluate_use_dist_sampler", "sampler_seed",
    "log_file",
}


def default_batch_step(trainer: "Trainer", batch: Any) -> None:
    """One training step: forward, backward, optimizer step, zero grad (accumulation-aware)."""
    outputs = trainer.train_step(batch)
    trainer.backward(outputs)
    trainer.step()
    trainer.zero_grad()


def _positive_int(name: str, value: Any, allow: Sequence[int] = ()) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (value <= 0 and value not in allow):
        extra = f" (or {', '.join(map(str, allow))})" if allow else ""
        raise ValueError(f"{name} must be a positive int{extra}, got {value!r}.")
    return value


class Trainer:
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
        driver_kwargs, options = split_backend_kwargs(kwargs, _TRAINER_OPTIONS)
        self._check_arguments(train_dataloader, n_epochs, evaluate_dataloaders, metrics,
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
        self.use_dist_sampler = options.get("use_dist_sampler", True)
        self.evaluate_use_dist_sampler = options.get("evaluate_use_dist_sampler", True)

        self.driver: Driver = choose_driver(model, driver, device, fp16=fp16, **driver_kwargs)
        self.driver.set_optimizers(optimizers)
        self.driver.ensure_setup()
        log.set_rank(self.driver.rank, self.driver.world_size)
        if options.get("log_file") is not None:
            log.add_log_file(options["log_file"])
        self.driver.check_dataloader(train_dataloader, "train_dataloader")

        if overfit_batches:
            self.dataloader = OverfitDataLoader(train_dataloader, overfit_batches)
            evaluate_dataloaders = self.dataloader if metrics else evaluate_dataloaders
        else:
            distribute = self.driver.is_distributed() and self.use_dist_sampler
            self.dataloader = make_reproducible_dataloader(
                self.driver, train_dataloader, seed=options.get("sampler_seed", 0),
                num_replicas=self.driver.world_size if distribute else 1, rank=self.driver.rank if distribute else 0)

        fn, signature_fn = self.driver.get_model_call_fn(train_fn or "train_step", for_training=True)
        self._call_model = ModelCaller(fn, signature_fn, model_wo_auto_param_call)
        self.batch_step_fn: BatchStepFn = batch_step_fn or default_batch_step

        num_batches = self.driver.dataloader_length(self.dataloader)
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

        all_callbacks = list(callbacks or ())
        from fastcore_train.callbacks.progress import choose_progress_callback
        progress = choose_progress_callback(options.get("progress_bar", "auto"), self.driver.is_global_zero())
        if progress is not None:
            all_callbacks.append(progress)
        self.callback_manager = CallbackManager(all_callbacks)
        for event, fn in self._take_custom_callbacks(marker):
            self.callback_manager.add_fn(event, fn)
        self._fire("on_after_trainer_initialized", self.driver)

    # ------------------------------------------------------------------ argument checks
    @staticmethod
    def _check_arguments(train_dataloader: Any, n_epochs: Any, evaluate_dataloaders: Any, metrics: Any,
                         evaluate_batch_step_fn: Any, batch_step_fn: Any, evaluate_every: Any,
                         accumulation_steps: Any, n_batches: Any, overfit_batches: Any, monitor: Any) -> None:
        if train_dataloader is None:
            raise ValueError("train_dataloader is required.")
        _positive_int("n_epochs", n_epochs)
        _positive_int("accumulation_steps", accumulation_steps)
        _positive_int("n_batches", n_batches, allow=(-1,))
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
        if batch_step_fn is not None and not callable(batch_step_fn):
            raise ValueError("batch_step_fn must be callable(trainer, batch).")
        if monitor is not None and not (isinstance(monitor, str) or callable(monitor)):
            raise ValueError(f"monitor must be a result name (str) or callable(results) -> float, got {monitor!r}.")

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
            resume_training: bool = True, catch_KeyboardInterrupt: Optional[bool] = None) -> None:
        """Train for ``n_epochs`` (or ``n_batches``), evaluating as ``evaluate_every`` says.

        ``num_train_batch_per_epoch``/``num_eval_batch_per_dl`` cap batches (-1: all);
        ``num_eval_sanity_batch`` batches are evaluated before training to catch errors early;
        ``resume_from`` is a checkpoint folder to continue from.
        """
        _positive_int("num_train_batch_per_epoch", num_train_batch_per_epoch, allow=(-1,))
        _positive_int("num_eval_batch_per_dl", num_eval_batch_per_dl, allow=(-1,))
        if isinstance(num_eval_sanity_batch, bool) or not isinstance(num_eval_sanity_batch, int) or num_eval_sanity_batch < 0:
            raise ValueError(f"num_eval_sanity_batch must be an int >= 0, got {num_eval_sanity_batch!r}.")
        if catch_KeyboardInterrupt is None:
            catch_KeyboardInterrupt = not self.driver.is_distributed()
        self._num_eval_batch_per_dl = num_eval_batch_per_dl
        self._batch_cap = num_train_batch_per_epoch if num_train_batch_per_epoch > 0 else None
        try:
            if resume_from is not None:
                self.load_checkpoint(resume_from, resume_training=resume_training)
            if self.evaluator is not None and num_eval_sanity_batch > 0:
                self._fire("on_sanity_check_begin")
                with self._rng_preserved():
                    sanity_results = self.evaluator.run(num_eval_batch_per_dl=num_eval_sanity_batch)
                self._fire("on_sanity_check_end", sanity_results)
            self._fire("on_train_begin")
            self.driver.barrier()
            state = self.state
            self._stop_requested = False
            while state.cur_epoch_idx < state.n_epochs and not self._reached_n_batches() and not self._stop_requested:
                self.driver.set_model_mode("train")
                self._fire("on_train_epoch_begin")
                self.driver.set_sampler_epoch(self.dataloader, state.cur_epoch_idx)
                self._train_epoch()
                state.cur_epoch_idx += 1
                state.batch_idx_in_epoch = self._batches_before_iter = 0
                self._fire("on_train_epoch_end")
                self.driver.barrier()
                if self.evaluator is not None and not callable(self.evaluate_every) and self.evaluate_every < 0 \
                        and state.cur_epoch_idx % -self.evaluate_every == 0:
                    self.run_evaluate()
            self._fire("on_train_end")
            self.driver.barrier()
        except KeyboardInterrupt as interrupt:
            self._fire("on_exception", interrupt)
            self.driver.on_exception(interrupt)
            if not catch_KeyboardInterrupt:
                raise
            logger.warning("Training interrupted by the user (KeyboardInterrupt) at epoch %d, batch %d.",
                           self.state.cur_epoch_idx, self.state.batch_idx_in_epoch)
        except BaseException as error:
            self._fire("on_exception", error)
            self.driver.on_exception(error)
            raise

    def stop_training(self) -> None:
        """Ask the loop to stop after the current batch (e.g. early stopping); every rank must ask."""
        self._stop_requested = True

    def _reached_n_batches(self) -> bool:
        return 0 < self.state.n_batches <= self.state.global_forward_batches

    def _train_epoch(self) -> None:
        """One pass over the training dataloader; the per-batch hot path lives here."""
        manager = self.callback_manager
        fetch_begin, fetch_end = manager.on_fetch_data_begin, manager.on_fetch_data_end
        batch_begin, batch_end = manager.on_train_batch_begin, manager.on_train_batch_end
        driver = self.driver
        state = self.state
        move = driver.needs_data_move
        mapping = self.train_input_mapping
        batch_step_fn = self.batch_step_fn
        accumulation = self.accumulation_steps
        no_sync = accumulation > 1 and driver.is_distributed()
        n_batches = state.n_batches
        evaluate_every = self.evaluate_every if self.evaluator is not None else None
        every_batches = evaluate_every if isinstance(evaluate_every, int) and evaluate_every > 0 else 0
        evaluate_when = evaluate_every if callable(evaluate_every) else None

        iterator, per_epoch = self._start_epoch_iterator()
        while True:
            if fetch_begin is not None:
                fetch_begin(self)
            try:
                batch = next(iterator)
            except StopIteration:
                break
            if fetch_end is not None:
                fetch_end(self)
            if mapping is not None:
                batch = apply_mapping(mapping, batch)
            if move:
                batch = driver.move_data_to_device(batch)
            if batch_begin is not None:
                batch_begin(self, batch, None)
            if accumulation > 1:
                done = state.batch_idx_in_epoch + 1
                self._update_now = done % accumulation == 0 or done == per_epoch
                if no_sync and not self._update_now:
                    with driver.no_sync():
                        batch_step_fn(self, batch)
                else:
                    batch_step_fn(self, batch)
            else:
                batch_step_fn(self, batch)
            state.global_forward_batches += 1
            state.batch_idx_in_epoch += 1
            if batch_end is not None:
                batch_end(self)
            if every_batches and state.global_forward_batches % every_batches == 0:
                self.run_evaluate()
            elif evaluate_when is not None and evaluate_when(self):
                self.run_evaluate()
            if state.batch_idx_in_epoch == per_epoch or state.global_forward_batches == n_batches \
                    or self._stop_requested:
                break

    def _start_epoch_iterator(self) -> tuple[Any, int]:
        """The epoch's batch iterator (resuming where a checkpoint stopped) and its batch count.

        A reproducible sampler resumes by itself; for any other dataloader the batches already
        trained are fetched and dropped, which is exact only if its order is deterministic.
        """
        state = self.state
        self._batches_before_iter = done = state.batch_idx_in_epoch
        iterator = iter(self.dataloader)
        if done and find_reproducible_batch_sampler(self.driver, self.dataloader) is None:
            logger.warning("Resuming mid-epoch without a reproducible sampler: skipping %d batches; the "
                           "data order matches the interrupted run only if the dataloader is deterministic.", done)
            for _ in range(done):
                next(iterator)
            self._batches_before_iter = 0
        if self._pending_rng_state is not None:
            self._set_rng_state(self._pending_rng_state)
            self._pending_rng_state = None
        remaining = self.driver.dataloader_length(self.dataloader)
        cap = self._batch_cap
        if remaining is None:
            per_epoch = -1 if cap is None else cap
        else:
            per_epoch = remaining + self._batches_before_iter
            per_epoch = per_epoch if cap is None else min(per_epoch, cap)
        state.num_batches_per_epoch = None if per_epoch == -1 else per_epoch
        return iterator, per_epoch

    # ------------------------------------------------------------------ step primitives
    def train_step(self, batch: Any) -> Any:
        """The training forward (``train_fn``/``train_step``/forward), output_mapping applied."""
        if self.fp16:
            with self.driver.auto_cast():
                outputs = self._call_model(batch)
        else:
            outputs = self._call_model(batch)
        if self.train_output_mapping is not None:
            outputs = apply_mapping(self.train_output_mapping, outputs)
        return outputs

    def backward(self, outputs: Any) -> None:
        """Backward the ``loss`` in ``outputs`` (divided by ``accumulation_steps``)."""
        manager = self.callback_manager
        if manager.on_before_backward is not None:
            manager.on_before_backward(self, outputs)
        try:
            loss = outputs["loss"]
        except Exception:
            loss = extract_loss(outputs)
        self.last_loss = loss
        if self.accumulation_steps > 1:
            loss = loss / self.accumulation_steps
        self.driver.backward(loss)
        if manager.on_after_backward is not None:
            manager.on_after_backward(self)

    def step(self) -> None:
        """Step the optimizers, on the last micro-batch of each accumulation group only."""
        if self._update_now:
            manager = self.callback_manager
            if manager.on_before_optimizers_step is not None:
                manager.on_before_optimizers_step(self, self.driver.optimizers)
            self.driver.step()
            if manager.on_after_optimizers_step is not None:
                manager.on_after_optimizers_step(self, self.driver.optimizers)

    def zero_grad(self) -> None:
        """Clear gradients, on the last micro-batch of each accumulation group only."""
        if self._update_now:
            manager = self.callback_manager
            if manager.on_before_zero_grad is not None:
                manager.on_before_zero_grad(self, self.driver.optimizers)
            self.driver.zero_grad()
            if manager.on_after_zero_grad is not None:
                manager.on_after_zero_grad(self, self.driver.optimizers)

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

    # ------------------------------------------------------------------ random state
    def _get_rng_state(self) -> dict[str, Any]:
        return {**get_host_rng_state(), "framework": self.driver.get_rng_state()}

    def _set_rng_state(self, state: dict[str, Any]) -> None:
        set_host_rng_state(state)
        self.driver.set_rng_state(state["framework"])

    @contextlib.contextmanager
    def _rng_preserved(self) -> Iterator[None]:
        """Evaluation must not shift training's random streams (else resumes would diverge)."""
        saved = self._get_rng_state()
        try:
            yield
        finally:
            self._set_rng_state(saved)

    # ------------------------------------------------------------------ save / load
    def save_model(self, folder: Union[str, Path], only_state_dict: bool = True,
                   model_save_fn: Optional[Callable[[Path], None]] = None, **kwargs: Any) -> None:
        """Write the model into ``folder`` (as ``model<suffix>``, or via ``model_save_fn(folder)``)."""
        self._fire("on_save_model")
        folder = Path(folder)
        if model_save_fn is not None:
            if self.driver.is_global_zero():
                folder.mkdir(parents=True, exist_ok=True)
                model_save_fn(folder)
        elif self.driver.is_global_zero() or self.driver.collective_save:
            ckpt.write_model_file(folder, self.driver, only_state_dict, **kwargs)
        self.driver.barrier()

    def load_model(self, folder: Union[str, Path], only_state_dict: bool = True,
                   model_load_fn: Optional[Callable[[Path], None]] = None, **kwargs: Any) -> None:
        """Restore the model written by :meth:`save_model` (every rank loads)."""
        self._fire("on_load_model")
        folder = Path(folder)
        if model_load_fn is not None:
            model_load_fn(folder)
        else:
            path = ckpt.model_file(folder, self.driver)
            if not path.exists():
                raise FileNotFoundError(
                    f"No model file at {str(path)!r}: load_model expects the folder given to save_model "
                    f"(which writes {path.name} inside it)."
                )
            self.driver.load_model(path, only_state_dict=only_state_dict, **kwargs)
        self.driver.barrier()

    def save_checkpoint(self, folder: Union[str, Path], only_state_dict: bool = True,
                        model_save_fn: Optional[Callable[[Path], None]] = None,
                        extra_json: Optional[dict[str, Any]] = None) -> None:
        """Write everything needed to resume exactly into ``folder``, atomically.

        Model, optimizers (and grad scaler), the sampler's position, trainer counters, callback
        states, event-filter counters and every rank's RNG states (python, numpy, framework).
        ``folder`` may be new, empty, or an earlier checkpoint (replaced whole); anything else
        there is the user's, and saving raises :class:`~fastcore_train.checkpoint.CheckpointTargetError`
        on every rank, leaving it untouched.
        """
        problem = ckpt.checkpoint_target_problem(folder) if self.driver.is_global_zero() else None
        problem = self.driver.broadcast_object(problem)  # every rank raises alike, none waits
        if problem is not None:
            raise ckpt.CheckpointTargetError(problem)
        callback_states = self.callback_manager.callback_states(self)
        sampler = find_reproducible_batch_sampler(self.driver, self.dataloader)
        consumed = self.state.batch_idx_in_epoch - self._batches_before_iter
        trainer_state = {
            "state": self.state.state_dict(),
            "sampler": None if sampler is None else sampler.state_dict(num_consumed_batches=consumed),
            "event_filters": self.callback_manager.filter_states(),
            "rng": self.driver.all_gather_object(self._get_rng_state()),
        }
        if self.driver.is_global_zero() or self.driver.collective_save:
            ckpt.write_checkpoint(folder, self.driver, trainer_state, callback_states, only_state_dict,
                                  model_save_fn, extra_json)
        self.driver.barrier()

    def load_checkpoint(self, folder: Union[str, Path], resume_training: bool = True,
                        only_state_dict: bool = True,
                        model_load_fn: Optional[Callable[[Path], None]] = None) -> None:
        """Restore a checkpoint; with ``resume_training=False`` only model and optimizers.

        Training then continues from the batch after the one the checkpoint was taken at, with
        the same data order and random streams as an uninterrupted run.
        """
        meta = ckpt.read_meta(folder, self.driver)
        folder = Path(meta["folder"])
        if model_load_fn is not None:
            model_load_fn(folder)
        else:
            path = ckpt.require_file(ckpt.model_file(folder, self.driver), "model file")
            self.driver.load_model(path, only_state_dict=meta.get("only_state_dict", only_state_dict))
        self.driver.load_training_state(ckpt.require_file(
            folder / f"{ckpt.TRAINING_STATE_STEM}{self.driver.model_file_suffix}", "optimizer state"))
        if resume_training:
            saved = ckpt.read_trainer_state(folder)
            self.state.load_state_dict(saved["state"])
            self.callback_manager.load_filter_states(saved["event_filters"])
            self._load_sampler_state(saved.get("sampler"))
            rng_states = saved["rng"]
            same_world = len(rng_states) == self.driver.world_size
            self._pending_rng_state = rng_states[self.driver.rank if same_world else 0]
            if not same_world:
                logger.warning("The checkpoint was written by %d rank(s) and is resumed on %d: random "
                               "streams restart from rank 0's state.", len(rng_states), self.driver.world_size)
            self.callback_manager.load_callback_states(self, ckpt.read_callback_states(folder))
        self.driver.barrier()

    def _load_sampler_state(self, sampler_state: Optional[dict[str, Any]]) -> None:
        sampler = find_reproducible_batch_sampler(self.driver, self.dataloader)
        if sampler_state is not None and sampler is not None:
            sampler.load_state_dict(sampler_state)
        elif sampler_state is not None or self.state.batch_idx_in_epoch:
            logger.warning("The checkpoint's data position cannot be restored exactly: %s.",
                           "this trainer's dataloader has no reproducible sampler" if sampler is None else
                           "it was written without a reproducible sampler")

    # ------------------------------------------------------------------ state properties
    @property
    def model(self) -> Any:
        return self.driver.unwrap_model()

    @property
    def optimizers(self) -> list[Any]:
        return self.driver.optimizers

    @property
    def n_epochs(self) -> int:
        return self.state.n_epochs

    @n_epochs.setter
    def n_epochs(self, value: int) -> None:
        self.state.n_epochs = value

    @property
    def cur_epoch_idx(self) -> int:
        return self.state.cur_epoch_idx

    @cur_epoch_idx.setter
    def cur_epoch_idx(self, value: int) -> None:
        self.state.cur_epoch_idx = value

    @property
    def global_forward_batches(self) -> int:
        return self.state.global_forward_batches

    @global_forward_batches.setter
    def global_forward_batches(self, value: int) -> None:
        self.state.global_forward_batches = value

    @property
    def batch_idx_in_epoch(self) -> int:
        return self.state.batch_idx_in_epoch

    @batch_idx_in_epoch.setter
    def batch_idx_in_epoch(self, value: int) -> None:
        self.state.batch_idx_in_epoch = value

    @property
    def num_batches_per_epoch(self) -> Optional[int]:
        return self.state.num_batches_per_epoch

    @property
    def n_batches(self) -> int:
        return self.state.n_batches

    @property
    def total_batches(self) -> Optional[int]:
        return self.state.total_batches
