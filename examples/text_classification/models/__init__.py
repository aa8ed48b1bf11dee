"""The classifier in each framework: ``build_classifier(config, seed)`` in ``models.<framework>``."""
from __future__ import annotations

import importlib
from types import ModuleType

FRAMEWORKS = ("torch", "paddle", "jittor", "oneflow")


def load(framework: str) -> ModuleType:
    """The model module of ``framework`` (imports that framework)."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework={framework!r}: choose one of {', '.join(FRAMEWORKS)}.")
    return importlib.import_module(f"{__name__}.{framework}")
