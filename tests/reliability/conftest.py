"""Fixtures of the reliability tests."""
from __future__ import annotations

import logging

import pytest

from fastcore_train.log import logger


@pytest.fixture
def log_records():
    """The fastcore_train logger's records during the test, INFO and up (the logger does not propagate)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def messages(records, level: int = logging.WARNING) -> list[str]:
    return [record.getMessage() for record in records if record.levelno >= level]


@pytest.fixture
def saved(harness, tmp_path):
    """A trainer that trained 2 epochs and its checkpoint ``tmp_path/ckpt`` (written, not pending)."""
    from tests.conformance.harnesses.base import initial_weights, make_data
    from tests.conformance.helpers import make_trainer

    x, y = make_data(16)
    trainer = make_trainer(harness, harness.make_model(initial_weights()), x, y, n_epochs=2)
    trainer.run(num_eval_sanity_batch=0)
    trainer.save_checkpoint(tmp_path / "ckpt")
    trainer.wait_for_checkpoint()
    return trainer, tmp_path / "ckpt"
