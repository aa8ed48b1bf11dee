"""Which standard layer each part of a model is, and how its tensors are named neutrally.

A *layout* lists the model's mappable layers in module order: ``[path, kind, info]`` rows, e.g.
``["encoder.0", "linear", {}]`` or ``["rnn", "lstm", {"num_layers": 2, "bidirectional": true}]``.
It is plain JSON, recorded in every checkpoint's ``meta.json`` (``"layers"``), so a checkpoint can
be converted from its files alone, without building the model.

Neutral names and layouts follow torch's (``fc.weight`` of shape ``[out, in]``, ``bn.running_var``,
``lstm.weight_ih_l0`` with gates ``i, f, g, o``); each backend's ``neutral_weights.py`` says how its
framework names and lays out the same tensors (:class:`TensorSpec`), and the walking and checking
is done here once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

#: The layer kinds every backend maps; see docs/moving-between-frameworks.md.
LAYER_KINDS = ("linear", "conv1d", "conv2d", "embedding", "layer_norm", "batch_norm", "lstm", "gru")
RNN_KINDS = ("lstm", "gru")

Layout = list  # [[path, kind, info], ...]


class UnmappableLayerError(TypeError):
    """A model holding a tensor outside the layers the neutral format maps."""


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a layer: its name in the framework (relative to the layer), its neutral
    name, whether the framework stores it transposed (2-D), whether it is a buffer (not trained),
    and ``alias_of``: a second name the framework gives the same tensor (paddle's RNN cells)."""

    name: str
    neutral: str
    transpose: bool = False
    buffer: bool = False
    optional: bool = False
    alias_of: Optional[str] = None


def rnn_tensor_names(info: dict[str, Any]) -> list[str]:
    """torch's names of an RNN's tensors, in its order: per layer, per direction, ``weight_ih``,
    ``weight_hh``, ``bias_ih``, ``bias_hh`` (``_l{k}`` and ``_reverse`` appended)."""
    names = []
    for layer in range(int(info.get("num_layers", 1))):
        for suffix in ("", "_reverse") if info.get("bidirectional") else ("",):
            names += [f"{kind}_l{layer}{suffix}" for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    return names


def affine_info(module: Any) -> dict[str, Any]:
    """The info of a layer whose weight or bias may be absent (``bias=False``, ``affine=False``):
    ``{"weight": False}``/``{"bias": False}`` for each that is not a tensor."""
    return {name: False for name in ("weight", "bias") if not hasattr(getattr(module, name, None), "shape")}


def find_layer(module: Any, layers: tuple[tuple[type, str], ...],
               rnn_info: Callable[[Any], Optional[dict[str, Any]]]) -> Optional[tuple[str, dict[str, Any]]]:
    """``(kind, info)`` of ``module`` from a backend's ``layers`` table (``(class, kind)`` rows,
    matched by exact class; batch norm by subclass), None for any other module.
    ``rnn_info(module)``: an RNN's ``{"num_layers", "bidirectional"}``, None when it is not mapped."""
    for cls, kind in layers:
        if type(module) is cls or (kind == "batch_norm" and isinstance(module, cls)):
            if kind in RNN_KINDS:
                info = rnn_info(module)
                return None if info is None else (kind, info)
            return kind, affine_info(module)
    return None


def torch_style_rnn_info(module: Any) -> Optional[dict[str, Any]]:
    """An RNN's info for torch, jittor and oneflow (``num_layers``, ``bidirectional``, ``bias``,
    ``proj_size``); projections and bias-free RNNs are not mapped."""
    if getattr(module, "proj_size", 0) or not module.bias:
        return None
    return {"num_layers": int(module.num_layers), "bidirectional": bool(module.bidirectional)}


def torch_style_layers(nn: Any, batch_norms: tuple[type, ...]) -> tuple[tuple[type, str], ...]:
    """The standard-layer table of a framework that follows torch's class names (torch, oneflow):
    ``nn`` is its module namespace, ``batch_norms`` its batch-norm classes (matched by subclass)."""
    return ((nn.Linear, "linear"), (nn.Conv1d, "conv1d"), (nn.Conv2d, "conv2d"), (nn.Embedding, "embedding"),
            (nn.LayerNorm, "layer_norm"), *((cls, "batch_norm") for cls in batch_norms), (nn.LSTM, "lstm"),
            (nn.GRU, "gru"))


#: torch-style optimizer class name -> neutral kind (torch and oneflow name them alike).
TORCH_STYLE_OPTIMIZERS = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}


