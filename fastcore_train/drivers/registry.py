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

from fastcore_train.log import adopt_launched_rank
from fastcore_train.parallel.environment import (MPIRUN, ONEFLOW_LAUNCH, PADDLE_LAUNCH, TORCHRUN,
                                                 LaunchEnvironment, detect_rank_facts)

#: What every backend subpackage must expose (checked when it is first loaded).
BACKEND_FUNCTIONS = ("create_driver", "is_model", "seed_framework", "build_demo")
#: Driver keyword arguments that mean the same to every backend; the core passes them through
#: (``collective_timeout`` the core applies itself, to ``driver.comm``).
COMMON_DRIVER_KWARGS = ("data_device", "output_from_new_proc", "collective_timeout")
#: The common ones a backend's ``create_driver`` never sees.
CORE_DRIVER_KWARGS = ("collective_timeout",)


@dataclass(frozen=True)
class BackendEntry:
    """A backend, declared without importing its framework.

    ``name``: its registry name; ``framework_module``: the framework's top-level module (how
    ``driver="auto"`` recognises a model's framework from its class's module); ``module``: the
    subpackage implementing it; ``driver_names``: the ``driver=`` values it answers to;
    ``install_hint``: how to install the framework; ``owned_kwargs``: the Trainer keyword
    arguments it takes (e.g. ``torch_kwargs``), handed to its ``create_driver`` only;
    ``launch_environment``: the variables its launcher sets for each rank (None: no launcher);
    ``metric_modules``: the modules of the metric libraries its ``metrics`` part adapts (e.g.
    ``torchmetrics``), recognised from a metric's class module without importing them;
    ``ranks_meet_at_import``: its ranks meet when the framework is imported (oneflow), at the master
    address of its launcher variables, so ranks started together hold that import until rank 0 listens
    there: the ranks it starts itself (:meth:`import_rendezvous`) and an engine's workers (Ray's).

    The subpackage must expose ``create_driver(driver_name, model, device, fp16, **kwargs)``,
    ``is_model(model) -> bool``, ``seed_framework(seed)`` and
    ``build_demo(data, hidden, lr, batch_size, seed)``.
    """

    name: str
    framework_module: str
    module: str
    driver_names: tuple[str, ...]
    install_hint: str
    owned_kwargs: tuple[str, ...] = ()
    launch_environment: Optional[LaunchEnvironment] = None
    metric_modules: tuple[str, ...] = ()
    ranks_meet_at_import: bool = False

    def import_rendezvous(self, variables: list[dict[str, str]]) -> Optional[str]:
        """``host:port`` where rank 0 of a job started with launcher ``variables`` (one dict per rank)
        waits for the others at import, the others to start once it listens; None for a backend
        whose ranks meet later (at their process group's creation)."""
        if not self.ranks_meet_at_import or not variables or self.launch_environment is None:
            return None
        facts = self.launch_environment.detect(variables[0])
        return None if facts is None else facts.master_address

    def check(self) -> None:
        """Raise ValueError when the declaration is incomplete or malformed."""
        for field in ("name", "framework_module", "module", "install_hint"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ValueError(f"Backend {self.name!r}: {field} must be a non-empty string.")
        if not self.driver_names or not all(isinstance(n, str) and n for n in self.driver_names):
            raise ValueError(f"Backend {self.name!r}: driver_names must list at least one name.")
        for keyword in self.owned_kwargs:
            if not (isinstance(keyword, str) and keyword.isidentifier()) or keyword in COMMON_DRIVER_KWARGS:
                raise ValueError(f"Backend {self.name!r}: {keyword!r} cannot be a keyword argument it owns.")
        if not all(isinstance(module, str) and module for module in self.metric_modules):
            raise ValueError(f"Backend {self.name!r}: metric_modules must be module names, got {self.metric_modules!r}.")


class BackendNotInstalledError(ImportError):
    """A backend's framework is not installed; the message says how to install it."""


_BACKENDS: dict[str, BackendEntry] = {}


def register_backend(entry: BackendEntry) -> None:
    """Add a backend (used for the built-in ones below, and open to third parties).

    The entry is checked, and neither its driver names nor its keyword arguments may belong to
    another backend.
    """
    entry.check()
    for other in _BACKENDS.values():
        if other.name == entry.name:
            continue
        for name in set(entry.driver_names) & set(other.driver_names):
            raise ValueError(f"Driver name {name!r} already belongs to backend {other.name!r}.")
        for keyword in set(entry.owned_kwargs) & set(other.owned_kwargs):
            raise ValueError(f"Keyword argument {keyword!r} already belongs to backend {other.name!r}.")
    _BACKENDS[entry.name] = entry
    if entry.launch_environment is not None:
        _tell_the_log_which_rank()


def _tell_the_log_which_rank() -> None:
    """Hand the launchers' rank facts to the log (which sits below this layer), so that even lines
    logged before the Trainer exists name the right rank. No framework is imported."""
    try:
        facts = detect_rank_facts(launch_environments())
    except (ValueError, RuntimeError):  # a job that looks half-launched: the Trainer says so when it sets up its ranks
        return
    adopt_launched_rank(facts.rank, facts.world_size)


def unregister_backend(name: str) -> None:
    """Remove a backend registered with :func:`register_backend` (a no-op for an unknown name)."""
    _BACKENDS.pop(name, None)


def all_backends() -> list[BackendEntry]:
    return list(_BACKENDS.values())


def all_driver_kwargs() -> tuple[str, ...]:
    """Every driver keyword the Trainer accepts: the common ones and each backend's own."""
    return COMMON_DRIVER_KWARGS + tuple(k for entry in _BACKENDS.values() for k in entry.owned_kwargs)


def launch_environments() -> list[LaunchEnvironment]:
    """The launchers of the registered backends, for telling which rank this process is."""
    found: list[LaunchEnvironment] = []
    for entry in _BACKENDS.values():
        if entry.launch_environment is not None and entry.launch_environment not in found:
            found.append(entry.launch_environment)
    return found


def available_driver_names() -> list[str]:
    return [name for entry in _BACKENDS.values() for name in entry.driver_names]


def get_backend(name: str) -> BackendEntry:
    """The registered backend called ``name``."""
    if name not in _BACKENDS:
        raise ValueError(f"Unknown backend {name!r}; registered: {', '.join(_BACKENDS)}.")
    return _BACKENDS[name]


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


def _class_modules(value: Any) -> list[str]:
    """The modules of the classes in ``type(value)``'s MRO (read, never imported)."""
    return [getattr(cls, "__module__", "") or "" for cls in type(value).__mro__]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def backend_for_value(value: Any) -> Optional[BackendEntry]:
    """The backend whose framework ``value`` (a tensor, say) belongs to, from its class modules."""
    for module in _class_modules(value):
        for entry in _BACKENDS.values():
            if _within(module, entry.framework_module):
                return entry
    return None


def backend_for_metric(metric: Any) -> Optional[BackendEntry]:
    """The backend that adapts ``metric``, a metric of a library it declares in ``metric_modules``
    (``torchmetrics``, ``paddle.metric``), from the metric's class modules, without importing them."""
    for module in _class_modules(metric):
        for entry in _BACKENDS.values():
            if any(_within(module, library) for library in entry.metric_modules):
                return entry
    return None


def load_backend_part(entry: BackendEntry, part: str) -> ModuleType:
    """Import ``<backend module>.<part>`` (e.g. ``metrics``: the same module name in every backend),
    with the same clear errors as :func:`load_backend`."""
    load_backend(entry)
    return importlib.import_module(f"{entry.module}.{part}")


def find_backend_part(entry: BackendEntry, part: str) -> Optional[ModuleType]:
    """:func:`load_backend_part`, or None when the backend has no such module (parts such as
    ``tensors`` and ``metrics`` are optional for a third-party backend)."""
    try:
        return load_backend_part(entry, part)
    except ModuleNotFoundError as error:
        if error.name != f"{entry.module}.{part}":
            raise
        return None


def load_backend(entry: BackendEntry) -> ModuleType:
    """Import a backend subpackage, turning a missing framework into an install instruction and
    a subpackage that lacks part of the backend contract into a clear error."""
    try:
        module = importlib.import_module(entry.module)
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".", 1)[0] == entry.framework_module:
            raise BackendNotInstalledError(
                f"The {entry.name!r} backend needs the {entry.framework_module!r} package, which is not "
                f"installed. Install it with: {entry.install_hint}"
            ) from error
        raise
    missing = [name for name in BACKEND_FUNCTIONS if not callable(getattr(module, name, None))]
    if missing:
        raise TypeError(f"Backend {entry.name!r}: its module {entry.module!r} lacks {', '.join(missing)}; a backend "
                        f"module must define {', '.join(BACKEND_FUNCTIONS)}.")
    return module


