"""Metrics written as a fastNLP 1.0 user writes them, the library metrics of each backend, and the
hand computations the tests compare them with. Shared by tests/compat and the 2-rank job
(tests/distributed/jobs/metrics_job.py)."""
from __future__ import annotations

from typing import Any

import numpy as np

from fastcore_train import Accuracy, Metric
from tests.conformance.harnesses.base import OUT


class FastNLPStyleStats(Metric):
    """A custom metric in fastNLP 1.0's style, one element per aggregate method (unchanged code)."""

    def __init__(self, backend="auto", aggregate_when_get_metric=None):
        super().__init__(backend=backend, aggregate_when_get_metric=aggregate_when_get_metric)
        self.register_element(name="correct", value=0, aggregate_method="sum", backend=backend)
        self.register_element(name="total", value=0, aggregate_method="sum", backend=backend)
        self.register_element(name="share_acc", value=0, aggregate_method="mean", backend=backend)
        self.register_element(name="max_logit", value=-1e9, aggregate_method="max", backend=backend)
        self.register_element(name="min_logit", value=1e9, aggregate_method="min", backend=backend)

    def update(self, pred, target):
        pred_np, target_np = self.tensor2numpy(pred), self.tensor2numpy(target)
        self.correct += int((pred_np.argmax(-1) == target_np).sum())
        self.total += target_np.shape[0]
        self.share_acc = self.correct / self.total
        self.max_logit = max(self.max_logit.get_scalar(), pred.max().item())
        if self.min_logit > pred.min().item():
            self.min_logit.fill_value(pred.min().item())

    def get_metric(self) -> dict:
        return {"acc": round(self.correct.get_scalar() / (self.total.get_scalar() + 1e-12), 6),
                "total": self.total.item(), "share_acc": self.share_acc.get_scalar(),
                "max": self.max_logit.get_scalar(), "min": self.min_logit.get_scalar()}


class SeenIndices(Metric):
    """No element: combines ranks itself with ``self.all_gather_object`` (fastNLP's other way)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def reset(self):
        self.seen = []

    def update(self, idx):
        self.seen.extend(int(i) for i in np.asarray(self.tensor2numpy(idx)).reshape(-1))

    def get_metric(self) -> dict:
        return {"per_rank": self.all_gather_object(self.seen)}


def library_metrics(backend: str) -> dict[str, Any]:
    """The metrics of the backend's framework library (none for jittor and oneflow: they have none)."""
    if backend == "torch":
        import torchmetrics
        return {"tm_acc": torchmetrics.Accuracy(task="multiclass", num_classes=OUT, average="micro"),
                "tm_f1": torchmetrics.F1Score(task="multiclass", num_classes=OUT, average="macro")}
    if backend == "paddle":
        import paddle
        return {"pd_acc": paddle.metric.Accuracy(topk=(1, 2))}
    return {}


def all_metrics(backend: str) -> dict[str, Any]:
    return {"acc": Accuracy(), "stats": FastNLPStyleStats(), "seen": SeenIndices(), **library_metrics(backend)}


def input_mapping(batch):
    """``y`` under every name the metrics ask for (ours: target; paddle.metric: label)."""
    return {**batch, "target": batch["y"], "label": batch["y"]}


def output_mapping(outputs):
    return {**outputs, "preds": outputs["pred"]}  # torchmetrics' update(preds, target)


def by_hand(logits: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """What the metrics must give over ``logits``/``y``, computed with numpy."""
    pred = logits.argmax(-1)
    f1s = []
    for label in range(OUT):
        tp = int(((pred == label) & (y == label)).sum())
        fp = int(((pred == label) & (y != label)).sum())
        fn = int(((pred != label) & (y == label)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    top2 = np.argsort(-logits, axis=-1)[:, :2]
    return {"acc": float((pred == y).mean()), "macro_f1": float(np.mean(f1s)),
            "top2": float((top2 == y[:, None]).any(-1).mean()), "total": len(y),
            "max": float(logits.max()), "min": float(logits.min())}


def check_against_hand(results: dict, logits: np.ndarray, y: np.ndarray, backend: str, dl: str = "dev") -> None:
    """Every result of :func:`all_metrics` equals the hand computation over the whole data set."""
    hand = by_hand(logits, y)
    assert results[f"acc#acc#{dl}"] == round(hand["acc"], 6)
    assert results[f"acc#stats#{dl}"] == round(hand["acc"], 6)
    assert results[f"total#stats#{dl}"] == hand["total"]
    np.testing.assert_allclose(results[f"max#stats#{dl}"], hand["max"], rtol=1e-5)
    np.testing.assert_allclose(results[f"min#stats#{dl}"], hand["min"], rtol=1e-5)
    seen = [index for share in results[f"per_rank#seen#{dl}"] for index in share]
    assert sorted(seen) == list(range(len(y))), "every sample evaluated exactly once"
    shares = [hand_share_acc(logits, y, share) for share in results[f"per_rank#seen#{dl}"]]
    np.testing.assert_allclose(results[f"share_acc#stats#{dl}"], np.mean(shares), rtol=1e-6)  # jittor keeps floats as float32
    if backend == "torch":
        np.testing.assert_allclose(results[f"tm_acc#{dl}"], hand["acc"], rtol=1e-6)
        np.testing.assert_allclose(results[f"tm_f1#{dl}"], hand["macro_f1"], rtol=1e-6)
    if backend == "paddle":
        np.testing.assert_allclose(results[f"acc_top1#pd_acc#{dl}"], hand["acc"], rtol=1e-6)
        np.testing.assert_allclose(results[f"acc_top2#pd_acc#{dl}"], hand["top2"], rtol=1e-6)


def hand_share_acc(logits: np.ndarray, y: np.ndarray, share: list[int]) -> float:
    share = np.asarray(share, dtype=np.int64)
    return float((logits[share].argmax(-1) == y[share]).mean()) if share.size else 0.0
