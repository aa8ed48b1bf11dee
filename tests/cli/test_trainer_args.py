"""``TrainerArgs`` holds every Trainer argument that is a value, with its default, and nothing else."""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from fastcore_train.callbacks.checkpoint_callback import CheckpointCallback
from fastcore_train.config import EnvArgs, TrainerArgs, from_flagai, trainer_args_table
from fastcore_train.config.trainer_args import RUN_FIELDS
from fastcore_train.controllers.arguments import TRAINER_OPTIONS
from fastcore_train.controllers.trainer import Trainer
from fastcore_train.drivers.registry import all_driver_kwargs

OBJECTS = {"self", "model", "train_dataloader", "optimizers", "evaluate_dataloaders", "batch_step_fn",
           "evaluate_batch_step_fn", "callbacks", "metrics", "kwargs"}
FIELDS = {item.name: item for item in dataclasses.fields(TrainerArgs)}


def test_every_value_argument_of_the_trainer_is_a_field_with_its_default():
    constructor = inspect.signature(Trainer.__init__).parameters
    run = inspect.signature(Trainer.run).parameters
    expected = (set(constructor) - OBJECTS) | TRAINER_OPTIONS | set(all_driver_kwargs()) | (set(run) - {"self"})
    assert set(FIELDS) == expected
    defaults = TrainerArgs()
    for name, parameter in [*constructor.items(), *run.items()]:
        if name in FIELDS:
            assert getattr(defaults, name) == parameter.default, name
    assert set(RUN_FIELDS) == set(run) - {"self"}
    assert all(item.metadata.get("help") for item in FIELDS.values())


def test_trainer_kwargs_pass_only_changed_arguments():
    args = TrainerArgs(n_epochs=3, sampler_seed=5, resume_from="ckpt")
    kwargs = args.trainer_kwargs()
    assert kwargs == {"n_epochs": 3, "sampler_seed": 5}
    assert "progress_bar" not in kwargs and "torch_kwargs" not in kwargs and "resume_from" not in kwargs
    assert args.run_kwargs()["resume_from"] == "ckpt"
    assert TrainerArgs().report_to is not TrainerArgs().report_to  # no shared mutable default


def test_a_call_adds_its_own_arguments_beside_the_args_ones():
    """FlagAI's and the HF walk-through's form: ``Trainer(..., **args.trainer_kwargs(), input_mapping=...)``."""
    mapping = {"x": "features"}

    def trainer(**kwargs):
        return kwargs

    args = EnvArgs(env_type="pytorchDDP").parse_args(["--num_gpus=2", "--pytorch_device=cpu"]).trainer_args()
    assert trainer(**args.trainer_kwargs(), input_mapping=mapping)["input_mapping"] == mapping
    replaced = TrainerArgs(input_mapping={"a": "b"}).trainer_kwargs(input_mapping=mapping, n_epochs=2)
    assert replaced == {"input_mapping": mapping, "n_epochs": 2}


def test_the_docs_table_is_generated_from_the_fields():
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert trainer_args_table() in page
    assert ":param n_epochs: Epochs to train" in TrainerArgs.__doc__


@pytest.mark.parametrize("env_type, kwargs, driver, device", [
    ("pytorch", {}, "torch", "cpu"),
    ("pytorch", {"pytorch_device": "cuda"}, "torch", "cuda"),
    ("pytorchDDP", {"num_gpus": 2}, "torch", [0, 1]),
    ("pytorchDDP", {"num_gpus": 2, "pytorch_device": "cpu"}, "torch", ["cpu", "cpu"]),
    ("deepspeed", {"num_gpus": 2, "deepspeed_config": "ds.json"}, "deepspeed", [0, 1]),
    ("deepspeed+mpu", {"num_gpus": 4, "model_parallel_size": 2, "deepspeed_config": "ds.json"},
     "torch_model_parallel", [0, 1, 2, 3]),
])
def test_flagai_env_types_map_onto_drivers(env_type, kwargs, driver, device):
    args = from_flagai(env_type=env_type, epochs=4, gradient_accumulation_steps=2, eval_interval=100, **kwargs)
    assert (args.driver, args.device) == (driver, device)
    assert (args.n_epochs, args.accumulation_steps, args.evaluate_every) == (4, 2, 100)
    if env_type == "deepspeed":
        assert args.deepspeed_kwargs == {"config": "ds.json"}
    if env_type == "deepspeed+mpu":  # Megatron-style tensor parallel: 2 groups of 2 ranks
        assert args.torch_model_parallel_kwargs == {"tp_size": 2} and args.deepspeed_kwargs is None


