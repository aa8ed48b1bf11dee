"""Random state for exact resume, as JSON-able data.

OneFlow 0.9's ``Generator.get_state``/``set_state`` do not restore the stream that ``bernoulli``
and ``dropout`` draw from (restoring a saved state does not repeat the draws), and each
``nn.Dropout`` owns a generator of its own. So the driver does not save generator states: it
reseeds every generator (the default ones via ``flow.manual_seed``, and each module's own) after
every training backward from ``(base seed, number of backwards)``. That pair is the whole random
state: a resumed run reseeds from it and continues exactly as an uninterrupted run.

The price: ``manual_seed`` waits for every queued op to finish (oneflow runs ops asynchronously),
so reseeding after each backward stops the host from running ahead of the kernels (1.3x the hand
loop's time on a small MLP). A model that draws no random numbers while training does not need it,
so the default, ``reseed="auto"``, pays it only for a model with modules that own a generator and
draw from it (``nn.Dropout`` with ``p > 0``: how oneflow models draw). Otherwise it reseeds only
when a random state is loaded (resume, and after evaluation), which is exact for a model that
draws nothing. A model that draws through functions in its ``forward`` (``flow.nn.functional.dropout``,
``flow.randn``) has no such module to be seen by: give it ``"every_backward"``, which always
reseeds; ``"on_load"`` never does. (Watching the default generator's state for draws was tried and
is not reliable: its state does not change with every draw.)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import oneflow as flow

SCHEME = "fastcore_train.oneflow.reseed-per-backward.v1"
RESEED_MODES = ("auto", "every_backward", "on_load")


def module_generators(model: flow.nn.Module) -> list[Any]:
    """The generators a model's modules own (``nn.Dropout`` keeps one as ``.generator``), in order."""
    found = []
    for module in model.modules():
        generator = getattr(module, "generator", None)
        if isinstance(generator, flow._oneflow_internal.Generator):
            found.append(generator)
    return found


def drawing_modules(model: flow.nn.Module) -> list[str]:
    """Names of the modules that own a generator and draw from it (``nn.Dropout`` with ``p > 0``)."""
    return [name for name, module in model.named_modules()
            if isinstance(getattr(module, "generator", None), flow._oneflow_internal.Generator)
            and getattr(module, "p", 1) != 0]


def check_reseed_mode(mode: Any) -> str:
    """``oneflow_kwargs["reseed"]`` checked."""
    if mode not in RESEED_MODES:
        raise ValueError(f"oneflow_kwargs['reseed']={mode!r}: use 'auto' (the default: reseed after every backward "
                         "only for a model that draws random numbers), 'every_backward' (always: exact resume for "
                         "any model) or 'on_load' (never: exact only for a model that draws no random numbers while "
                         "training).")
    return mode





class Reseeder:
    """Derives every generator's seed from ``(base, count)`` and advances ``count`` per backward."""

    def __init__(self, base: int, every_backward: bool = True) -> None:
        self.base = int(base)
        self.every_backward = every_backward
        self.count = 0
        self.generators: list[Any] = []

    def reseed(self) -> None:
        seeds = np.random.SeedSequence([self.base, self.count]).generate_state(len(self.generators) + 1,
                                                                               dtype=np.uint32)
        flow.manual_seed(int(seeds[0]))  # the CPU generator and every CUDA device's
        for generator, seed in zip(self.generators, seeds[1:]):
            generator.manual_seed(int(seed))

    def advance(self) -> None:
        self.count += 1
        if self.every_backward:
            self.reseed()

    def state(self) -> dict[str, Any]:
        return {"scheme": SCHEME, "base": self.base, "count": self.count}

    def load(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("scheme") != SCHEME:
            raise ValueError("The random state was not written by fastcore_train's oneflow driver; load a "
                             "checkpoint written with driver='oneflow'.")
        self.base, self.count = int(state["base"]), int(state["count"])
        self.reseed()
