"""One hop of the weights round trip torch -> paddle -> jittor -> oneflow -> torch, run in the
framework's own environment (oneflow needs Python 3.10, jittor its compiled env, so no single
env holds all four): ``python -m tests.parity.chain FRAMEWORK IN.safetensors OUT.safetensors``
loads the neutral file into that framework's model holding every mapped layer and saves it again.
"""
from __future__ import annotations

import sys
from typing import Any


def every_layer_model(framework: str) -> Any:
    """Embedding, Conv1d, Conv2d without bias, LayerNorm, BatchNorm1d, a 2-layer bidirectional
    LSTM, a GRU and a Linear in a Sequential, built with ``framework``'s own layers."""
    if framework == "paddle":
        import paddle.nn as nn
        return nn.LayerDict({"embed": nn.Embedding(11, 6), "conv1": nn.Conv1D(6, 5, 3),
                             "conv2": nn.Conv2D(1, 2, 3, bias_attr=False), "norm": nn.LayerNorm(5),
                             "bn": nn.BatchNorm1D(5), "lstm": nn.LSTM(5, 4, num_layers=2, direction="bidirect"),
                             "gru": nn.GRU(8, 3), "head": nn.Sequential(nn.Linear(3, 2))})
    if framework == "jittor":
        import jittor.nn as nn
    elif framework == "oneflow":
        import oneflow.nn as nn
    else:
        import torch.nn as nn

    class EveryLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.conv1 = nn.Embedding(11, 6), nn.Conv1d(6, 5, 3)
            self.conv2, self.norm, self.bn = nn.Conv2d(1, 2, 3, bias=False), nn.LayerNorm(5), nn.BatchNorm1d(5)
            self.lstm = nn.LSTM(5, 4, num_layers=2, bidirectional=True)
            self.gru, self.head = nn.GRU(8, 3), nn.Sequential(nn.Linear(3, 2))

    return EveryLayer()


def hop(framework: str, source: str, target: str) -> None:
    from fastcore_train import load_neutral_weights, save_neutral_weights
    model = every_layer_model(framework)
    load_neutral_weights(model, source)
    save_neutral_weights(model, target)


if __name__ == "__main__":
    hop(*sys.argv[1:4])
