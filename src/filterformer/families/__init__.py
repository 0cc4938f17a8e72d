"""The model families filterformer patches and diagnoses, known in one place.

For Hugging Face ``transformers`` models and timm Vision Transformers: whether a model is one
(without importing either library), where its layers and self-attention modules are, and, for
``transformers``, the switch of its attention implementation and its undoing.
"""

from .huggingface import (
    attention_implementation,
    attention_modules,
    enclosing_layer,
    hidden_layers,
    is_huggingface_model,
    restore_attention_implementations,
    switch_attention_implementation,
    using_attention_implementation,
)
from .timm import has_timm_blocks, is_timm_vision_transformer, vision_transformer_blocks

__all__ = [
    "attention_implementation",
    "attention_modules",
    "enclosing_layer",
    "has_timm_blocks",
    "hidden_layers",
    "is_huggingface_model",
    "is_timm_vision_transformer",
    "restore_attention_implementations",
    "switch_attention_implementation",
    "using_attention_implementation",
    "vision_transformer_blocks",
]
