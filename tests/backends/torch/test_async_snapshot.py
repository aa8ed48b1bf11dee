"""torch copies an asynchronous checkpoint's parameters and optimizer state beside training (on the
writer's thread, until the next optimizer step); what the forward pass changes, batch-norm running
statistics, must be copied at the save point itself."""
from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from fastcore_train import Callback, Trainer  # noqa: E402


class BatchNormNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(4)
        self.out = torch.nn.Linear(4, 3)

    def train_step(self, x, y):
        return {"loss": torch.nn.functional.cross_entropy(self.out(self.norm(x)), y)}


class SaveWithSlowCopy(Callback):
    def __init__(self, folder, at: int) -> None:
        self.folder, self.at = folder, at
        self.at_save = None

    def on_train_batch_end(self, trainer):
        if trainer.global_forward_batches != self.at:
            return
        model = trainer.driver.unwrap_model()
        self.at_save = {name: value.clone() for name, value in model.state_dict().items()}
        io = trainer.driver.io
        copy = io.host_copy

        def slow_copy(obj):  # on the writer's thread: the next batches' forward passes run meanwhile
            time.sleep(0.5)
            return copy(obj)

        io.host_copy = slow_copy
        trainer.save_checkpoint(self.folder, blocking=False)


def test_running_statistics_are_those_of_the_save_point(tmp_path):
    torch.manual_seed(0)
    model = BatchNormNet()
    data = [{"x": torch.randn(8, 4) * (i + 1) + i, "y": torch.randint(0, 3, (8,))} for i in range(6)]
    saver = SaveWithSlowCopy(tmp_path / "ckpt", at=2)
    trainer = Trainer(model=model, train_dataloader=data, optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
                      driver="torch", device="cpu", n_epochs=1, progress_bar=None, callbacks=[saver])
    assert trainer.driver.io.copies_in_background
    trainer.run(num_eval_sanity_batch=0)
    saved = torch.load(tmp_path / "ckpt" / "model.pt", weights_only=True)
    assert not torch.equal(model.norm.running_mean, saver.at_save["norm.running_mean"]), "training went on"
    for name, value in saver.at_save.items():
        assert torch.equal(saved[name], value), f"{name} is not the save point's"
