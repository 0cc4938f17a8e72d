"""GFSA: graph-filter self-attention (Choi et al., NeurIPS 2024; METHODS.md §1)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from ..functional import GFSA_BASES, efficient_feature_maps, gfsa, gfsa_filter, gfsa_response
from ..functional.gfsa import check_order
from ..methods import GFSA_ORDER
from ..optim import exclude_from_weight_decay
from .base import AttentionBase, AttentionInputs
from .context import AttentionMaps
from .registry import register_attention

__all__ = ["GFSA_COEFFICIENTS", "GraphFilterAttention"]

#: The filter's coefficients and their initial values (GFSA == plain attention at init).
GFSA_COEFFICIENTS = {"w0": 0.0, "w1": 1.0, "wK": 0.0}


@register_attention("gfsa")
class GraphFilterAttention(AttentionBase):
    """Attention as the learned graph filter ``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))``.

    Per head, ``w0, w1, wK`` start at 0, 1, 0, so the layer equals its base attention at init.
    The default path makes two fused attention calls (``Y1 = ĀV``, ``Y2 = ĀY1``) and never forms
    an N×N matrix. Attention dropout cannot be shared by two fused calls, so ``attn_drop`` is
    applied to the filtered output instead.

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
        learn: Iterable[str] = ("w0", "w1", "wK"),
        exact_power: bool = False,
        base: str = "softmax",
    ) -> None:
        if base not in GFSA_BASES:
            raise ValueError(f"base must be one of {GFSA_BASES}; got {base!r}")
        if base == "efficient" and causal:
            raise ValueError("base='efficient' is non-causal only; use base='softmax' for causal")
        learn = (learn,) if isinstance(learn, str) else tuple(learn)
        unknown = set(learn) - set(GFSA_COEFFICIENTS)
        if unknown:
            raise ValueError(
                f"learn must name coefficients among {tuple(GFSA_COEFFICIENTS)}; "
                f"got {sorted(unknown)}"
            )
        super().__init__(
            dim, num_heads, qkv_bias, attn_drop, proj_drop, causal=causal,
            neutreno_lambda=neutreno_lambda, neutreno_learnable=neutreno_learnable,
        )
        self.K = check_order(K)
        self.exact_power = exact_power
        self.base = base
        self.learn = learn
        for name, value in GFSA_COEFFICIENTS.items():
            init = torch.full((num_heads,), value)
            if name in learn:
                self.register_parameter(name, exclude_from_weight_decay(torch.nn.Parameter(init)))
            else:
                self.register_buffer(name, init)

    @property
    def key_padding_only(self) -> bool:  # type: ignore[override]
        """The efficient base masks only keys."""
        return self.base == "efficient"

    def attend(self, q: Tensor, k: Tensor, v: Tensor, inputs: AttentionInputs) -> Tensor:
        return gfsa(
            q, k, v, self.w0, self.w1, self.wK, K=self.K, attn_mask=inputs.attn_mask,
            key_padding_mask=inputs.padding_mask, is_causal=inputs.is_causal,
            exact_power=self.exact_power, base=self.base, scale=self.scale,
            dropout_p=self.attn_drop if self.training else 0.0, past=inputs.cache,
            query_offset=inputs.query_offset,
        )

    def filter_matrix(self, q: Tensor, k: Tensor, inputs: AttentionInputs) -> AttentionMaps:
        if self.base == "efficient":
            rho_q, rho_k = efficient_feature_maps(q, k, inputs.padding_mask)
            attn = rho_q @ rho_k.transpose(-1, -2)
        else:
            attn = self._explicit_attention(q, k, inputs)
        filt = gfsa_filter(
            attn, self.w0, self.w1, self.wK, K=self.K, exact_power=self.exact_power
        )
        return AttentionMaps(attention=attn, filter=filt)

    def filter_response(self, sigma: Tensor) -> Tensor:
        """The filter's response ``g(σ)`` per head at graph frequencies σ (METHODS.md §1).

        Args:
            sigma: ``(M,)`` frequencies in ``[0, 1]``; the coefficients are taken to its dtype and
                device.

        Returns:
            ``(h, M)``: :func:`~filterformer.functional.gfsa_response` of this layer's ``w0``,
            ``w1``, ``wK``, ``K`` and ``exact_power``.
        """
        w0, w1, wK = (w.to(sigma) for w in (self.w0, self.w1, self.wK))
        return gfsa_response(sigma, w0, w1, wK, K=self.K, exact_power=self.exact_power)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, K={self.K}, learn={self.learn}, "
            f"exact_power={self.exact_power}, base={self.base!r}"
        )
