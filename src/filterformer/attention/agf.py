"""AGF: attentive graph filter in the singular-value domain (Wi et al.; METHODS.md §3)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import check_choice, check_integer
from ..functional import (
    POLYNOMIAL_BASES,
    agf_coefficients,
    agf_factors,
    agf_filter,
    agf_response,
)
from ..functional.agf_triton import agf_layer_for
from ..functional.polynomials import NAMED_JACOBI_PARAMETERS, check_jacobi_parameters
from ..optim import exclude_from_weight_decay
from .base import AttentionBase, AttentionInputs, autocast_dtype, split_heads
from .context import AttentionMaps
from .registry import register_attention

__all__ = ["AGF_AUX_LOSS", "AttentiveGraphFilterAttention"]

#: The name under which AGF layers add their orthogonality regulariser to the model's aux loss.
AGF_AUX_LOSS = "agf_orthogonality"


@register_attention("agf")
class AttentiveGraphFilterAttention(AttentionBase):
    """Attention as a learned, token-specific filter of learned singular values.

    Per head, with ``U = ρq(Q)`` and ``Vs = ρk(K)`` (Efficient Attention's feature maps),
    ``S = sigmoid(X W_Σ)`` and ``G = Σ_{k=0..K} θ_k P_k(S)``, the output is
    ``(U ⊙ G)(Vsᵀ V)``: ``O(N·d²)`` time, nothing N×N. ``θ_0 = 1`` and ``θ_k = tanh(p_k)`` with
    ``p`` initialised to 0 (one set per layer, shared by heads), so at init AGF is exactly
    Efficient Attention.

    Every forward in training adds the orthogonality regulariser ``mean|UᵀU − I| + mean|VsᵀVs −
    I|`` to the context's auxiliary losses under :data:`AGF_AUX_LOSS` with weight γ; the model
    averages it over layers and adds it to its loss. In evaluation it is not formed (it is a
    training term only; the metrics of evaluation leave auxiliary losses out), so a model in
    ``eval()`` reports no auxiliary loss and its loss is the task's. Under autocast its feature
    maps and filter run in float32 and its matrix products in the autocast dtype. There is no
    probability matrix to drop out of: ``attn_drop`` is applied to the filtered output.
    Non-causal only; masks only keys: a ``padding_mask``, or an ``attn_mask`` of shape
    ``(B, 1, 1, N)``.

    Args:
        dim: model width D.
        num_heads: heads h; D must be divisible by h.
        qkv_bias: bias on the fused q/k/v projection (and on the singular values' projection).
        attn_drop: dropout on the filtered output (see above).
        proj_drop: dropout after the output projection.
        causal: must be False (AGF is non-causal only).
        neutreno_lambda: NeuTRENO's λ (METHODS.md §2); 0 disables the term.
        neutreno_learnable: learn a per-head λ initialised to ``neutreno_lambda``.
        K: the highest polynomial order (≥ 1).
        basis: one of ``"jacobi"``, ``"legendre"``, ``"chebyshev"``, ``"monomial"``.
        a, b: the Jacobi parameters (``basis="jacobi"`` only).
        orthogonality_weight: γ, the regulariser's weight in the model's training loss (0
            disables it).
    """

    supports_causal = False
    key_padding_only = True
    options = ("K", "basis", "a", "b", "orthogonality_weight", *AttentionBase.options)

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
        K: int = 5,
        basis: str = "jacobi",
        a: float = 1.0,
        b: float = 1.0,
        orthogonality_weight: float = 0.01,
    ) -> None:
        check_choice("basis", basis, POLYNOMIAL_BASES)
        check_integer("K", K, hint=" (the paper's default is 5)")
        if basis == "jacobi":
            check_jacobi_parameters(K, a, b)
        a, b = NAMED_JACOBI_PARAMETERS.get(basis, (float(a), float(b)))
        if isinstance(orthogonality_weight, bool) or not isinstance(
                orthogonality_weight, (int, float)) or not 0 <= orthogonality_weight < math.inf:
            raise ValueError(f"orthogonality_weight must be a finite number >= 0; got "
                             f"{orthogonality_weight}")
        super().__init__(
            dim, num_heads, qkv_bias, attn_drop, proj_drop, causal=causal,
            neutreno_lambda=neutreno_lambda, neutreno_learnable=neutreno_learnable,
        )
        self.K = K
        self.basis = basis
        self.a, self.b = a, b
        self.orthogonality_weight = float(orthogonality_weight)
        # W_Σ: the singular values' projection, one per layer like W_U (q) and W_V (k).
        self.singular_values = nn.Linear(dim, dim, bias=self.qkv.bias is not None)
        self.p = exclude_from_weight_decay(nn.Parameter(torch.zeros(K)))

    @property
    def theta(self) -> Tensor:
        """``(K+1,)`` the filter coefficients ``[1, tanh(p_1), …, tanh(p_K)]``."""
        return agf_coefficients(self.p)

    def _singular_logits(self, inputs: AttentionInputs) -> Tensor:
        """``X W_Σ`` split into heads, ``(B, h, N, d)``: a projection like W_U and W_V, in their
        precision (under autocast, half precision; the sigmoid and the filter run wider)."""
        return split_heads(self.singular_values(inputs.x), self.num_heads)

    def _factors(
        self, q: Tensor, k: Tensor, inputs: AttentionInputs
    ) -> tuple[Tensor, Tensor, Tensor]:
        """U, Vs and G, each ``(B, h, N, d)``, in at least float32."""
        return agf_factors(
            q, k, self._singular_logits(inputs), self.theta, inputs.padding_mask,
            basis=self.basis, a=self.a, b=self.b,
        )

    def attend(self, q: Tensor, k: Tensor, v: Tensor, inputs: AttentionInputs) -> Tensor:
        logits = self._singular_logits(inputs)
        # Under autocast the products over tokens run in its half precision, as autocast would
        # run them; the feature maps and polynomials of S, which lose too much there, do not.
        products = autocast_dtype(q)
        with torch.autocast(device_type=q.device.type, enabled=False):
            out, reg = agf_layer_for(
                q, k, v, logits, self.theta,
                inputs.padding_mask, basis=self.basis, a=self.a, b=self.b,
                orthogonality=self.training and self.orthogonality_weight > 0,
                products_dtype=products,
            )
        if reg is not None:
            inputs.context.add_aux_loss(AGF_AUX_LOSS, reg, self.orthogonality_weight)
        return F.dropout(out.to(v.dtype), self.attn_drop, self.training)

    def filter_matrix(self, q: Tensor, k: Tensor, inputs: AttentionInputs) -> AttentionMaps:
        """``Ā = U Vsᵀ`` and the filter ``(U ⊙ G) Vsᵀ``, ``(B, h, N, N)`` each (small N only)."""
        rho_q, rho_k, g = self._factors(q, k, inputs)
        with torch.autocast(device_type=q.device.type, enabled=False):
            attention = rho_q @ rho_k.transpose(-1, -2)
            return AttentionMaps(attention=attention, filter=agf_filter(rho_q, rho_k, g))

    def filter_response(self, sigma: Tensor) -> Tensor:
        """The filter's response ``G(σ) = Σ_k θ_k P_k(σ)`` at singular values σ (METHODS.md §3).

        Args:
            sigma: ``(M,)`` singular values in ``[0, 1]``; θ is taken to its dtype and device.

        Returns:
            ``(1, M)``, one curve shared by every head:
            :func:`~filterformer.functional.agf_response` of this layer's θ, basis and Jacobi
            parameters.
        """
        theta = self.theta.to(sigma)
        return agf_response(sigma, theta, basis=self.basis, a=self.a, b=self.b).unsqueeze(0)

    def extra_repr(self) -> str:
        basis = f"jacobi(a={self.a}, b={self.b})" if self.basis == "jacobi" else self.basis
        return (
            f"{super().extra_repr()}, K={self.K}, basis={basis}, "
            f"orthogonality_weight={self.orthogonality_weight}"
        )
