"""GFSA's graph filter as one part that every module running GFSA owns (METHODS.md §1).

:class:`GraphFilter` is mixed into an ``nn.Module``, as PEFT's ``LoraLayer`` is into each layer
type it adapts: the native :class:`~filterformer.attention.GraphFilterAttention` and a patched
Hugging Face model's
:class:`~filterformer.patching.hf_attention.HuggingFaceAttentionPatch` both own one. It holds the
per-head coefficients ``w0, w1, wK`` (registered on the module itself, so state-dict names stay
``…w0``), the order ``K``, ``exact_power`` and the base attention, and is the only place that
checks those options, applies the filter to values, forms ``H̃`` and evaluates its response. The
kernels are :mod:`filterformer.functional.gfsa`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..functional.gfsa import GFSA_BASES, check_order, gfsa, gfsa_filter, gfsa_response
from ..methods import GFSA_ORDER
from ..optim import exclude_from_weight_decay

__all__ = [
    "GFSA_COEFFICIENTS",
    "GRAPH_FILTER_OPTIONS",
    "GraphFilter",
    "check_graph_filter_options",
]

#: The filter's coefficients and their initial values (GFSA == plain attention at init).
GFSA_COEFFICIENTS = {"w0": 0.0, "w1": 1.0, "wK": 0.0}
#: GFSA's own options and their defaults (the reference implementation learns only ``wK``; the
#: package learns all three by default).
GRAPH_FILTER_OPTIONS: dict[str, Any] = {
    "K": GFSA_ORDER, "learn": tuple(GFSA_COEFFICIENTS), "exact_power": False, "base": "softmax",
}


def check_graph_filter_options(
    options: Mapping[str, Any], *, causal: bool = False
) -> dict[str, Any]:
    """GFSA's options, checked and completed with their defaults.

    Args:
        options: any of ``K`` (≥ 2), ``learn`` (a name or names among ``w0, w1, wK``),
            ``exact_power`` (bool), ``base`` (``"softmax"`` or ``"efficient"``).
        causal: whether the filter runs in a causal model (the efficient base cannot).

    Returns:
        Every option; ``learn`` as a tuple in ``w0, w1, wK`` order.

    Raises:
        ValueError: naming the option and its valid values.
    """
    unknown = sorted(set(options) - set(GRAPH_FILTER_OPTIONS))
    if unknown:
        raise ValueError(f"unknown GFSA option(s) {unknown}; valid: {list(GRAPH_FILTER_OPTIONS)}")
    values = {**GRAPH_FILTER_OPTIONS, **options}
    values["K"] = check_order(values["K"])
    learn = values["learn"]
    names = (learn,) if isinstance(learn, str) else tuple(learn)
    bad = sorted(set(names) - set(GFSA_COEFFICIENTS))
    if bad:
        raise ValueError(
            f"learn must name coefficients among {tuple(GFSA_COEFFICIENTS)}; got {bad}"
        )
    values["learn"] = tuple(name for name in GFSA_COEFFICIENTS if name in names)
    if not isinstance(values["exact_power"], bool):
        raise ValueError(f"exact_power must be True or False; got {values['exact_power']!r}")
    if values["base"] not in GFSA_BASES:
        raise ValueError(f"base must be one of {GFSA_BASES}; got {values['base']!r}")
    if values["base"] == "efficient" and causal:
        raise ValueError("GFSA's base='efficient' is non-causal only; use base='softmax' for "
                         "causal models")
    return values


class GraphFilter:
    """``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))`` per head, for the module it is mixed into.

    Call :meth:`init_graph_filter` in the module's constructor (after ``nn.Module.__init__``).

    Attributes:
        K: the filter order approximated by the Taylor stand-in for ``Ā^K``.
        learn: the learned coefficients; the others are fixed buffers.
        exact_power: the true ``Ā^K V`` (K chained calls) instead of the stand-in.
        base: ``"softmax"`` or ``"efficient"`` (Efficient Attention, non-causal).
    """

    K: int
    learn: tuple[str, ...]
    exact_power: bool
    base: str
    w0: Tensor
    w1: Tensor
    wK: Tensor

    def init_graph_filter(
        self,
        num_heads: int,
        *,
        K: int = GFSA_ORDER,
        learn: str | Iterable[str] = tuple(GFSA_COEFFICIENTS),
        exact_power: bool = False,
        base: str = "softmax",
        causal: bool = False,
        like: Tensor | None = None,
    ) -> None:
        """Check the options and register ``w0, w1, wK``, each ``(num_heads,)``, at 0, 1, 0.

        Args:
            num_heads: query heads h.
            K, learn, exact_power, base: :func:`check_graph_filter_options`.
            causal: whether the module is causal.
            like: a tensor whose dtype and device the coefficients take (default: torch's).
        """
        options = check_graph_filter_options(
            {"K": K, "learn": learn, "exact_power": exact_power, "base": base}, causal=causal
        )
        self.K, self.learn = options["K"], options["learn"]
        self.exact_power, self.base = options["exact_power"], options["base"]
        where = {} if like is None else {"dtype": like.dtype, "device": like.device}
        for name, value in GFSA_COEFFICIENTS.items():
            init = torch.full((num_heads,), value, **where)
            if name in self.learn:
                self.register_parameter(name, exclude_from_weight_decay(nn.Parameter(init)))
            else:
                self.register_buffer(name, init)

    def graph_filter(self, q: Tensor, k: Tensor, v: Tensor, **kernel: Any) -> Tensor:
        """``H̃ V`` through :func:`~filterformer.functional.gfsa` (``(B, h, L, d_v)``).

        Args:
            q: ``(B, h, L, d)``; k: ``(B, h_kv, S, d)``; v: ``(B, h_kv, S, d_v)``.
            **kernel: the kernel's masking, scale, dropout and decoding arguments.
        """
        return gfsa(
            q, k, v, self.w0, self.w1, self.wK, K=self.K, exact_power=self.exact_power,
            base=self.base, **kernel,
        )

    def filter_of(self, attention: Tensor) -> Tensor:
        """The explicit ``H̃`` ``(B, h, N, N)`` of an explicit ``Ā`` of the same shape."""
        return gfsa_filter(
            attention, self.w0, self.w1, self.wK, K=self.K, exact_power=self.exact_power
        )

    def filter_response(self, sigma: Tensor) -> Tensor:
        """The filter's response ``g(σ)`` per head at graph frequencies σ (METHODS.md §1).

        Args:
            sigma: ``(M,)`` frequencies in ``[0, 1]``; the coefficients are taken to its dtype and
                device.

        Returns:
            ``(h, M)``: :func:`~filterformer.functional.gfsa_response` of ``w0, w1, wK``, ``K``
            and ``exact_power``.
        """
        w0, w1, wK = (w.to(sigma) for w in (self.w0, self.w1, self.wK))
        return gfsa_response(sigma, w0, w1, wK, K=self.K, exact_power=self.exact_power)

    def graph_filter_repr(self) -> str:
        return (
            f"K={self.K}, learn={self.learn}, exact_power={self.exact_power}, base={self.base!r}"
        )
