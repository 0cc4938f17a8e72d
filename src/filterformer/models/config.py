"""The configuration of a :class:`~filterformer.models.Transformer`."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..attention import get_attention_class
from ..checks import (
    check_choice,
    check_finite_numbers,
    check_integer,
    check_positive,
    check_probability,
)
from ..functional.neutreno import check_neutreno_lambda
from ..jsonsafe import reject_unknown_fields
from ..nn import FUSION_MODES, NORM_POSITIONS, POSITIONS

__all__ = ["TransformerConfig"]


@dataclass
class TransformerConfig:
    """Everything that shapes a Transformer; one dataclass, checked on construction.

    Attributes:
        dim: model width D.
        depth: number of blocks L.
        num_heads: attention heads h (D divisible by h).
        mlp_ratio: MLP inner width over D.
        dropout: dropout in embeddings, MLPs and after attention projections.
        attn_dropout: dropout on attention probabilities.
        qkv_bias: bias on the q/k/v projection.
        norm: ``"pre"`` or ``"post"`` LayerNorm.
        norm_eps: LayerNorm epsilon.
        causal: causal (decoder) or bidirectional (encoder).
        attention: the attention method (a registry name: ``softmax``, ``gfsa``, ``agf``, …).
        attention_options: keyword options of that method (e.g. ``{"K": 3}`` for GFSA).
        attention_layers: 0-based indices of the blocks that use ``attention``; the others use
            softmax. None means every block (GFSA's "even-numbered layers" are ``(1, 3, 5, …)``).
        neutreno_lambda: NeuTRENO's λ on every attention layer, a finite number >= 0 (the papers
            use (0, 1]; 0 disables it).
        neutreno_learnable: learn λ per head, initialised to ``neutreno_lambda``.
        neutreno_warmup: for a pretrained run's NeuTRENO patch only: the optimiser steps over
            which λ rises from 0, so that the patched model starts as the pretrained one
            (:mod:`~filterformer.patching.neutreno_warmup`). A model trained from scratch has
            no earlier outputs to keep and refuses any value but 0.
        fusion: fuse every layer's output before the head: None, ``concat``, ``max`` or ``gate``.
        fusion_include_embeddings: also fuse the embedding output H_0.
        vocab_size: token vocabulary, for ``input_ids`` inputs.
        input_dim: features per token, for continuous ``inputs``.
        max_len: the longest sequence.
        position: ``"learned"``, ``"sinusoidal"`` or ``"none"`` positional encoding.
    """

    dim: int = 128
    depth: int = 4
    num_heads: int = 4
    mlp_ratio: float = 4.0
    dropout: float = 0.0
    attn_dropout: float = 0.0
    qkv_bias: bool = True
    norm: str = "pre"
    norm_eps: float = 1e-5
    causal: bool = False
    attention: str = "softmax"
    attention_options: dict[str, Any] = field(default_factory=dict)
    attention_layers: tuple[int, ...] | None = None
    neutreno_lambda: float = 0.0
    neutreno_learnable: bool = False
    neutreno_warmup: int = 0
    fusion: str | None = None
    fusion_include_embeddings: bool = False
    vocab_size: int | None = None
    input_dim: int | None = None
    max_len: int = 512
    position: str = "learned"

    def __post_init__(self) -> None:
        for name in ("dim", "depth", "num_heads", "max_len"):
            check_integer(name, getattr(self, name))
        if self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")
        for name in ("dropout", "attn_dropout"):
            check_probability(name, getattr(self, name))
        for name in ("mlp_ratio", "norm_eps"):
            check_positive(name, getattr(self, name))
        if not 1 <= self.dim * self.mlp_ratio < 2**63:
            raise ValueError(f"mlp_ratio × dim is the MLP's inner width, a whole number from 1 "
                             f"to 2**63; got {self.mlp_ratio} × {self.dim}")
        check_choice("norm", self.norm, NORM_POSITIONS)
        check_choice("position", self.position, POSITIONS)
        if self.fusion is not None:
            check_choice("fusion", self.fusion, FUSION_MODES)
        get_attention_class(self.attention)  # raises with the valid names
        if self.attention_layers is not None:
            self.attention_layers = _layer_indices(self.attention_layers, self.depth)
        for name in ("vocab_size", "input_dim"):
            check_integer(name, getattr(self, name), optional=True)
        check_neutreno_lambda(self.neutreno_lambda)
        check_integer("neutreno_warmup", self.neutreno_warmup, minimum=0)
        if self.neutreno_warmup:
            raise ValueError(
                f"neutreno_warmup={self.neutreno_warmup} raises λ from 0 in a pretrained model's "
                "NeuTRENO patch (a run with pretrained set); a model trained from scratch has no "
                "pretrained outputs to keep: leave neutreno_warmup at 0"
            )
        # Each method checks its options' meaning when built; no option may be NaN or infinite.
        self.attention_options = check_finite_numbers("attention_options",
                                                      dict(self.attention_options))

    def layer_attention(self, index: int) -> tuple[str, dict[str, Any]]:
        """The attention method and options of block ``index``."""
        if self.attention_layers is None or index in self.attention_layers:
            return self.attention, self.attention_options
        return "softmax", {}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for checkpoints and config files)."""
        data = dataclasses.asdict(self)
        # Always 0 here (pretrained runs only): left out, so configs written before the field
        # existed (checkpoints being resumed) read the same.
        del data["neutreno_warmup"]
        if data["attention_layers"] is not None:
            data["attention_layers"] = list(data["attention_layers"])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransformerConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise ValueError listing the valid ones."""
        reject_unknown_fields(cls, data)
        return cls(**data)



def _layer_indices(layers: Any, depth: int) -> tuple[int, ...]:
    """``attention_layers`` as a tuple of ints in ``0..depth-1`` (numpy integers included)."""
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
        raise ValueError(
            f"attention_layers must be a list of 0-based block indices; got {layers!r}"
        )
    layers = tuple(layers)
    bad = [i for i in layers if isinstance(i, bool) or not _is_index(i) or not 0 <= i < depth]
    if bad:
        raise ValueError(f"attention_layers must be 0-based indices in 0..{depth - 1}; got {bad}")
    return tuple(operator.index(i) for i in layers)


def _is_index(value: Any) -> bool:
    try:
        operator.index(value)
    except TypeError:
        return False
    return True
