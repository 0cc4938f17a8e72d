"""Softmax attention: the one-term graph filter ``H = Ā`` (Vaswani et al., 2017)."""

from __future__ import annotations

from torch import Tensor

from ..functional import attend
from .base import AttentionBase, AttentionInputs
from .registry import register_attention

__all__ = ["SoftmaxAttention"]


@register_attention("softmax")
class SoftmaxAttention(AttentionBase):
    """Multi-head softmax attention through PyTorch's fused SDPA kernels.

    Drop-in for timm's ``Attention`` (same constructor and ``qkv``/``proj`` names).
    """

    def attend(self, q: Tensor, k: Tensor, v: Tensor, inputs: AttentionInputs) -> Tensor:
        return attend(
            q,
            k,
            v,
            attn_mask=inputs.attn_mask,
            key_padding_mask=inputs.padding_mask,
            is_causal=inputs.is_causal,
            dropout_p=self.attn_drop if self.training else 0.0,
            scale=self.scale,
            query_offset=inputs.query_offset,
        )
