"""``TrainerArgs``: every Trainer argument that is not an object, with its default and help text.

One typed dataclass is the single source for the ``fastcore-train fit`` command line (jsonargparse
reads its fields and the help below), for the table on the "Configuration and command line" docs
page (:func:`trainer_args_table`) and for building a Trainer in Python::

    args = TrainerArgs(n_epochs=3, driver="torch")
    trainer = Trainer(model, train_dataloader, optimizer, **args.trainer_kwargs())
    trainer.run(**args.run_kwargs())

The objects (model, dataloaders, optimizers, metrics, callbacks) are not here: the command line
names them by import path. Names follow fastNLP 1.0 (``n_epochs``, ``evaluate_every``, ...);
:mod:`fastcore_train.config.flagai` maps FlagAI's ``EnvTrainer`` names onto these fields and
:mod:`fastcore_train.config.transformers_args` transformers' ``TrainingArguments`` names.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

#: Fields that are ``Trainer.run()`` arguments rather than constructor arguments.
RUN_FIELDS = ("num_train_batch_per_epoch", "num_eval_batch_per_dl", "num_eval_sanity_batch", "resume_from",
              "resume_training", "catch_KeyboardInterrupt")


def _arg(default: Any, help: str) -> Any:
    """A dataclass field with its help text (lists and dicts get a fresh copy per instance)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class TrainerArgs:
    """The Trainer's arguments that are values, not objects (see the module docstring)."""

    # ---- what trains where
    driver: str = _arg("auto", "Backend driver: torch, fairscale, torch_fsdp, deepspeed, torch_model_parallel, paddle, "
                               "paddle_model_parallel, jittor, oneflow, or auto (the model's framework).")
    device: Union[int, str, list[Union[int, str]], None] = _arg("cpu", "Device: 'cpu', 'cuda:0', a GPU index, or a list ([0,1], [cpu,cpu]) for data "
                                 "parallel (self-launched unless a launcher started the ranks); None: do not move the model.")
    fp16: bool = _arg(False, "Mixed precision (autocast and a gradient scaler where the backend has one).")
    # ---- how long, how often
    n_epochs: int = _arg(20, "Epochs to train (0: only the evaluation before training).")
    n_batches: int = _arg(-1, "Stop after this many batches in all (-1: n_epochs decides).")
    accumulation_steps: int = _arg(1, "Batches whose gradients are summed before each optimizer step.")
    evaluate_every: int = _arg(-1, "Evaluate every n batches (>0) or every n epochs (<0).")
    monitor: Optional[str] = _arg(None, "Result name the best checkpoint and early stopping watch (e.g. acc).")
    larger_better: bool = _arg(True, "Whether a larger monitored value is better.")
    overfit_batches: int = _arg(0, "Train and evaluate on the first n batches only (-1: the whole training set; 0: off).")
    # ---- how the model is called
    train_fn: Optional[str] = _arg(None, "Model method for a training step (default: train_step, else forward).")
    evaluate_fn: Optional[str] = _arg(None, "Model method for an evaluation step (default: evaluate_step, else forward).")
    input_mapping: Optional[dict[str, str]] = _arg(None, "Rename batch keys before the model call, for training and evaluation.")
    output_mapping: Optional[dict[str, str]] = _arg(None, "Rename model output keys, for training and evaluation.")
    train_input_mapping: Optional[dict[str, str]] = _arg(None, "input_mapping for training only.")
    train_output_mapping: Optional[dict[str, str]] = _arg(None, "output_mapping for training only.")
    evaluate_input_mapping: Optional[dict[str, str]] = _arg(None, "input_mapping for evaluation only.")
    evaluate_output_mapping: Optional[dict[str, str]] = _arg(None, "output_mapping for evaluation only.")
    model_wo_auto_param_call: bool = _arg(False, "Pass the batch whole to the model instead of matching its keys to "
                                                 "the method's parameters.")
    model_use_eval_mode: bool = _arg(True, "Put the model in eval mode while evaluating.")
    activation_checkpointing: Union[bool, str, list[str], None] = _arg(
        None, "Recompute these layers' activations in backward instead of keeping them (less memory, more compute): "
              "True (every block of a ModuleList/Sequential), or layer class names; None: off.")
    # ---- data
    use_dist_sampler: Optional[bool] = _arg(None, "Split the training data across ranks (None: yes when data parallel).")
    evaluate_use_dist_sampler: Optional[bool] = _arg(None, "Split the evaluation data across ranks (None: as use_dist_sampler).")
    sampler_seed: int = _arg(0, "Seed of the reproducible samplers the Trainer puts in the dataloaders.")
    data_device: Optional[str] = _arg(None, "Device batches are moved to (None: the model's).")
    # ---- output and logging
    progress_bar: Optional[str] = _arg("auto", "Progress display: auto, rich, tqdm, raw, or None.")
    log_file: Optional[str] = _arg(None, "Also write the log to this file.")
    model_summary: bool = _arg(True, "Log the model summary table when training starts.")
    output_from_new_proc: str = _arg("only_error", "Self-launched ranks' output: all, ignore, only_error, or a folder "
                                                   "for rank_N.log files.")
    collective_timeout: float = _arg(600.0, "Data parallel: seconds a rank may make no progress before every rank "
                                             "exits naming the rank that did not arrive.")
    report_to: list[str] = _arg([], "Metric logs and experiment trackers to report to: csv, tensorboard, mlflow, "
                                    "wandb, swanlab (or all: every installed one).")
    report_dir: str = _arg("logs", "Folder of the report_to logs (csv and tensorboard files, mlflow's SQLite "
                                   "store, wandb's and swanlab's offline runs).")
    report_every_n_batches: int = _arg(50, "Report the training loss and learning rates every n batches (0: never).")
    run_name: Optional[str] = _arg(None, "Run name shown by the trackers (default: the run folder's name).")
    nan_guard: Union[bool, int] = _arg(True, "Stop with NonFiniteLossError when the training loss is NaN or inf, "
                                             "checked every 50 batches and at each epoch's last (an int n: every n "
                                             "batches; False: never).")
    marker: Optional[str] = _arg(None, "Which @Trainer.on functions apply to this Trainer.")
    # ---- backend options
    torch_kwargs: Optional[dict[str, Any]] = _arg(None, "Options of the torch driver (see the torch backend page).")
    fairscale_kwargs: Optional[dict[str, Any]] = _arg(None, "Options of the fairscale driver.")
    torch_fsdp_kwargs: Optional[dict[str, Any]] = _arg(None, "Options of the torch_fsdp driver.")
    torch_model_parallel_kwargs: Optional[dict[str, Any]] = _arg(
        None, "Options of the torch_model_parallel driver (tp_size, tp_plan, state_dict_type, fully_shard_kwargs).")
    deepspeed_kwargs: Optional[dict[str, Any]] = _arg(None, "Options of the deepspeed driver (config: its JSON config).")
    paddle_kwargs: Optional[dict[str, Any]] = _arg(None, "Options of the paddle driver.")
    paddle_model_parallel_kwargs: Optional[dict[str, Any]] = _arg(
        None, "Options of the paddle_model_parallel driver (tp_size, tp_plan).")
    jittor_kwargs: Optional[dict[str, Any]] = _arg(None, "Options of the jittor driver.")
    oneflow_kwargs: Optional[dict[str, Any]] = _arg(None, "Options of the oneflow driver.")
    # ---- Trainer.run()
    num_train_batch_per_epoch: int = _arg(-1, "run(): train at most this many batches per epoch (-1: all).")
    num_eval_batch_per_dl: int = _arg(-1, "run(): evaluate at most this many batches per dataloader (-1: all).")
    num_eval_sanity_batch: int = _arg(2, "run(): batches evaluated before training to catch errors early "
                                         "(0: none, -1: all).")
    resume_from: Optional[str] = _arg(None, "run(): checkpoint folder to resume from.")
    resume_training: bool = _arg(True, "run(): restore the training state too (False: the model's weights only).")
    catch_KeyboardInterrupt: Optional[bool] = _arg(None, "run(): end quietly on Ctrl-C (None: yes unless data parallel).")

    def trainer_kwargs(self, **yours: Any) -> dict[str, Any]:
        """Keyword arguments for ``Trainer(model, train_dataloader, optimizers, **...)``.

        Only the options that differ from the Trainer's defaults, so the Trainer sees exactly what a
        hand-written call would pass, and a call may add its own (``Trainer(..., **args.trainer_kwargs(),
        input_mapping=...)``) without "got multiple values for keyword argument". ``yours`` are
        added (or replace these values) here: ``trainer_kwargs(input_mapping=...)``.
        """
        values: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            if item.name in RUN_FIELDS:
                continue
            value = getattr(self, item.name)
            if value != _default_of(item):
                values[item.name] = value
        return {**values, **yours}

    def run_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``trainer.run(**...)``."""
        return {name: getattr(self, name) for name in RUN_FIELDS}

    @classmethod
    def from_transformers(cls, **training_arguments: Any) -> "TrainerArgs":
        """The TrainerArgs of a transformers ``TrainingArguments(**training_arguments)`` setup; names
        that configure something else are an error saying where they go
        (:mod:`fastcore_train.config.transformers_args`)."""
        from fastcore_train.config.transformers_args import from_transformers
        return from_transformers(**training_arguments)

    @classmethod
    def from_flagai(cls, **env_trainer_arguments: Any) -> "TrainerArgs":
        """The TrainerArgs of a FlagAI ``EnvTrainer`` setup (:func:`fastcore_train.config.from_flagai`)."""
        from fastcore_train.config.flagai import from_flagai
        return from_flagai(**env_trainer_arguments)

    @classmethod
    def parse_args(cls, args: Optional[Sequence[str]] = None, **flagai_defaults: Any) -> "TrainerArgs":
        """The TrainerArgs of a FlagAI command line (``--epochs=10 --env_type=pytorchDDP ...``;
        default: ``sys.argv``), ``flagai_defaults`` as ``EnvArgs(**...)`` takes them. For your own
        flags and the non-Trainer values use :class:`fastcore_train.config.EnvArgs`."""
        from fastcore_train.config.flagai_env_args import EnvArgs
        return EnvArgs(**flagai_defaults).parse_args(args).trainer_args()

    def replace(self, **changes: Any) -> "TrainerArgs":
        """A copy with ``changes`` applied (unknown names are a TypeError)."""
        return dataclasses.replace(self, **changes)


def _default_of(item: dataclasses.Field) -> Any:
    if item.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return item.default_factory()  # type: ignore[misc]
    return item.default


def help_of(name: str) -> str:
    """The help text of the ``TrainerArgs`` field ``name``."""
    return {item.name: item.metadata["help"] for item in dataclasses.fields(TrainerArgs)}[name]


def trainer_args_table() -> str:
    """A markdown table of every field: name, type, default, help (the docs page shows it)."""
    rows = ["| argument | type | default | meaning |", "| --- | --- | --- | --- |"]
    for item in dataclasses.fields(TrainerArgs):
        kind = str(item.type).replace("typing.", "").replace("|", "\\|")
        default = repr(_default_of(item)).replace("|", "\\|")
        rows.append(f"| `{item.name}` | `{kind}` | `{default}` | {item.metadata['help']} |")
    return "\n".join(rows) + "\n"


# jsonargparse (and help()) read a class's parameter help from its docstring: written from the
# fields' help texts, so the help exists once.
TrainerArgs.__doc__ = (TrainerArgs.__doc__ or "") + "\n\n" + "\n".join(
    f":param {item.name}: {item.metadata['help']}" for item in dataclasses.fields(TrainerArgs))
