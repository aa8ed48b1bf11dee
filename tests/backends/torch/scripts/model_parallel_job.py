"""The job for the ``driver="torch_model_parallel"`` tests: one launch of 2 ranks runs every case.

Usage: python model_parallel_job.py CONFIG_JSON (self-launched with ``device=["cpu", "cpu"]``).
For each model (``mlp``, and ``block``: a transformer block whose attention projections are split
column-wise and its output row-wise) it trains 50 steps on 2 ranks with ``tp_size=2`` and with
``tp_size=1`` (data parallel over FSDP2), recording every step's loss, the final full weights,
the evaluation results and predictions. Then the checkpoint case: train the block with
``tp_size=2`` (dp=1), save a checkpoint asynchronously at step ``SAVE_AT`` and stop; resume it
with ``tp_size=1`` (dp=2) to the end. Rank r writes ``<out>/rank_<r>.json``.

``build_trainer`` and the models are what the tests use in their own process.
"""
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

from fastcore_train import Accuracy, GradClipCallback, Trainer  # noqa: E402
from tests.backends.model_parallel_jobs import StepLosses  # noqa: E402

STEPS, BATCH, SAVE_AT = 50, 8, 20
#: clipping (by norm and by value) and accumulation on both meshes, and bfloat16 autocast
VARIANTS = {"clip_norm_tp2": dict(tp_size=2, clip={"clip_value": 0.05}, accumulation_steps=2),
            "clip_norm_tp1": dict(tp_size=1, clip={"clip_value": 0.05}, accumulation_steps=2),
            "clip_value_tp2": dict(tp_size=2, clip={"clip_value": 0.002, "clip_type": "value"}),
            "bf16_tp2": dict(tp_size=2, fp16=True),
            # built on the meta device, each rank reading its shards of the same initial weights from a file
            "meta_tp2": dict(tp_size=2, meta=True), "meta_tp1": dict(tp_size=1, meta=True)}
