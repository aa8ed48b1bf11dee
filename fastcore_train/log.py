"""The package logger (``logging.getLogger("fastcore_train")``), with a default console handler."""
from __future__ import annotations

import logging
import sys

logger = logging.getLogger("fastcore_train")
if not logger.handlers:
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("[%(asctime)s %(levelname)s fastcore_train] %(message)s", "%H:%M:%S"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
