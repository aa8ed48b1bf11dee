"""The job for the ``driver="paddle_model_parallel"`` test: one launch of 2 ranks runs every case.

Usage: python model_parallel_job.py CONFIG_JSON (self-launched with ``device=["cpu", "cpu"]``).
An MLP (``fc1`` split column-wise, ``fc2`` row-wise) trains ``STEPS`` steps with ``tp_size=2``
(mesh dp=1 x tp=2) and with ``tp_size=1`` (dp=2 x tp=1: data parallel, each rank half the batch),
recording every step's loss, the final full weights and the evaluation results; a few steps with
gradient clipping (by norm, then by value); then the checkpoint case: train to step ``SAVE_AT``,
save a checkpoint and stop, and resume it on the same mesh to the end. Rank r writes
``<out>/rank_<r>.json``. ``build_trainer`` and the model are what the test uses in its own
process.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle.io import DataLoader, Dataset  # noqa: E402

from fastcore_train import Accuracy, GradClipCallback, Trainer  # noqa: E402
from tests.backends.model_parallel_jobs import StepLosses  # noqa: E402

STEPS, BATCH, SAVE_AT, CLIP_STEPS = 50, 8, 20, 10
DIM, HIDDEN, CLASSES = 12, 32, 4
PLAN = {"fc1": "colwise", "fc2": "rowwise"}
#: clipping by norm and by value (SGD with momentum, CLIP_STEPS steps), small enough to act
CLIPS = {"clip_norm": {"clip_value": 0.05}, "clip_value": {"clip_value": 0.002, "clip_type": "value"}}


class MLP(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = paddle.nn.Linear(DIM, HIDDEN), paddle.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.fc2(paddle.nn.functional.relu(self.fc1(x)))

    def train_step(self, x, y):
        return {"loss": paddle.nn.functional.cross_entropy(self(x), y)}

    def evaluate_step(self, x):
        return {"pred": self(x)}


class Samples(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.x = rng.normal(0, 1, (n, DIM)).astype(np.float32)
        self.y = rng.integers(0, CLASSES, n).astype(np.int64)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict:
        return {"x": self.x[index], "y": self.y[index]}


def build_trainer(driver, device, callbacks=(), tp_size=None, clip=None, steps=STEPS, batch_size=BATCH, **kwargs):
    """A Trainer of the seeded MLP (AdamW; SGD with momentum and GradClipCallback(**clip) with
    ``clip``) over ``steps`` steps of ``BATCH`` samples (each rank of a dp=2 job reads
    ``batch_size = BATCH / 2``), shuffled, 2 epochs."""
    paddle.seed(0)
    model = MLP()
    if clip is None:
        optimizer = paddle.optimizer.AdamW(learning_rate=1e-2, parameters=model.parameters())
    else:
        optimizer = paddle.optimizer.Momentum(learning_rate=0.5, momentum=0.9, parameters=model.parameters())
        callbacks = [*callbacks, GradClipCallback(**clip)]
    if tp_size is not None:
        kwargs["paddle_model_parallel_kwargs"] = {"tp_size": tp_size, "tp_plan": PLAN}
    loader = DataLoader(Samples(steps * BATCH // 2, seed=1), batch_size=batch_size, shuffle=True)
    dev = DataLoader(Samples(13, seed=2), batch_size=3)
    return Trainer(model, loader, optimizer, driver=driver, device=device, n_epochs=2, progress_bar=None,
                   callbacks=list(callbacks), evaluate_dataloaders={"dev": dev}, metrics={"acc": Accuracy()},
                   evaluate_input_mapping={"y": "target"}, **kwargs)


def full_weights(trainer) -> dict:
    """The user model's full weights as lists (split tensors gathered: collective)."""
    return {name: np.asarray(value).tolist() for name, value in trainer.driver.io.model_state().items()}


def main(config):
    out = Path(config["out"])
    record = {}
    for tp_size in (2, 1):
        losses = StepLosses()
        trainer = build_trainer("paddle_model_parallel", ["cpu", "cpu"], [losses], tp_size=tp_size,
                                batch_size=BATCH * tp_size // 2)
        trainer.run(num_eval_sanity_batch=0)
        record[f"tp{tp_size}"] = {
            "losses": losses.losses, "weights": full_weights(trainer), "results": trainer.evaluator.run(),
            "dp": list(trainer.driver.data_shard()), "driver": type(trainer.driver).__name__,
            "local_shapes": {name: list(p._local_value().shape)
                             for name, p in trainer.driver.unwrap_model().named_parameters()}}
    for name, clip in CLIPS.items():
        clipped = build_trainer("paddle_model_parallel", ["cpu", "cpu"], tp_size=2, clip=clip, steps=CLIP_STEPS)
        clipped.run(num_eval_sanity_batch=0)
        record[name] = {"weights": full_weights(clipped)}
    saving = StepLosses(stop_at=SAVE_AT, folder=out / "checkpoint")
    build_trainer("paddle_model_parallel", ["cpu", "cpu"], [saving], tp_size=2).run(num_eval_sanity_batch=0)
    resumed = build_trainer("paddle_model_parallel", ["cpu", "cpu"], tp_size=2)
    resumed.run(num_eval_sanity_batch=0, resume_from=out / "checkpoint")
    record["resumed_tp2"] = {"weights": full_weights(resumed), "batches": resumed.global_forward_batches}
    (out / f"rank_{resumed.driver.comm.rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
