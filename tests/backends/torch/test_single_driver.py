"""What only the torch single-process driver has: devices, autocast, forward fallbacks."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from fastcore_train import Event, GradClipCallback, Trainer, choose_driver
from fastcore_train.backends.torch import TorchSingleDriver

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")


class ForwardOnly(torch.nn.Module):
    """No train_step: the Trainer must call forward(x, y) and read its 'loss'."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return {"loss": torch.nn.functional.cross_entropy(self.linear(x), y)}


@dataclasses.dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor


class DataclassOutput(ForwardOnly):
    def forward(self, x, y):
        logits = self.linear(x)
        return Output(loss=torch.nn.functional.cross_entropy(logits, y), logits=logits)


def loader():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(16, 4, generator=generator)
    y = torch.randint(0, 3, (16,), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=4)


def test_auto_picks_the_torch_driver_and_forward_is_the_fallback():
    model = ForwardOnly()
    trainer = Trainer(model, loader(), torch.optim.SGD(model.parameters(), lr=0.1), driver="auto",
                      input_mapping={0: "x", 1: "y"}, n_epochs=1, progress_bar=None)
    assert isinstance(trainer.driver, TorchSingleDriver)
    before = model.linear.weight.detach().clone()
    trainer.run(num_eval_sanity_batch=0)
    assert not torch.equal(before, model.linear.weight)


