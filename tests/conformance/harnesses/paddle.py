"""The paddle side of the conformance suite.

Paddle's ``Linear.weight`` is ``[in, out]``, the harness's canonical layout, so weights are copied
as they are (torch's harness transposes).
"""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle.io import DataLoader, Dataset

from tests.conformance.harnesses.base import BackendHarness


class MLP(paddle.nn.Layer):
    def __init__(self, weights: dict[str, np.ndarray], dropout: float) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(*weights["w1"].shape)
        self.fc2 = paddle.nn.Linear(*weights["w2"].shape)
        self.dropout = paddle.nn.Dropout(dropout)
        for parameter, name in ((self.fc1.weight, "w1"), (self.fc1.bias, "b1"), (self.fc2.weight, "w2"),
                                (self.fc2.bias, "b2")):
            parameter.set_value(weights[name])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))

    def train_step(self, x: paddle.Tensor, y: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"loss": F.cross_entropy(self(x), y)}

    def evaluate_step(self, x: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    """Rows of numpy arrays; paddle's collate stacks them into tensors."""

    def __init__(self, x: np.ndarray, y: np.ndarray, with_index: bool = False) -> None:
        self.x, self.y = x, y
        self.with_index = with_index

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        sample = {"x": self.x[index], "y": self.y[index]}
        if self.with_index:
            sample["idx"] = np.int64(index)
        return sample


def _clip(model: paddle.nn.Layer, clip_type: str, value: float) -> None:
    """paddle's own clipping utilities."""
    if clip_type == "norm":
        paddle.nn.utils.clip_grad_norm_(model.parameters(), value)
    else:
        paddle.nn.utils.clip_grad_value_(model.parameters(), value)


class LossForward(paddle.nn.Layer):
    """A model whose forward returns the loss, as a user-wrapped DataParallel needs."""

    def __init__(self, inner: paddle.nn.Layer) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: paddle.Tensor, y: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"loss": F.cross_entropy(self.inner(x), y)}


class Harness(BackendHarness):
    driver_name = "paddle"

    def make_model(self, weights, dropout=0.0):
        return MLP(weights, dropout)

    def get_weights(self, model):
        return {"w1": model.fc1.weight.numpy().copy(), "b1": model.fc1.bias.numpy().copy(),
                "w2": model.fc2.weight.numpy().copy(), "b2": model.fc2.bias.numpy().copy()}

    def make_sgd(self, model, lr, momentum=0.0):
        if momentum:
            return paddle.optimizer.Momentum(learning_rate=lr, momentum=momentum, parameters=model.parameters())
        return paddle.optimizer.SGD(learning_rate=lr, parameters=model.parameters())

    def make_adam(self, model, lr, eps=1e-8):
        return paddle.optimizer.Adam(learning_rate=lr, epsilon=eps, parameters=model.parameters())

    def make_dataloader(self, x, y, batch_size, shuffle=False, with_index=False):
        return DataLoader(ArrayDataset(x, y, with_index), batch_size=batch_size, shuffle=shuffle)

    def loader_over(self, dataset, batch_size, collate_fn=None):
        return DataLoader(dataset, batch_size=batch_size, collate_fn=collate_fn)

    def lr_of(self, optimizer):
        return optimizer.get_lr()

    def make_lr_scheduler(self, optimizer):
        scheduler = paddle.optimizer.lr.StepDecay(learning_rate=optimizer.get_lr(), step_size=2, gamma=0.5)
        optimizer.set_lr_scheduler(scheduler)
        return scheduler

    def indices_of(self, batch):
        return [int(i) for i in batch["idx"].numpy().reshape(-1)]

    def hand_train(self, model, optimizer, batches, loss_scale=1.0, step_every=1, clip=None):
        model.train()
        for index, (x, y) in enumerate(batches, start=1):
            loss = F.cross_entropy(model(paddle.to_tensor(x)), paddle.to_tensor(y))
            (loss * loss_scale if loss_scale != 1.0 else loss).backward()
            if index % step_every == 0:
                if clip is not None:
                    _clip(model, *clip)
                optimizer.step()
                optimizer.clear_grad()

    def grads_of(self, model, optimizer):
        return {"w1": model.fc1.weight.grad.numpy().copy(), "b1": model.fc1.bias.grad.numpy().copy(),
                "w2": model.fc2.weight.grad.numpy().copy(), "b2": model.fc2.bias.grad.numpy().copy()}

    def hand_clipped_grads(self, model, optimizer, x, y, clip_type, value):
        model.train()
        F.cross_entropy(model(paddle.to_tensor(x)), paddle.to_tensor(y)).backward()
        if clip_type is not None:
            _clip(model, clip_type, value)
        return self.grads_of(model, optimizer)

    def predict(self, model, x):
        model.eval()
        with paddle.no_grad():
            return model(paddle.to_tensor(x)).numpy()

    def wrap_user_data_parallel(self, model):
        paddle.distributed.init_parallel_env()
        return paddle.DataParallel(LossForward(model))

    def foreign_object(self):
        return object()
