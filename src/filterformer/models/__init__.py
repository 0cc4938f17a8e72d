"""Models: the Transformer backbone, its configuration and task heads."""

from .causal_lm import CausalLM, CausalLMOutput
from .classifier import ClassifierOutput, SequenceClassifier
from .config import TransformerConfig
from .graph_bridge import GraphBridgeClassifier, GraphBridgeRegressor, GraphBridgeTokenizer
from .regressor import RegressionOutput, SequenceRegressor
from .transformer import Transformer, TransformerOutput

__all__ = [
    "CausalLM",
    "CausalLMOutput",
    "ClassifierOutput",
    "GraphBridgeClassifier",
    "GraphBridgeRegressor",
    "GraphBridgeTokenizer",
    "RegressionOutput",
    "SequenceClassifier",
    "SequenceRegressor",
    "Transformer",
    "TransformerConfig",
    "TransformerOutput",
]
