"""The oneflow side of the conformance suite."""
from __future__ import annotations

import io
import json
import pickle
import re

import numpy as np
import oneflow as flow
from oneflow.utils.data import DataLoader, Dataset

from tests.conformance.harnesses.base import BackendHarness


class MLP(flow.nn.Module):
    def __init__(self, weights: dict[str, np.ndarray], dropout: float) -> None:
        super().__init__()
        self.fc1 = flow.nn.Linear(*weights["w1"].shape)
        self.fc2 = flow.nn.Linear(*weights["w2"].shape)
        self.dropout = flow.nn.Dropout(dropout)
        with flow.no_grad():
            self.fc1.weight.copy_(flow.from_numpy(weights["w1"].T.copy()))
            self.fc1.bias.copy_(flow.from_numpy(weights["b1"].copy()))
            self.fc2.weight.copy_(flow.from_numpy(weights["w2"].T.copy()))
            self.fc2.bias.copy_(flow.from_numpy(weights["b2"].copy()))

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        return self.fc2(self.dropout(flow.relu(self.fc1(x))))

    def train_step(self, x: flow.Tensor, y: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"loss": flow.nn.functional.cross_entropy(self(x), y)}

    def evaluate_step(self, x: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"pred": self(x)}


class ArrayDataset(Dataset):
    def __init__(self, x: np.ndarray, y: np.ndarray, with_index: bool = False) -> None:
        self.x, self.y = flow.from_numpy(x), flow.from_numpy(y)
        self.with_index = with_index

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, flow.Tensor]:
        sample = {"x": self.x[index], "y": self.y[index]}
        if self.with_index:
            sample["idx"] = index
        return sample


def _numpy(tensor: flow.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy().copy()


def _clip(model: flow.nn.Module, clip_type: str, value: float) -> None:
    """oneflow's own clipping utilities."""
    if clip_type == "norm":
        flow.nn.utils.clip_grad_norm_(model.parameters(), value)
    else:
        flow.nn.utils.clip_grad_value_(model.parameters(), value)


class LossForward(flow.nn.Module):
    """A model whose forward returns the loss, as a user-wrapped DistributedDataParallel needs."""

    def __init__(self, inner: flow.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: flow.Tensor, y: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"loss": flow.nn.functional.cross_entropy(self.inner(x), y)}


class Harness(BackendHarness):
    driver_name = "oneflow"
    recompute = "no_dropout"

    def make_model(self, weights, dropout=0.0):
        return MLP(weights, dropout)

    def get_weights(self, model):
        return {"w1": _numpy(model.fc1.weight).T.copy(), "b1": _numpy(model.fc1.bias),
                "w2": _numpy(model.fc2.weight).T.copy(), "b2": _numpy(model.fc2.bias)}

    def make_sgd(self, model, lr, momentum=0.0):
        return flow.optim.SGD(model.parameters(), lr=lr, momentum=momentum)

    def make_adam(self, model, lr, eps=1e-8):
        return flow.optim.Adam(model.parameters(), lr=lr, eps=eps)

    def make_dataloader(self, x, y, batch_size, shuffle=False, with_index=False):
        return DataLoader(ArrayDataset(x, y, with_index), batch_size=batch_size, shuffle=shuffle)

    def loader_over(self, dataset, batch_size, collate_fn=None):
        return DataLoader(dataset, batch_size=batch_size, collate_fn=collate_fn)

    def lr_of(self, optimizer):
        return optimizer.param_groups[0]["lr"]

    def make_lr_scheduler(self, optimizer):
        return flow.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    def indices_of(self, batch):
        return [int(i) for i in batch["idx"]]

    def hand_train(self, model, optimizer, batches, loss_scale=1.0, step_every=1, clip=None):
        model.train()
        for index, (x, y) in enumerate(batches, start=1):
            loss = flow.nn.functional.cross_entropy(model(flow.from_numpy(x)), flow.from_numpy(y))
            (loss * loss_scale if loss_scale != 1.0 else loss).backward()
            if index % step_every == 0:
                if clip is not None:
                    _clip(model, *clip)
                optimizer.step()
                optimizer.zero_grad()

    def grads_of(self, model, optimizer):
        return {"w1": _numpy(model.fc1.weight.grad).T.copy(), "b1": _numpy(model.fc1.bias.grad),
                "w2": _numpy(model.fc2.weight.grad).T.copy(), "b2": _numpy(model.fc2.bias.grad)}

    def hand_clipped_grads(self, model, optimizer, x, y, clip_type, value):
        model.train()
        flow.nn.functional.cross_entropy(model(flow.from_numpy(x)), flow.from_numpy(y)).backward()
        if clip_type is not None:
            _clip(model, clip_type, value)
        return self.grads_of(model, optimizer)

    def predict(self, model, x):
        model.eval()
        with flow.no_grad():
            return model(flow.from_numpy(x)).numpy()

    def wrap_user_data_parallel(self, model):
        model.to("cpu")
        return flow.nn.parallel.DistributedDataParallel(LossForward(model))

    def foreign_object(self):
        return object()

    def canonical_checkpoint(self, files):
        """``flow.save`` names each tensor's subfolder from a process-wide counter (``tensor_<N>``), so two
        saves of the same state differ in those names, in the pickles naming them, and in meta.json's
        checksums of those pickles. Here: the names renumbered in order, each ``pickled_data`` as the
        structure it unpickles to (tensors as their renamed folder), its checksum left out."""
        names = sorted({found for path in files for found in re.findall(r"tensor_\d+", path)}, key=lambda n: int(n[7:]))
        rename = {name: f"t{index}" for index, name in enumerate(names)}
        swap = lambda text: re.sub(r"tensor_\d+", lambda m: rename.get(m.group(0), m.group(0)), text)  # noqa: E731

        class Reference:
            def __setstate__(self, state):
                self.path = rename[state["path"]]

            def __repr__(self):
                return f"<tensor {self.path}>"

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                return Reference if module.startswith("oneflow") else super().find_class(module, name)

        canonical = {}
        for path, data in files.items():
            if path.endswith("pickled_data"):
                data = repr(Unpickler(io.BytesIO(data)).load()).encode()
            elif path == "meta.json":
                meta = json.loads(data)
                meta["checksums"] = {swap(name): value for name, value in meta["checksums"].items()
                                     if not name.endswith("pickled_data")}
                meta["files"] = sorted(meta["checksums"])
                meta.pop("meta_checksum", None)  # (of the names before they were made equal)
                data = json.dumps(meta, sort_keys=True).encode()
            canonical[swap(path)] = data
        return canonical
