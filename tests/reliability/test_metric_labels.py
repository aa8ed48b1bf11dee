"""A label outside a metric's classes is an error naming it, not a silently lower (or 0.0) score.

The metric checks are numpy only (they run in every env); the last test runs a real model of each
backend (``--backend``) through the Evaluator.
"""
from __future__ import annotations

import numpy as np
import pytest

from fastcore_train import Accuracy, ClassifyFPreRecMetric, Evaluator, SpanFPreRecMetric
from tests.conformance.harnesses.base import OUT, initial_weights, make_data

SCORES = np.eye(3)[[0, 1, 2, 1]]  # pred scores over 3 classes, argmax [0, 1, 2, 1]


def test_accuracy_target_beyond_the_scored_classes():
    with pytest.raises(ValueError, match=r"target holds class id 3, out of range for the 3 classes pred scores"):
        Accuracy().update(SCORES, np.array([0, 1, 3, 1]))


def test_accuracy_negative_target():
    with pytest.raises(ValueError, match=r"target holds class id -100; class ids must be non-negative.*seq_len"):
        Accuracy().update(np.array([0, 1]), np.array([0, -100]))


def test_accuracy_padding_masked_by_seq_len_is_fine():
    metric = Accuracy()
    metric.update(np.eye(3)[[[0, 1, 2], [1, 1, 0]]], np.array([[0, 1, 2], [1, -100, -100]]), seq_len=[3, 1])
    assert metric.get_metric() == {"acc": 1.0}


def test_classify_target_outside_the_tag_vocab_names_it_and_the_labels():
    metric = ClassifyFPreRecMetric(tag_vocab=["neg", "pos"])
    with pytest.raises(ValueError, match=r"target holds class id 2, out of range for the tag_vocab of 2 labels "
                                         r"\['neg', 'pos'\]"):
        metric.update(np.array([0, 1]), np.array([0, 2]))


def test_classify_target_beyond_the_scored_classes():
    with pytest.raises(ValueError, match=r"target holds class id 4, out of range for the 3 classes pred scores"):
        ClassifyFPreRecMetric().update(SCORES, np.array([0, 1, 4, 1]))
    with pytest.raises(ValueError, match=r"target holds class id 3, out of range for the 3 classes pred scores"):
        ClassifyFPreRecMetric(tag_vocab=["a", "b", "c", "d"]).update(SCORES, np.array([0, 1, 3, 1]))


def test_span_target_outside_the_tag_vocab_or_the_scored_tags():
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    with pytest.raises(ValueError, match=r"target holds tag id 7, outside the tag vocabulary of 5 tags \['O', 'B-PER'"):
        SpanFPreRecMetric(tag_vocab=tags).update(np.array([[0, 1, 2]]), np.array([[0, 1, 7]]))
    scores = np.eye(3)[[[0, 1, 2]]]  # a model scoring 3 of the 5 tags
    with pytest.raises(ValueError, match=r"target holds tag id 3 \('B-LOC'\), but pred scores only 3 tags"):
        SpanFPreRecMetric(tag_vocab=tags).update(scores, np.array([[0, 1, 3]]))


def test_labels_beyond_the_models_classes_fail_the_evaluation(harness):
    x, y = make_data(8)
    y = y.copy()
    y[5] = OUT + 1  # the model scores OUT classes
    model = harness.make_model(initial_weights())
    for metric in (Accuracy(), ClassifyFPreRecMetric()):
        evaluator = Evaluator(model, harness.make_dataloader(x, y, 4), metrics={"m": metric},
                              driver=harness.driver_name, verbose=0, input_mapping={"y": "target"})
        with pytest.raises(ValueError, match=rf"target holds class id {OUT + 1}, out of range for the {OUT} classes"):
            evaluator.run()
