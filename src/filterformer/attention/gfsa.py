"""GFSA: graph-filter self-attention (Choi et al., NeurIPS 2024; METHODS.md §1)."""

from __future__ import annotations

from collections.abc import Iterable

from torch import Tensor

from ..functional import efficient_feature_maps
from ..methods import GFSA_ORDER
from .base import AttentionBase, AttentionInputs
from .context import AttentionMaps
from .graph_filter import GFSA_COEFFICIENTS, GraphFilter
from .registry import register_attention

__all__ = ["GFSA_COEFFICIENTS", "GraphFilterAttention"]


@register_attention("gfsa")
class GraphFilterAttention(AttentionBase, GraphFilter):
    """Attention as the learned graph filter ``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))``.

    Per head, ``w0, w1, wK`` start at 0, 1, 0, so the layer equals its base attention at init.
    The default path makes two fused attention calls (``Y1 = ĀV``, ``Y2 = ĀY1``) and never forms
    an N×N matrix. Attention dropout cannot be shared by two fused calls, so ``attn_drop`` is
    applied to the filtered output instead. The filter itself (coefficients, options, response)
    is the :class:`~filterformer.attention.graph_filter.GraphFilter` this module owns.

    Args:
        dim: model width D.
        num_heads: heads h; D must be divisible by h.
        qkv_bias: bias on the fused q/k/v projection.
        attn_drop: dropout on the filtered output (see above).
        proj_drop: dropout after the output projection.
        causal: whether the layer is causal (``base="softmax"`` only).
        neutreno_lambda: NeuTRENO's λ (METHODS.md §2); 0 disables the term.
        neutreno_learnable: learn a per-head λ initialised to ``neutreno_lambda``.
        K: the filter order (≥ 2) approximated by the Taylor stand-in for ``Ā^K``.
        learn: which of ``"w0"``, ``"w1"``, ``"wK"`` are learned; the others are fixed buffers
            (the reference implementation learns only ``wK``).
        exact_power: use the true ``Ā^K V`` (K chained calls) instead of the Taylor stand-in.
        base: ``"softmax"`` or ``"efficient"`` (Efficient Attention, linear in N, non-causal).
    """

    options = ("K", "learn", "exact_power", "base", *AttentionBase.options)

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        *,
        causal: bool = False,
        neutreno_lambda: float = 0.0,
        neutreno_learnable: bool = False,
        K: int = GFSA_ORDER,
        learn: Iterable[str] = tuple(GFSA_COEFFICIENTS),
        exact_power: bool = False,
        base: str = "softmax",
    ) -> None:
        super().__init__(
            dim, num_heads, qkv_bias, attn_drop, proj_drop, causal=causal,
            neutreno_lambda=neutreno_lambda, neutreno_learnable=neutreno_learnable,
        )
        self.init_graph_filter(
            num_heads, K=K, learn=learn, exact_power=exact_power, base=base, causal=causal
        )

    @property
    def key_padding_only(self) -> bool:  # type: ignore[override]
        """The efficient base masks only keys."""
        return self.base == "efficient"

    def attend(self, q: Tensor, k: Tensor, v: Tensor, inputs: AttentionInputs) -> Tensor:
        return self.graph_filter(
            q, k, v, attn_mask=inputs.attn_mask, key_padding_mask=inputs.padding_mask,
            is_causal=inputs.is_causal, scale=self.scale,
            dropout_p=self.attn_drop if self.training else 0.0, past=inputs.cache,
            query_offset=inputs.query_offset,
        )

    def filter_matrix(self, q: Tensor, k: Tensor, inputs: AttentionInputs) -> AttentionMaps:
        if self.base == "efficient":
            rho_q, rho_k = efficient_feature_maps(q, k, inputs.padding_mask)
            attn = rho_q @ rho_k.transpose(-1, -2)
        else:
            attn = self._explicit_attention(q, k, inputs)
        return AttentionMaps(attention=attn, filter=self.filter_of(attn))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, {self.graph_filter_repr()}"