def test_flagai_names_that_belong_elsewhere_say_where():
    with pytest.raises(ValueError, match=r"lr -> the optimizer.*batch_size -> the dataloader"):
        from_flagai(lr=1e-3, batch_size=8)
    with pytest.raises(ValueError, match="env_type 'bmtrain' is not supported"):
        from_flagai(env_type="bmtrain")
    with pytest.raises(ValueError, match="Unknown FlagAI argument"):
        from_flagai(epoch=3)
    with pytest.raises(ValueError, match="env_type='deepspeed\\+mpu'"):
        from_flagai(env_type="deepspeed", num_gpus=2, model_parallel_size=2)
    with pytest.raises(ValueError, match="must divide num_gpus=3"):
        from_flagai(env_type="deepspeed+mpu", num_gpus=3, model_parallel_size=2)
    assert from_flagai(tensorboard_dir="tb", log_interval=10).report_to == ["tensorboard"]
    assert from_flagai(checkpoint_activations=True).trainer_kwargs()["activation_checkpointing"] is True


def test_transformers_names_map_onto_trainer_args():
    args = TrainerArgs.from_transformers(
        output_dir="out", num_train_epochs=3.0, max_steps=10, gradient_accumulation_steps=2, fp16=True,
        eval_strategy="steps", eval_steps=100, logging_steps=20, report_to="tensorboard", seed=7,
        resume_from_checkpoint=True, metric_for_best_model="eval_loss", save_strategy="no", learning_rate=None,
        include_for_metrics=[], warmup_steps=0)
    assert (args.n_epochs, args.n_batches, args.accumulation_steps, args.fp16) == (3, 20, 2, True)  # steps x accum
    assert (args.evaluate_every, args.report_every_n_batches, args.report_to) == (100, 20, ["tensorboard"])
    assert (args.report_dir, args.sampler_seed, args.resume_from) == ("out", 7, "auto")
    assert (args.monitor, args.larger_better) == ("loss", False)  # transformers' eval_loss is our "loss"
    assert args.run_kwargs()["resume_from"] == "auto"
    epochs = TrainerArgs.from_transformers(evaluation_strategy="epoch", metric_for_best_model="accuracy",
                                           logging_dir="tb", resume_from_checkpoint="ckpt/epoch_1")
    assert (epochs.evaluate_every, epochs.monitor, epochs.larger_better) == (-1, "accuracy", True)
    assert (epochs.report_dir, epochs.resume_from) == ("tb", "ckpt/epoch_1")
    assert TrainerArgs.from_transformers(logging_strategy="no").report_every_n_batches == 0
    assert TrainerArgs.from_transformers(deepspeed="ds.json").deepspeed_kwargs == {"config": "ds.json"}
    assert TrainerArgs.from_transformers() == TrainerArgs()
    assert TrainerArgs.from_transformers(gradient_checkpointing=True).activation_checkpointing is True


def test_transformers_names_that_belong_elsewhere_say_where():
    with pytest.raises(ValueError, match=r"learning_rate -> the optimizer.*per_device_train_batch_size -> "
                                         r"the dataloader.*label_smoothing_factor -> the loss your train_step"):
        TrainerArgs.from_transformers(learning_rate=5e-5, per_device_train_batch_size=8, label_smoothing_factor=0.1)
    with pytest.raises(ValueError, match=r"save_strategy -> CheckpointCallback"):
        TrainerArgs.from_transformers(save_strategy="epoch")
    with pytest.raises(ValueError, match=r"remove_unused_columns -> nothing"):
        TrainerArgs.from_transformers(remove_unused_columns=True)
    with pytest.raises(ValueError, match="Unknown transformers argument"):
        TrainerArgs.from_transformers(num_epochs=3)
    with pytest.raises(ValueError, match="whole number"):
        TrainerArgs.from_transformers(num_train_epochs=2.5)
    with pytest.raises(ValueError, match="one of"):
        TrainerArgs.from_transformers(eval_strategy="sometimes")


