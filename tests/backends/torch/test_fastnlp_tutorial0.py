"""fastNLP 1.0's tutorial 0 (Trainer and Evaluator on torch), ported by changing its imports.

The tutorial trains an "argmax" MLP (the label is the position of a vector's largest entry),
evaluates it with an Evaluator that reuses ``trainer.driver`` with ``device=None``, then builds a
second Trainer on the same driver with an Evaluator inside (``evaluate_every=-1``) and evaluates
again. The only change besides the imports is ``device=0`` (a GPU) -> ``device="cpu"``.
This test walks the same steps and checks what the tutorial shows: the result key ``acc#acc``,
an accuracy that is what the model actually predicts, and training that changes the model.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from torch.optim import SGD
from torch.utils.data import DataLoader, Dataset

from fastcore_train import Callback, Evaluator, Trainer
from fastcore_train.metrics import Accuracy


class ArgMaxModel(nn.Module):
    def __init__(self, num_labels: int, feature_dimension: int):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(feature_dimension, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU())
        self.output = nn.Linear(10, num_labels)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.output(self.hidden(x))

    def train_step(self, x, y):
        return {"loss": self.loss_fn(self(x), y)}

    def evaluate_step(self, x, y):
        return {"pred": self(x).argmax(dim=-1), "target": y}


class RecordResults(Callback):
    def __init__(self):
        self.seen: list[dict] = []

    def on_evaluate_end(self, trainer, results):
        self.seen.append(dict(results))


class ArgMaxDataset(Dataset):
    def __init__(self, feature_dimension: int, data_num: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randint(-100, 100, (data_num, feature_dimension), generator=generator).float()
        self.y = self.x.argmax(dim=-1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, item):
        return {"x": self.x[item], "y": self.y[item]}


def accuracy_by_hand(model: nn.Module, dataset: ArgMaxDataset) -> float:
    with torch.no_grad():
        predicted = model(dataset.x).argmax(dim=-1)
    return float((predicted == dataset.y).float().mean())


def test_tutorial_0_runs_as_written_on_cpu(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    train_dataset = ArgMaxDataset(feature_dimension=10, data_num=1000, seed=1000)
    evaluate_dataset = ArgMaxDataset(feature_dimension=10, data_num=100, seed=7)
    train_dataloader = DataLoader(train_dataset, batch_size=8, shuffle=True)
    evaluate_dataloader = DataLoader(evaluate_dataset, batch_size=8)
    model = ArgMaxModel(num_labels=10, feature_dimension=10)
    optimizer = SGD(model.parameters(), lr=0.001)
    before = [p.detach().clone() for p in model.parameters()]

    trainer = Trainer(model=model, driver="torch", device="cpu", train_dataloader=train_dataloader,
                      optimizers=optimizer, n_epochs=2, progress_bar="rich")
    trainer.run()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))

    evaluator = Evaluator(model=model, driver=trainer.driver, device=None,
                          dataloaders=evaluate_dataloader, metrics={"acc": Accuracy()})
    first = evaluator.run()
    assert set(first) == {"acc#acc"}
    assert np.isclose(first["acc#acc"], accuracy_by_hand(model, evaluate_dataset))

    record = RecordResults()
    seen = record.seen
    trainer = Trainer(model=model, driver=trainer.driver, train_dataloader=train_dataloader,
                      evaluate_dataloaders=evaluate_dataloader, metrics={"acc": Accuracy()},
                      optimizers=optimizer, n_epochs=2, evaluate_every=-1, callbacks=[record])
    trainer.run()
    assert len(seen) == 2 and all(set(results) == {"acc#acc"} for results in seen)

    second = Evaluator(model=model, driver=trainer.driver, dataloaders=evaluate_dataloader,
                       metrics={"acc": Accuracy()}).run()
    assert np.isclose(second["acc#acc"], accuracy_by_hand(model, evaluate_dataset))
    assert np.isclose(second["acc#acc"], seen[-1]["acc#acc"])
