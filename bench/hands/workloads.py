"""The three real workloads of ``bench/models.py``, written once for every framework (numpy only).

* ``cnn``: the MNIST "BasicNet" of pytorch/examples and Accelerate's notebook-launcher tutorial
  (conv 1->32 3x3, conv 32->64 3x3, max-pool 2, dropout 0.25, fc 9216->128, dropout 0.5, fc 10,
  log_softmax + NLL loss) on the shipped 8x8 digits upscaled to 28x28, batch 64, Adam;
* ``transformer``: the text classifier of ``examples/text_classification`` (2 encoder blocks, dim
  128, seq 64) on seeded random tokens and labels, batch 32, Adam;
* ``loader``: a data-bound run: every sample costs ~1 ms of numpy work in the dataset's
  ``__getitem__`` (a seeded crop, flip, noise and blur of a digit), served by 2 loader workers to a
  small MLP (256-64-10, SGD), so the loader, not the model, sets the pace.

Each backend module in ``bench/hands`` turns these columns into its own dataset and loader, and
builds the model in its own framework; the data and its per-sample work are the same everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

WORKLOADS = ("cnn", "transformer", "loader")
IMAGE = 28          # the CNN's input side (MNIST's)
CROP = 16           # the loader workload's sample side (a 16x16 crop, 256 features)
LOADER_SIZES = (CROP * CROP, 64, 10)
#: batches per round (one epoch) by default, per workload
DEFAULT_BATCHES = {"cnn": 40, "transformer": 48, "loader": 80}  # ~4 s per torch epoch, 1 thread
BLUR_PASSES = 30    # the loader workload's per-sample work: ~1 ms of numpy per sample


@dataclass(frozen=True)
class Workload:
    """What a backend needs to build one workload: batch, loader workers, loss, optimizer."""

    name: str
    batch_size: int
    keys: tuple[str, str]       # the batch's input and target names (also ``train_step``'s arguments)
    loss: str                   # "cross_entropy" (on logits) or "nll" (on log-probabilities)
    optimizer: str              # "adam" or "sgd"
    lr: float
    workers: int = 0
    transform: Optional[Callable[[dict[str, np.ndarray], int], dict[str, np.ndarray]]] = None


def upscale(images: np.ndarray, side: int = IMAGE) -> np.ndarray:
    """Square images ``(n, h, w)`` resized to ``side`` x ``side`` by bilinear interpolation (numpy)."""
    n, h, w = images.shape
    pos_y = np.linspace(0, h - 1, side)
    pos_x = np.linspace(0, w - 1, side)
    y0, x0 = np.floor(pos_y).astype(int), np.floor(pos_x).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    wy, wx = (pos_y - y0)[None, :, None], (pos_x - x0)[None, None, :]
    top = images[:, y0][:, :, x0] * (1 - wx) + images[:, y0][:, :, x1] * wx
    bottom = images[:, y1][:, :, x0] * (1 - wx) + images[:, y1][:, :, x1] * wx
    return (top * (1 - wy) + bottom * wy).astype(np.float32)


def _digits(n: int, side: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` training digits (repeated in order past the 1437 shipped), upscaled to ``side``."""
    from fastcore_train.data import load_digits
    data = load_digits()
    index = np.arange(n) % len(data.x_train)
    images = upscale(data.x_train.reshape(-1, 8, 8), side)
    return images[index], data.y_train[index]


def augment(sample: dict[str, np.ndarray], index: int) -> dict[str, np.ndarray]:
    """The loader workload's per-sample work, seeded by the index (the same in any worker):
    a random 16x16 crop of the 28x28 digit, a random flip, noise, then ``BLUR_PASSES`` 3x3 blurs."""
    rng = np.random.default_rng(index)
    top, left = rng.integers(0, IMAGE - CROP + 1, size=2)
    image = sample["x"][top:top + CROP, left:left + CROP]
    if rng.random() < 0.5:
        image = image[:, ::-1]
    image = image + rng.normal(0.0, 0.05, image.shape).astype(np.float32)
    for _ in range(BLUR_PASSES):
        padded = np.pad(image, 1, mode="edge")
        image = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] + padded[1:-1, 1:-1]) / 5
    return {"x": np.ascontiguousarray(image, dtype=np.float32).reshape(-1), "y": sample["y"]}


def get(name: str) -> Workload:
    """The workload named ``name`` (one of ``WORKLOADS``)."""
    if name == "cnn":
        return Workload("cnn", 64, ("x", "y"), "nll", "adam", 1e-3)
    if name == "transformer":
        return Workload("transformer", 32, ("tokens", "label"), "cross_entropy", "adam", 1e-3)
    if name == "loader":
        return Workload("loader", 32, ("x", "y"), "cross_entropy", "sgd", 0.01, workers=2, transform=augment)
    raise ValueError(f"model={name!r}: choose one of {', '.join(WORKLOADS)}.")


def columns(workload: Workload, batches: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The samples of ``batches`` batches as named numpy columns (the same on every framework)."""
    n = batches * workload.batch_size
    if workload.name == "cnn":
        images, labels = _digits(n, IMAGE)
        return {"x": images[:, None], "y": labels}  # (n, 1, 28, 28): one channel
    if workload.name == "transformer":
        from examples.text_classification.architecture import ClassifierConfig
        config = ClassifierConfig()
        rng = np.random.default_rng(seed)
        return {"tokens": rng.integers(0, config.vocab_size, size=(n, config.seq_len), dtype=np.int64),
                "label": rng.integers(0, config.num_classes, size=n, dtype=np.int64)}
    images, labels = _digits(n, IMAGE)  # the loader workload: 28x28 digits, cropped per sample
    return {"x": images, "y": labels}


def per_sample_ms(workload: Workload, samples: int = 200) -> float:
    """What ``workload.transform`` costs per sample in this process (ms; 0 without one)."""
    import time
    if workload.transform is None:
        return 0.0
    data = columns(workload, 1)
    sample = {key: value[0] for key, value in data.items()}
    started = time.perf_counter()
    for index in range(samples):
        workload.transform(sample, index)
    return 1e3 * (time.perf_counter() - started) / samples


def describe(workload: Workload) -> str:
    """One line naming the model, data and recipe."""
    what: dict[str, Any] = {
        "cnn": "BasicNet CNN (conv32-conv64-pool-dropout-fc128-dropout-fc10, log_softmax+NLL) on digits upscaled to 28x28",
        "transformer": "transformer classifier (examples/text_classification: 2 blocks, dim 128, 4 heads, seq 64) "
                       "on random tokens",
        "loader": f"MLP {'-'.join(map(str, LOADER_SIZES))} on augmented 16x16 crops "
                  f"({BLUR_PASSES} numpy blurs per sample in __getitem__)",
    }
    return (f"{what[workload.name]}, batch {workload.batch_size}, {workload.optimizer.capitalize()} lr {workload.lr:g}, "
            f"{workload.workers} loader workers")
