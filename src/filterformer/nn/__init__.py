"""Layers: Transformer block, MLP, layer fusion, pooling, embeddings."""

from .block import NORM_POSITIONS, TransformerBlock
from .embeddings import POSITIONS, InputEmbedding, sinusoidal_positions
from .fusion import FUSION_MODES, LayerFusion
from .mlp import Mlp
from .pooling import POOLINGS, SequencePooling, masked_mean

__all__ = [
    "FUSION_MODES",
    "NORM_POSITIONS",
    "POOLINGS",
    "POSITIONS",
    "InputEmbedding",
    "LayerFusion",
    "Mlp",
    "SequencePooling",
    "TransformerBlock",
    "masked_mean",
    "sinusoidal_positions",
]
