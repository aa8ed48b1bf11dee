"""The object sections of a config: ``model``, ``data``, ``optimizer``, ``lr_scheduler``.

Each is ``{class_path: <import path of a class or function>, init_args: {...}}``. Frameworks share
no base class, so the parser cannot be told a type to check ``class_path`` against; instead the
class paths are read first (from the ``--config`` files and ``--<section>.class_path`` on the
command line), imported, and the parser gets each one's own parameters under
``<section>.init_args`` (jsonargparse reads their type hints: wrong types, unknown keys and
command-line overrides work as for any argument). The argument an object receives from the one
built before it is left out of the config: ``params``/``parameters``/``model`` of an optimizer,
``optimizer`` of a scheduler; a ``driver`` parameter of any of them is linked to
``trainer.driver``.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from fastcore_train.cli.errors import ConfigError, locate
from fastcore_train.cli.yaml_limits import check_yaml_limits

SECTIONS = ("model", "data", "optimizer", "lr_scheduler")
REQUIRED = ("model", "data", "optimizer")
#: The parameter each section gets from what was built before it (the first one its target has).
INJECTED = {"optimizer": ("params", "parameters", "model"), "lr_scheduler": ("optimizer",)}


@dataclass
class Section:
    """One object section: its key, its target (a class or function) and what is injected."""

    key: str
    class_path: str
    target: Callable[..., Any]
    injected: Optional[str]

    @property
    def links_driver(self) -> bool:
        return "driver" in _parameters(self.target)

    def build(self, init_args: dict[str, Any], given: Any = None) -> Any:
        """Call the target with ``init_args`` (and the injected object)."""
        kwargs = dict(init_args)
        if self.injected is not None:
            kwargs[self.injected] = given
        return self.target(**kwargs)


def _parameters(target: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return []


def config_files(argv: Sequence[str]) -> list[Path]:
    """The files given with ``--config`` (several allowed; later ones win)."""
    files: list[Path] = []
    for index, arg in enumerate(argv):
        if arg == "--config" and index + 1 < len(argv):
            files.append(Path(argv[index + 1]))
        elif arg.startswith("--config="):
            files.append(Path(arg.split("=", 1)[1]))
    return files


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml
    try:
        text = path.read_text(encoding="utf-8")
        check_yaml_limits(text, path)  # before any loader expands its aliases
        loaded = yaml.safe_load(text)
    except OSError as error:
        raise ConfigError(f"cannot read the config file {str(path)!r}: {error.strerror}.") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from error
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path} must hold a mapping of keys (model:, data:, trainer:, ...), got "
                          f"{type(loaded).__name__}.")
    return loaded


def class_paths(argv: Sequence[str]) -> dict[str, str]:
    """Each section's ``class_path``: from the config files, then the command line (which wins)."""
    found: dict[str, str] = {}
    for path in config_files(argv):
        for key, value in _read_yaml(path).items():
            if key in SECTIONS and isinstance(value, dict) and "class_path" in value:
                found[key] = value["class_path"]
    for index, arg in enumerate(argv):
        for key in SECTIONS:
            flag = f"--{key}.class_path"
            if arg == flag and index + 1 < len(argv):
                found[key] = argv[index + 1]
            elif arg.startswith(flag + "="):
                found[key] = arg.split("=", 1)[1]
    return found


def import_target(key: str, class_path: Any, files: Sequence[Path]) -> Callable[..., Any]:
    """Import ``class_path``; an error names the key, its file line and what failed."""
    where = locate(f"{key}.class_path", files)
    if not isinstance(class_path, str) or "." not in class_path:
        raise ConfigError(f"class_path must be a dotted import path such as torch.optim.Adam, got {class_path!r}.",
                          f"{key}.class_path", where)
    module_name, _, name = class_path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"cannot import {class_path!r}: {error}. Check the spelling, and that the package "
                          "is installed.", f"{key}.class_path", where) from error
    target = getattr(module, name, None)
    if target is None:
        raise ConfigError(f"cannot import {class_path!r}: module {module_name!r} has no {name!r}.",
                          f"{key}.class_path", where)
    if not callable(target):
        raise ConfigError(f"{class_path!r} is a {type(target).__name__}, not a class or function.",
                          f"{key}.class_path", where)
    return target


def read_sections(argv: Sequence[str]) -> dict[str, Section]:
    """The sections the config names, imported; a missing required one is a ConfigError."""
    files = config_files(argv)
    paths = class_paths(argv)
    missing = [key for key in REQUIRED if key not in paths]
    if missing and not any(arg in ("-h", "--help") for arg in argv):
        raise ConfigError(f"the config names no {' / '.join(missing)}: give each as "
                          f"'{missing[0]}: {{class_path: <import path>, init_args: {{...}}}}' in the --config file, "
                          f"or --{missing[0]}.class_path on the command line.", missing[0])
    sections: dict[str, Section] = {}
    for key, class_path in paths.items():
        target = import_target(key, class_path, files)
        names = _parameters(target)
        injected = next((name for name in INJECTED.get(key, ()) if name in names), None)
        if key in INJECTED and injected is None:
            wanted = " or ".join(INJECTED[key])
            raise ConfigError(f"{class_path} takes no {wanted} parameter, so it cannot be given the "
                              f"{'model' if key == 'optimizer' else 'optimizer'} it works on.",
                              f"{key}.class_path", locate(f"{key}.class_path", files))
        sections[key] = Section(key, class_path, target, injected)
    return sections


def add_section_arguments(parser: Any, section: Section) -> None:
    """``--<key>.class_path`` and the target's parameters under ``--<key>.init_args.*``."""
    parser.add_argument(f"--{section.key}.class_path", type=str, default=section.class_path,
                        help=f"import path of the {section.key} class or function")
    skip = {section.injected} if section.injected else set()
    target = section.target
    if inspect.isclass(target):
        parser.add_class_arguments(target, f"{section.key}.init_args", skip=skip, fail_untyped=False,
                                   instantiate=False, sub_configs=True)
    else:
        parser.add_function_arguments(target, f"{section.key}.init_args", skip=skip, fail_untyped=False)
    if section.links_driver:
        parser.link_arguments("trainer.driver", f"{section.key}.init_args.driver")
