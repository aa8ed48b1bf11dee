"""``driver.io`` for paddle (:class:`PaddlePersistence`): model files, optimizer state that loads
into any equal optimizer, and the random state of paddle's generators.

Model files. Paddle cannot pickle a ``paddle.nn.Layer`` (``paddle.save`` refuses it); a whole
model is its static-graph export, which needs the input signature (``input_spec``). So:

- state dict (default): ``paddle.save(model.state_dict(), path)``, one file;
- whole model: ``path`` becomes a folder holding ``model.json`` + ``model.pdiparams`` (load them
  for inference with ``paddle.jit.load(str(path / "model"))``) and ``state_dict.pdparams``, which
  :func:`load_model_file` restores into a Layer (an export's parameters are renamed, so they cannot
  be matched to a Layer reliably).

Optimizer state, keyed by parameter position.
``paddle.optimizer.Optimizer.state_dict()`` keys each accumulator (momentum, Adam moments...) by a
variable name made from the parameter's generated name plus a per-process counter
(``linear_3.w_0_velocity_1``). Those names change whenever models or optimizers are created in
another order, e.g. when a checkpoint is loaded into a model built later in the same process;
``set_state_dict`` then fails or loads nothing. Here the state is saved per accumulator kind and
parameter *index* in the optimizer's parameter list (what ``torch.optim`` does), and on loading
the accumulators are created the way paddle's first ``step()`` creates them and then filled in.

Checkpoint files are hashed while written: ``paddle.save`` writes to a path or to an
``io.BytesIO`` (nothing else), so a checkpoint's file object is handed to it as a
:class:`FileBuffer`, a ``BytesIO`` whose writes go straight on to that file (paddle only writes
to and flushes it); the bytes are those a save to the path writes.

Loading runs no code of the file's: ``paddle.load`` unpickles with plain ``pickle``, so every file
is first read through :mod:`fastcore_train.utils.safe_pickle` (numpy arrays, containers, numbers,
strings: all a ``paddle.save`` of state dicts holds) and handed to ``paddle.load`` only when that
succeeded, as the same bytes in memory. ``load_model(..., weights_only=False)`` skips the check
for a file one trusts.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional, Sequence

import paddle
from paddle.base import framework
from paddle.optimizer.lr import LRScheduler

from fastcore_train.backends.paddle import snapshot
from fastcore_train.backends.paddle.rng import get_rng_state, set_rng_state
from fastcore_train.drivers.persistence import Persistence
from fastcore_train.log import logger
from fastcore_train.utils import safe_pickle

TRUSTED_HINT = ("If you wrote this file yourself and trust it, trainer.load_model(folder, weights_only=False) "
                "reads it with paddle.load unchecked.")

EXPORT_PREFIX = "model"
STATE_FILE = "state_dict.pdparams"


class FileBuffer(io.BytesIO):
    """A ``BytesIO`` (what ``paddle.save`` accepts besides a path) that keeps nothing: what is
    written to it goes on to ``file`` (a checkpoint's hashing file object)."""

    def __init__(self, file: BinaryIO) -> None:
        super().__init__()
        self._file = file

    def write(self, data: Any) -> int:  # type: ignore[override]
        return self._file.write(data)

    def writelines(self, lines: Any) -> None:  # type: ignore[override]
        for line in lines:
            self._file.write(line)

    def flush(self) -> None:
        self._file.flush()

    def tell(self) -> int:
        return self._file.tell()


def save_target(path_or_file: Any) -> Any:
    """What ``paddle.save`` takes for a path (a str) or a binary file object (a :class:`FileBuffer`)."""
    return str(path_or_file) if isinstance(path_or_file, (str, os.PathLike)) else FileBuffer(path_or_file)


def _is_static_forward(model: paddle.nn.Layer) -> bool:
    """True when ``forward`` is decorated with ``paddle.jit.to_static`` (it knows its inputs)."""
    return type(model.forward).__name__ == "StaticFunction"


def save_model_file(model: paddle.nn.Layer, path: Path, whole_model: bool = False,
                    input_spec: Optional[Sequence[Any]] = None, **kwargs: Any) -> None:
    """Write ``model`` to ``path`` (see the module docstring for the two layouts)."""
    if whole_model and input_spec is None and not _is_static_forward(model):
        logger.warning(
            "only_state_dict=False: paddle can only save a whole model as a paddle.jit.save export, which "
            "needs the model's input_spec; saved the state dict only. Pass paddle_kwargs={'input_spec': "
            "[paddle.static.InputSpec(shape, dtype, name), ...]} (or save_model(..., input_spec=...)) to "
            "export the model too.")
        whole_model = False
    if not whole_model:
        paddle.save(model.state_dict(), save_target(path), **kwargs)
        return
    path.mkdir(parents=True, exist_ok=True)
    paddle.save(model.state_dict(), str(path / STATE_FILE))
    was_training = model.training
    model.eval()  # the export is for inference: dropout off, batch norm on running statistics
    try:
        paddle.jit.save(model, str(path / EXPORT_PREFIX), input_spec=input_spec, **kwargs)
    finally:
        if was_training:
            model.train()


def load_file(path: Path, weights_only: bool = True, **kwargs: Any) -> Any:
    """``paddle.load`` of ``path`` once its pickle holds nothing but plain data (unless
    ``weights_only=False``); a file naming anything else raises
    :class:`~fastcore_train.utils.safe_pickle.UnsafePickleError`, nothing of it run."""
    data = Path(path).read_bytes()
    if weights_only:
        safe_pickle.loads(data, source=repr(str(path)), hint=TRUSTED_HINT)
    return paddle.load(io.BytesIO(data), **kwargs)


def load_model_file(model: paddle.nn.Layer, path: Path, assign: Optional[Callable[[Any, Any], None]] = None,
                    **kwargs: Any) -> None:
    """Restore into ``model`` what :func:`save_model_file` wrote; parameter names must match.
    ``assign(tensor, value)``: how a value goes into the model's tensor (default: the model's
    ``set_state_dict``; split tensors of model parallel need their part of it)."""
    apply_model_state(model, read_model_file(model, path, **kwargs), assign)


def read_model_file(model: paddle.nn.Layer, path: Path, **kwargs: Any) -> dict[str, Any]:
    """The state dict :func:`save_model_file` wrote, checked to fit ``model`` (nothing put into it)."""
    file = path / STATE_FILE if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} is a folder without {STATE_FILE}, so it was not written by fastcore_train; "
            f"load a paddle.jit.save export with paddle.jit.load instead.")
    state = load_file(file, **kwargs)
    if not isinstance(state, dict):
        raise TypeError(f"{str(file)!r} holds a {type(state).__name__}, not a paddle state dict.")
    expected = set(model.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(
            f"{str(file)!r} does not fit the model {type(model).__name__}: missing {missing}, unexpected "
            f"{unexpected}. Load it into a model of the same structure as the one saved.")
    return state


def apply_model_state(model: paddle.nn.Layer, state: dict[str, Any],
                      assign: Optional[Callable[[Any, Any], None]] = None) -> None:
    """Put a state dict read by :func:`read_model_file` into ``model`` (see :func:`load_model_file`)."""
    if assign is None:
        model.set_state_dict(state)
        return
    current = model.state_dict()
    for name, value in state.items():
        assign(current[name], value)


# ---------------------------------------------------------------------- optimizer state
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
        "betas": _betas(optimizer),  # Adam's step count is read from its beta powers with these (converter)
    }