def backend_part(model: Any, part: str) -> ModuleType:
    """The module ``part`` of the backend that trains ``model`` (``<backend module>.<part>``).

    Framework-neutral code reaches a backend's small single-job modules this way, e.g. ``"lr"``
    (reading and setting learning rates); every built-in backend has the same set. A backend
    without that module is an error naming what is missing.
    """
    entry = backend_for_model(model)
    if entry is None:
        raise TypeError(f"No registered backend trains a {type(model).__name__} (registered frameworks: "
                        f"{', '.join(sorted(e.framework_module for e in _BACKENDS.values()))}).")
    load_backend(entry)
    try:
        return importlib.import_module(f"{entry.module}.{part}")
    except ModuleNotFoundError as error:
        if error.name != f"{entry.module}.{part}":
            raise
        raise NotImplementedError(f"Backend {entry.name!r} has no {part!r} module ({entry.module}.{part}), which "
                                  "this feature needs.") from error


def driver_kwargs_for(entry: BackendEntry, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``entry``'s driver gets: the common ones and its own, not other backends'."""
    return {key: value for key, value in kwargs.items()
            if (key in COMMON_DRIVER_KWARGS and key not in CORE_DRIVER_KWARGS) or key in entry.owned_kwargs}


register_backend(BackendEntry(
    name="torch", framework_module="torch", module="fastcore_train.backends.torch",
    driver_names=("torch", "fairscale", "torch_fsdp", "deepspeed", "torch_model_parallel"),
    install_hint='pip install "fastcore-train[torch]"',
    owned_kwargs=("torch_kwargs", "fairscale_kwargs", "torch_fsdp_kwargs", "deepspeed_kwargs", "torch_model_parallel_kwargs"),
    launch_environment=TORCHRUN, metric_modules=("torchmetrics",),
))
register_backend(BackendEntry(
    name="paddle", framework_module="paddle", module="fastcore_train.backends.paddle",
    driver_names=("paddle", "paddle_model_parallel"), install_hint='pip install "fastcore-train[paddle]"',
    owned_kwargs=("paddle_kwargs", "paddle_model_parallel_kwargs"), launch_environment=PADDLE_LAUNCH, metric_modules=("paddle.metric",),
))
register_backend(BackendEntry(
    name="jittor", framework_module="jittor", module="fastcore_train.backends.jittor",
    driver_names=("jittor",), install_hint='pip install "fastcore-train[jittor]" (needs numpy<2; its core compiles on first import)',
    owned_kwargs=("jittor_kwargs",), launch_environment=MPIRUN,
))
register_backend(BackendEntry(
    name="oneflow", framework_module="oneflow", module="fastcore_train.backends.oneflow",
    driver_names=("oneflow",), install_hint='pip install "fastcore-train[oneflow]" (Python <= 3.10; see docs/backends.md)',
    owned_kwargs=("oneflow_kwargs",), launch_environment=ONEFLOW_LAUNCH,
    ranks_meet_at_import=True,
))
