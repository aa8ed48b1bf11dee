"""The torch side of the conformance suite."""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from tests.conformance.harnesses.base import BackendHarness


class MLP(torch.nn.Module):
    def __init__(self, weights: dict[str, np.ndarray], dropout: float) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(*weights["w1"].shape)
        self.fc2 = torch.nn.Linear(*weights["w2"].shape)
        self.dropout = torch.nn.Dropout(dropout)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.from_numpy(weights["w1"].T.copy()))
            self.fc1.bias.copy_(torch.from_numpy(weights["b1"]))
            self.fc2.weight.copy_(torch.from_numpy(weights["w2"].T.copy()))
            self.fc2.bias.copy_(torch.from_numpy(weights["b2"]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(torch.relu(self.fc1(x))))

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.cross_entropy(self(x), y)}

    def evaluate_step(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    def __init__(self, x: np.ndarray, y: np.ndarray, with_index: bool = False) -> None:
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)
        self.with_index = with_index

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        sample = {"x": self.x[index], "y": self.y[index]}
        if self.with_index:
            sample["idx"] = index
        return sample


def _clip(model: torch.nn.Module, clip_type: str, value: float) -> None:
    """torch's own clipping utilities."""
    if clip_type == "norm":
        torch.nn.utils.clip_grad_norm_(model.parameters(), value)
    else:
        torch.nn.utils.clip_grad_value_(model.parameters(), value)


class LossForward(torch.nn.Module):
    """A model whose forward returns the loss, as a user-wrapped DistributedDataParallel needs."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.cross_entropy(self.inner(x), y)}


class Harness(BackendHarness):
    driver_name = "torch"

    def make_model(self, weights, dropout=0.0):
        return MLP(weights, dropout)

    def get_weights(self, model):
        return {"w1": model.fc1.weight.detach().numpy().T.copy(), "b1": model.fc1.bias.detach().numpy().copy(),
                "w2": model.fc2.weight.detach().numpy().T.copy(), "b2": model.fc2.bias.detach().numpy().copy()}

    def make_sgd(self, model, lr, momentum=0.0):
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)

    def make_adam(self, model, lr, eps=1e-8):
        return torch.optim.Adam(model.parameters(), lr=lr, eps=eps)

    def make_dataloader(self, x, y, batch_size, shuffle=False, with_index=False):
        return DataLoader(ArrayDataset(x, y, with_index), batch_size=batch_size, shuffle=shuffle)

    def loader_over(self, dataset, batch_size, collate_fn=None):
        return DataLoader(dataset, batch_size=batch_size, collate_fn=collate_fn)

    def lr_of(self, optimizer):
        return optimizer.param_groups[0]["lr"]

    def make_lr_scheduler(self, optimizer):
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    def indices_of(self, batch):
        return [int(i) for i in batch["idx"]]

    def hand_train(self, model, optimizer, batches, loss_scale=1.0, step_every=1, clip=None):
        model.train()
        for index, (x, y) in enumerate(batches, start=1):
            loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
            (loss * loss_scale if loss_scale != 1.0 else loss).backward()
            if index % step_every == 0:
                if clip is not None:
                    _clip(model, *clip)
                optimizer.step()
                optimizer.zero_grad()

    def grads_of(self, model, optimizer):
        return {"w1": model.fc1.weight.grad.numpy().T.copy(), "b1": model.fc1.bias.grad.numpy().copy(),
                "w2": model.fc2.weight.grad.numpy().T.copy(), "b2": model.fc2.bias.grad.numpy().copy()}

    def hand_clipped_grads(self, model, optimizer, x, y, clip_type, value):
        model.train()
        torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        if clip_type is not None:
            _clip(model, clip_type, value)
        return self.grads_of(model, optimizer)

    def predict(self, model, x):
        model.eval()
        with torch.no_grad():
            return model(torch.from_numpy(x)).numpy()

    def wrap_user_data_parallel(self, model):
        torch.distributed.init_process_group("gloo")
        return torch.nn.parallel.DistributedDataParallel(LossForward(model))

    def foreign_object(self):
        return object()
