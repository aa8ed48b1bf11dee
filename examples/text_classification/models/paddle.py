"""The classifier in PaddlePaddle (see ``architecture`` for its shape)."""
from __future__ import annotations

import paddle
import paddle.nn.functional as F
from paddle import nn

from examples.text_classification.architecture import ClassifierConfig, initial_weights, linear_names


class EncoderBlock(nn.Layer):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = config.heads, config.head_dim
        self.ln1, self.ln2 = nn.LayerNorm(config.dim), nn.LayerNorm(config.dim)
        self.qkv, self.out = nn.Linear(config.dim, 3 * config.dim), nn.Linear(config.dim, config.dim)
        self.fc1, self.fc2 = nn.Linear(config.dim, config.ffn), nn.Linear(config.ffn, config.dim)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        batch, length, dim = x.shape
        qkv = self.qkv(self.ln1(x)).reshape([batch, length, 3, self.heads, self.head_dim]).transpose([2, 0, 3, 1, 4])
        q, k, v = qkv[0], qkv[1], qkv[2]
        attention = F.softmax(paddle.matmul(q, k, transpose_y=True) / self.head_dim ** 0.5, axis=-1)
        x = x + self.out(paddle.matmul(attention, v).transpose([0, 2, 1, 3]).reshape([batch, length, dim]))
        return x + self.fc2(F.relu(self.fc1(self.ln2(x))))


class TextClassifier(nn.Layer):
    def __init__(self, config: ClassifierConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.pos = self.create_parameter([config.seq_len, config.dim])
        self.blocks = nn.LayerList([EncoderBlock(config) for _ in range(config.layers)])
        self.ln_f = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes)

    def forward(self, tokens: paddle.Tensor) -> paddle.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x).mean(axis=1))

    def train_step(self, tokens: paddle.Tensor, label: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"loss": F.cross_entropy(self(tokens), label)}

    def evaluate_step(self, tokens: paddle.Tensor) -> dict[str, paddle.Tensor]:
        return {"pred": self(tokens)}


def build_classifier(config: ClassifierConfig = ClassifierConfig(), seed: int = 0) -> TextClassifier:
    """A classifier holding ``initial_weights(config, seed)`` (linear weights transposed to paddle's ``(in, out)``)."""
    model = TextClassifier(config)
    transposed = set(linear_names(config))
    weights = initial_weights(config, seed)
    model.set_state_dict({name: value.T.copy() if name in transposed else value for name, value in weights.items()})
    return model
