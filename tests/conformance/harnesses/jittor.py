"""The jittor side of the conformance suite.

Jittor's ``nn.Linear.weight`` is ``[out, in]`` like torch's, so weights are transposed on the
way in and out. A jittor Dataset is its own loader (``set_attrs(batch_size=..., shuffle=...)``).
The hand-written loop is jittor's idiom: ``optimizer.step(loss)``, or ``optimizer.backward``
per micro-batch and ``optimizer.step()`` when accumulating.
"""
from __future__ import annotations

from typing import Any

import jittor as jt
import numpy as np
from jittor.dataset import Dataset

import fastcore_train.backends.jittor  # noqa: F401  (undoes jittor's exit-on-SIGCHLD handler in this process)

from tests.conformance.harnesses.base import BackendHarness


class MLP(jt.Module):
    def __init__(self, weights: dict[str, np.ndarray], dropout: float) -> None:
        super().__init__()
        self.fc1 = jt.nn.Linear(*weights["w1"].shape)
        self.fc2 = jt.nn.Linear(*weights["w2"].shape)
        self.dropout = jt.nn.Dropout(dropout)
        self.fc1.weight.assign(jt.array(weights["w1"].T.copy()))
        self.fc1.bias.assign(jt.array(weights["b1"]))
        self.fc2.weight.assign(jt.array(weights["w2"].T.copy()))
        self.fc2.bias.assign(jt.array(weights["b2"]))

    def execute(self, x: jt.Var) -> jt.Var:
        return self.fc2(self.dropout(jt.nn.relu(self.fc1(x))))

    def train_step(self, x: jt.Var, y: jt.Var) -> dict[str, jt.Var]:
        return {"loss": jt.nn.cross_entropy_loss(self(x), y)}

    def evaluate_step(self, x: jt.Var) -> dict[str, jt.Var]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool = False,
                 with_index: bool = False) -> None:
        super().__init__()
        self.x, self.y = x, y
        self.with_index = with_index
        self.set_attrs(total_len=len(x), batch_size=batch_size, shuffle=shuffle)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        sample = {"x": self.x[index], "y": self.y[index]}
        if self.with_index:
            sample["idx"] = np.int64(index)
        return sample


class DatasetOver(Dataset):
    """Any sized, indexable dataset as a jittor Dataset (jittor's loader is its Dataset class)."""

    def __init__(self, inner: Any, batch_size: int, collate_fn: Any = None) -> None:
        super().__init__()
        self.inner, self.collate_fn = inner, collate_fn
        self.set_attrs(total_len=len(inner), batch_size=batch_size, shuffle=False)

    def __getitem__(self, index: int) -> Any:
        return self.inner[int(index)]

    def collate_batch(self, batch: Any) -> Any:
        """jittor's place for a collate function (its Dataset is its loader)."""
        return super().collate_batch(batch) if self.collate_fn is None else self.collate_fn(batch)


def _clip(optimizer: jt.optim.Optimizer, clip_type: str, value: float) -> None:
    """Jittor's optimizer clips by norm; by value, each gradient it holds is clamped (``Var.clamp``)."""
    if clip_type == "norm":
        optimizer.clip_grad_norm(value)
        return
    for group in optimizer.param_groups:
        for grad in group["grads"]:
            grad.update(grad.clamp(-value, value))


class Harness(BackendHarness):
    driver_name = "jittor"
    recompute = "none"

    def make_model(self, weights, dropout=0.0):
        return MLP(weights, dropout)

    def get_weights(self, model):
        return {"w1": model.fc1.weight.numpy().T.copy(), "b1": model.fc1.bias.numpy().copy(),
                "w2": model.fc2.weight.numpy().T.copy(), "b2": model.fc2.bias.numpy().copy()}

    def make_sgd(self, model, lr, momentum=0.0):
        return jt.optim.SGD(model.parameters(), lr, momentum=momentum)

    def make_adam(self, model, lr, eps=1e-8):
        return jt.optim.Adam(model.parameters(), lr, eps=eps)

    def make_dataloader(self, x, y, batch_size, shuffle=False, with_index=False):
        return ArrayDataset(x, y, batch_size, shuffle=shuffle, with_index=with_index)

    def loader_over(self, dataset, batch_size, collate_fn=None):
        return DatasetOver(dataset, batch_size, collate_fn)

    def lr_of(self, optimizer):
        return optimizer.param_groups[0].get("lr", optimizer.lr)

    def make_lr_scheduler(self, optimizer):
        return jt.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    def indices_of(self, batch):
        return [int(i) for i in batch["idx"].numpy().reshape(-1)]

    def hand_train(self, model, optimizer, batches, loss_scale=1.0, step_every=1, clip=None):
        model.train()
        for index, (x, y) in enumerate(batches, start=1):
            loss = jt.nn.cross_entropy_loss(model(jt.array(x)), jt.array(y))
            if step_every == 1 and loss_scale == 1.0 and clip is None:
                optimizer.step(loss)
                continue
            optimizer.backward(loss * loss_scale if loss_scale != 1.0 else loss)
            if index % step_every == 0:
                if clip is not None:
                    _clip(optimizer, *clip)
                optimizer.step()

    def grads_of(self, model, optimizer):
        return {"w1": model.fc1.weight.opt_grad(optimizer).numpy().T.copy(),
                "b1": model.fc1.bias.opt_grad(optimizer).numpy().copy(),
                "w2": model.fc2.weight.opt_grad(optimizer).numpy().T.copy(),
                "b2": model.fc2.bias.opt_grad(optimizer).numpy().copy()}

    def hand_clipped_grads(self, model, optimizer, x, y, clip_type, value):
        model.train()
        optimizer.backward(jt.nn.cross_entropy_loss(model(jt.array(x)), jt.array(y)))
        if clip_type is not None:
            _clip(optimizer, clip_type, value)
        return self.grads_of(model, optimizer)

    def predict(self, model, x):
        model.eval()
        with jt.no_grad():
            return model(jt.array(x)).numpy()

    def foreign_object(self):
        return object()
