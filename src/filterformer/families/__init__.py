"""The model families filterformer loads, patches and diagnoses: one adapter each.

:data:`HUGGING_FACE` (``transformers`` models, :mod:`.huggingface`) and :data:`TIMM` (timm ViTs,
:mod:`.timm`) each load or create their models offline, find their layers, patch them and
capture their intermediates; patching, diagnostics, training and the CLI go through them
(:func:`family_of`, :func:`patchable_family`). Telling a model's family imports neither library.
"""

from .family import FAMILIES, LaidOutFamily, ModelFamily, family_named, family_of, patchable_family
from .hf_attention_implementation import (
    attention_implementation,
    restore_attention_implementations,
    switch_attention_implementation,
    using_attention_implementation,
)
from .hf_directory import MINILM
from .hf_modules import attention_modules, enclosing_layer, hidden_layers, is_huggingface_model
from .huggingface import HUGGING_FACE, HuggingFaceFamily
from .timm import TIMM, TimmFamily
from .timm_models import has_timm_blocks, is_timm_vision_transformer, vision_transformer_blocks

__all__ = [
    "FAMILIES",
    "HUGGING_FACE",
    "MINILM",
    "TIMM",
    "HuggingFaceFamily",
    "LaidOutFamily",
    "ModelFamily",
    "TimmFamily",
    "attention_implementation",
    "attention_modules",
    "enclosing_layer",
    "family_named",
    "family_of",
    "has_timm_blocks",
    "hidden_layers",
    "is_huggingface_model",
    "is_timm_vision_transformer",
    "patchable_family",
    "restore_attention_implementations",
    "switch_attention_implementation",
    "using_attention_implementation",
    "vision_transformer_blocks",
]
