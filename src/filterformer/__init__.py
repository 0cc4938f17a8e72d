"""filterformer: self-attention as a graph filter.

GFSA, AGF, SAMSA, NeuTRENO and layer fusion for any Transformer; patching of pretrained
Hugging Face and timm models; over-smoothing diagnostics; datasets, training and benchmarks.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .attention import attention_names, build_attention, register_attention
from .method_spec import MethodSpec
from .models import CausalLM, SequenceClassifier, Transformer, TransformerConfig

__version__ = "0.1.0"

# Heavier tools load on first use, so `import filterformer` stays light.
_LAZY = {
    "patch": "filterformer.patching",
    "unpatch": "filterformer.patching",
    "patched_parameters": "filterformer.patching",
    "patch_change": "filterformer.patching",
    "save_pretrained": "filterformer.patching",
    "from_pretrained": "filterformer.patching",
    "diagnose": "filterformer.diagnostics",
    "load_run": "filterformer.training.run_model",
    "LoadedRun": "filterformer.training.run_model",
}

__all__ = [
    "CausalLM",
    "MethodSpec",
    "SequenceClassifier",
    "Transformer",
    "TransformerConfig",
    "attention_names",
    "build_attention",
    "register_attention",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'filterformer' has no attribute {name!r}")
