"""A model built on the ``meta`` device, given weights only once it is split across the ranks.

``with torch.device("meta"): model = MyModel()`` builds the modules without any weight memory; the
model-parallel driver splits and shards that empty model, then each rank allocates its own shards
(``to_empty``) and fills them: from a weights file, read one tensor at a time and cut to this
rank's part, or by the user's function over the sharded model (as torchtitan's ``init_weights``).
No rank ever holds the whole model, which is what sharding is for when it does not fit one rank.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Union

import torch

try:
    from torch.distributed.tensor import DTensor, distribute_tensor
except ImportError:  # pragma: no cover - the model-parallel driver needs torch >= 2.6 anyway
    DTensor, distribute_tensor = None, None

InitWeights = Union[str, Path, Callable[[torch.nn.Module], Any], None]

__all__ = ["InitWeights", "on_meta_device", "check_init_weights", "materialize"]


def on_meta_device(module: torch.nn.Module) -> bool:
    """Whether any parameter or buffer of ``module`` is on the meta device (has no memory yet)."""
    return any(tensor.is_meta for tensor in (*module.parameters(), *module.buffers()))


def check_init_weights(module: torch.nn.Module, init_weights: InitWeights) -> None:
    """A model on the meta device needs ``init_weights``; a wrong kind or a missing file is an
    error before any process starts."""
    if init_weights is None:
        if on_meta_device(module):
            raise ValueError(
                "The model is on the meta device (built under torch.device('meta')): its weights have no values yet. "
                "Give torch_model_parallel_kwargs={'init_weights': ...}: a weights file (safetensors, or a torch "
                "state dict) each rank reads its shards from, or a function (model) -> None that initialises the "
                "sharded model in place.")
        return
    if callable(init_weights):
        return
    if not isinstance(init_weights, (str, Path)):
        raise TypeError(f"init_weights must be a weights file or a function (model) -> None, got "
                        f"{type(init_weights).__name__}.")
    if not Path(init_weights).is_file():
        raise FileNotFoundError(f"init_weights={str(init_weights)!r}: no such file; give a safetensors file or a torch "
                                "state dict saved with torch.save(model.state_dict(), path).")


def materialize(module: torch.nn.Module, device: torch.device, init_weights: InitWeights, allocate: bool) -> None:
    """Fill a split and sharded ``module`` from ``init_weights``; ``allocate``: it is on the meta
    device, so first give it memory on ``device`` (this rank's shards only)."""
    if allocate:
        module.to_empty(device=device)
    with torch.no_grad():
        if callable(init_weights):
            init_weights(module)
        else:
            _load_shards(module, Path(init_weights))


def _load_shards(module: torch.nn.Module, path: Path) -> None:
    """Copy each tensor of the file into the module's tensor of that name: a split one (DTensor)
    takes only this rank's part; every name must be in the file and match its shape."""
    targets = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    seen = set()
    for name, full in _tensors_of(path, set(targets)):
        target = targets[name]
        if tuple(full.shape) != tuple(target.shape):
            raise ValueError(f"init_weights {str(path)!r}: {name} has shape {tuple(full.shape)}, the model's "
                             f"{tuple(target.shape)}.")
        full = full.to(device=target.device, dtype=target.dtype)
        if DTensor is not None and isinstance(target, DTensor):
            # every rank read the same file: cut locally, no communication
            part = distribute_tensor(full, target.device_mesh, target.placements, src_data_rank=None).to_local()
            target.to_local().copy_(part)
        else:
            target.copy_(full)
        seen.add(name)
    missing = sorted(set(targets) - seen)
    if missing:
        raise ValueError(f"init_weights {str(path)!r} has no tensor for {missing[:8]}{' ...' if len(missing) > 8 else ''}"
                         " of the model: its weights would stay uninitialised memory.")


def _tensors_of(path: Path, wanted: set[str]) -> Iterator[tuple[str, torch.Tensor]]:
    """The file's tensors that ``wanted`` names, one at a time (mapped, not read whole)."""
    if path.suffix == ".safetensors":
        try:
            from safetensors import safe_open
        except ImportError as missing:
            raise ImportError("init_weights as a .safetensors file needs safetensors: pip install safetensors") from missing
        with safe_open(str(path), framework="pt") as weights:
            for name in weights.keys():
                if name in wanted:
                    yield name, weights.get_tensor(name)
        return
    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(state, dict):
        raise TypeError(f"init_weights {str(path)!r} holds a {type(state).__name__}, not a state dict.")
    for name in list(state):
        if name in wanted:
            yield name, state.pop(name)
