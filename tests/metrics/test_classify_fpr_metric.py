"""Tests of ``ClassifyFPreRecMetric`` against hand-computed counts and scores."""

import numpy as np
import pytest

from fastcore_train.metrics import ClassifyFPreRecMetric
from tests.metrics.ranks import aggregate_ranks

# idx:    0  1  2  3  4  5  6
TARGET = [0, 1, 2, 0, 1, 2, 2]
PRED = [0, 2, 2, 1, 1, 1, 2]
# class 0: tp 1 (idx 0), fp 0,          fn 1 (idx 3)  -> pre 1,   rec 1/2, f 2/3
# class 1: tp 1 (idx 4), fp 2 (idx 3,5), fn 1 (idx 1) -> pre 1/3, rec 1/2, f 2/5
# class 2: tp 2 (idx 2,6), fp 1 (idx 1), fn 1 (idx 5) -> pre 2/3, rec 2/3, f 2/3
# micro: tp 4, fp 3, fn 3 -> 4/7 everywhere
MICRO = {"f": round(4 / 7, 6), "pre": round(4 / 7, 6), "rec": round(4 / 7, 6)}
MACRO = {
    "f": round((2 / 3 + 2 / 5 + 2 / 3) / 3, 6),
    "pre": round((1 + 1 / 3 + 2 / 3) / 3, 6),
    "rec": round((1 / 2 + 1 / 2 + 2 / 3) / 3, 6),
}
PER_LABEL = {
    "0": (round(2 / 3, 6), 1.0, 0.5),
    "1": (0.4, round(1 / 3, 6), 0.5),
    "2": (round(2 / 3, 6), round(2 / 3, 6), round(2 / 3, 6)),
}


def per_label_keys(names):
    """``{"f-<name>": f, "pre-<name>": pre, "rec-<name>": rec}`` from PER_LABEL, renamed."""
    result = {}
    for index, name in zip(PER_LABEL, names):
        f, pre, rec = PER_LABEL[index]
        result.update({f"f-{name}": f, f"pre-{name}": pre, f"rec-{name}": rec})
    return result



class Vocab:
    """A fastNLP ``Vocabulary`` look-alike."""

    def __init__(self, words):
        self.idx2word = dict(enumerate(words))
        self.unknown, self.padding = "<unk>", "<pad>"


def test_counts_and_micro_scores():
    metric = ClassifyFPreRecMetric()
    metric.update(np.array(PRED), np.array(TARGET))
    np.testing.assert_array_equal(metric.tp, [1, 1, 2])
    np.testing.assert_array_equal(metric.fp, [0, 2, 1])
    np.testing.assert_array_equal(metric.fn, [1, 1, 1])
    assert metric.get_metric() == MICRO


def test_macro_scores():
    metric = ClassifyFPreRecMetric(f_type="macro")
    metric.update(np.array(PRED), np.array(TARGET))
    assert metric.get_metric() == MACRO


def test_per_label_keys_without_vocab_use_class_ids():
    metric = ClassifyFPreRecMetric(only_gross=False)
    metric.update(np.array(PRED), np.array(TARGET))
    assert metric.get_metric() == {**per_label_keys(["0", "1", "2"]), **MICRO}


@pytest.mark.parametrize(
    "vocab",
    [
        ["neg", "neu", "pos"],
        ("neg", "neu", "pos"),
        {"neg": 0, "neu": 1, "pos": 2},
        {0: "neg", 1: "neu", 2: "pos"},
        Vocab(["neg", "neu", "pos"]),
    ],
    ids=["list", "tuple", "label-to-index", "index-to-label", "idx2word"],
)
def test_per_label_keys_use_vocab_names(vocab):
    metric = ClassifyFPreRecMetric(tag_vocab=vocab, only_gross=False, f_type="macro")
    metric.update(np.array(PRED), np.array(TARGET))
    assert metric.get_metric() == {**per_label_keys(["neg", "neu", "pos"]), **MACRO}


def test_scores_input_and_seq_len_masking():
    target = np.array([[0, 1, 2], [2, 0, -100]])  # -100: padding, never counted
    pred = np.array([[0, 1, 1], [2, 2, 5]])
    scores = np.eye(6)[pred]  # one-hot scores whose argmax is pred
    # valid pairs (target, pred): (0,0) (1,1) (2,1) (2,2) (0,2)
    # class 0: tp 1 fn 1 -> pre 1, rec 1/2, f 2/3; class 1: tp 1 fp 1 -> pre 1/2, rec 1, f 2/3
    # class 2: tp 1 fp 1 fn 1 -> 1/2 each; micro tp 3 fp 2 fn 2 -> 3/5
    micro = ClassifyFPreRecMetric()
    micro.update(scores, target, seq_len=np.array([3, 2]))
    assert micro.get_metric() == {"f": 0.6, "pre": 0.6, "rec": 0.6}
    macro = ClassifyFPreRecMetric(f_type="macro")
    macro.update(pred, target, seq_len=[3, 2])
    assert macro.get_metric() == {
        "f": round((2 / 3 + 2 / 3 + 1 / 2) / 3, 6),
        "pre": round((1 + 1 / 2 + 1 / 2) / 3, 6),
        "rec": round((1 / 2 + 1 + 1 / 2) / 3, 6),
    }


