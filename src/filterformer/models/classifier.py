"""Sequence classification on top of a :class:`Transformer`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import AttentionMaps
from ..checks import check_integer
from ..nn import SequencePooling
from .config import TransformerConfig
from .saved_model import SavesPretrained
from .transformer import Transformer

__all__ = ["ClassifierOutput", "SequenceClassifier"]


@dataclass
class ClassifierOutput:
    """Attributes:
    logits: ``(B, num_classes)``.
    loss: cross-entropy plus the backbone's auxiliary loss, when labels are given.
    aux_loss: the backbone's auxiliary loss, or None.
    hidden_states, attention_maps: as :class:`~filterformer.models.TransformerOutput`.
    """

    logits: Tensor
    loss: Tensor | None = None
    aux_loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attention_maps: tuple[AttentionMaps, ...] | None = None


class SequenceClassifier(nn.Module, SavesPretrained):
    """Transformer, pooling over real tokens, then a linear head.

    Args:
        config: the backbone's :class:`TransformerConfig` (bidirectional or causal).
        num_classes: number of classes.
        pooling: ``"mean"``, ``"first"`` or ``"attention"``.
        transformer: an existing backbone to wrap instead of building one from ``config``.
    """

    def __init__(
        self,
        config: TransformerConfig,
        num_classes: int,
        pooling: str = "mean",
        transformer: nn.Module | None = None,
    ) -> None:
        super().__init__()
        check_integer("num_classes", num_classes, minimum=2)
        self.config = config
        self.num_classes = num_classes
        self.transformer = Transformer(config) if transformer is None else transformer
        self.pool = SequencePooling(pooling, config.dim)
        self.head = nn.Linear(config.dim, num_classes)

    def pretrained_arguments(self) -> dict[str, Any]:
        if not (type(self.transformer) is Transformer and self.transformer.config == self.config):
            raise ValueError(
                f"this SequenceClassifier wraps a {type(self.transformer).__name__} that is not "
                "built from its config, so it cannot be rebuilt from a saved config"
            )
        return {"num_classes": self.num_classes, "pooling": self.pool.mode}

    def forward(
        self,
        input_ids: Tensor | None = None,
        *,
        inputs: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        padding_mask: Tensor | None = None,
        labels: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> ClassifierOutput:
        """Classify; inputs as :meth:`Transformer.forward`, ``labels`` ``(B,)`` long."""
        out = self.transformer(
            input_ids, inputs=inputs, inputs_embeds=inputs_embeds, padding_mask=padding_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        logits = self.head(self.pool(out.last_hidden_state, padding_mask))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits, labels)
            if out.aux_loss is not None:
                loss = loss + out.aux_loss
        return ClassifierOutput(
            logits=logits, loss=loss, aux_loss=out.aux_loss, hidden_states=out.hidden_states,
            attention_maps=out.attention_maps,
        )
