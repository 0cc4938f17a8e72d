"""A Transformer block around any attention method: pre-LN or post-LN."""

from __future__ import annotations

from torch import Tensor, nn

from ..attention import AttentionBase, AttentionContext, LayerCache
from .mlp import Mlp

__all__ = ["NORM_POSITIONS", "TransformerBlock"]

NORM_POSITIONS = ("pre", "post")


class TransformerBlock(nn.Module):
    """Attention and MLP sub-layers with residual connections and LayerNorm.

    pre-LN:  ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``.
    post-LN: ``norm1(x + attn(x))``, then ``norm2(x + mlp(x))`` (the original Transformer and
    BERT; the layer-norm paper's σ1, σ2 are the smallest per-token input std of the two norms).

    Args:
        dim: width D.
        attention: the attention module (any :class:`AttentionBase`).
        mlp_ratio: MLP inner width over D.
        dropout: MLP dropout.
        norm: ``"pre"`` or ``"post"``.
        norm_eps: LayerNorm epsilon.
    """

    def __init__(
        self,
        dim: int,
        attention: AttentionBase,
        *,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        norm: str = "pre",
        norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if norm not in NORM_POSITIONS:
            raise ValueError(f"norm must be one of {NORM_POSITIONS}; got {norm!r}")
        self.norm_position = norm
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = attention
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), dropout)

    def forward(
        self,
        x: Tensor,
        *,
        padding_mask: Tensor | None = None,
        context: AttentionContext | None = None,
        cache: LayerCache | None = None,
    ) -> Tensor:
        """``(B, N, D)`` -> ``(B, N, D)``; see :meth:`AttentionBase.forward` for the arguments."""
        attend = dict(padding_mask=padding_mask, context=context, cache=cache)
        if self.norm_position == "pre":
            x = x + self.attn(self.norm1(x), residual=x, **attend)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x, **attend))
        return self.norm2(x + self.mlp(x))
