"""Moving weights and checkpoints between frameworks: the neutral weights format (safetensors,
torch's names and layouts), :func:`convert_checkpoint` and the layer mapping it rests on. See
docs/moving-between-frameworks.md."""
from fastcore_train.convert.checkpoint import ConversionError, convert_checkpoint
from fastcore_train.convert.layout import LAYER_KINDS, UnmappableLayerError
from fastcore_train.convert.optimizer_state import UnconvertibleOptimizerError
from fastcore_train.convert.weights import layout_of, load_neutral_weights, save_neutral_weights

__all__ = ["convert_checkpoint", "save_neutral_weights", "load_neutral_weights", "layout_of", "ConversionError",
           "UnmappableLayerError", "UnconvertibleOptimizerError", "LAYER_KINDS"]
