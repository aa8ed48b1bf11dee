"""Tests of ``SpanFPreRecMetric`` against hand-decoded spans."""

import numpy as np
import pytest

from fastcore_train.metrics import SpanFPreRecMetric
from tests.metrics.ranks import aggregate_ranks

BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# sequence 0: gold B-PER I-PER O B-LOC -> per[0,2) loc[3,4)
#             pred B-PER I-PER O B-PER -> per[0,2) per[3,4)
# sequence 1 (length 3): gold O B-LOC I-LOC | pad O; pred O B-LOC I-LOC | pad B-PER
BIO_TARGET = np.array([[1, 2, 0, 3], [0, 3, 4, 0]])
BIO_PRED = np.array([[1, 2, 0, 1], [0, 3, 4, 1]])
BIO_SEQ_LEN = np.array([4, 3])
# per: tp 1 fp 1 fn 0 -> pre 1/2, rec 1, f 2/3; loc: tp 1 fp 0 fn 1 -> pre 1, rec 1/2, f 2/3
# micro: tp 2 fp 1 fn 1 -> 2/3 each



class Vocab:
    """A fastNLP ``Vocabulary`` look-alike with padding and unknown entries."""

    def __init__(self, words, padding="<pad>", unknown="<unk>"):
        self.idx2word = dict(enumerate([padding, unknown, *words]))
        self.padding, self.unknown = padding, unknown


def counts(metric):
    return {name: metric.elements[name].tolist() for name in ("tp", "fp", "fn")}


def test_bio_micro_with_seq_len():
    metric = SpanFPreRecMetric(BIO)
    assert metric.encoding_type == "bio"
    metric.update(BIO_PRED, BIO_TARGET, BIO_SEQ_LEN)
    assert metric.span_labels == ("per", "loc")
    assert counts(metric) == {"tp": [1, 1], "fp": [1, 0], "fn": [0, 1]}
    third = round(2 / 3, 6)
    assert metric.get_metric() == {"f": third, "pre": third, "rec": third}


def test_bio_macro_and_per_label_keys():
    metric = SpanFPreRecMetric(BIO, f_type="macro", only_gross=False)
    metric.update(BIO_PRED, BIO_TARGET, BIO_SEQ_LEN)
    third = round(2 / 3, 6)
    assert metric.get_metric() == {
        "f-per": third, "pre-per": 0.5, "rec-per": 1.0,
        "f-loc": third, "pre-loc": 1.0, "rec-loc": 0.5,
        "f": third, "pre": 0.75, "rec": 0.75,
    }


def test_without_seq_len_the_whole_row_counts():
    metric = SpanFPreRecMetric(BIO)
    metric.update(BIO_PRED, BIO_TARGET)  # the padded B-PER of sequence 1 is now a false positive
    # tp 2 fp 2 fn 1 -> pre 1/2, rec 2/3, f 4/7
    assert metric.get_metric() == {"f": round(4 / 7, 6), "pre": 0.5, "rec": round(2 / 3, 6)}


def test_scores_input():
    metric = SpanFPreRecMetric(BIO)
    metric.update(np.eye(len(BIO))[BIO_PRED], BIO_TARGET, BIO_SEQ_LEN)
    assert counts(metric) == {"tp": [1, 1], "fp": [1, 0], "fn": [0, 1]}


def test_bio_ill_formed_continuations_open_spans():
    metric = SpanFPreRecMetric(BIO)
    # gold: O I-PER I-PER B-LOC I-PER -> per[1,3) loc[3,4) per[4,5)
    # pred: O I-PER I-PER B-LOC I-LOC -> per[1,3) loc[3,5)
    metric.update(np.array([[0, 2, 2, 3, 4]]), np.array([[0, 2, 2, 3, 2]]), [5])
    assert counts(metric) == {"tp": [1, 0], "fp": [0, 1], "fn": [1, 1]}


