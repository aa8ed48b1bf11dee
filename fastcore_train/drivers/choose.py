"""``choose_driver``: turn the Trainer's ``driver=`` and ``device=`` into a Driver instance."""
from __future__ import annotations

from typing import Any, Union

from fastcore_train.drivers.collectives import check_collective_timeout
from fastcore_train.drivers.driver import Driver
from fastcore_train.drivers.registry import (BackendEntry, available_driver_names, backend_for_driver_name,
                                             backend_for_model, driver_kwargs_for, framework_of, load_backend)


def choose_driver(model: Any, driver: Union[str, Driver] = "auto", device: Any = "cpu",
                  fp16: bool = False, **kwargs: Any) -> Driver:
    """Return ``driver`` itself if it is a Driver, else build the named (or detected) one.

    ``"auto"`` picks the backend whose framework defines the model's class. An unknown name, or
    a model that does not belong to the named driver's framework, raises a ValueError listing
    what is available. Of ``kwargs``, the driver gets the common driver options and those its
    backend owns (``torch_kwargs`` reaches torch only); ``collective_timeout`` (seconds) is set on
    its ``comm`` here, for every backend.
    """
    timeout = kwargs.pop("collective_timeout", None)
    timeout = None if timeout is None else check_collective_timeout(timeout)
    chosen = driver if isinstance(driver, Driver) else _build_driver(model, driver, fp16, device, kwargs)
    if timeout is not None:
        chosen.comm.timeout = timeout
    return chosen


def _build_driver(model: Any, driver: Any, fp16: bool, device: Any, kwargs: dict[str, Any]) -> Driver:
    if not isinstance(driver, str):
        raise ValueError(
            f"driver must be a name ({', '.join(available_driver_names())}, or 'auto') or a Driver "
            f"instance, got {type(driver).__name__}."
        )
    if driver == "auto":
        entry = backend_for_model(model)
        if entry is None:
            raise ValueError(
                f"driver='auto' cannot tell which framework the model of type "
                f"{type(model).__module__}.{type(model).__qualname__} belongs to. Pass a model of a "
                f"supported framework, or name a driver: {', '.join(available_driver_names())}."
            )
        driver_name = entry.driver_names[0]
    else:
        entry = backend_for_driver_name(driver)
        driver_name = driver
        _check_model_framework(model, driver_name, entry)  # before importing that framework
    backend = load_backend(entry)
    if not backend.is_model(model):
        found = framework_of(model)
        where = f"a {found} model" if found else f"an object of type {type(model).__qualname__}"
        suggestion = "use driver='auto'" if found and backend_for_model(model) else \
            f"pass a {entry.framework_module} model"
        raise ValueError(
            f"driver={driver_name!r} trains {entry.framework_module} models, but got {where}; "
            f"{suggestion}. Available drivers: {', '.join(available_driver_names())}."
        )
    return backend.create_driver(driver_name, model, device=device, fp16=fp16, **driver_kwargs_for(entry, kwargs))


def _check_model_framework(model: Any, driver_name: str, entry: BackendEntry) -> None:
    """A ValueError when ``model`` belongs to another registered framework than ``entry``'s, told
    from the modules of its class hierarchy (nothing imported), so that a torch model given to
    ``driver="paddle"`` gets this, not an instruction to install paddle."""
    found = framework_of(model)
    if found is None or found == entry.framework_module:
        return
    own = backend_for_model(model)
    suggestion = repr(own.driver_names[0]) if own is not None else "'auto'"
    raise ValueError(
        f"driver={driver_name!r} trains {entry.framework_module} models, but the model "
        f"({type(model).__qualname__}) is a {found} model. Pass driver={suggestion} (or driver='auto', "
        f"which picks the driver from the model), or a model of {entry.framework_module}. "
        f"Available drivers: {', '.join(available_driver_names())}."
    )
