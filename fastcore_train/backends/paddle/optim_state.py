"""Optimizer state keyed by parameter position, so it loads into any equal optimizer.

``paddle.optimizer.Optimizer.state_dict()`` keys each accumulator (momentum, Adam moments...) by a
variable name made from the parameter's generated name plus a per-process counter
(``linear_3.w_0_velocity_1``). Those names change whenever models or optimizers are created in
another order, e.g. when a checkpoint is loaded into a model built later in the same process;
``set_state_dict`` then fails or loads nothing. Here the state is saved per accumulator kind and
parameter *index* in the optimizer's parameter list (what ``torch.optim`` does), and on loading
the accumulators are created the way paddle's first ``step()`` creates them and then filled in.
"""
from __future__ import annotations

from typing import Any

import paddle
from paddle.base import framework
from paddle.optimizer.lr import LRScheduler

FORMAT = "fastcore_train.paddle.optimizer.v1"


def optimizer_parameters(optimizer: paddle.optimizer.Optimizer) -> list[Any]:
    """The optimizer's parameters in order (flattening parameter groups)."""
    groups = list(optimizer._param_groups or [])
    if groups and isinstance(groups[0], dict):
        return [parameter for group in groups for parameter in group["params"]]
    return groups


def _owner_index(optimizer: paddle.optimizer.Optimizer) -> dict[str, int]:
    """Accumulator owner name (a parameter, or its fp32 master copy) -> parameter index."""
    index = {parameter.name: position for position, parameter in enumerate(optimizer_parameters(optimizer))}
    for name, master in getattr(optimizer, "_master_weights", {}).items():
        if name in index:
            index[master.name] = index[name]
    return index


def save_optimizer_state(optimizer: paddle.optimizer.Optimizer) -> dict[str, Any]:
    """The optimizer's state with accumulators keyed ``{kind: {parameter index: tensor}}``."""
    owners = _owner_index(optimizer)
    accumulators: dict[str, dict[int, Any]] = {}
    for kind, by_owner in optimizer._accumulators.items():
        accumulators[kind] = {owners[owner]: value for owner, value in by_owner.items() if owner in owners}
    masters = {owners[name]: value for name, value in getattr(optimizer, "_master_weights", {}).items()
               if name in owners}
    scheduler = optimizer._learning_rate
    return {
        "format": FORMAT, "num_parameters": len(optimizer_parameters(optimizer)),
        "accumulators": accumulators, "master_weights": masters,
        "lr_scheduler": scheduler.state_dict() if isinstance(scheduler, LRScheduler) else None,
    }


def _create_accumulators(optimizer: paddle.optimizer.Optimizer) -> None:
    """Create the accumulators now, as paddle's first ``step()`` would (they start at their
    initial values; loading overwrites them)."""
    block = framework.default_main_program().global_block()
    groups = list(optimizer._param_groups or [])
    with framework.dygraph_guard_if_declarative():
        if groups and isinstance(groups[0], dict):
            for group in groups:
                trainable = {**group, "params": [p for p in group["params"] if not p.stop_gradient]}
                optimizer._create_accumulators(block, trainable)
        else:
            optimizer._create_accumulators(block, [p for p in optimizer_parameters(optimizer) if not p.stop_gradient])


def load_optimizer_state(optimizer: paddle.optimizer.Optimizer, state: dict[str, Any]) -> None:
    """Restore what :func:`save_optimizer_state` returned into an optimizer over equal parameters."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError("The optimizer state was not written by fastcore_train's paddle driver; load it "
                         "with optimizer.set_state_dict(paddle.load(path)) yourself.")
    parameters = optimizer_parameters(optimizer)
    if state["num_parameters"] != len(parameters):
        raise ValueError(
            f"The saved optimizer state covers {state['num_parameters']} parameters but this optimizer has "
            f"{len(parameters)}; build the optimizer over the same parameters as when it was saved.")
    if state["accumulators"] and not optimizer._accumulators:
        _create_accumulators(optimizer)
    owners = _owner_index(optimizer)
    for kind, by_index in state["accumulators"].items():
        current = {owners[owner]: value for owner, value in optimizer._accumulators.get(kind, {}).items()
                   if owner in owners}
        missing = sorted(set(by_index) - set(current))
        if missing:
            raise ValueError(
                f"The saved optimizer state has {kind!r} for parameter(s) {missing}, which this optimizer "
                f"({type(optimizer).__name__}) does not keep; pass the same kind of optimizer as when it was saved.")
        for position, value in by_index.items():
            current[position].set_value(value)
    masters = getattr(optimizer, "_master_weights", {})
    for position, value in state["master_weights"].items():
        name = parameters[position].name
        if name in masters:
            masters[name].set_value(value)
    scheduler = optimizer._learning_rate
    if state["lr_scheduler"] is not None and isinstance(scheduler, LRScheduler):
        scheduler.set_state_dict(state["lr_scheduler"])
