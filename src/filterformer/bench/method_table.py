"""The benchmarked methods: what one step runs and what it is compared with.

Kernels call the library's kernels and are compared with ``sdpa``; attention modules and models
are built from the presets of :mod:`filterformer.methods` and compared with ``softmax-module``
and ``model-softmax`` (ours with x-transformers' ``Encoder``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from ..attention import build_attention
from ..functional import attend, attention_matrix, efficient_attention, gfsa, gfsa_filter
from ..methods import GFSA_ORDER, NEUTRENO_LAMBDA, apply_method
from ..models import Transformer, TransformerConfig
from .step_cases import BenchCase, BenchShape, CaseBuilder, kernel_case, model_case, module_case

__all__ = ["BENCH_METHODS", "BenchMethod", "PeerUnavailable", "build_case", "explicit_gfsa",
           "get_method", "method_names", "preset_module", "xtransformers_encoder"]


@dataclass(frozen=True, kw_only=True)
class BenchMethod:
    """One benchmarked method: its ``name`` (command line, ``bench.json``), ``level`` (``kernel``,
    ``module``, ``model``), what one step runs (``timed``), its cases (``build``), the method it
    is compared with (``baseline``) and, where its memory grows too fast to try, the ``longest``
    N a run measures in each mode."""

    name: str
    level: str
    timed: str
    build: CaseBuilder
    baseline: str | None = None
    longest: dict[str, int] = field(default_factory=dict)


def explicit_gfsa(
    q: Tensor, k: Tensor, v: Tensor, w0: Tensor, w1: Tensor, wK: Tensor, *, K: int
) -> Tensor:
    """GFSA as its authors' code computes it, a benchmark reference: ``A = softmax(QKᵀ/√d)`` and
    ``A·A`` formed, ``H̃ = w0·I + w1·A + wK·(A + (K−1)(A·A − A))``, returning ``H̃V``.

    q, k, v: ``(B, h, N, d)``; w0, w1, wK: ``(h,)``; returns ``(B, h, N, d)``, equal to
    ``gfsa(q, k, v, w0, w1, wK, K=K)`` up to rounding.
    """
    return gfsa_filter(attention_matrix(q, k), w0, w1, wK, K=K) @ v


class PeerUnavailable(RuntimeError):
    """x-transformers is not installed; the configuration is recorded as skipped."""


def xtransformers_encoder(dim: int, depth: int, heads: int, mlp_ratio: float) -> nn.Module:
    """x-transformers' ``Encoder`` shaped like our model, ``(B, N, dim)`` -> ``(B, N, dim)``,
    with fused SDPA (``attn_flash=True``); by its design its LayerNorms and attention output
    projection have no bias (``depth·3·D + D`` parameters fewer)."""
    try:
        from x_transformers import Encoder
    except ImportError as err:
        message = "x-transformers is not installed (pip install 'filterformer[bench]')"
        raise PeerUnavailable(message) from err
    return Encoder(dim=dim, depth=depth, heads=heads, attn_dim_head=dim // heads,
                   ff_mult=mlp_ratio, attn_flash=True)


def _gfsa(**options: object) -> CaseBuilder:
    return kernel_case(partial(gfsa, K=GFSA_ORDER, **options), coefficients=True)


def preset_module(preset: str, **options: object) -> CaseBuilder:
    """Cases of the attention module that method ``preset`` puts in every block."""
    changes = apply_method({"attention_options": options}, preset)
    return module_case(lambda shape: build_attention(
        changes.get("attention", "softmax"), shape.width, shape.heads,
        neutreno_lambda=changes.get("neutreno_lambda", 0.0), **changes["attention_options"],
    ))


def _preset_model(preset: str, **options: object) -> CaseBuilder:
    """Cases of our Transformer (pre-LN, no qkv bias, no positions) with method ``preset``."""

    def model(shape: BenchShape, N: int) -> nn.Module:
        fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
                  "mlp_ratio": shape.mlp_ratio, "qkv_bias": False, "norm": "pre",
                  "position": "none", "max_len": N, "attention_options": options}
        return Transformer(TransformerConfig(**apply_method(fields, preset)))

    def forward(model: nn.Module, x: Tensor) -> list[Tensor]:
        out = model(inputs_embeds=x)
        return [out.last_hidden_state] + ([] if out.aux_loss is None else [out.aux_loss])

    return model_case(model, forward)


def _samsa(mode: str, k: int) -> BenchMethod:
    return BenchMethod(name=f"samsa-{mode}-k{k}", level="module", baseline="softmax-module",
                       build=preset_module(f"samsa_{mode}", num_samples=k),
                       timed=f"SAMSA module ({mode}, k={k}): projections, importance-score MLP, "
                       "top-k sampling, attention of N queries to k keys")


BENCH_METHODS: dict[str, BenchMethod] = {method.name: method for method in (
    BenchMethod(name="sdpa", level="kernel", build=kernel_case(attend),
                timed="attend(q, k, v): one fused scaled-dot-product attention call"),
    BenchMethod(name="gfsa", level="kernel", baseline="sdpa", build=_gfsa(),
                timed=f"gfsa(K={GFSA_ORDER}): two fused attention calls (ĀV, Ā²V) and the "
                "filter's combination; w0, w1, wK learned"),
    BenchMethod(name="gfsa-exact", level="kernel", baseline="sdpa", build=_gfsa(exact_power=True),
                timed=f"gfsa(K={GFSA_ORDER}, exact_power=True): Ā^K V by {GFSA_ORDER} chained "
                "fused calls"),
    BenchMethod(name="gfsa-efficient", level="kernel", baseline="sdpa",
                build=_gfsa(base="efficient"), timed=f"gfsa(K={GFSA_ORDER}, base='efficient'): "
                "powers of Efficient Attention, O(N·d²)"),
    # Its forward holds about five (B, h, N, N) float32 matrices at once: 2 GiB each at N=8192
    # (B=2, h=4), 10 GiB in all; 40 GiB at N=16384. Training keeps more for the backward.
    BenchMethod(name="gfsa-explicit", level="kernel", baseline="sdpa",
                longest={"train": 4096, "inference": 8192},
                build=kernel_case(partial(explicit_gfsa, K=GFSA_ORDER), coefficients=True),
                timed="the GFSA authors' formulation: A = softmax(QKᵀ/√d) and A·A materialised, "
                "H̃ = w0·I + w1·A + wK·(A + (K−1)(A·A − A)), H̃V"),
    BenchMethod(name="efficient", level="kernel", baseline="sdpa",
                build=kernel_case(efficient_attention),
                timed="efficient_attention(q, k, v): ρq(Q)(ρk(K)ᵀV), O(N·d²)"),
    BenchMethod(name="softmax-module", level="module", build=preset_module("softmax"),
                timed="SoftmaxAttention: qkv projection, SDPA, output projection"),
    BenchMethod(name="neutreno", level="module", baseline="softmax-module",
                build=preset_module("neutreno"),
                timed=f"SoftmaxAttention with neutreno_lambda={NEUTRENO_LAMBDA}: softmax-module "
                "plus λ(V⁰ − V), same context and inputs"),
    BenchMethod(name="agf", level="module", baseline="softmax-module", build=preset_module("agf"),
                timed="AGF module (K=5, Jacobi a=b=1): projections incl. W_Σ, (U⊙G)(VsᵀV), and "
                "the orthogonality regulariser joins the loss"),
    *(_samsa(mode, k) for mode in ("soft", "hard") for k in (128, 256)),
    BenchMethod(name="model-softmax", level="model", baseline="model-xtransformers",
                build=_preset_model("softmax"), timed="our Transformer (softmax, pre-LN, no qkv "
                "bias, no positions) on embeddings"),
    BenchMethod(name="model-xtransformers", level="model",
                build=model_case(lambda shape, N: xtransformers_encoder(
                    shape.width, shape.depth, shape.heads, shape.mlp_ratio), lambda m, x: [m(x)]),
                timed="x-transformers Encoder of the same shape (attn_flash=True) on embeddings"),
    BenchMethod(name="model-gfsa", level="model", baseline="model-softmax",
                build=_preset_model("gfsa"),
                timed=f"our Transformer with GFSA (K={GFSA_ORDER}) in every block"),
    BenchMethod(name="model-neutreno", level="model", baseline="model-softmax",
                build=_preset_model("neutreno"),
                timed=f"our Transformer with NeuTRENO (λ={NEUTRENO_LAMBDA}) in every block"),
    BenchMethod(name="model-agf", level="model", baseline="model-softmax",
                build=_preset_model("agf"),
                timed="our Transformer with AGF in every block (+ its regulariser)"),
    BenchMethod(name="model-samsa", level="model", baseline="model-softmax",
                build=_preset_model("samsa_hard", num_samples=256),
                timed="our Transformer with SAMSA (hard, k=256) in every block"),
    BenchMethod(name="model-samsa-soft", level="model", baseline="model-softmax",
                build=_preset_model("samsa_soft", num_samples=256),
                timed="our Transformer with SAMSA (soft, k=256) in every block"),
    BenchMethod(name="model-fusion", level="model", baseline="model-softmax",
                build=_preset_model("fusion"),
                timed="our Transformer with the fusion preset (fusion='concat')"),
)}


def method_names() -> tuple[str, ...]:
    """Every benchmark method, in table order."""
    return tuple(BENCH_METHODS)


def get_method(name: str) -> BenchMethod:
    """The method ``name``; ValueError listing the valid names otherwise."""
    if name not in BENCH_METHODS:
        raise ValueError(f"unknown benchmark method {name!r}; valid choices: "
                         f"{', '.join(BENCH_METHODS)}")
    return BENCH_METHODS[name]


def build_case(name: str, shape: BenchShape, N: int, mode: str,
               device: torch.device | str = "cpu") -> BenchCase:
    """The case of method ``name`` at length ``N`` in ``mode`` on ``device``."""
    return get_method(name).build(shape, N, mode, torch.device(device))
