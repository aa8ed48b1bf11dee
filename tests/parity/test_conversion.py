"""convert_checkpoint between torch and paddle beyond the training recipe: every mapped layer
(weights bit-identical there and back, recurrent layers computing the same outputs), the LR
schedule's position, the random state it cannot move, the command line, and bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import paddle
import pytest
import torch

from fastcore_train import LRSchedCallback, Trainer, convert_checkpoint, load_neutral_weights, save_neutral_weights
from fastcore_train.convert import UnmappableLayerError
from fastcore_train.convert.neutral_file import read_neutral_file
from tests.parity.chain import every_layer_model, hop
from tests.parity.frameworks import PADDLE, TORCH, PaddleMLP, TorchMLP

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class TorchEveryLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.conv1 = torch.nn.Conv1d(6, 5, 3)
        self.conv2 = torch.nn.Conv2d(1, 2, 3, bias=False)
        self.norm = torch.nn.LayerNorm(5)
        self.bn = torch.nn.BatchNorm1d(5)
        self.lstm = torch.nn.LSTM(5, 4, num_layers=2, bidirectional=True)
        self.gru = torch.nn.GRU(8, 3)
        self.head = torch.nn.Sequential(torch.nn.Linear(3, 2))


class PaddleEveryLayer(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.embed = paddle.nn.Embedding(11, 6)
        self.conv1 = paddle.nn.Conv1D(6, 5, 3)
        self.conv2 = paddle.nn.Conv2D(1, 2, 3, bias_attr=False)
        self.norm = paddle.nn.LayerNorm(5)
        self.bn = paddle.nn.BatchNorm1D(5)
        self.lstm = paddle.nn.LSTM(5, 4, num_layers=2, direction="bidirect")
        self.gru = paddle.nn.GRU(8, 3)
        self.head = paddle.nn.Sequential(paddle.nn.Linear(3, 2))


def _randomize(model: torch.nn.Module) -> None:
    """Every tensor random (running statistics too), so a misplaced one cannot go unnoticed."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, value in model.state_dict().items():
            if value.is_floating_point():
                value.copy_(torch.rand(value.shape, generator=generator) + (1.0 if "var" in name else 0.0))


def test_every_mapped_layer_goes_to_paddle_and_back_bit_identical(tmp_path: Path) -> None:
    source = TorchEveryLayer()
    _randomize(source)
    save_neutral_weights(source, tmp_path / "torch.safetensors")
    middle = PaddleEveryLayer()
    load_neutral_weights(middle, tmp_path / "torch.safetensors")
    np.testing.assert_array_equal(middle.head[0].weight.numpy(), source.head[0].weight.detach().numpy().T)
    np.testing.assert_array_equal(middle.bn._variance.numpy(), source.bn.running_var.numpy())
    save_neutral_weights(middle, tmp_path / "paddle.safetensors")
    back = TorchEveryLayer()
    load_neutral_weights(back, tmp_path / "paddle.safetensors")
    for name, value in source.state_dict().items():
        if name.endswith("num_batches_tracked"):
            assert int(back.state_dict()[name]) == 0  # paddle keeps no batch count
            continue
        assert back.state_dict()[name].numpy().tobytes() == value.numpy().tobytes(), name

    x = np.random.default_rng(0).normal(size=(7, 2, 5)).astype(np.float32)  # [time, batch, features]
    expected, _ = source.lstm(torch.from_numpy(x))
    actual, _ = middle.lstm(paddle.to_tensor(x.transpose(1, 0, 2)))
    np.testing.assert_allclose(actual.numpy().transpose(1, 0, 2), expected.detach().numpy(), atol=1e-6)
    expected, _ = source.gru(torch.from_numpy(np.ascontiguousarray(expected.detach().numpy())))
    actual, _ = middle.gru(actual)
    np.testing.assert_allclose(actual.numpy().transpose(1, 0, 2), expected.detach().numpy(), atol=1e-6)


