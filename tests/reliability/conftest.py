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