def test_ignore_labels_drop_their_counts():
    metric = ClassifyFPreRecMetric(tag_vocab=["neg", "neu", "pos"], ignore_labels=["neu"],
                                   only_gross=False)
    metric.update(np.array(PRED), np.array(TARGET))
    # classes 0 and 2 only: tp 3, fp 1, fn 2 -> pre 3/4, rec 3/5, f 2/3
    assert metric.get_metric() == {
        **{k: v for k, v in per_label_keys(["neg", "neu", "pos"]).items() if "neu" not in k},
        "f": round(2 / 3, 6), "pre": 0.75, "rec": 0.6,
    }


def test_ignore_labels_by_id_without_vocab_and_beta():
    metric = ClassifyFPreRecMetric(ignore_labels=[1], beta=2)
    metric.update(np.array(PRED), np.array(TARGET))
    # pre 3/4, rec 3/5 -> f2 = 5 * pre * rec / (4 * pre + rec) = 2.25 / 3.6
    assert metric.get_metric() == {"f": 0.625, "pre": 0.75, "rec": 0.6}


@pytest.mark.also_per_backend  # torch tensors as metric inputs: runs where torch is installed
def test_torch_tensors():
    torch = pytest.importorskip("torch")
    metric = ClassifyFPreRecMetric(f_type="macro")
    scores = torch.nn.functional.one_hot(torch.tensor(PRED), 3).float().requires_grad_()
    metric.update(scores, torch.tensor(TARGET))
    assert metric.get_metric() == MACRO


def test_counts_grow_with_new_classes_and_reset_empties_them():
    metric = ClassifyFPreRecMetric()
    metric.update(np.array([0, 1]), np.array([1, 1]))
    assert len(metric.tp) == 2
    metric.update(np.array([3]), np.array([3]))
    np.testing.assert_array_equal(metric.tp, [0, 1, 0, 1])
    metric.reset()
    assert metric.tp.shape == (0,)
    assert metric.get_metric() == {"f": 0.0, "pre": 0.0, "rec": 0.0}


@pytest.mark.parametrize("f_type", ["micro", "macro"])
@pytest.mark.parametrize("tag_vocab", [None, ["a", "b", "c", "d"]])
def test_two_half_datasets_aggregate_to_the_whole(f_type, tag_vocab):
    target = np.array([[0, 1, 2], [0, 1, 3], [3, 3, 0], [2, 1, 0]])
    pred = np.array([[0, 1, 1], [0, 0, 3], [3, 2, 0], [2, 1, 3]])
    seq_len = np.array([3, 2, 3, 1])
    make = lambda: ClassifyFPreRecMetric(tag_vocab, f_type=f_type, only_gross=False)  # noqa: E731
    whole = make()
    whole.update(pred, target, seq_len)
    rank0, rank1 = make(), make()
    rank0.update(pred[:2], target[:2], seq_len[:2])
    rank1.update(pred[2:], target[2:], seq_len[2:])
    if tag_vocab is None:  # rank 0 never sees class 3, so its counts are shorter
        assert (len(rank0.tp), len(rank1.tp)) == (3, 4)
    aggregate_ranks(rank0, rank1)
    assert rank0.get_metric() == rank1.get_metric() == whole.get_metric()
    np.testing.assert_array_equal(rank0.tp, whole.tp)


def test_bad_arguments_are_reported():
    with pytest.raises(ValueError, match="f_type"):
        ClassifyFPreRecMetric(f_type="weighted")
    with pytest.raises(TypeError, match="tag_vocab"):
        ClassifyFPreRecMetric(tag_vocab="abc")
    with pytest.raises(ValueError, match="ignore_labels"):
        ClassifyFPreRecMetric(tag_vocab=["a", "b"], ignore_labels=["c"])
    with pytest.raises(ValueError, match="without gaps"):
        ClassifyFPreRecMetric(tag_vocab={"a": 0, "b": 2})


def test_bad_inputs_are_reported():
    metric = ClassifyFPreRecMetric(tag_vocab=["a", "b"])
    with pytest.raises(ValueError, match="does not fit target"):
        metric.update(np.zeros((2, 3)), np.zeros(3))
    with pytest.raises(ValueError, match="out of range"):
        metric.update(np.array([2]), np.array([0]))
    with pytest.raises(ValueError, match="non-negative"):
        metric.update(np.array([0]), np.array([-1]))
    with pytest.raises(ValueError, match="integer ids"):
        metric.update(np.array([0.5]), np.array([0]))