def test_bioes():
    vocab = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    metric = SpanFPreRecMetric(vocab, only_gross=False)
    assert metric.encoding_type == "bioes"
    # gold: B-PER I-PER E-PER O S-LOC -> per[0,3) loc[4,5)
    # pred: B-PER E-PER S-PER O S-LOC -> per[0,2) per[2,3) loc[4,5)
    metric.update(np.array([[1, 3, 4, 0, 8]]), np.array([[1, 2, 3, 0, 8]]), np.array([5]))
    assert counts(metric) == {"tp": [0, 1], "fp": [2, 0], "fn": [1, 0]}
    # micro: tp 1 fp 2 fn 1 -> pre 1/3, rec 1/2, f 2/5
    assert metric.get_metric() == {
        "f-per": 0.0, "pre-per": 0.0, "rec-per": 0.0,
        "f-loc": 1.0, "pre-loc": 1.0, "rec-loc": 1.0,
        "f": 0.4, "pre": round(1 / 3, 6), "rec": 0.5,
    }


def test_bmes_without_labels():
    vocab = ["B", "M", "E", "S"]  # word segmentation: spans carry the empty label
    metric = SpanFPreRecMetric(vocab, only_gross=False)
    assert metric.encoding_type == "bmes"
    # gold: B M E S B E -> [0,3) [3,4) [4,6); pred: B E S S B E -> [0,2) [2,3) [3,4) [4,6)
    metric.update(np.array([[0, 2, 3, 3, 0, 2]]), np.array([[0, 1, 2, 3, 0, 2]]), [6])
    # tp 2 fp 2 fn 1 -> pre 1/2, rec 2/3, f 4/7; the empty label has no per-label keys
    assert metric.get_metric() == {"f": round(4 / 7, 6), "pre": 0.5, "rec": round(2 / 3, 6)}


def test_bmeso():
    vocab = ["O", "B-ORG", "M-ORG", "E-ORG", "S-ORG"]
    metric = SpanFPreRecMetric(vocab)
    assert metric.encoding_type == "bmeso"
    # gold: B M E O S -> org[0,3) org[4,5); pred: B M E S O -> org[0,3) org[3,4)
    metric.update(np.array([[1, 2, 3, 4, 0]]), np.array([[1, 2, 3, 0, 4]]), [5])
    assert counts(metric) == {"tp": [1], "fp": [1], "fn": [1]}
    assert metric.get_metric() == {"f": 0.5, "pre": 0.5, "rec": 0.5}


def test_explicit_encoding_is_case_insensitive():
    assert SpanFPreRecMetric(BIO, encoding_type="BIO").encoding_type == "bio"


def test_ignore_labels_are_case_insensitive():
    metric = SpanFPreRecMetric(BIO, ignore_labels=["LOC"])
    metric.update(BIO_PRED, BIO_TARGET, BIO_SEQ_LEN)
    # only per: tp 1 fp 1 fn 0 -> pre 1/2, rec 1, f 2/3
    assert metric.get_metric() == {"f": round(2 / 3, 6), "pre": 0.5, "rec": 1.0}


@pytest.mark.parametrize(
    "vocab",
    [{tag: index for index, tag in enumerate(BIO)}, dict(enumerate(BIO)), tuple(BIO)],
    ids=["label-to-index", "index-to-label", "tuple"],
)
def test_vocab_forms(vocab):
    metric = SpanFPreRecMetric(vocab)
    metric.update(BIO_PRED, BIO_TARGET, BIO_SEQ_LEN)
    assert counts(metric) == {"tp": [1, 1], "fp": [1, 0], "fn": [0, 1]}


def test_idx2word_vocab_with_padding_tokens():
    metric = SpanFPreRecMetric(Vocab(BIO))  # ids shift by 2: <pad>=0, <unk>=1, O=2, B-PER=3 ...
    assert metric.encoding_type == "bio"
    assert metric.span_labels == ("per", "loc")
    # gold: B-PER I-PER <pad>; pred: B-PER <unk> I-PER -> unk is outside, so I-PER opens per[2,3)
    metric.update(np.array([[3, 1, 4]]), np.array([[3, 4, 0]]), [3])
    assert counts(metric) == {"tp": [0, 0], "fp": [2, 0], "fn": [1, 0]}


