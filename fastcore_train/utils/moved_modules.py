"""Old import paths of modules that moved into subpackages keep working, with a FutureWarning.

``fastcore_train.demo_config`` (named in users' ``fit`` config files), the ``checkpoint_*``
modules and ``demo_task`` moved when the package root was given one subpackage per job
(``checkpoint/``, ``demo/``, ``data/digits_task.py``). A finder on ``sys.meta_path`` answers an
import of an old name with the module at its new home, so both names are the same module object.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Optional, Sequence

#: old module name -> new module name
MOVED = {
    "fastcore_train.checkpoint_async": "fastcore_train.checkpoint.async_writer",
    "fastcore_train.checkpoint_checksums": "fastcore_train.checkpoint.checksums",
    "fastcore_train.checkpoint_errors": "fastcore_train.checkpoint.errors",
    "fastcore_train.checkpoint_target": "fastcore_train.checkpoint.target",
    "fastcore_train.demo_config": "fastcore_train.demo.config",
    "fastcore_train.demo_task": "fastcore_train.data.digits_task",
}


class _MovedModuleLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{self.old} moved to {self.new}; import it from there (the old name will be removed).",
                      FutureWarning, stacklevel=3)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[self.old] = module  # (already executed at its new name)


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of :data:`MOVED` and loads the module at its new name."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(fullname, new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (the package's ``__init__`` calls it)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())  # (before an editable install's finder of an older tree)