def torch_style_layer_kind(layers: tuple[tuple[type, str], ...]) -> Callable[[Any], Optional[tuple[str, dict[str, Any]]]]:
    """``layer_kind(module)`` over a :func:`torch_style_layers` table, RNNs read as torch does."""
    return lambda module: find_layer(module, layers, torch_style_rnn_info)


def detached_numpy(value: Any) -> Any:
    """A torch-style tensor's values as a numpy array (off the graph, on the host)."""
    return value.detach().cpu().numpy()


def torch_style_specs(kind: str, info: dict[str, Any], batch_count: bool = True) -> list[TensorSpec]:
    """The tensors of a ``kind`` layer as torch names them (the neutral names themselves); jittor
    and oneflow name them alike. ``batch_count``: batch norm keeps ``num_batches_tracked``."""
    if kind in RNN_KINDS:
        return [TensorSpec(name, name) for name in rnn_tensor_names(info)]
    specs = [TensorSpec("weight", "weight")] if info.get("weight", True) else []
    if info.get("bias", True) and kind != "embedding":
        specs.append(TensorSpec("bias", "bias"))
    if kind == "batch_norm":
        specs += [TensorSpec("running_mean", "running_mean", buffer=True),
                  TensorSpec("running_var", "running_var", buffer=True)]
        if batch_count:
            specs.append(TensorSpec("num_batches_tracked", "num_batches_tracked", buffer=True, optional=True))
    return specs


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def model_layout(model: Any, layer_kind: Callable[[Any], Optional[tuple[str, dict[str, Any]]]],
                 specs: Callable[[str, dict[str, Any]], list[TensorSpec]]) -> Layout:
    """The layout of ``model``, walking its module tree (``named_children()``, which every
    framework here has) and asking ``layer_kind`` (a backend's) what each module is.

    Raises :class:`UnmappableLayerError` naming the first tensor of ``model.state_dict()`` that no
    mapped layer covers."""
    rows: Layout = []

    def walk(module: Any, path: str) -> None:
        found = layer_kind(module)
        if found is not None:
            rows.append([path, found[0], dict(found[1])])
            return
        for name, child in module.named_children():
            walk(child, _join(path, name))

    walk(model, "")
    covered = {_join(path, spec.name) for path, kind, info in rows for spec in specs(kind, info)}
    for name, value in model.state_dict().items():
        if name not in covered:
            owner = name.rsplit(".", 1)[0] if "." in name else ""
            module = _find(model, owner)
            raise UnmappableLayerError(
                f"Cannot map {name!r} (shape {list(getattr(value, 'shape', []))}) to the neutral weights format: it "
                f"belongs to a {type(module).__name__ if module is not None else '?'}, which is not one of the "
                f"layers the converter maps ({', '.join(LAYER_KINDS)}). Build that part from mapped layers, "
                "or convert its weights yourself.")
    return rows


def _find(model: Any, path: str) -> Any:
    module = model
    for part in path.split(".") if path else []:
        children = dict(module.named_children())
        if part not in children:
            return None
        module = children[part]
    return module


def layout_tensors(layout: Layout, specs: Callable[[str, dict[str, Any]], list[TensorSpec]]
                   ) -> list[tuple[str, str, TensorSpec]]:
    """``(framework name, neutral name, spec)`` of every tensor of ``layout``, in model order."""
    return [(_join(path, spec.name), _join(path, spec.neutral), spec)
            for path, kind, info in layout for spec in specs(kind, info)]


def parameter_order(layout: Layout, specs: Callable[[str, dict[str, Any]], list[TensorSpec]],
                    with_buffers: bool = False) -> list[str]:
    """The neutral names of the trained parameters in the order ``model.parameters()`` gives
    them (what optimizers' states are keyed by): layers in module order, then the layer's own
    order; aliases left out, and buffers too unless the framework's ``parameters()`` lists them
    (``with_buffers``: jittor's does)."""
    return [neutral for _, neutral, spec in layout_tensors(layout, specs)
            if (with_buffers or not spec.buffer) and spec.alias_of is None]