def _checkpoint(tmp_path: Path, scheduler_steps: int = 0) -> Path:
    model = TorchMLP()
    optimizer = TORCH["adam"](model)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    x = np.random.default_rng(0).normal(size=(16, 64)).astype(np.float32)
    y = np.arange(16) % 10
    trainer = Trainer(model=model, driver="torch", device="cpu", optimizers=optimizer, progress_bar=None,
                      train_dataloader=TORCH["loader"](x, y, False), n_batches=4, model_summary=False,
                      callbacks=[LRSchedCallback(scheduler)])
    trainer.run()
    trainer.save_checkpoint(tmp_path / "torch_ckpt")
    return tmp_path / "torch_ckpt"


def test_schedule_position_moves_and_the_random_state_is_said_not_to(tmp_path: Path, caplog) -> None:
    source = _checkpoint(tmp_path)
    convert_checkpoint(source, tmp_path / "paddle_ckpt", to="paddle")
    assert "random state" in caplog.text
    meta = json.loads((tmp_path / "paddle_ckpt" / "meta.json").read_text())
    assert meta["backend"] == "paddle" and meta["converted_from"]["backend"] == "torch"
    assert any("random state" in note for note in meta["converted_from"]["not_converted"])

    model = PaddleMLP()
    optimizer = paddle.optimizer.Adam(learning_rate=paddle.optimizer.lr.StepDecay(0.003, step_size=3, gamma=0.5),
                                      parameters=model.parameters())
    x = np.random.default_rng(0).normal(size=(16, 64)).astype(np.float32)
    trainer = Trainer(model=model, driver="paddle", device="cpu", optimizers=optimizer, progress_bar=None,
                      train_dataloader=PADDLE["loader"](x, np.arange(16) % 10, False), n_batches=4,
                      model_summary=False, callbacks=[LRSchedCallback(optimizer._learning_rate)])
    trainer.load_checkpoint(tmp_path / "paddle_ckpt")
    assert optimizer._learning_rate.last_epoch == 4 and optimizer.get_lr() == pytest.approx(0.0015)
    assert trainer.global_forward_batches == 4


