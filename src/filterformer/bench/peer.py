"""The peer of the whole-model benchmark: x-transformers' ``Encoder`` shaped like ours.

Matched to :class:`~filterformer.models.Transformer` with ``qkv_bias=False`` and no positional
encoding: same width, depth, heads, head width, MLP ratio (GELU, biased), pre-LN with a final
norm, attention through PyTorch's fused ``scaled_dot_product_attention`` (``attn_flash=True``,
x-transformers' fastest path; without it, it forms the attention matrix). What still differs is
x-transformers' choice, not ours to change: its LayerNorms and its attention output projection
have no bias (``depth·3·D + D`` parameters fewer), and q, k, v are three projections, not one.
"""

from __future__ import annotations

from torch import nn

__all__ = ["PeerUnavailable", "xtransformers_encoder"]


class PeerUnavailable(RuntimeError):
    """The peer library is not installed; the benchmark records the configuration as skipped."""


def xtransformers_encoder(dim: int, depth: int, heads: int, mlp_ratio: float) -> nn.Module:
    """x-transformers' ``Encoder`` of the given shape: ``(B, N, dim)`` -> ``(B, N, dim)``.

    Args:
        dim: width D.
        depth: blocks.
        heads: attention heads (head width ``dim // heads``).
        mlp_ratio: MLP inner width over D.

    Raises:
        PeerUnavailable: when x-transformers is not installed.
    """
    try:
        from x_transformers import Encoder
    except ImportError as err:
        raise PeerUnavailable(
            "x-transformers is not installed (pip install 'filterformer[bench]')"
        ) from err
    return Encoder(
        dim=dim,
        depth=depth,
        heads=heads,
        attn_dim_head=dim // heads,
        ff_mult=mlp_ratio,
        attn_flash=True,
    )
