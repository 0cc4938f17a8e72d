"""Layer fusion: combine every layer's output before the task head (Shi et al., ICLR 2022).

METHODS.md §5. Deep Transformers over-smooth; fusing all layers lets the head see the earlier,
less smooth representations.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["FUSION_MODES", "LayerFusion"]

FUSION_MODES = ("concat", "max", "gate")


class LayerFusion(nn.Module):
    """Fuse L layer outputs ``H_1..H_L`` (each ``(B, N, D)``) into one ``(B, N, D)``.

    Modes:
        ``concat``: ``Linear(L·D → D)`` over the concatenated layers, initialised to return the
            last layer unchanged (a pretrained model is unchanged at init).
        ``max``: elementwise max over layers; no parameters.
        ``gate``: per token t, ``α_{t,l} = softmax_l(g(H_{l,t}))`` with ``g = Linear(D → 1)``
            shared across layers; output ``Σ_l α_{t,l} H_{l,t}``.

    Args:
        mode: one of ``FUSION_MODES``.
        dim: width D.
        num_layers: L, the number of tensors fused (include the embeddings if you pass them).
    """

    def __init__(self, mode: str, dim: int, num_layers: int) -> None:
        super().__init__()
        if mode not in FUSION_MODES:
            raise ValueError(f"fusion mode must be one of {FUSION_MODES}; got {mode!r}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1; got {num_layers}")
        self.mode = mode
        self.dim = dim
        self.num_layers = num_layers
        if mode == "concat":
            self.linear = nn.Linear(num_layers * dim, dim)
            with torch.no_grad():
                self.linear.weight.zero_()
                self.linear.weight[:, -dim:] = torch.eye(dim)
                self.linear.bias.zero_()
        elif mode == "gate":
            self.gate = nn.Linear(dim, 1)

    def forward(self, layers: Sequence[Tensor]) -> Tensor:
        """Fuse ``layers`` (L tensors ``(B, N, D)``, in depth order) into ``(B, N, D)``."""
        if len(layers) != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layer outputs; got {len(layers)}")
        if self.mode == "concat":
            return self.linear(torch.cat(list(layers), dim=-1))
        stacked = torch.stack(list(layers), dim=-2)  # (B, N, L, D)
        if self.mode == "max":
            return stacked.amax(dim=-2)
        weights = self.gate(stacked).softmax(dim=-2)  # (B, N, L, 1)
        return (weights * stacked).sum(dim=-2)

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, dim={self.dim}, num_layers={self.num_layers}"
