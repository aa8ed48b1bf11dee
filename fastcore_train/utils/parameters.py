"""Which parameter objects a model and an optimizer hold, read by duck typing (no framework import).

Used to catch an optimizer built for another model (or a copy of it), which would train nothing.
Everything known about each framework's optimizers is in :func:`optimizer_parameters`:

* torch and jittor: ``optimizer.param_groups``, a list of dicts whose ``"params"`` lists the parameters;
* oneflow: ``optimizer.param_groups``, a list of ``ParamGroup`` objects with a ``parameters`` list;
* paddle: ``optimizer._parameter_list``, the parameters themselves, or dicts with ``"params"``
  when the optimizer was given parameter groups.

Anything else (a third-party backend's optimizer, say) is "unknown", and nothing is checked.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable, Optional


def _group_parameters(group: Any) -> Iterable[Any]:
    if isinstance(group, Mapping):
        return group.get("params", ())  # torch, jittor, paddle parameter groups
    parameters = getattr(group, "parameters", None)
    if parameters is not None and not callable(parameters):
        return parameters  # oneflow's ParamGroup
    return (group,)  # paddle's plain parameter list: the entry is a parameter


def optimizer_parameters(optimizer: Any) -> Optional[list[Any]]:
    """The parameter objects ``optimizer`` updates, or None when its kind is not known here."""
    groups = getattr(optimizer, "param_groups", None)
    if groups is None:
        groups = getattr(optimizer, "_parameter_list", None)  # paddle
    if groups is None or isinstance(groups, (str, bytes, Mapping)):
        return None
    try:
        return [parameter for group in groups for parameter in _group_parameters(group)]
    except TypeError:  # not iterable as expected: an optimizer kind we do not know
        return None


def model_parameters(model: Any) -> Optional[list[Any]]:
    """``model.parameters()`` as a list (torch, paddle, jittor, oneflow), or None without one."""
    parameters = getattr(model, "parameters", None)
    if not callable(parameters):
        return None
    try:
        return list(parameters())
    except TypeError:
        return None


def optimizers_miss_the_model(model: Any, optimizers: Iterable[Any]) -> Optional[str]:
    """Why ``optimizers`` would train none of ``model``'s parameters, or None when they would
    (or when either side cannot be read)."""
    owned = model_parameters(model)
    if not owned:
        return None
    held: list[Any] = []
    for optimizer in optimizers:
        parameters = optimizer_parameters(optimizer)
        if parameters is None:
            return None
        held.extend(parameters)
    owned_ids = {id(parameter) for parameter in owned}
    if any(id(parameter) in owned_ids for parameter in held):
        return None
    what = "hold no parameters at all" if not held else \
        f"hold {len(held)} parameter(s), none of which is one of the model's {len(owned)}"
    return (f"The optimizer(s) would train nothing: they {what}. They were "
            "probably built for another model, or for this model before it was copied or rebuilt (e.g. "
            "copy.deepcopy(model) after making the optimizer). Build the optimizer from this model's "
            "parameters, e.g. SGD(model.parameters(), lr=...), and pass that model to the Trainer.")


def model_without_parameters(model: Any) -> Optional[str]:
    """Why ``model`` cannot be trained when it holds no parameter at all, or None when it holds
    some (or has no ``parameters()`` to ask)."""
    owned = model_parameters(model)
    if owned is None or owned:
        return None
    return (f"The model ({type(model).__qualname__}) has no parameters, so training would change nothing. "
            "Layers kept in a plain python list or dict, or created outside the model, are not registered "
            "with it: assign each layer as an attribute of the model, or keep them in the framework's "
            "container (torch.nn.ModuleList, paddle.nn.LayerList, ...); then build the optimizer from "
            "model.parameters().")
