"""The three model heads on a tiny backbone, with a padded batch and labels for each."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from filterformer.models import CausalLM, SequenceClassifier, SequenceRegressor

from ..models.helpers import VOCAB, config
from .batches import BATCH, LENGTH, padding_mask, token_ids
from .methods import CAUSAL_METHODS, METHODS

MODELS = ("classifier", "causal_lm", "regressor")
CLASSES, FEATURES = 3, 5
#: The regressor's target scale, away from 0 and 1 so that standardising acts.
TARGET_MEAN, TARGET_STD = 2.5, 0.7

#: (model, method) pairs the tier runs: the causal LM takes the causal methods only.
MODEL_METHODS = [
    (model, method) for model in MODELS for method in METHODS
    if model != "causal_lm" or method in CAUSAL_METHODS
]


def build_model(model: str, method: str) -> nn.Module:
    """A float32 ``model`` (one of :data:`MODELS`) with ``method``'s changes."""
    changes = METHODS[method]
    if model == "classifier":
        return SequenceClassifier(config(**changes), num_classes=CLASSES)
    if model == "causal_lm":
        return CausalLM(config(causal=True, **changes))
    if model == "regressor":
        backbone = config(vocab_size=None, input_dim=FEATURES, **changes)
        return SequenceRegressor(backbone, target_mean=TARGET_MEAN, target_std=TARGET_STD)
    raise ValueError(f"model must be one of {MODELS}; got {model!r}")


def model_batch(model: str) -> tuple[dict[str, Any], Tensor]:
    """The keyword inputs (labels included) of ``model`` and where its tokens are real
    ``(B, N)``: token ids (features for the regressor), left padding for the causal LM."""
    mask = padding_mask(left=model == "causal_lm")
    if model == "classifier":
        inputs = {"input_ids": token_ids(), "labels": torch.randint(0, CLASSES, (BATCH,))}
    elif model == "causal_lm":
        labels = torch.randint(0, VOCAB, (BATCH, LENGTH)).masked_fill(~mask, -100)
        inputs = {"input_ids": token_ids(), "labels": labels}
    else:
        inputs = {
            "inputs": torch.randn(BATCH, LENGTH, FEATURES, dtype=torch.float64),
            "labels": TARGET_MEAN + TARGET_STD * torch.randn(BATCH, dtype=torch.float64),
        }
    return {**inputs, "padding_mask": mask}, mask


def model_outputs(model: nn.Module, inputs: dict[str, Any]) -> dict[str, Tensor]:
    """The model's predictions (logits, or the regressor's values) and loss."""
    out = model(**inputs)
    predictions = out.predictions if isinstance(model, SequenceRegressor) else out.logits
    return {"predictions": predictions, "loss": out.loss}