def _betas(optimizer: paddle.optimizer.Optimizer) -> Optional[list[float]]:
    """Adam's and AdamW's ``(beta1, beta2)`` as numbers, None for other optimizers."""
    if not hasattr(optimizer, "_beta1"):
        return None
    return [float(beta.item() if hasattr(beta, "item") else beta) for beta in (optimizer._beta1, optimizer._beta2)]


def _set_step_count(optimizer: paddle.optimizer.Optimizer, step: int) -> None:
    """Set Adam's beta powers to what ``step`` steps leave (``beta ** (step + 1)``), for a state
    converted from another framework, which counts steps instead."""
    betas = _betas(optimizer)
    if betas is None:
        return
    for kind, beta in zip(("beta1_pow_acc", "beta2_pow_acc"), betas):
        for value in optimizer._accumulators.get(kind, {}).values():
            value.set_value(paddle.full(value.shape, beta ** (step + 1), dtype=value.dtype))


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


def set_value(tensor: Any, value: Any) -> None:
    """``tensor.set_value(value)``: how a loaded value goes into an accumulator or a parameter."""
    tensor.set_value(value)


def load_optimizer_state(optimizer: paddle.optimizer.Optimizer, state: dict[str, Any],
                         assign: Callable[[Any, Any], None] = set_value) -> None:
    """Restore what :func:`save_optimizer_state` returned into an optimizer over equal parameters
    (``assign(tensor, value)`` puts each value in place)."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError("The optimizer state was not written by fastcore_train's paddle driver; load it "
                         "with optimizer.set_state_dict(paddle.load(path)) yourself.")
    parameters = optimizer_parameters(optimizer)
    if state["num_parameters"] is not None and state["num_parameters"] != len(parameters):
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
            assign(current[position], value)
    if state.get("step") is not None:  # converted from another framework (see neutral_weights.py)
        _set_step_count(optimizer, int(state["step"]))
    masters = getattr(optimizer, "_master_weights", {})
    for position, value in state["master_weights"].items():
        name = parameters[position].name
        if name in masters:
            assign(masters[name], value)
    scheduler = optimizer._learning_rate
    if state["lr_scheduler"] is not None and isinstance(scheduler, LRScheduler):
        scheduler.set_state_dict(state["lr_scheduler"])


class PaddlePersistence(Persistence):
    """State dicts with ``paddle.save``; ``input_spec`` (from ``paddle_kwargs``) lets whole-model
    saves also export the model with ``paddle.jit.save``."""

    model_file_suffix = ".pdparams"
    saves_to_file_objects = True  # through a FileBuffer (see the module docstring)
    saves_whole_model_to_file_objects = False  # a paddle.jit.save export is a folder

    def __init__(self, driver: Any, input_spec: Optional[Sequence[Any]] = None) -> None:
        super().__init__(driver)
        self.input_spec = input_spec

    def save_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        """``paddle.save`` of the state dict; ``only_state_dict=False`` with an ``input_spec``
        (keyword here, or ``paddle_kwargs``) makes ``path`` a folder that also holds the
        ``paddle.jit.save`` export."""
        input_spec = kwargs.pop("input_spec", self.input_spec)
        target = Path(path) if isinstance(path, (str, os.PathLike)) else path  # (or a file object: see the module)
        save_model_file(self.driver.unwrap_model(), target, whole_model=not only_state_dict,
                        input_spec=input_spec, **kwargs)

    def load_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> None:
        load_model_file(self.driver.unwrap_model(), Path(path), **kwargs)

    def read_model(self, path: Path, only_state_dict: bool = True, **kwargs: Any) -> Callable[[], None]:
        model = self.driver.unwrap_model()
        state = read_model_file(model, Path(path), **kwargs)
        return lambda: apply_model_state(model, state)

    def save_training_state(self, path: Path) -> None:
        self.write_object(self.training_state_object(), path)

    def model_state(self) -> Any:
        return self.driver.unwrap_model().state_dict()

    def training_state_object(self) -> dict[str, Any]:
        return self.training_state([save_optimizer_state(optimizer) for optimizer in self.driver.optimizers])

    def write_object(self, obj: Any, path: Any) -> None:
        paddle.save(obj, save_target(path))

    def host_copy(self, obj: Any) -> Any:
        return snapshot.host_copy(obj, self.host_buffers)

    def load_training_state(self, path: Path) -> None:
        self.read_training_state(path)()

    def read_training_state(self, path: Path) -> Callable[[], None]:
        state = load_file(path)
        return lambda: self.restore_training_state(state, load_optimizer_state)

    def rng_state(self) -> dict[str, Any]:
        return get_rng_state()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        set_rng_state(state)