def test_command_line_converts_and_refuses_bad_input(tmp_path: Path) -> None:
    source = _checkpoint(tmp_path)
    command = [sys.executable, "-m", "fastcore_train", "convert"]
    done = subprocess.run(command + [str(source), str(tmp_path / "out"), "--to", "paddle"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "model.pdparams").is_file()
    bad = subprocess.run(command + [str(source), str(tmp_path / "bad"), "--to", "mxnet"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Unknown framework 'mxnet'" in bad.stderr and not (tmp_path / "bad").exists()


def test_unmappable_layer_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(64, 10)
            self.scale = torch.nn.Parameter(torch.ones(10))

        def train_step(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"loss": torch.nn.functional.cross_entropy(self.fc(x) * self.scale, y)}

    model = Scaled()
    x = np.zeros((8, 64), np.float32)
    trainer = Trainer(model=model, driver="torch", device="cpu", optimizers=TORCH["sgd"](model), progress_bar=None,
                      train_dataloader=TORCH["loader"](x, np.arange(8) % 10, False), n_batches=1, model_summary=False)
    trainer.run()
    trainer.save_checkpoint(tmp_path / "ckpt")  # saving works; converting says why it cannot
    with pytest.raises(UnmappableLayerError, match="'scale'.*Scaled"):
        convert_checkpoint(tmp_path / "ckpt", tmp_path / "out", to="paddle")
    with pytest.raises(UnmappableLayerError, match="'scale'"):
        save_neutral_weights(model, tmp_path / "w.safetensors")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ckpt"]


def test_checkpoint_round_trip_torch_paddle_torch_is_bit_identical(tmp_path: Path) -> None:
    source = _checkpoint(tmp_path)
    convert_checkpoint(source, tmp_path / "paddle", to="paddle")
    convert_checkpoint(tmp_path / "paddle", tmp_path / "torch", to="torch")
    before = torch.load(source / "model.pt", weights_only=True)
    after = torch.load(tmp_path / "torch" / "model.pt", weights_only=True)
    assert before.keys() == after.keys()
    for name in before:
        assert before[name].numpy().tobytes() == after[name].numpy().tobytes(), name
    state_before = torch.load(source / "training_state.pt", weights_only=True)["optimizers"][0]["state"]
    state_after = torch.load(tmp_path / "torch" / "training_state.pt", weights_only=True)["optimizers"][0]["state"]
    for index, slots in state_before.items():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(slots[key], state_after[index][key]), (index, key)
    convert_checkpoint(tmp_path / "torch", tmp_path / "neutral.safetensors", to="neutral")
    tensors, layout = read_neutral_file(tmp_path / "neutral.safetensors")
    assert [row[:2] for row in layout] == [["fc1", "linear"], ["fc2", "linear"]] and len(tensors) == 4


#: Set by tox's parity env: the interpreters of the jittor and oneflow envs (``name=path,...``).
CHAIN_PYTHONS = "FASTCORE_TRAIN_CHAIN_PYTHONS"
JITTOR_ENV = {"use_mkl": "0", "nvcc_path": "", "FIX_TORCH_ERROR": "0", "log_silent": "1"}


def _chain_pythons() -> dict[str, str]:
    pythons = dict(item.split("=", 1) for item in os.environ.get(CHAIN_PYTHONS, "").split(",") if "=" in item)
    missing = [name for name in ("jittor", "oneflow") if not Path(pythons.get(name, "")).is_file()]
    if missing:
        message = (f"the {' and '.join(missing)} env(s) are not built (their interpreters come from ${CHAIN_PYTHONS}; "
                   "tox builds them before the parity env)")
        if os.environ.get("CI"):
            pytest.fail(message)  # CI runs every env in order: the round trip must run there
        pytest.skip(message)
    return pythons


def test_weights_round_trip_through_all_four_frameworks_is_bit_identical(tmp_path: Path) -> None:
    pythons = _chain_pythons()
    source = every_layer_model("torch")
    _randomize(source)
    source.bn.num_batches_tracked.zero_()  # only torch and oneflow count batches: the count does not travel
    save_neutral_weights(source, tmp_path / "0-torch.safetensors")
    hop("paddle", tmp_path / "0-torch.safetensors", tmp_path / "1-paddle.safetensors")
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root), **JITTOR_ENV,
                   "JITTOR_HOME": os.environ.get("JITTOR_HOME", str(Path.home() / ".cache" / "fastcore-train-jittor"))}
    for step, (framework, before) in enumerate((("jittor", "1-paddle"), ("oneflow", "2-jittor")), start=2):
        done = subprocess.run([pythons[framework], "-m", "tests.parity.chain", framework,
                               str(tmp_path / f"{before}.safetensors"), str(tmp_path / f"{step}-{framework}.safetensors")],
                              cwd=root, env=environment, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    back = every_layer_model("torch")
    load_neutral_weights(back, tmp_path / "3-oneflow.safetensors")
    for name, value in source.state_dict().items():
        assert back.state_dict()[name].numpy().tobytes() == value.numpy().tobytes(), name
    first, _ = read_neutral_file(tmp_path / "0-torch.safetensors")
    for hop_file in ("1-paddle", "2-jittor", "3-oneflow"):
        tensors, _ = read_neutral_file(tmp_path / f"{hop_file}.safetensors")
        assert sorted(tensors) == sorted(name for name in first if not name.endswith("num_batches_tracked")) or \
            sorted(tensors) == sorted(first), hop_file
        for name, value in tensors.items():
            assert value.tobytes() == first[name].tobytes(), (hop_file, name)


def test_weights_only_conversion_loads_with_load_model(tmp_path: Path) -> None:
    source = _checkpoint(tmp_path)
    convert_checkpoint(source, tmp_path / "weights", to="paddle", weights_only=True)
    assert sorted(path.name for path in (tmp_path / "weights").iterdir()) == ["meta.json", "model.pdparams"]
    model = PaddleMLP()
    x = np.random.default_rng(1).normal(size=(8, 64)).astype(np.float32)
    trainer = Trainer(model=model, driver="paddle", device="cpu", optimizers=PADDLE["sgd"](model), progress_bar=None,
                      train_dataloader=PADDLE["loader"](x, np.arange(8) % 10, False), model_summary=False)
    trainer.load_model(tmp_path / "weights")
    torch_model = TorchMLP()
    torch_model.load_state_dict(torch.load(source / "model.pt", weights_only=True))
    expected = torch_model(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(model(paddle.to_tensor(x)).numpy(), expected, atol=1e-5)
