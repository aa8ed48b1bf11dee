"""Which backends exist, which driver names they answer to, and how to tell a model's framework.

Backends are listed here by module path only: nothing is imported until a driver is asked for,
so ``import fastcore_train`` loads no framework, and ``driver="auto"`` inspects a model's class
hierarchy by module name instead of importing frameworks to run ``isinstance``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Optional


@dataclass(frozen=True)
class BackendEntry:
    """A backend: its name, the framework's top-level module, our subpackage, its driver names.

    The subpackage must expose ``create_driver(driver_name, model, device, fp16, **kwargs)``,
    ``is_model(model) -> bool``, ``seed_framework(seed)`` and
    ``build_demo(data, hidden, lr, batch_size, seed)``.
    """

    name: str
    framework_module: str
    module: str
    driver_names: tuple[str, ...]
    install_hint: str


_BACKENDS: dict[str, BackendEntry] = {}


def register_backend(entry: BackendEntry) -> None:
    """Add a backend (used for the built-in ones below, and open to third parties)."""
    for name in entry.driver_names:
        owner = backend_for_driver_name(name, strict=False)
        if owner is not None and owner.name != entry.name:
            raise ValueError(f"Driver name {name!r} already belongs to backend {owner.name!r}.")
    _BACKENDS[entry.name] = entry


def all_backends() -> list[BackendEntry]:
    return list(_BACKENDS.values())


def available_driver_names() -> list[str]:
    return [name for entry in _BACKENDS.values() for name in entry.driver_names]


def backend_for_driver_name(name: str, strict: bool = True) -> Optional[BackendEntry]:
    for entry in _BACKENDS.values():
        if name in entry.driver_names:
            return entry
    if strict:
        raise ValueError(
            f"Unknown driver {name!r}. Available drivers: {', '.join(available_driver_names())}; "
            "or pass driver='auto' to pick the one matching your model."
        )
    return None


def framework_of(model: Any) -> Optional[str]:
    """Top-level module of the first framework class in ``type(model)``'s MRO, without imports."""
    frameworks = {entry.framework_module for entry in _BACKENDS.values()}
    for cls in type(model).__mro__:
        top = cls.__module__.split(".", 1)[0]
        if top in frameworks:
            return top
    return None


def backend_for_model(model: Any) -> Optional[BackendEntry]:
    framework = framework_of(model)
    for entry in _BACKENDS.values():
        if entry.framework_module == framework:
            return entry
    return None


def load_backend(entry: BackendEntry) -> ModuleType:
    """Import a backend subpackage, turning a missing framework into an install instruction."""
    try:
        return importlib.import_module(entry.module)
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".", 1)[0] == entry.framework_module:
            raise ImportError(
                f"The {entry.name!r} backend needs the {entry.framework_module!r} package, which is not "
                f"installed. Install it with: {entry.install_hint}"
            ) from error
        raise


register_backend(BackendEntry(
    name="torch", framework_module="torch", module="fastcore_train.backends.torch",
    driver_names=("torch", "fairscale", "torch_fsdp", "deepspeed"), install_hint='pip install "fastcore-train[torch]"',
))
register_backend(BackendEntry(
    name="paddle", framework_module="paddle", module="fastcore_train.backends.paddle",
    driver_names=("paddle",), install_hint='pip install "fastcore-train[paddle]"',
))
register_backend(BackendEntry(
    name="jittor", framework_module="jittor", module="fastcore_train.backends.jittor",
    driver_names=("jittor",), install_hint='pip install "fastcore-train[jittor]" (needs numpy<2; its core compiles on first import)',
))
register_backend(BackendEntry(
    name="oneflow", framework_module="oneflow", module="fastcore_train.backends.oneflow",
    driver_names=("oneflow",), install_hint='pip install "fastcore-train[oneflow]" (Python <= 3.10; see docs/backends.md)',
))
