"""A transformers model as its users hand it over: a tiny ``BertForSequenceClassification`` built
from a config (no download), batches in HF's names (``input_ids``, ``attention_mask``,
``labels``) and no mapping anywhere. HF's names are understood as fastNLP's are: ``labels`` go into
the model (which returns a ``ModelOutput`` with ``loss`` and ``logits``), and the metrics read
``logits`` as their predictions and ``labels`` as their targets. ``train()`` and ``evaluate()``
are transformers' method names. Torch only: transformers models are torch modules."""
from __future__ import annotations

import logging
import math
import os

import numpy as np
import pytest
import torch

from fastcore_train import Accuracy, ClassifyFPreRecMetric, EvalPrediction, Trainer, TrainOutput
from fastcore_train.log import logger

if os.environ.get("FASTCORE_TRAIN_REQUIRE_HF"):
    import transformers  # noqa: F401  (tox installs it with the torch extras: a missing one must fail here)
transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[transformers]')")

CLASSES, LENGTH, VOCAB = 3, 8, 40


def tiny_bert() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=LENGTH, num_labels=CLASSES)
    return transformers.BertForSequenceClassification(config)


def hf_rows(count: int, seed: int) -> list[dict[str, torch.Tensor]]:
    """Rows as a tokenizer and datasets give them; the label is the first token's class."""
    generator = np.random.default_rng(seed)
    ids = generator.integers(1, VOCAB, size=(count, LENGTH))
    lengths = generator.integers(LENGTH // 2, LENGTH + 1, size=count)
    rows = []
    for row_ids, length in zip(ids, lengths):
        mask = (np.arange(LENGTH) < length).astype(np.int64)
        rows.append({"input_ids": torch.as_tensor(row_ids * mask), "attention_mask": torch.as_tensor(mask),
                     "labels": torch.as_tensor(row_ids[0] % CLASSES)})
    return rows


def compute_metrics(eval_pred: EvalPrediction) -> dict:
    logits, labels = eval_pred
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


def by_hand(model: torch.nn.Module, rows: list[dict]) -> tuple[np.ndarray, np.ndarray, float]:
    """The logits, labels and mean loss of ``rows``, from the model itself."""
    batch = torch.utils.data.default_collate(rows)
    model.eval()
    with torch.no_grad():
        output = model(**batch)
    return output.logits.numpy(), batch["labels"].numpy(), float(output.loss)


def macro_f1(predicted: np.ndarray, labels: np.ndarray) -> float:
    scores = []
    for label in np.unique(labels):
        tp = np.sum((predicted == label) & (labels == label))
        fp, fn = np.sum((predicted == label) & (labels != label)), np.sum((predicted != label) & (labels == label))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def test_a_transformers_model_trains_evaluates_and_predicts_without_mappings():
    model = tiny_bert()
    train_rows, dev_rows = hf_rows(48, seed=1), hf_rows(20, seed=2)
    loader = torch.utils.data.DataLoader(train_rows, batch_size=8, shuffle=True)
    dev = torch.utils.data.DataLoader(dev_rows, batch_size=8)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    trainer = Trainer(model, loader, torch.optim.AdamW(model.parameters(), lr=1e-2), evaluate_dataloaders=dev,
                      metrics={"acc": Accuracy(), "f1": ClassifyFPreRecMetric(f_type="macro"), "hf": compute_metrics},
                      n_epochs=2, progress_bar=None)
    output = trainer.train()  # transformers' name for run()
    assert isinstance(output, TrainOutput) and output.global_step == 12 and math.isfinite(output.training_loss)
    assert any(not torch.equal(before[name], value) for name, value in model.state_dict().items())

    results = trainer.evaluate()  # transformers' name for run_evaluate()
    logits, labels, loss = by_hand(model, dev_rows)
    predicted = logits.argmax(-1)
    assert results["acc#acc"] == pytest.approx(float((predicted == labels).mean()))
    assert results["accuracy#hf"] == pytest.approx(float((predicted == labels).mean()))
    assert results["f#f1"] == pytest.approx(macro_f1(predicted, labels), abs=1e-6)
    assert results["loss"] == pytest.approx(loss, rel=1e-5)  # the ModelOutput's loss, per sample

    warnings: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = warnings.append
    logger.addHandler(handler)
    try:
        predictions = trainer.predict(dev)
    finally:
        logger.removeHandler(handler)
    assert set(predictions) == {"logits"} and not warnings  # the batch's loss is left out, silently
    np.testing.assert_allclose(predictions["logits"], logits, rtol=1e-5, atol=1e-6)


def test_transformers_method_arguments_we_cannot_honour_name_ours():
    model = tiny_bert()
    loader = torch.utils.data.DataLoader(hf_rows(16, seed=3), batch_size=8)
    trainer = Trainer(model, loader, torch.optim.SGD(model.parameters(), lr=0.1), n_epochs=1, progress_bar=None)
    with pytest.raises(RuntimeError, match="evaluate\\(\\) needs evaluate_dataloaders and metrics"):
        trainer.evaluate()
    with pytest.raises(TypeError, match="fastcore_train.Evaluator"):
        trainer.evaluate(eval_dataset=loader)
    with pytest.raises(TypeError, match="trainer.run\\(\\)"):
        trainer.train(trial={"lr": 0.1})
