"""FlagAI's ``EnvTrainer`` argument names, mapped onto :class:`TrainerArgs`.

A FlagAI user keeps their words: ``from_flagai(env_type="pytorchDDP", epochs=3, num_gpus=2, ...)``
gives the TrainerArgs meaning the same run (``pytorchDDP``: the torch driver, data parallel over
``num_gpus`` devices; ``deepspeed``: the DeepSpeed driver with ``deepspeed_config``). Names that
set up something other than the Trainer (batch size, learning rate, checkpoints) are an error
that says where they go here, so nothing is silently dropped. ``checkpoint_activations=True`` sets
``activation_checkpointing``; ``tensorboard`` (EnvArgs' flag) turns the TensorBoard log on or off.
:mod:`fastcore_train.config.flagai_env_args` reads FlagAI's command line (``EnvArgs``).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from fastcore_train.config.trainer_args import TrainerArgs

#: FlagAI name -> TrainerArgs field it sets.
RENAMED = {"epochs": "n_epochs", "gradient_accumulation_steps": "accumulation_steps", "fp16": "fp16",
           "eval_interval": "evaluate_every", "seed": "sampler_seed", "log_interval": "report_every_n_batches",
           "tensorboard_dir": "report_dir", "experiment_name": "run_name", "load_dir": "resume_from"}
#: FlagAI name -> where that setting lives in fastcore_train.
ELSEWHERE = {
    "batch_size": "the dataloader (its batch_size; data.init_args in a config)",
    "lr": "the optimizer (optimizer.init_args.lr in a config)",
    "weight_decay": "the optimizer (optimizer.init_args.weight_decay)",
    "warm_up": "WarmupCallback(warmup=...) in callbacks",
    "clip_grad": "GradClipCallback(clip_value=...) in callbacks",
    "save_dir": "CheckpointCallback(folder=...) in callbacks, or output_dir of fastcore-train fit",
    "save_interval": "CheckpointCallback(every_n_batches=...) in callbacks",
    "save_optim": "checkpoints always hold the optimizer state",
    "save_rng": "checkpoints always hold the random states",
    "load_type": "resume_from (the whole training state) or resume_training=False (weights only)",
    "load_optim": "resume_training=True restores the optimizer",
    "load_rng": "resume_training=True restores the random states",
    "master_ip": "the launcher (torchrun --master_addr)", "master_port": "the launcher (torchrun --master_port)",
    "num_nodes": "the launcher (torchrun --nnodes)", "hostfile": "the launcher (deepspeed --hostfile)",
    "training_script": "the launcher's command line", "not_call_launch": "nothing: ranks self-launch only when "
    "no launcher started them", "local_rank": "the launcher's LOCAL_RANK variable",
    "model_parallel_size": "nothing: model parallelism (deepspeed+mpu) is not supported",
    "num_checkpoints": "nothing: in FlagAI it is DeepSpeed's count of activation checkpoints for deepspeed+mpu "
    "(deepspeed.checkpointing.configure), not a number of saved checkpoints; FlagAI keeps every saved one, as "
    "CheckpointCallback(every_n_batches=...) does (topk=k keeps the k best)",
}
ENV_TYPES = ("pytorch", "pytorchDDP", "deepspeed")


def from_flagai(env_type: str = "pytorch", pytorch_device: Optional[str] = None, num_gpus: int = 1,
                deepspeed_config: Any = None, **names: Any) -> TrainerArgs:
    """The :class:`TrainerArgs` of a FlagAI ``EnvTrainer`` set up with these arguments.

    ``pytorch_device`` left out means what FlagAI does: ``cpu`` for ``pytorch``, GPUs for the data
    parallel types; ``pytorch_device="cpu"`` with ``pytorchDDP`` runs ``num_gpus`` ranks on the CPU.
    """
    if env_type not in ENV_TYPES:
        raise ValueError(f"env_type {env_type!r} is not supported; FlagAI's {', '.join(ENV_TYPES)} are "
                         "(model parallel 'deepspeed+mpu' and 'bmtrain' have no counterpart here).")
    tensorboard = names.pop("tensorboard", None)
    activation_checkpointing = names.pop("checkpoint_activations", False)
    unknown = sorted(set(names) - set(RENAMED) - set(ELSEWHERE))
    if unknown:
        raise ValueError(f"Unknown FlagAI argument(s) {unknown}; known: {sorted([*RENAMED, *ELSEWHERE])}.")
    moved = {name: ELSEWHERE[name] for name in names if name in ELSEWHERE}
    if moved:
        raise ValueError("These FlagAI arguments are not Trainer arguments here: " +
                         "; ".join(f"{name} -> {where}" for name, where in moved.items()) + ".")
    values = {RENAMED[name]: value for name, value in names.items()}
    if env_type == "pytorch":
        values.update(driver="torch", device=pytorch_device or "cpu")
    elif env_type == "pytorchDDP":
        devices = ["cpu"] * num_gpus if pytorch_device == "cpu" else list(range(num_gpus))
        values.update(driver="torch", device=devices)
    else:
        devices = ["cpu"] * num_gpus if pytorch_device == "cpu" else list(range(num_gpus))
        values.update(driver="deepspeed", device=devices)
        if deepspeed_config is not None:
            values["deepspeed_kwargs"] = {"config": deepspeed_config}
    if tensorboard is not None:  # EnvArgs' --tensorboard flag
        values["report_to"] = ["tensorboard"] if tensorboard else []
    elif "report_dir" in values or "report_every_n_batches" in values:
        values.setdefault("report_to", ["tensorboard"])  # FlagAI writes TensorBoard logs
    if activation_checkpointing:
        values[_activation_checkpointing_field()] = True
    return TrainerArgs(**values)


def _activation_checkpointing_field() -> str:
    """The TrainerArgs field FlagAI's ``checkpoint_activations`` sets, where this version has it."""
    if "activation_checkpointing" not in {item.name for item in dataclasses.fields(TrainerArgs)}:
        raise ValueError("checkpoint_activations=True: activation checkpointing is not available in this version of "
                         "fastcore_train; drop the flag (or set it to False) to train without it.")
    return "activation_checkpointing"
