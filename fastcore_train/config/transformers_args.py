"""transformers' ``TrainingArguments`` names, mapped onto :class:`TrainerArgs`.

``TrainerArgs.from_transformers(num_train_epochs=3, eval_strategy="steps", eval_steps=100, ...)``
gives the TrainerArgs meaning the same run. Names that set up something other than the Trainer
(batch size, learning rate, checkpoints, the Hub) are an error that says where they go here, so
nothing is silently dropped; such a name given an off value (None, False, 0, an empty list) asks for
nothing and is accepted.
"""
from __future__ import annotations

from typing import Any

from fastcore_train.config.trainer_args import TrainerArgs

__all__ = ["from_transformers", "RENAMED", "ELSEWHERE", "NO_EFFECT"]

#: transformers name -> TrainerArgs field it sets unchanged.
RENAMED = {"gradient_accumulation_steps": "accumulation_steps", "fp16": "fp16", "logging_dir": "report_dir",
           "run_name": "run_name", "greater_is_better": "larger_better",
           "gradient_checkpointing": "activation_checkpointing"}
#: names read together with others (see :func:`from_transformers`).
COMBINED = ("num_train_epochs", "max_steps", "eval_strategy", "evaluation_strategy", "eval_steps", "save_strategy",
            "logging_strategy", "logging_steps", "report_to", "output_dir", "seed", "data_seed",
            "resume_from_checkpoint", "metric_for_best_model", "disable_tqdm", "deepspeed", "eval_on_start")
_CHECKPOINTS = "CheckpointCallback(folder, every_n_batches=..., topk=...) in callbacks"
_OPTIMIZER = "the optimizer you build (optimizer.init_args in a config)"
_DATALOADER = "the dataloader you build (its batch_size, num_workers, drop_last, pin_memory, collate_fn)"
#: transformers names that change nothing here, and why (accepted with any value).
NO_EFFECT = {"log_on_each_node": "rank 0 logs for the whole job (FASTCORE_TRAIN_LOG_ALL_RANKS=1: every rank)"}
_LOG_LEVEL = "fastcore_train.set_log_level(level) before building the Trainer (or FASTCORE_TRAIN_LOG_LEVEL)"
#: transformers name -> where that setting lives in fastcore_train.
ELSEWHERE = {
    "per_device_train_batch_size": _DATALOADER, "per_device_eval_batch_size": _DATALOADER,
    "dataloader_num_workers": _DATALOADER, "dataloader_drop_last": _DATALOADER,
    "dataloader_pin_memory": _DATALOADER, "group_by_length": "BucketedBatchSampler in the dataloader",
    "learning_rate": _OPTIMIZER, "weight_decay": _OPTIMIZER, "adam_beta1": _OPTIMIZER, "adam_beta2": _OPTIMIZER,
    "adam_epsilon": _OPTIMIZER, "optim": _OPTIMIZER,
    "lr_scheduler_type": "LRSchedCallback(scheduler) in callbacks",
    "warmup_steps": "WarmupCallback(warmup=steps) in callbacks", "warmup_ratio": "WarmupCallback(warmup=ratio)",
    "max_grad_norm": "GradClipCallback(clip_value=...) in callbacks",
    "label_smoothing_factor": "the loss your train_step computes (e.g. the framework's cross entropy's "
                              "label_smoothing)",
    "label_names": "nothing for 'labels' or 'label' (the metrics read them as target); another key: "
                   "evaluate_input_mapping={key: 'target'} (input_mapping would take it from the model too)",
    "log_level": _LOG_LEVEL, "log_level_replica": _LOG_LEVEL + " (the other ranks log warnings and errors only; "
    "FASTCORE_TRAIN_LOG_ALL_RANKS=1 gives them rank 0's level)",
    "torch_compile_backend": "compile the model before building the Trainer (torch.compile(model, backend=...))",
    "torch_compile_mode": "compile the model before building the Trainer (torch.compile(model, mode=...))",
    "remove_unused_columns": "nothing: the model's method gets the batch entries its parameters name",
    "save_steps": _CHECKPOINTS, "save_total_limit": _CHECKPOINTS, "save_only_model": _CHECKPOINTS,
    "save_safetensors": "save_neutral_weights / convert_checkpoint (safetensors)",
    "load_best_model_at_end": "LoadBestModelCallback in callbacks",
    "overwrite_output_dir": "nothing: each run writes its own timestamped folder",
    "eval_accumulation_steps": "nothing: predict(..., output_dir=...) streams large outputs to disk",
    "prediction_loss_only": "an evaluate_step that returns only the loss (the result 'loss')",
    "include_inputs_for_metrics": "EvalPrediction.inputs is None here: return what the metric needs from "
                                  "evaluate_step",
    "include_for_metrics": "EvalPrediction.inputs is None here; the mean evaluation loss is the result 'loss'",
    "eval_delay": "evaluate_every=callable(trainer) -> bool",
    "logging_first_step": "a Callback's on_train_batch_end",
    "bf16": "fp16=True: the backend's mixed precision (see its backend page for the dtype)",
    "do_train": "your script calls trainer.run()",
    "do_eval": "your script calls trainer.evaluate() (or run_evaluate())",
    "do_predict": "your script calls trainer.predict()",
    "use_cpu": "device='cpu' (the default)", "no_cuda": "device='cpu' (the default)",
    "local_rank": "the launcher's LOCAL_RANK variable", "ddp_backend": "the backend's driver (driver=)",
    "ddp_find_unused_parameters": "the torch backend's options (torch_kwargs)",
    "fsdp": "driver='torch_fsdp' (or fairscale_kwargs={'fsdp': True})",
    "torch_compile": "compile the model before building the Trainer",
    "push_to_hub": "not supported: upload the saved folder with huggingface_hub",
    "hub_model_id": "not supported: upload the saved folder with huggingface_hub",
    "hub_strategy": "not supported: upload the saved folder with huggingface_hub",
    "hub_token": "not supported: upload the saved folder with huggingface_hub",
}
_STRATEGIES = ("no", "steps", "epoch")
#: Values that ask for nothing beyond the defaults here (transformers' own defaults among them).
_ASKS_FOR_NOTHING = {"label_names": (["labels"], ["label"], ("labels",), ("label",)),
                     "log_level": ("passive",), "log_level_replica": ("passive", "warning")}