DIM, HEADS, SEQ, CLASSES = 16, 4, 6, 4
PLANS = {
    "mlp": {"fc1": "colwise", "fc2": "rowwise"},
    "block": {"attn.q": "colwise", "attn.k": "colwise", "attn.v": "colwise", "attn.out": "rowwise",
              "up": "colwise", "down": "rowwise"},
}


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(DIM * SEQ, 64), torch.nn.Linear(64, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.v, self.out = (torch.nn.Linear(DIM, DIM) for _ in range(3))
        # no key bias: its gradient is zero in exact arithmetic, and AdamW would amplify rounding noise
        self.k = torch.nn.Linear(DIM, DIM, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # -1 heads: under tensor parallel each rank holds DIM / tp of the projections, i.e. its heads
        q, k, v = (proj(x).view(b, s, -1, DIM // HEADS).transpose(1, 2) for proj in (self.q, self.k, self.v))
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out(attended.transpose(1, 2).reshape(b, s, -1))


class Block(torch.nn.Module):
    """A pre-norm transformer block and a classifier head (not split: replicated across tp)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(DIM), torch.nn.LayerNorm(DIM)
        self.attn = Attention()
        self.up, self.down = torch.nn.Linear(DIM, 4 * DIM), torch.nn.Linear(4 * DIM, DIM)
        self.head = torch.nn.Linear(DIM, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        x = x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))
        return self.head(x.mean(dim=1))


def train_step(self, x, y):
    return {"loss": torch.nn.functional.cross_entropy(self(x), y)}


def evaluate_step(self, x):
    return {"pred": self(x)}


for _cls in (MLP, Block):
    _cls.train_step, _cls.evaluate_step = train_step, evaluate_step
MODELS = {"mlp": MLP, "block": Block}


class Samples(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.x = torch.from_numpy(rng.normal(0, 1, (n, SEQ, DIM)).astype(np.float32))
        self.y = torch.from_numpy(rng.integers(0, CLASSES, n).astype(np.int64))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict:
        return {"x": self.x[index], "y": self.y[index]}


def initial_weights_file(model_name, folder):
    """The seeded initial weights of ``model_name`` as a safetensors file in ``folder`` (written
    once: a self-launched job runs this in rank 0 before it starts the other rank)."""
    from safetensors.torch import save_file

    path = Path(folder, f"initial_{model_name}.safetensors")
    if not path.exists():
        torch.manual_seed(0)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # both ranks may write it: same bytes
        save_file(MODELS[model_name]().state_dict(), str(partial))
        partial.replace(path)
    return path


def build_trainer(model_name, driver, device, batch_size, callbacks=(), tp_size=None, clip=None, meta=None,
                  **kwargs):
    """A Trainer of ``model_name`` (seeded weights; AdamW, or SGD with ``clip``: GradClipCallback's
    arguments) over ``STEPS`` steps of the global batch ``BATCH`` (each rank of a dp=2 job reads
    ``batch_size = BATCH / 2``, or half that accumulating 2 batches). ``meta``: a folder; the model
    is built on the meta device and each rank reads its shards of the seeded weights from there."""
    torch.manual_seed(0)
    if meta is None:
        model = MODELS[model_name]()
    else:
        init_weights = initial_weights_file(model_name, meta)
        with torch.device("meta"):
            model = MODELS[model_name]()
    if clip is None:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        callbacks = [*callbacks, GradClipCallback(**clip)]
    if tp_size is not None:
        kwargs["torch_model_parallel_kwargs"] = {"tp_size": tp_size, "tp_plan": PLANS[model_name],
                                               "fsdp_layers": ["Linear"]}  # (FSDP2 units: dp > 1 only)
        if meta is not None:
            kwargs["torch_model_parallel_kwargs"]["init_weights"] = init_weights
    loader = DataLoader(Samples(STEPS * BATCH // 2, seed=1), batch_size=batch_size, shuffle=True)
    dev = DataLoader(Samples(13, seed=2), batch_size=3)
    return Trainer(model, loader, optimizer, driver=driver, device=device, n_epochs=2, progress_bar=None,
                   callbacks=list(callbacks), evaluate_dataloaders={"dev": dev}, metrics={"acc": Accuracy()},
                   evaluate_input_mapping={"y": "target"}, **kwargs)


def full_weights(trainer) -> dict:
    """The user model's full weights as lists (DTensors gathered: collective)."""
    state = trainer.driver.unwrap_model().state_dict()
    return {name: (value.full_tensor() if hasattr(value, "full_tensor") else value).detach().cpu().tolist()
            for name, value in state.items()}


def predictions(trainer) -> list:
    predicted = trainer.predict(DataLoader(Samples(7, seed=3), batch_size=3))
    return np.asarray(predicted["pred"]).tolist()


def main(config):
    out = Path(config["out"])
    record = {}
    for model_name in ("mlp", "block"):
        for tp_size in (2, 1):
            losses = StepLosses()
            trainer = build_trainer(model_name, "torch_model_parallel", ["cpu", "cpu"], BATCH * tp_size // 2,
                                    [losses], tp_size=tp_size)
            trainer.run(num_eval_sanity_batch=0)
            record[f"{model_name}_tp{tp_size}"] = {
                "losses": losses.losses, "weights": full_weights(trainer), "results": trainer.evaluator.run(),
                "predictions": predictions(trainer), "dp": trainer.driver.data_shard(),
                "driver": type(trainer.driver).__name__}
    for name, variant in VARIANTS.items():
        losses = StepLosses()
        batch = BATCH * variant["tp_size"] // 2 // variant.get("accumulation_steps", 1)
        if variant.get("meta"):
            variant = {**variant, "meta": out}
        trainer = build_trainer("mlp", "torch_model_parallel", ["cpu", "cpu"], batch, [losses], **variant)
        trainer.run(num_eval_sanity_batch=0)
        record[name] = {"losses": losses.losses, "weights": full_weights(trainer), "on_meta": trainer.driver._on_meta}
    saving = StepLosses(stop_at=SAVE_AT, folder=out / "checkpoint", blocking=False)
    build_trainer("block", "torch_model_parallel", ["cpu", "cpu"], BATCH, [saving], tp_size=2).run(num_eval_sanity_batch=0)
    resumed = build_trainer("block", "torch_model_parallel", ["cpu", "cpu"], BATCH // 2, tp_size=1)
    resumed.run(num_eval_sanity_batch=0, resume_from=out / "checkpoint")
    record["resumed_dp2"] = {"weights": full_weights(resumed), "batches": resumed.global_forward_batches}
    (out / f"rank_{resumed.driver.comm.rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
