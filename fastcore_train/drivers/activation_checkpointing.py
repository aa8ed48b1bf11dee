"""Activation checkpointing: chosen layers keep only their inputs in forward and run again in backward.

``Trainer(..., activation_checkpointing=...)`` names the layers; this module reads that option,
picks the layers and wraps them, for every backend alike. A backend supplies only the call that
runs a function under its framework's recompute facility, in ``backends/<name>/recompute.py``:

- ``recompute(function, *args, **kwargs)``: the framework's checkpoint call (torch's
  ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``, paddle's
  ``fleet.utils.recompute(use_reentrant=False)``, oneflow's ``oneflow.utils.checkpoint.checkpoint``);
- optionally ``refuse(name, layer) -> Optional[str]``: why that layer cannot be recomputed exactly;
- or, where the framework has no such facility, ``UNSUPPORTED``: the sentence saying so (jittor).

A wrapped layer keeps its class, its parameters and its place in the module tree: only its
``forward`` is replaced by an instance attribute (a :class:`RecomputedForward`), so state-dict keys,
parameter names and checkpoints are the same with or without the option, and the data-parallel
wrappers that the drivers build afterwards see an ordinary module. In eval mode a wrapped layer
runs its forward directly (nothing to recompute without a backward).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

from fastcore_train.drivers.registry import backend_part, backend_for_model

__all__ = ["ActivationCheckpointingSpec", "RecomputedForward", "apply_activation_checkpointing", "layer_selector",
           "select_layers"]

#: What ``activation_checkpointing=`` accepts: None/False (off), True (every block of a
#: ModuleList/Sequential), a class name, a class, a list of names and classes, or a predicate
#: ``(qualified name, module) -> bool``.
ActivationCheckpointingSpec = Union[None, bool, str, type, Sequence[Union[str, type]], Callable[[str, Any], bool]]
#: The container classes whose direct children ``True`` selects (torch/oneflow/jittor spell them
#: ``ModuleList`` and ``Sequential``, paddle ``LayerList`` and ``Sequential``).
CONTAINER_CLASSES = ("ModuleList", "Sequential", "LayerList")

_ACCEPTED = ("activation_checkpointing takes True (every direct child of a ModuleList/Sequential/LayerList), a "
             "layer class name ('Block'), a layer class, a list of names and classes, or a predicate "
             "(name, module) -> bool; None or False turns it off")


def layer_selector(spec: ActivationCheckpointingSpec) -> Optional[Callable[[str, Any, Any], bool]]:
    """``select(name, module, parent) -> bool`` for ``spec``; None when it turns the option off.

    A name matches the layer's class name (``"Block"``) or its qualified name
    (``"my_pkg.model.Block"``); a class matches its instances, subclasses included.
    """
    if spec is None or spec is False:
        return None
    if spec is True:
        return lambda name, module, parent: parent is not None and type(parent).__name__ in CONTAINER_CLASSES
    if isinstance(spec, (str, type)):
        spec = [spec]
    if isinstance(spec, Sequence) and not isinstance(spec, str):
        names = {item for item in spec if isinstance(item, str)}
        classes = tuple(item for item in spec if isinstance(item, type))
        wrong = [item for item in spec if not isinstance(item, (str, type))]
        if wrong or not spec:
            raise TypeError(f"{_ACCEPTED}; got {spec!r}" + (f" (not a name or class: {wrong!r})" if wrong else "") + ".")

        def by_class(name: str, module: Any, parent: Any) -> bool:
            kind = type(module)
            return (kind.__name__ in names or f"{kind.__module__}.{kind.__qualname__}" in names
                    or (bool(classes) and isinstance(module, classes)))
        return by_class
    if callable(spec):
        return lambda name, module, parent: bool(spec(name, module))
    raise TypeError(f"{_ACCEPTED}; got {spec!r}.")


def _named_children(module: Any) -> list[tuple[str, Any]]:
    children = getattr(module, "named_children", None)
    return list(children()) if callable(children) else []


def select_layers(model: Any, spec: ActivationCheckpointingSpec) -> list[tuple[str, Any]]:
    """The ``(qualified name, layer)`` pairs of ``model`` that ``spec`` selects, in module order.

    The model itself is never selected, and a selected layer's own sublayers are not looked at
    (recomputing a layer already recomputes everything inside it). A spec that selects nothing is
    an error listing the model's layer classes, so a misspelt name does not silently do nothing.
    """
    select = layer_selector(spec)
    if select is None:
        return []
    chosen: list[tuple[str, Any]] = []
    classes: dict[str, None] = {}

    def visit(module: Any, prefix: str) -> None:
        for name, child in _named_children(module):
            qualified = f"{prefix}{name}"
            classes[type(child).__name__] = None
            if select(qualified, child, module):
                chosen.append((qualified, child))
            else:
                visit(child, f"{qualified}.")

    visit(model, "")
    if not chosen:
        raise ValueError(f"activation_checkpointing={spec!r} selects no layer of this {type(model).__name__}; its "
                         f"layer classes are: {', '.join(classes) or 'none (it has no sublayers)'}. {_ACCEPTED}.")
    return chosen


class RecomputedForward:
    """A layer's forward run through its framework's recompute call (in training mode).

    Set as the layer's ``forward`` instance attribute, so the framework's ``__call__`` (and its
    hooks) runs as before around it. It holds the class's own forward function rather than a
    bound method, so the layer pickles and deep-copies with it.
    """

    def __init__(self, layer: Any, recompute: Callable[..., Any]) -> None:
        self.layer = layer
        self.recompute = recompute
        #: The forward the layer had: an instance attribute of its own, or its class's function.
        self.own_forward = layer.__dict__.get("forward")
        self.class_forward = type(layer).forward

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """The layer's original forward."""
        if self.own_forward is not None:
            return self.own_forward(*args, **kwargs)
        return self.class_forward(self.layer, *args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not getattr(self.layer, "training", True):
            return self.run(*args, **kwargs)
        return self.recompute(self.run, *args, **kwargs)


def apply_activation_checkpointing(model: Any, spec: ActivationCheckpointingSpec) -> list[str]:
    """Wrap the layers of ``model`` that ``spec`` selects (see :func:`select_layers`); return their names.

    Call it before any data-parallel wrapper is built (the Trainer does, before the driver sets
    up). A layer already wrapped stays as it is, so applying it twice changes nothing.
    """
    chosen = select_layers(model, spec)
    if not chosen:
        return []
    entry = backend_for_model(model)
    framework = entry.name if entry is not None else type(model).__module__.split(".")[0]
    part = backend_part(model, "recompute")
    recompute = getattr(part, "recompute", None)
    if recompute is None:
        raise NotImplementedError(f"activation_checkpointing is not available for {framework}: "
                                  f"{getattr(part, 'UNSUPPORTED', 'its backend has no recompute call')}")
    refuse = getattr(part, "refuse", None)
    for name, layer in chosen:
        reason = refuse(name, layer) if refuse is not None else None
        if reason:
            raise ValueError(f"activation_checkpointing cannot recompute layer {name!r} "
                             f"({type(layer).__name__}) on {framework}: {reason}")
    for _, layer in chosen:
        if not isinstance(layer.__dict__.get("forward"), RecomputedForward):
            layer.forward = RecomputedForward(layer, recompute)
    return [name for name, _ in chosen]
