"""Models: the Transformer backbone, its configuration and task heads."""

from .causal_lm import CausalLM, CausalLMOutput
from .classifier import ClassifierOutput, SequenceClassifier
from .config import TransformerConfig
from .graph_bridge import GraphBridgeClassifier, GraphBridgeTokenizer
from .transformer import Transformer, TransformerOutput

__all__ = [
    "CausalLM",
    "CausalLMOutput",
    "ClassifierOutput",
    "GraphBridgeClassifier",
    "GraphBridgeTokenizer",
    "SequenceClassifier",
    "Transformer",
    "TransformerConfig",
    "TransformerOutput",
]
