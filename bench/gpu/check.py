"""The CUDA paths of the torch backend in one run, for a GPU machine that is lent for minutes.

``bench/gpu/run.sh`` runs this on one GPU with only what that machine has (torch; Accelerate and
Lightning where installed; this package from the working tree on ``PYTHONPATH``) and writes one
results table. Each row is a check or a measurement:

* **train**: the MLP trained on the device; its loss falls.
* **fp16**: ``fp16=True``, float16 autocast with a grad scaler (bfloat16 and no scaler on CPU).
* **bf16**: ``torch_kwargs={"autocast_dtype": "bfloat16"}``: bfloat16 autocast, no scaler.
* **resume after a kill**: a run killed with SIGKILL after a checkpoint, resumed from it in a new
  process, ends with the uninterrupted run's weights, bit for bit.
* **async checkpoint**: ``CheckpointCallback(async_save=True)`` snapshots the device's weights
  while training goes on; the checkpoint loads back as the weights at that batch.
* **speed** (MLP, CNN, transformer): the Trainer against a hand-written loop on the same data and
  initial weights, each round ended by ``torch.cuda.synchronize()``; the median of interleaved
  rounds' ratios, and whether the weights end equal.
* **peers**: Accelerate and Lightning running the same MLP loop, against the same hand loop.
* **reads**: values the Trainer reads from the device per 100 batches at its defaults.

CI runs the same logic on CPU (``--device cpu --quick``, tests/bench/test_gpu_check.py); the
figures that count are the GPU's. It exits 0 even when a check fails (the table says which).

    python bench/gpu/check.py --device cuda --out gpu_results.md
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from fastcore_train import Callback, CheckpointCallback, Trainer  # noqa: E402

Row = tuple[str, str, str]  # check, result, detail


# ------------------------------------------------------------------ models and data
class MLP(torch.nn.Module):
    def __init__(self, width: int = 512) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                                       torch.nn.ReLU(), torch.nn.Linear(width, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                                            torch.nn.AdaptiveAvgPool2d(4))
        self.head = torch.nn.Linear(64 * 16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x.view(-1, 1, 28, 28)).flatten(1))


class Transformer(torch.nn.Module):
    def __init__(self, dim: int = 128, seq: int = 64) -> None:
        super().__init__()
        self.seq, self.dim = seq, dim
        layer = torch.nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x.view(-1, self.seq, self.dim)).mean(dim=1))


MODELS: dict[str, tuple[Callable[[], torch.nn.Module], int]] = {  # name -> (build, input features)
    "mlp": (MLP, 64), "cnn": (CNN, 28 * 28), "transformer": (Transformer, 64 * 128)}


def train_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"loss": torch.nn.functional.cross_entropy(model(x), y)}


for _model in (MLP, CNN, Transformer):
    _model.train_step = train_step


def data(features: int, batches: int, batch_size: int, seed: int = 0) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    count = batches * batch_size
    return TensorDataset(torch.randn(count, features, generator=generator),
                         torch.randint(0, 10, (count,), generator=generator))


def loader(dataset: TensorDataset, batch_size: int) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, shuffle=False,
                      collate_fn=lambda rows: {"x": torch.stack([r[0] for r in rows]), "y": torch.stack([r[1] for r in rows])})


def fresh(name: str, device: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = MODELS[name][0]().to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# ------------------------------------------------------------------ checks
class Losses(Callback):
    def __init__(self) -> None:
        self.values: list[float] = []

    def on_before_backward(self, trainer: Any, outputs: Any) -> None:
        self.values.append(float(outputs["loss"]))


def check_train(device: str, batches: int, **options: Any) -> Row:
    model, optimizer = fresh("mlp", device)
    losses = Losses()
    trainer = Trainer(model, loader(data(64, batches, 64), 64), optimizer, device=device, n_epochs=3,
                      progress_bar=None, callbacks=[losses], **options)
    trainer.run(num_eval_sanity_batch=0)
    scaler = trainer.driver.precision.scaler
    first, last = statistics.mean(losses.values[:batches]), statistics.mean(losses.values[-batches:])
    ok = last < first and all(value == value for value in losses.values)
    detail = (f"loss {first:.4f} -> {last:.4f}; autocast {trainer.driver.precision.autocast_dtype if options else 'off'}"
              f"; scaler {type(scaler).__name__ if scaler is not None else 'none'}"
              + (f" (scale {scaler.get_scale():.0f})" if scaler is not None else ""))
    return "ok" if ok else "FAILED", detail


def check_scaler(device: str, batches: int, dtype: Any) -> Row:
    """``fp16=True`` with the default autocast dtype (None) or ``dtype``; a grad scaler only for float16 on CUDA."""
    result, detail = check_train(device, batches, fp16=True,
                                 **({"torch_kwargs": {"autocast_dtype": dtype}} if dtype else {}))
    wants_scaler = device.startswith("cuda") and dtype in (None, "float16")
    if ("GradScaler" in detail) != wants_scaler:
        return "FAILED", detail + f" (expected {'a' if wants_scaler else 'no'} grad scaler)"
    return result, detail


def resume_worker(config: dict) -> None:
    """One run of the kill-and-resume check (``--worker``): train, or resume, and write the weights."""
    torch.use_deterministic_algorithms(True)
    device, folder = config["device"], Path(config["folder"])
    model, optimizer = fresh("mlp", device)

    class KillAt(Callback):
        def on_train_batch_end(self, trainer: Any) -> None:
            if trainer.global_forward_batches == config.get("kill_at"):
                trainer.wait_for_checkpoint()
                os.kill(os.getpid(), signal.SIGKILL)

    saving = CheckpointCallback(folder / "checkpoints", every_n_batches=config["save_every"], save_object="checkpoint")
    trainer = Trainer(model, loader(data(64, config["batches"], 64), 64), optimizer, device=device, n_epochs=2,
                      progress_bar=None, callbacks=[saving, KillAt()], sampler_seed=1)
    trainer.run(num_eval_sanity_batch=0, resume_from="auto" if config.get("resume") else None)
    torch.save({name: value.cpu() for name, value in model.state_dict().items()}, folder / config["weights"])


def run_worker(config: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, __file__, "--worker", json.dumps(config)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def check_resume_after_kill(device: str, batches: int) -> Row:
    with tempfile.TemporaryDirectory() as whole, tempfile.TemporaryDirectory() as killed:
        common = {"device": device, "batches": batches, "save_every": max(1, batches // 2)}
        done = run_worker({**common, "folder": whole, "weights": "final.pt"})
        if done.returncode != 0:
            return "FAILED", f"uninterrupted run: {done.stderr[-300:]}"
        kill_at = batches + max(1, batches // 2) + 1  # in the second epoch, after a checkpoint
        first = run_worker({**common, "folder": killed, "weights": "never.pt", "kill_at": kill_at})
        if first.returncode != -signal.SIGKILL:
            return "FAILED", f"the run to kill ended with {first.returncode}: {first.stderr[-300:]}"
        second = run_worker({**common, "folder": killed, "weights": "final.pt", "resume": True})
        if second.returncode != 0:
            return "FAILED", f"resumed run: {second.stderr[-300:]}"
        expected, got = (torch.load(Path(folder, "final.pt")) for folder in (whole, killed))
        same = all(torch.equal(expected[name], got[name]) for name in expected)
        return ("ok" if same else "FAILED"), (f"killed with SIGKILL at batch {kill_at} of {2 * batches}, resumed from "
                                              f"the last checkpoint: weights {'bit-identical' if same else 'DIFFER'}")


def check_async_checkpoint(device: str, batches: int) -> Row:
    model, optimizer = fresh("mlp", device)
    at_save: dict[str, torch.Tensor] = {}

    class Remember(Callback):
        def on_save_checkpoint(self, trainer: Any) -> dict:
            at_save.clear()
            at_save.update({name: value.detach().cpu().clone() for name, value in model.state_dict().items()})
            return {}

    with tempfile.TemporaryDirectory() as folder:
        saving = CheckpointCallback(folder, every_n_batches=batches, save_object="checkpoint", async_save=True)
        trainer = Trainer(model, loader(data(64, batches, 64), 64), optimizer, device=device, n_epochs=1,
                          progress_bar=None, callbacks=[Remember(), saving])
        started = time.perf_counter()
        trainer.run(num_eval_sanity_batch=0)
        seconds = time.perf_counter() - started
        checkpoints = [path for path in Path(folder).rglob("meta.json")]
        if not checkpoints:
            return "FAILED", "no checkpoint was written"
        reloaded, reload_optimizer = fresh("mlp", device)
        Trainer(reloaded, loader(data(64, batches, 64), 64), reload_optimizer, device=device, n_epochs=1,
                progress_bar=None).load_checkpoint(checkpoints[-1].parent)
        same = all(torch.equal(at_save[name], value.cpu()) for name, value in reloaded.state_dict().items())
        return ("ok" if same else "FAILED"), (f"snapshot from {device} memory, written in the background; loads back "
                                              f"{'bit-identical' if same else 'DIFFERENT'}; run {seconds:.2f} s")


def hand_epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: DataLoader, device: str) -> None:
    model.train()
    for batch in batches:
        x, y = batch["x"].to(device, non_blocking=True), batch["y"].to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(device)


def timed(fn: Callable[[], None], device: str) -> float:
    synchronize(device)
    started = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - started


def check_speed(name: str, device: str, batches: int, rounds: int) -> Row:
    features = MODELS[name][1]
    batches_data = loader(data(features, batches, 64), 64)
    hand_model, hand_optimizer = fresh(name, device)
    model, optimizer = fresh(name, device)
    trainer = Trainer(model, batches_data, optimizer, device=device, n_epochs=1, progress_bar=None)

    def trainer_epoch() -> None:
        trainer.state.cur_epoch_idx = 0
        trainer.run(num_eval_sanity_batch=0)

    ratios = []
    for round_index in range(rounds + 1):
        pair = [("hand", lambda: hand_epoch(hand_model, hand_optimizer, batches_data, device)),
                ("trainer", trainer_epoch)]
        times = {label: timed(fn, device) for label, fn in (pair if round_index % 2 else pair[::-1])}
        if round_index:  # the first round warms both up
            ratios.append(times["trainer"] / times["hand"])
    same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), hand_model.state_dict().values()))
    ratio = statistics.median(ratios)
    return "measured", f"Trainer / hand loop {ratio:.3f} (median of {rounds} rounds of {batches} batches); " \
                       f"weights {'bit-identical' if same else 'differ'}"


def check_peers(device: str, batches: int, rounds: int) -> list[tuple[str, str, str]]:
    rows = []
    batches_data = loader(data(64, batches, 64), 64)
    for peer in ("accelerate", "lightning"):
        try:
            runner = _peer_runner(peer, device, batches_data)
        except ImportError as missing:
            rows.append((f"peers: {peer}", "skipped", f"not installed ({missing.name})"))
            continue
        hand_model, hand_optimizer = fresh("mlp", device)
        ratios = []
        for round_index in range(rounds + 1):
            hand = timed(lambda: hand_epoch(hand_model, hand_optimizer, batches_data, device), device)
            theirs = timed(runner, device)
            if round_index:
                ratios.append(theirs / hand)
        how = "a fit() per round, its set-up included" if peer == "lightning" else "one prepared loop"
        rows.append((f"peers: {peer}", "measured", f"{peer} / hand loop {statistics.median(ratios):.3f} "
                                                    f"(median of {rounds} rounds of {batches} batches; {how})"))
    return rows


def _peer_runner(peer: str, device: str, batches_data: DataLoader) -> Callable[[], None]:
    model, optimizer = fresh("mlp", device)
    if peer == "accelerate":
        from accelerate import Accelerator

        accelerator = Accelerator(cpu=not device.startswith("cuda"))
        model, optimizer, prepared = accelerator.prepare(model, optimizer, batches_data)

        def epoch() -> None:
            for batch in prepared:
                loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        return epoch
    import lightning

    class Module(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def training_step(self, batch: dict, index: int) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(self.model(batch["x"]), batch["y"])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.model.parameters(), lr=0.01)

    module = Module()

    def epoch() -> None:
        lightning.Trainer(max_epochs=1, accelerator="gpu" if device.startswith("cuda") else "cpu", devices=1,
                          logger=False, enable_checkpointing=False, enable_progress_bar=False,
                          enable_model_summary=False).fit(module, batches_data)
    return epoch


def check_reads(device: str, batches: int) -> Row:
    from bench.reads import CountReads, torch_read_counter

    model, optimizer = fresh("mlp", device)
    counter = CountReads()
    trainer = Trainer(model, loader(data(64, batches, 64), 64), optimizer, device=device, n_epochs=1,
                      callbacks=[counter])
    mode = torch_read_counter()
    with mode:
        trainer.run(num_eval_sanity_batch=0)
    reads = counter.at_end - counter.at_begin
    return "measured", (f"{100 * reads / batches:.2f} per 100 batches through driver.data; "
                        f"{100 * sum(mode.counts.values()) / batches:.2f} torch tensor reads in all ({mode.counts})")


# ------------------------------------------------------------------ the run
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", default=None, help="write the results table here too")
    parser.add_argument("--quick", action="store_true", help="few batches and rounds: CI's check of the logic")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        resume_worker(json.loads(args.worker))
        return
    batches, rounds = (4, 1) if args.quick else (100, 5)
    device = args.device
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or platform.machine()
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("train", lambda: check_train(device, batches)),
        ("fp16", lambda: check_scaler(device, batches, None)),
        ("bf16", lambda: check_scaler(device, batches, "bfloat16")),
        ("resume after a kill", lambda: check_resume_after_kill(device, batches)),
        ("async checkpoint", lambda: check_async_checkpoint(device, batches)),
        *[(f"speed: {model}", (lambda model=model: check_speed(model, device, batches, rounds))) for model in MODELS],
        ("peers", lambda: check_peers(device, batches, rounds)),
        ("reads", lambda: check_reads(device, max(batches, 100))),
    ]
    rows: list[tuple[str, str, str]] = []
    for label, check in checks:
        started = time.perf_counter()
        try:
            result = check()
        except Exception as error:  # noqa: BLE001 - a failing check is a row, the others still run
            result = ("FAILED", f"{type(error).__name__}: {error} | {traceback.format_exc(limit=2)[-300:]}")
        found = result if isinstance(result, list) else [(label, *result)]
        rows += [(row[0], row[1], f"{row[2]} [{time.perf_counter() - started:.1f} s]") for row in found]
        print(f"{rows[-1][0]}: {rows[-1][1]}", flush=True)
    lines = [f"# {device} ({name}); torch {torch.__version__}, Python {platform.python_version()}; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "| check | result | detail |", "|---|---|---|",
             *[f"| {check} | {result} | {detail.replace('|', '/')} |" for check, result, detail in rows]]
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")


if __name__ == "__main__":
    main()
