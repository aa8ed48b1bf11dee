"""The classifier in OneFlow (see ``architecture`` for its shape)."""
from __future__ import annotations

import oneflow as flow
import oneflow.nn.functional as F
from oneflow import nn

from examples.text_classification.architecture import ClassifierConfig, initial_weights


class EncoderBlock(nn.Module):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = config.heads, config.head_dim
        self.ln1, self.ln2 = nn.LayerNorm(config.dim), nn.LayerNorm(config.dim)
        self.qkv, self.out = nn.Linear(config.dim, 3 * config.dim), nn.Linear(config.dim, config.dim)
        self.fc1, self.fc2 = nn.Linear(config.dim, config.ffn), nn.Linear(config.ffn, config.dim)

    def forward(self, x: flow.Tensor) -> flow.Tensor:
        batch, length, dim = x.shape
        qkv = self.qkv(self.ln1(x)).view(batch, length, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attention = flow.softmax(flow.matmul(q, k.transpose(-2, -1)) / self.head_dim ** 0.5, dim=-1)
        x = x + self.out(flow.matmul(attention, v).transpose(1, 2).reshape(batch, length, dim))
        return x + self.fc2(F.relu(self.fc1(self.ln2(x))))


class TextClassifier(nn.Module):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.pos = nn.Parameter(flow.zeros(config.seq_len, config.dim))
        self.blocks = nn.ModuleList([EncoderBlock(config) for _ in range(config.layers)])
        self.ln_f = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes)

    def forward(self, tokens: flow.Tensor) -> flow.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x).mean(dim=1))

    def train_step(self, tokens: flow.Tensor, label: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"loss": F.cross_entropy(self(tokens), label)}

    def evaluate_step(self, tokens: flow.Tensor) -> dict[str, flow.Tensor]:
        return {"pred": self(tokens)}


def build_classifier(config: ClassifierConfig = ClassifierConfig(), seed: int = 0) -> TextClassifier:
    """A classifier holding ``initial_weights(config, seed)``."""
    model = TextClassifier(config)
    model.load_state_dict({name: flow.tensor(value) for name, value in initial_weights(config, seed).items()})
    return model
