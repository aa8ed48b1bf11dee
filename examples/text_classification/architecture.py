"""The classifier's shape and its initial weights, written once for every framework.

A 2-block pre-norm transformer encoder: token embedding plus a learned position embedding,
multi-head self-attention (one fused q/k/v projection) and a ReLU feed-forward in each block,
a final LayerNorm, mean pooling over the sequence and a linear head. No dropout, so that one seed
gives one result on every framework.

The initial weights are numpy arrays drawn from one seeded generator, under the parameter names
every framework's model uses. Every backend starts from exactly the same numbers; a framework
that stores a linear layer's weight as ``(in, out)`` (paddle) transposes them on load.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClassifierConfig:
    """Sizes of the classifier (the defaults are those of the example and of ``bench/models.py``)."""

    vocab_size: int = 1000
    num_classes: int = 4
    seq_len: int = 64
    dim: int = 128
    heads: int = 4
    layers: int = 2
    ffn: int = 256

    def __post_init__(self) -> None:
        if self.dim % self.heads:
            raise ValueError(f"dim={self.dim} must be a multiple of heads={self.heads}.")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


def linear_names(config: ClassifierConfig) -> list[str]:
    """Names of the linear layers' weights, stored ``(out, in)`` here (paddle transposes them)."""
    names = [f"blocks.{i}.{part}.weight" for i in range(config.layers) for part in ("qkv", "out", "fc1", "fc2")]
    return names + ["head.weight"]


def initial_weights(config: ClassifierConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Every parameter's initial value (float32), by the name the models give it.

    Embeddings are N(0, 0.02); linear layers are uniform in +-1/sqrt(fan_in) (weight and bias), as
    most frameworks initialise them; LayerNorms start at scale 1, shift 0.
    """
    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    def linear(prefix: str, fan_in: int, fan_out: int) -> dict[str, np.ndarray]:
        bound = 1.0 / np.sqrt(fan_in)
        return {f"{prefix}.weight": rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                f"{prefix}.bias": rng.uniform(-bound, bound, (fan_out,)).astype(np.float32)}

    def layer_norm(prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.weight": np.ones(config.dim, np.float32), f"{prefix}.bias": np.zeros(config.dim, np.float32)}

    weights = {"embed.weight": normal(config.vocab_size, config.dim), "pos": normal(config.seq_len, config.dim)}
    for i in range(config.layers):
        block = f"blocks.{i}"
        weights.update(layer_norm(f"{block}.ln1"))
        weights.update(linear(f"{block}.qkv", config.dim, 3 * config.dim))
        weights.update(linear(f"{block}.out", config.dim, config.dim))
        weights.update(layer_norm(f"{block}.ln2"))
        weights.update(linear(f"{block}.fc1", config.dim, config.ffn))
        weights.update(linear(f"{block}.fc2", config.ffn, config.dim))
    weights.update(layer_norm("ln_f"))
    weights.update(linear("head", config.dim, config.num_classes))
    return weights
