"""Walking a oneflow model's module tree for the model summary (:func:`fastcore_train.summarize`).

oneflow parameters answer ``numel()``, ``requires_grad`` and ``element_size()``, so the core's
reading serves as is; children come from the core's default ``named_children()``.
"""
from fastcore_train.summary import torch_style_parameter_facts as parameter_facts

__all__ = ["parameter_facts"]
