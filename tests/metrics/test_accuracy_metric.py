"""Tests of ``Accuracy`` against hand-computed values."""

import numpy as np
import pytest

from fastcore_train.metrics import Accuracy
from tests.metrics.ranks import aggregate_ranks



def test_class_ids():
    metric = Accuracy()
    metric.update(np.array([0, 1, 2, 1]), np.array([0, 1, 1, 1]))
    assert metric.get_metric() == {"acc": 0.75}
    assert (metric.correct, metric.total) == (3, 4)


def test_scores_use_argmax_over_last_axis():
    scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    metric = Accuracy()
    metric.update(scores, np.array([0, 0, 0]))
    assert metric.get_metric() == {"acc": round(2 / 3, 6)}  # 0.666667


def test_seq_len_masks_padding_of_sequences():
    pred = np.array([[1, 2, 3], [4, 5, 6]])
    target = np.array([[1, 2, 0], [4, 0, 0]])
    masked = Accuracy()
    masked.update(pred, target, seq_len=np.array([2, 1]))
    assert masked.get_metric() == {"acc": 1.0}
    assert masked.total == 3
    unmasked = Accuracy()
    unmasked.update(pred, target)
    assert unmasked.get_metric() == {"acc": 0.5}


def test_sequence_scores_with_seq_len():
    target = np.array([[1, 0, 1], [0, 0, 1]])
    scores = np.zeros((2, 3, 2))
    scores[..., 1] = [[1, 1, -1], [-1, -1, -1]]  # predicted ids [[1, 1, 0], [0, 0, 0]]
    metric = Accuracy()
    metric.update(scores, target, seq_len=[3, 2])
    # valid: (1,1) ok, (1,0) wrong, (0,1) wrong, (0,0) ok, (0,0) ok -> 3 of 5
    assert metric.get_metric() == {"acc": 0.6}


def test_seq_len_is_ignored_for_flat_targets():
    metric = Accuracy()
    metric.update(np.array([1, 0]), np.array([1, 1]), seq_len=np.array([1, 1]))
    assert metric.get_metric() == {"acc": 0.5}


def test_empty_metric_reports_zero_and_reset_clears():
    metric = Accuracy()
    assert metric.get_metric() == {"acc": 0}
    metric.update(np.array([1]), np.array([1]))
    metric.reset()
    assert (metric.correct, metric.total) == (0, 0)
    assert metric.get_metric() == {"acc": 0}


def test_accumulates_over_batches():
    metric = Accuracy()
    metric.update(np.array([1, 1]), np.array([1, 0]))
    metric.update(np.array([2]), np.array([2]))
    assert metric.get_metric() == {"acc": round(2 / 3, 6)}


@pytest.mark.also_per_backend  # torch tensors as metric inputs: runs where torch is installed
def test_torch_tensors():
    torch = pytest.importorskip("torch")
    target = torch.tensor([[1, 0, 1], [0, 0, 1]])
    scores = torch.zeros(2, 3, 2, requires_grad=True) + torch.tensor(
        [[[0.0, 1], [0, 1], [0, -1]], [[0, -1], [0, -1], [0, -1]]]
    )
    metric = Accuracy()
    metric.update(scores, target, seq_len=torch.tensor([3, 2]))
    assert metric.get_metric() == {"acc": 0.6}
    assert type(metric.correct.get_scalar()) is int


def test_two_half_datasets_aggregate_to_the_whole():
    pred = np.array([[1, 2, 3], [4, 5, 6], [1, 1, 1], [0, 0, 0]])
    target = np.array([[1, 2, 0], [4, 0, 0], [1, 0, 1], [0, 1, 0]])
    seq_len = np.array([3, 2, 3, 1])
    whole = Accuracy()
    whole.update(pred, target, seq_len)
    rank0, rank1 = Accuracy(), Accuracy()
    rank0.update(pred[:2], target[:2], seq_len[:2])
    rank1.update(pred[2:], target[2:], seq_len[2:])
    assert rank0.get_metric() != whole.get_metric()
    aggregate_ranks(rank0, rank1)
    assert rank0.get_metric() == rank1.get_metric() == whole.get_metric() == {"acc": round(6 / 9, 6)}


@pytest.mark.parametrize(
    "pred_shape, target_shape",
    [((2, 3), (3,)), ((4,), (2, 2)), ((2, 3, 4), (2, 4)), ((3,), (4,))],
)
def test_bad_shapes_are_reported(pred_shape, target_shape):
    with pytest.raises(ValueError, match="does not fit target"):
        Accuracy().update(np.zeros(pred_shape), np.zeros(target_shape))


def test_bad_seq_len_shape_is_reported():
    with pytest.raises(ValueError, match="seq_len must have shape"):
        Accuracy().update(np.zeros((2, 3)), np.zeros((2, 3)), seq_len=np.array([1, 2, 3]))
