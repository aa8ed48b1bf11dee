"""Activation checkpointing on jittor: not available (the core reads ``UNSUPPORTED`` and raises).

jittor 1.3 has no recompute facility (no checkpoint/recompute function, no saved-tensor hooks), so
``Trainer(activation_checkpointing=...)`` is an error on jittor that says so.
"""

#: The sentence the core's error gives.
UNSUPPORTED = ("jittor 1.3 has no recompute (activation checkpointing) facility. Train without "
               "activation_checkpointing (lower the batch size, or use fp16=True, to save memory), or train "
               "the model with the torch, paddle or oneflow backend, which have one.")