def test_a_dataclass_output_with_a_loss_attribute_trains():
    model = DataclassOutput()
    trainer = Trainer(model, loader(), torch.optim.SGD(model.parameters(), lr=0.1), input_mapping={0: "x", 1: "y"},
                      n_epochs=1, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4


def test_model_wo_auto_param_call_passes_the_batch_whole():
    class WholeBatch(ForwardOnly):
        def forward(self, batch):
            x, y = batch
            return {"loss": torch.nn.functional.cross_entropy(self.linear(x), y)}

    model = WholeBatch()
    trainer = Trainer(model, loader(), torch.optim.SGD(model.parameters(), lr=0.1), model_wo_auto_param_call=True,
                      n_epochs=1, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.global_forward_batches == 4


def test_fp16_on_cpu_runs_the_forward_in_bfloat16():
    dtypes = []

    class Spy(ForwardOnly):
        def forward(self, x, y):
            logits = self.linear(x)
            dtypes.append(logits.dtype)
            return {"loss": torch.nn.functional.cross_entropy(logits, y)}

    model = Spy()
    trainer = Trainer(model, loader(), torch.optim.SGD(model.parameters(), lr=0.1), input_mapping={0: "x", 1: "y"},
                      fp16=True, n_epochs=1, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    assert dtypes == [torch.bfloat16] * 4
    assert trainer.driver.precision.scaler is None
    assert model.linear.weight.dtype == torch.float32
    assert np.isfinite(trainer.driver.data.to_numeric(trainer.last_loss))


@pytest.mark.parametrize("device, expected", [("cpu", "cpu"), (None, "cpu"), (torch.device("cpu"), "cpu"),
                                              (["cpu"], "cpu")])
def test_device_forms(device, expected):
    driver = choose_driver(ForwardOnly(), "torch", device=device)
    assert driver.device.type == expected and driver.data.device.type == expected
    assert driver.data.needs_move is False


@pytest.mark.parametrize("device, message", [
    ("cuda", "needs CUDA") if not torch.cuda.is_available() else ("cuda:99", "CUDA device"),
    ("tpu:0", "is not a torch device"),
    (-1, "none is visible") if not torch.cuda.is_available() else ("cuda:99", "CUDA device"),
    (3.5, "device must be a str, int, torch.device or None"),
])
def test_bad_devices(device, message):
    with pytest.raises(ValueError, match=message):
        choose_driver(ForwardOnly(), "torch", device=device)


def test_unknown_torch_kwargs_are_rejected():
    with pytest.raises(TypeError, match=r"Unknown torch_kwargs \['set_grads_none'\]"):
        choose_driver(ForwardOnly(), "torch", torch_kwargs={"set_grads_none": True})


def test_set_grad_to_none_false_keeps_zeroed_gradients():
    model = ForwardOnly()
    trainer = Trainer(model, loader(), torch.optim.SGD(model.parameters(), lr=0.1), input_mapping={0: "x", 1: "y"},
                      n_epochs=1, progress_bar=None, torch_kwargs={"set_grad_to_none": False})
    trainer.run(num_eval_sanity_batch=0)
    assert model.linear.weight.grad is not None and torch.count_nonzero(model.linear.weight.grad) == 0


def test_evaluation_runs_without_grad_and_in_eval_mode():
    modes = []

    class Probe(ForwardOnly):
        def evaluate_step(self, x, y):
            modes.append((self.training, torch.is_grad_enabled()))
            return {"pred": self.linear(x), "target": y}

    from fastcore_train import Accuracy, Evaluator
    Evaluator(Probe(), loader(), {"acc": Accuracy()}, input_mapping={0: "x", 1: "y"}, verbose=0).run()
    assert set(modes) == {(False, False)}


@needs_cuda
def test_fp16_on_cuda_uses_a_grad_scaler():
    model = ForwardOnly()
    trainer = Trainer(model, loader(), torch.optim.SGD(model.parameters(), lr=0.1), device="cuda",
                      input_mapping={0: "x", 1: "y"}, fp16=True, n_epochs=1, progress_bar=None)
    trainer.run(num_eval_sanity_batch=0)
    assert trainer.driver.precision.scaler is not None and model.linear.weight.is_cuda


def _amp_hand_loop(model, batches, device, autocast):
    """torch's AMP recipe with clipping: scale, backward, unscale_, clip (norm then value), step, update."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=1024.0)
    for x, y in batches:
        with torch.autocast(device_type=device, dtype=torch.float16, enabled=autocast):
            loss = model(x.to(device), y.to(device))["loss"]
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.01)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


def _train_clipping_with_a_scaler(model, device, fp16):
    trainer = Trainer(model, loader(), torch.optim.SGD(model.parameters(), lr=0.1), device=device, fp16=fp16,
                      input_mapping={0: "x", 1: "y"}, n_epochs=1, progress_bar=None, callbacks=[GradClipCallback(0.05)])
    if trainer.driver.precision.scaler is None:  # CPU: no mixed precision, but torch's GradScaler works there too
        trainer.driver.precision.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    # a second clip in the same step must not unscale again (torch's unscale_ would raise)
    trainer.add_callback_fn(Event.on_before_optimizers_step(), lambda t, optimizers: t.driver.clip_grad_value(0.01))
    trainer.run(num_eval_sanity_batch=0)
    return trainer


def test_clipping_with_a_grad_scaler_unscales_once_and_matches_torchs_amp_recipe():
    """The driver unscales the gradients before clipping, once per step, and its scaler.step does
    not unscale them again: training equals torch's documented AMP loop with clipping."""
    model = ForwardOnly()
    trainer = _train_clipping_with_a_scaler(model, "cpu", fp16=False)
    reference = ForwardOnly()
    _amp_hand_loop(reference, list(loader()), "cpu", autocast=False)
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    assert trainer.driver.precision.scaler.get_scale() == 1024.0  # no overflow skipped a step
    unclipped = ForwardOnly()
    Trainer(unclipped, loader(), torch.optim.SGD(unclipped.parameters(), lr=0.1), input_mapping={0: "x", 1: "y"},
            n_epochs=1, progress_bar=None).run(num_eval_sanity_batch=0)
    assert not torch.allclose(model.linear.weight, unclipped.linear.weight)


@needs_cuda
def test_fp16_clipping_on_cuda_matches_torchs_amp_recipe():
    model = ForwardOnly()
    _train_clipping_with_a_scaler(model, "cuda", fp16=True)
    reference = ForwardOnly().cuda()
    _amp_hand_loop(reference, list(loader()), "cuda", autocast=True)
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_training_state_keeps_the_grad_scaler_state_in_its_file_layout(tmp_path):
    """The file holds ``{"optimizers": [...], "grad_scaler": ...}`` (the layout of every earlier
    release), and a file in that layout restores the scaler's scale."""
    model = ForwardOnly()
    driver = choose_driver(model, "torch")
    driver.ensure_setup()
    driver.set_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))
    driver.io.save_training_state(tmp_path / "plain.pt")
    assert list(torch.load(tmp_path / "plain.pt", weights_only=True)) == ["optimizers", "grad_scaler"]
    assert torch.load(tmp_path / "plain.pt", weights_only=True)["grad_scaler"] is None

    written = torch.amp.GradScaler("cpu", init_scale=256.0)
    torch.save({"optimizers": [driver.optimizers[0].state_dict()], "grad_scaler": written.state_dict()},
               tmp_path / "scaled.pt")
    driver.precision.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    driver.io.load_training_state(tmp_path / "scaled.pt")
    assert driver.precision.scaler.get_scale() == 256.0
    driver.io.save_training_state(tmp_path / "again.pt")
    assert torch.load(tmp_path / "again.pt", weights_only=True)["grad_scaler"] == written.state_dict()
    driver.io.load_training_state(tmp_path / "plain.pt")  # saved without a scaler: the scaler keeps its state
    assert driver.precision.scaler.get_scale() == 256.0


def test_autocast_dtype_chooses_bfloat16_without_a_scaler():
    from fastcore_train.backends.torch.precision import TorchPrecision

    cuda = torch.device("cuda")  # only read as a device type: nothing runs on it
    assert TorchPrecision(cuda, fp16=True).autocast_dtype == torch.float16
    bfloat = TorchPrecision(cuda, fp16=True, autocast_dtype="bfloat16")
    assert bfloat.autocast_dtype == torch.bfloat16 and bfloat.new_scaler() is None
    assert TorchPrecision(torch.device("cpu"), fp16=True).autocast_dtype == torch.bfloat16
    with pytest.raises(ValueError, match="must be 'float16' or 'bfloat16'"):
        TorchPrecision(cuda, fp16=True, autocast_dtype="float8")
