"""The shipped synthetic text task (examples/text_classification/data) is what its generator makes,
and it is the task its docs page describes. Framework-free: runs in every env, the core one included."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from examples.text_classification import corpus


def test_generator_rebuilds_the_shipped_files(tmp_path: Path) -> None:
    written = corpus.write(tmp_path)
    for path in written:
        shipped = corpus.DATA / path.name
        if path.suffix == ".gz":  # the text, bit for bit (the gzip bytes also match under the same zlib)
            same = gzip.decompress(path.read_bytes()) == gzip.decompress(shipped.read_bytes())
        else:
            same = path.read_bytes() == shipped.read_bytes()
        assert same, (f"{shipped} differs from what the generator writes now: rebuild it with "
                      "python examples/text_classification/corpus.py (and update the docs' figures)")


def test_the_class_is_the_topic_with_most_words() -> None:
    vocab = corpus.Vocabulary.read(corpus.DATA / "vocab.txt")
    assert len(vocab.words) == corpus.VOCAB_SIZE == len(set(vocab.words))
    for split, size in (("train", corpus.TRAIN_SIZE), ("test", corpus.TEST_SIZE)):
        data = corpus.load(split)
        assert data.tokens.shape == (size, corpus.SEQ_LEN) and data.tokens.max() < corpus.VOCAB_SIZE
        assert np.bincount(data.labels).tolist() == [size // len(corpus.TOPICS)] * len(corpus.TOPICS)
        topic_ids = [np.array([vocab.ids[word] for word in vocab.topic_words(t)]) for t in range(len(corpus.TOPICS))]
        counts = np.stack([np.isin(data.tokens, ids).sum(1) for ids in topic_ids], axis=1)
        assert (counts.argmax(1) == data.labels).all()
        ordered = np.sort(counts, axis=1)
        assert (ordered[:, -1] > ordered[:, -2]).all()          # no ties: one topic has the most words
        assert (ordered[:, -2] > 0).mean() > 0.5                  # most sentences carry distractor words