@pytest.mark.also_per_backend  # torch tensors as metric inputs: runs where torch is installed
def test_torch_tensors():
    torch = pytest.importorskip("torch")
    metric = SpanFPreRecMetric(BIO, f_type="macro")
    scores = torch.nn.functional.one_hot(torch.from_numpy(BIO_PRED), len(BIO)).float()
    metric.update(scores.requires_grad_(), torch.from_numpy(BIO_TARGET),
                  torch.from_numpy(BIO_SEQ_LEN))
    assert metric.get_metric() == {"f": round(2 / 3, 6), "pre": 0.75, "rec": 0.75}


def test_reset():
    metric = SpanFPreRecMetric(BIO)
    metric.update(BIO_PRED, BIO_TARGET, BIO_SEQ_LEN)
    metric.reset()
    assert counts(metric) == {"tp": [0, 0], "fp": [0, 0], "fn": [0, 0]}
    assert metric.get_metric() == {"f": 0.0, "pre": 0.0, "rec": 0.0}


@pytest.mark.parametrize("f_type", ["micro", "macro"])
def test_two_half_datasets_aggregate_to_the_whole(f_type):
    target = np.array([[1, 2, 0, 3], [0, 3, 4, 0], [3, 4, 1, 2], [1, 0, 0, 0]])
    pred = np.array([[1, 2, 0, 1], [0, 3, 4, 1], [3, 4, 1, 0], [3, 0, 1, 0]])
    seq_len = np.array([4, 3, 4, 2])
    whole = SpanFPreRecMetric(BIO, f_type=f_type, only_gross=False)
    whole.update(pred, target, seq_len)
    rank0 = SpanFPreRecMetric(BIO, f_type=f_type, only_gross=False)
    rank1 = SpanFPreRecMetric(BIO, f_type=f_type, only_gross=False)
    rank0.update(pred[:2], target[:2], seq_len[:2])
    rank1.update(pred[2:], target[2:], seq_len[2:])
    aggregate_ranks(rank0, rank1)
    assert rank0.get_metric() == rank1.get_metric() == whole.get_metric()
    assert counts(rank0) == counts(whole)


def test_encoding_errors():
    with pytest.raises(ValueError, match="Unknown encoding_type 'iob2'"):
        SpanFPreRecMetric(BIO, encoding_type="iob2")
    with pytest.raises(ValueError, match="not part of encoding 'bmes'"):
        SpanFPreRecMetric(BIO, encoding_type="bmes")
    with pytest.raises(ValueError, match="Cannot infer the span encoding"):
        SpanFPreRecMetric(["O", "B-PER", "X-PER"])
    with pytest.warns(UserWarning, match="do not occur"):
        SpanFPreRecMetric(BIO, encoding_type="bioes")


def test_bad_arguments_and_inputs():
    with pytest.raises(ValueError, match="f_type"):
        SpanFPreRecMetric(BIO, f_type="weighted")
    with pytest.raises(ValueError, match="not span labels"):
        SpanFPreRecMetric(BIO, ignore_labels=["ORG"])
    metric = SpanFPreRecMetric(BIO)
    with pytest.raises(ValueError, match="target must be"):
        metric.update(np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="does not fit target"):
        metric.update(np.zeros((2, 3)), np.zeros((2, 4)), [4, 4])
    with pytest.raises(ValueError, match="tag id 7"):
        metric.update(np.array([[7, 0]]), np.array([[0, 0]]), [2])
    with pytest.raises(ValueError, match="seq_len must have shape"):
        metric.update(np.zeros((2, 3)), np.zeros((2, 3)), [3])
