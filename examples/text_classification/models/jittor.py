"""The classifier in Jittor (see ``architecture`` for its shape); jittor calls ``forward`` ``execute``."""
from __future__ import annotations

import jittor as jt
from jittor import nn

from examples.text_classification.architecture import ClassifierConfig, initial_weights


class EncoderBlock(nn.Module):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = config.heads, config.head_dim
        self.ln1, self.ln2 = nn.LayerNorm(config.dim), nn.LayerNorm(config.dim)
        self.qkv, self.out = nn.Linear(config.dim, 3 * config.dim), nn.Linear(config.dim, config.dim)
        self.fc1, self.fc2 = nn.Linear(config.dim, config.ffn), nn.Linear(config.ffn, config.dim)

    def execute(self, x: jt.Var) -> jt.Var:
        batch, length, dim = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(batch, length, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attention = nn.softmax(jt.matmul(q, k.permute(0, 1, 3, 2)) / self.head_dim ** 0.5, dim=-1)
        x = x + self.out(jt.matmul(attention, v).permute(0, 2, 1, 3).reshape(batch, length, dim))
        return x + self.fc2(nn.relu(self.fc1(self.ln2(x))))


class TextClassifier(nn.Module):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.pos = jt.zeros((config.seq_len, config.dim))
        self.blocks = nn.ModuleList([EncoderBlock(config) for _ in range(config.layers)])
        self.ln_f = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes)

    def execute(self, tokens: jt.Var) -> jt.Var:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x).mean(dim=1))

    def train_step(self, tokens: jt.Var, label: jt.Var) -> dict[str, jt.Var]:
        return {"loss": nn.cross_entropy_loss(self(tokens), label)}

    def evaluate_step(self, tokens: jt.Var) -> dict[str, jt.Var]:
        return {"pred": self(tokens)}


def build_classifier(config: ClassifierConfig = ClassifierConfig(), seed: int = 0) -> TextClassifier:
    """A classifier holding ``initial_weights(config, seed)``."""
    model = TextClassifier(config)
    model.load_parameters(initial_weights(config, seed))
    return model
