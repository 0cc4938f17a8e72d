"""Sequence regression on top of a :class:`Transformer`: one real value per sequence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import AttentionMaps
from ..nn import SequencePooling
from .config import TransformerConfig
from .saved_model import SavesPretrained
from .transformer import Transformer

__all__ = ["RegressionOutput", "SequenceRegressor"]


@dataclass
class RegressionOutput:
    """Attributes:
    predictions: ``(B,)`` in the target's units.
    loss: ``mse`` plus the backbone's auxiliary loss, when targets are given.
    mse: mean squared error of the standardised prediction against the standardised target
        (no auxiliary loss), when targets are given.
    aux_loss: the backbone's auxiliary loss, or None.
    hidden_states, attention_maps: as :class:`~filterformer.models.TransformerOutput`.
    """

    predictions: Tensor
    loss: Tensor | None = None
    mse: Tensor | None = None
    aux_loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attention_maps: tuple[AttentionMaps, ...] | None = None


class SequenceRegressor(nn.Module, SavesPretrained):
    """Transformer, pooling over real tokens, then a linear head with one output.

    The head predicts the standardised target ``z = (y − target_mean) / target_std`` and is
    trained with the mean squared error on ``z``, so the loss has the same scale whatever the
    target's units; :attr:`RegressionOutput.predictions` is ``z · target_std + target_mean``, in
    the target's units. ``target_mean`` and ``target_std`` are buffers: a checkpoint keeps them.

    Args:
        config: the backbone's :class:`TransformerConfig`.
        pooling: ``"mean"``, ``"first"`` or ``"attention"``.
        target_mean: the training targets' mean.
        target_std: the training targets' standard deviation (positive).
    """

    #: Values predicted per sequence.
    num_outputs = 1

    def __init__(
        self,
        config: TransformerConfig,
        pooling: str = "mean",
        *,
        target_mean: float = 0.0,
        target_std: float = 1.0,
    ) -> None:
        super().__init__()
        if not (math.isfinite(target_mean) and math.isfinite(target_std) and target_std > 0):
            raise ValueError(f"target_mean must be finite and target_std positive and finite; "
                             f"got {target_mean!r} and {target_std!r}")
        self.config = config
        self.transformer = Transformer(config)
        self.pool = SequencePooling(pooling, config.dim)
        self.head = nn.Linear(config.dim, self.num_outputs)
        self.register_buffer("target_mean", torch.tensor(float(target_mean)))
        self.register_buffer("target_std", torch.tensor(float(target_std)))

    def pretrained_arguments(self) -> dict[str, Any]:
        return {"pooling": self.pool.mode, "target_mean": self.target_mean.item(),
                "target_std": self.target_std.item()}

    def standardize(self, targets: Tensor) -> Tensor:
        """``(targets − target_mean) / target_std``, any shape."""
        return (targets - self.target_mean) / self.target_std

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
    ) -> RegressionOutput:
        """Predict; inputs as :meth:`Transformer.forward`, ``labels`` ``(B,)`` float targets in
        their own units."""
        out = self.transformer(
            input_ids, inputs=inputs, inputs_embeds=inputs_embeds, padding_mask=padding_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        standardized = self.head(self.pool(out.last_hidden_state, padding_mask)).squeeze(-1)
        loss = mse = None
        if labels is not None:
            mse = F.mse_loss(standardized.float(), self.standardize(labels.float()))
            loss = mse if out.aux_loss is None else mse + out.aux_loss
        return RegressionOutput(
            predictions=standardized.float() * self.target_std + self.target_mean, loss=loss,
            mse=mse, aux_loss=out.aux_loss, hidden_states=out.hidden_states,
            attention_maps=out.attention_maps,
        )