def _asks_for_something(name: str, value: Any) -> bool:
    return bool(value) and value not in _ASKS_FOR_NOTHING.get(name, ())


def _strategy(name: str, value: Any) -> str:
    """An ``IntervalStrategy`` (or its string) as its string."""
    text = str(getattr(value, "value", value))
    if text not in _STRATEGIES:
        raise ValueError(f"{name}={value!r}: one of {_STRATEGIES} is expected.")
    return text


def _whole(name: str, value: Any) -> int:
    """A count of batches or epochs; transformers' fractions (a ratio of the run) have no counterpart."""
    if isinstance(value, bool) or not float(value).is_integer():
        raise ValueError(f"{name}={value!r}: a whole number is needed here (fractions of the run are not supported).")
    return int(value)


def _check_every_name(names: dict[str, Any]) -> None:
    """One error naming every argument that is not mapped here: those set elsewhere, each with where
    it goes, and those unknown; nothing when every name is the Trainer's or asks for nothing."""
    known = set(RENAMED) | set(COMBINED) | set(ELSEWHERE) | set(NO_EFFECT)
    unknown = sorted(set(names) - known)
    moved = {name: ELSEWHERE[name] for name, value in names.items()
             if name in ELSEWHERE and _asks_for_something(name, value)}
    save = names.get("save_strategy")
    if save is not None and _strategy("save_strategy", save) != "no":
        moved["save_strategy"] = _CHECKPOINTS
    parts = []
    if moved:
        parts.append("These transformers arguments are not Trainer arguments here: " +
                     "; ".join(f"{name} -> {where}" for name, where in moved.items()) + ".")
    if unknown:
        parts.append(f"Unknown transformers argument(s) {unknown}: no TrainingArguments field of that name is mapped "
                     "here (see docs/migration.md, 'Coming from the transformers TrainingArguments').")
    if parts:
        raise ValueError(" ".join(parts))


def from_transformers(**names: Any) -> TrainerArgs:
    """The :class:`TrainerArgs` of a transformers ``TrainingArguments(**names)`` setup."""
    _check_every_name(names)
    values = {RENAMED[name]: value for name, value in names.items() if name in RENAMED}
    accumulation = int(values.get("accumulation_steps", 1))
    if names.get("num_train_epochs") is not None:
        values["n_epochs"] = _whole("num_train_epochs", names["num_train_epochs"])
    if names.get("max_steps") not in (None, -1):  # optimizer steps there, batches here
        values["n_batches"] = _whole("max_steps", names["max_steps"]) * accumulation
    logging = _strategy("logging_strategy", names.get("logging_strategy", "steps"))
    if logging == "epoch":
        raise ValueError("logging_strategy='epoch' -> the metric logs record every evaluation; for the loss, "
                         "report_every_n_batches=<batches per epoch>.")
    if logging == "no":
        values["report_every_n_batches"] = 0
    elif names.get("logging_steps") is not None:
        values["report_every_n_batches"] = _whole("logging_steps", names["logging_steps"])
    strategy = names.get("eval_strategy", names.get("evaluation_strategy"))
    if strategy is not None and _strategy("eval_strategy", strategy) == "steps":
        steps = names.get("eval_steps", names.get("logging_steps", 500))
        values["evaluate_every"] = _whole("eval_steps", steps)
    elif strategy is not None and _strategy("eval_strategy", strategy) == "epoch":
        values["evaluate_every"] = -1
    if names.get("report_to") is not None:
        report_to = names["report_to"]
        values["report_to"] = [report_to] if isinstance(report_to, str) else list(report_to)
    if names.get("output_dir") is not None and "report_dir" not in values:
        values["report_dir"] = str(names["output_dir"])  # transformers logs under output_dir too
    seed = names.get("data_seed", names.get("seed"))
    if seed is not None:
        values["sampler_seed"] = int(seed)
    resume = names.get("resume_from_checkpoint")
    if resume is True:
        values["resume_from"] = "auto"
    elif resume not in (None, False):
        values["resume_from"] = str(resume)
    metric = names.get("metric_for_best_model")
    if metric is not None:
        metric = metric[len("eval_"):] if metric.startswith("eval_") else metric
        values["monitor"] = metric
        values.setdefault("larger_better", metric != "loss")  # transformers' default
    if names.get("disable_tqdm"):
        values["progress_bar"] = None
    if names.get("deepspeed") is not None:
        values.update(driver="deepspeed", deepspeed_kwargs={"config": names["deepspeed"]})
    if names.get("eval_on_start"):
        values["num_eval_sanity_batch"] = -1  # the evaluation before training covers every batch
    return TrainerArgs(**values)
