"""Attention modules: one per method, all on :class:`AttentionBase`'s contract.

Importing this package registers every built-in method; ``build_attention(name, ...)`` builds one
by name.
"""

from .agf import AGF_AUX_LOSS, AttentiveGraphFilterAttention
from .base import AttentionBase, AttentionInputs, merge_heads, split_heads
from .context import AttentionContext, AttentionMaps
from .decoding_cache import CACHE_BUCKET, DecodingCache, LayerCache
from .gfsa import GraphFilterAttention
from .registry import (
    ATTENTION_REGISTRY,
    attention_names,
    attention_options,
    build_attention,
    get_attention_class,
    register_attention,
)
from .samsa import ImportanceScore, SamplingAttention
from .softmax import SoftmaxAttention

__all__ = [
    "AGF_AUX_LOSS",
    "ATTENTION_REGISTRY",
    "CACHE_BUCKET",
    "AttentionBase",
    "AttentionContext",
    "AttentionInputs",
    "AttentionMaps",
    "AttentiveGraphFilterAttention",
    "DecodingCache",
    "GraphFilterAttention",
    "ImportanceScore",
    "LayerCache",
    "SamplingAttention",
    "SoftmaxAttention",
    "attention_names",
    "attention_options",
    "build_attention",
    "get_attention_class",
    "merge_heads",
    "register_attention",
    "split_heads",
]