def test_hf_first_trainer_page_arguments_are_reported_all_at_once():
    """transformers' docs/source/en/trainer.md: its TrainingArguments, then its logging flags. Every
    name not mapped here is in one error with where it goes; an unknown name does not hide them."""
    page = dict(output_dir="your-model", learning_rate=2e-5, per_device_train_batch_size=16,
                per_device_eval_batch_size=16, num_train_epochs=2, weight_decay=0.01, eval_strategy="epoch",
                save_strategy="epoch", load_best_model_at_end=True, push_to_hub=True)
    logging = dict(log_level="warning", log_level_replica="error")
    with pytest.raises(ValueError) as raised:
        TrainerArgs.from_transformers(**page, **logging, log_on_each_node=False, num_epochs=3)
    message = str(raised.value)
    for name in ["learning_rate", "per_device_train_batch_size", "per_device_eval_batch_size", "weight_decay",
                 "save_strategy", "load_best_model_at_end", "push_to_hub", *logging]:
        assert f"{name} -> " in message, name
    assert "set_log_level" in message and "Unknown transformers argument(s) ['num_epochs']" in message
    mapped = TrainerArgs.from_transformers(output_dir="your-model", num_train_epochs=2, eval_strategy="epoch",
                                           log_level="passive", label_names=["labels"], log_on_each_node=True)
    assert (mapped.n_epochs, mapped.evaluate_every, mapped.report_dir) == (2, -1, "your-model")
    with pytest.raises(ValueError, match=r"label_names -> .*evaluate_input_mapping"):
        TrainerArgs.from_transformers(label_names=["start_positions"])


def test_flagai_command_line_parses_as_env_args_does():
    """FlagAI's ``--name=value`` flags, its defaults, ``add_arg``, ``True``/``False`` and ``[a,b]`` values."""
    env_args = EnvArgs(env_type="pytorch", epochs=2, batch_size=4, lora_target_modules="[wq,wv]")
    env_args.add_arg(arg_name="test1", default=0, type=int)
    env_args.add_arg(arg_name="dry_run", store_true=True)
    args = env_args.parse_args(["--epochs=10", "--batch_size=8", "--test1=3", "--fp16=True", "--lr", "0.001",
                                "--lora_target_modules=[q, k]", "--dry_run"])
    assert (args.epochs, args.batch_size, args.test1, args.fp16, args.lr) == (10, 8, 3, True, 0.001)
    assert (args.lora_target_modules, args.dry_run, args.seed, args.not_call_launch) == (["q", "k"], True, 1234, True)
    trainer_args = args.trainer_args()
    assert (trainer_args.driver, trainer_args.device, trainer_args.n_epochs, trainer_args.fp16) == ("torch", "cpu", 10, True)
    assert (trainer_args.evaluate_every, trainer_args.sampler_seed, trainer_args.report_to) == (1000, 1234, [])
    assert env_args.parse_args(["--tensorboard=True"]).trainer_args().report_to == ["tensorboard"]
    ddp = TrainerArgs.parse_args(["--env_type=pytorchDDP", "--num_gpus=2", "--pytorch_device=cpu"], epochs=3)
    assert (ddp.driver, ddp.device, ddp.n_epochs) == ("torch", ["cpu", "cpu"], 3)
    with pytest.raises(SystemExit):  # argparse's one-line usage error
        env_args.parse_args(["--fp16=maybe"])


def test_flagai_save_interval_is_a_checkpoint_callback_and_num_checkpoints_is_not_a_keep_count(tmp_path):
    args = EnvArgs(save_dir=str(tmp_path)).parse_args(["--save_interval=5"])
    callback = CheckpointCallback(**args.checkpoint_kwargs())
    assert (callback.folder, callback.every_n_batches, callback.topk) == (tmp_path, 5, 0)  # FlagAI keeps them all
    assert callback.save_object == "checkpoint"
    with pytest.raises(ValueError, match=r"save_interval -> CheckpointCallback\(every_n_batches=.*num_checkpoints -> "
                                         r"nothing: in FlagAI it is DeepSpeed's count of activation checkpoints"):
        from_flagai(save_interval=5, num_checkpoints=2)


def test_flagai_checkpoint_activations_sets_activation_checkpointing():
    assert from_flagai(checkpoint_activations=False) == from_flagai()
    assert from_flagai(checkpoint_activations=True).activation_checkpointing is True
    assert EnvArgs().parse_args(["--checkpoint_activations=True"]).trainer_args().activation_checkpointing is True
