"""The benchmarked methods, a row each: kernels (against ``sdpa``), attention modules and models
built from :mod:`filterformer.methods`' presets (against ``softmax-module``, ``model-softmax``),
and, outside the default table, the targets' larger cases (decoding, a classifier, generation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from ..attention import build_attention
from ..functional import attend, attention_matrix, efficient_attention, gfsa, gfsa_filter
from ..methods import GFSA_ORDER as K
from ..methods import NEUTRENO_LAMBDA, apply_method
from ..models import Transformer, TransformerConfig
from .model_cases import GENERATED_TOKENS, TOKENS, classifier_case, decoding_case, generation_case
from .step_cases import BenchCase, BenchShape, CaseBuilder, kernel_case, model_case, module_case

__all__ = ["BENCH_METHODS", "BenchMethod", "build_case", "explicit_gfsa", "get_method",
           "method_names", "xtransformers_encoder"]


@dataclass(frozen=True)
class BenchMethod:
    """A row: ``level`` is ``kernel``, ``module`` or ``model``; ``timed``, what one step runs;
    ``longest``, per mode, the longest N tried where memory grows too fast."""

    name: str
    level: str
    build: CaseBuilder
    timed: str
    baseline: str | None = None
    longest: dict[str, int] = field(default_factory=dict)
    table: bool = True


def explicit_gfsa(
    q: Tensor, k: Tensor, v: Tensor, w0: Tensor, w1: Tensor, wK: Tensor, *, K: int
) -> Tensor:
    """GFSA as its authors' code computes it, a benchmark reference: ``A = softmax(QKᵀ/√d)`` and
    ``A·A`` formed, ``H̃ = w0·I + w1·A + wK·(A + (K−1)(A·A − A))``, returning ``H̃V``.

    q, k, v: ``(B, h, N, d)``; w0, w1, wK: ``(h,)``; returns ``(B, h, N, d)``, equal to
    ``gfsa(q, k, v, w0, w1, wK, K=K)`` up to rounding.
    """
    return gfsa_filter(attention_matrix(q, k), w0, w1, wK, K=K) @ v


def xtransformers_encoder(dim: int, depth: int, heads: int, mlp_ratio: float) -> nn.Module:
    """x-transformers' ``Encoder`` shaped like our model, with fused SDPA (by its design without
    LayerNorm and attention output biases); an ImportError (a skipped case) where missing."""
    try:
        from x_transformers import Encoder
    except ImportError as err:
        raise ImportError("x-transformers is not installed (pip install "
                          "'filterformer[bench]')") from err
    return Encoder(dim=dim, depth=depth, heads=heads, attn_dim_head=dim // heads,
                   ff_mult=mlp_ratio, attn_flash=True)


def _module(preset: str, **options: object) -> CaseBuilder:
    changes = apply_method({"attention_options": options}, preset)
    return module_case(lambda shape: build_attention(
        changes.get("attention", "softmax"), shape.width, shape.heads,
        neutreno_lambda=changes.get("neutreno_lambda", 0.0), **changes["attention_options"]))


def _model(preset: str, **options: object) -> CaseBuilder:
    """Our Transformer (pre-LN, no qkv bias, no positions) with method ``preset``."""

    def model(shape: BenchShape, N: int) -> nn.Module:
        fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
                  "mlp_ratio": shape.mlp_ratio, "qkv_bias": False, "norm": "pre",
                  "position": "none", "max_len": N, "attention_options": options}
        return Transformer(TransformerConfig(**apply_method(fields, preset)))

    def forward(model: nn.Module, x: Tensor) -> list[Tensor]:
        out = model(inputs_embeds=x)
        return [out.last_hidden_state] + ([] if out.aux_loss is None else [out.aux_loss])

    return model_case(model, forward)


def _gfsa(**options: object) -> CaseBuilder:
    return kernel_case(partial(gfsa, K=K, **options), coefficients=True)


_Kernel = partial(BenchMethod, level="kernel", baseline="sdpa")
_Module = partial(BenchMethod, level="module", baseline="softmax-module")
_Model = partial(BenchMethod, level="model", baseline="model-softmax")
_LARGER = {"bert-softmax": ("softmax", {}), "bert-gfsa": ("gfsa", {}),
           "bert-samsa-hard-k256": ("samsa_hard", {"num_samples": 256}), "bert-agf": ("agf", {})}

BENCH_METHODS: dict[str, BenchMethod] = {method.name: method for method in (
    _Kernel("sdpa", build=kernel_case(attend), baseline=None,
            timed="attend(q, k, v): one fused scaled-dot-product attention call"),
    _Kernel("gfsa", build=_gfsa(),
            timed=f"gfsa(K={K}): two fused attention calls (ĀV, Ā²V) and the filter's sum"),
    _Kernel("gfsa-exact", build=_gfsa(exact_power=True),
            timed=f"gfsa(K={K}, exact_power=True): Ā^K V by {K} chained fused calls"),
    _Kernel("gfsa-efficient", build=_gfsa(base="efficient"),
            timed=f"gfsa(K={K}, base='efficient'): powers of Efficient Attention, O(N·d²)"),
    # Its forward holds about five (B, h, N, N) float32 matrices at once: 2 GiB each at N=8192
    # (B=2, h=4), 10 GiB in all; 40 GiB at N=16384. Training keeps more for the backward.
    _Kernel("gfsa-explicit", longest={"train": 4096, "inference": 8192},
            build=kernel_case(partial(explicit_gfsa, K=K), coefficients=True),
            timed="the GFSA authors' formulation: A and A·A materialised, H̃V"),
    _Kernel("efficient", build=kernel_case(efficient_attention),
            timed="efficient_attention(q, k, v): ρq(Q)(ρk(K)ᵀV), O(N·d²)"),
    _Module("softmax-module", build=_module("softmax"), baseline=None,
            timed="SoftmaxAttention: qkv projection, SDPA, output projection"),
    _Module("neutreno", build=_module("neutreno"),
            timed=f"softmax-module plus λ(V⁰ − V), λ={NEUTRENO_LAMBDA}"),
    _Module("agf", build=_module("agf"),
            timed="AGF module (K=5, Jacobi a=b=1): projections, (U⊙G)(VsᵀV), its regulariser "
                  "(training)"),
    *(_Module(f"samsa-{kind}-k{k}", build=_module(f"samsa_{kind}", num_samples=k),
              timed=f"SAMSA module ({kind}, k={k}): scores, top-k, N queries to k keys")
      for kind in ("soft", "hard") for k in (128, 256)),
    _Model("model-softmax", build=_model("softmax"), baseline="model-xtransformers",
           timed="our Transformer (softmax, pre-LN, no qkv bias, no positions) on embeddings"),
    _Model("model-xtransformers", baseline=None, build=model_case(
        lambda shape, N: xtransformers_encoder(shape.width, shape.depth, shape.heads,
                                               shape.mlp_ratio), lambda m, x: [m(x)]),
           timed="x-transformers Encoder of the same shape (attn_flash=True) on embeddings"),
    *(_Model(f"model-{name}", build=_model(preset, **options),
             timed=f"our Transformer with {preset}{' (k=256)' if options else ''} in every block")
      for name, preset, options in (
          ("gfsa", "gfsa", {}), ("neutreno", "neutreno", {}), ("agf", "agf", {}),
          ("samsa", "samsa_hard", {"num_samples": 256}),
          ("samsa-soft", "samsa_soft", {"num_samples": 256}), ("fusion", "fusion", {}))),
    _Module("gfsa-module", build=_module("gfsa"), table=False,
            timed=f"GFSA module (K={K}): projections, two fused attention passes, the filter"),
    *(_Model(name, build=classifier_case(preset, 30522, **options), table=False,
             baseline=None if preset == "softmax" else "bert-softmax",
             timed=f"{preset} classifier: forward, backward, clipping, AdamW")
      for name, (preset, options) in _LARGER.items()),
    *(_Model(f"generate-{method}", build=generation_case(method), table=False,
             baseline=None if method == "softmax" else "generate-softmax",
             timed=f"our CausalLM ({method}): generate() of {GENERATED_TOKENS} tokens")
      for method in ("softmax", "gfsa")),
    *(_Model(f"decode-{method}", build=decoding_case(method), table=False,
             baseline=None if method == "softmax" else "decode-softmax",
             timed=f"our CausalLM ({method}): the cache cut back to the prompt, then {TOKENS} "
             "greedy tokens") for method in ("softmax", "gfsa", "neutreno")),
)}


def method_names() -> tuple[str, ...]:
    """The rows of a default run's table, in order."""
    return tuple(name for name, method in BENCH_METHODS.items() if method.table)


def get_method(name: str) -> BenchMethod:
    """The row ``name``; ValueError listing the valid names otherwise."""
    if name not in BENCH_METHODS:
        raise ValueError(f"unknown benchmark method {name!r}; valid choices: "
                         f"{', '.join(BENCH_METHODS)}")
    return BENCH_METHODS[name]


def build_case(name: str, shape: BenchShape, N: int, mode: str,
               device: torch.device | str = "cpu") -> BenchCase:
    """The case of row ``name`` at length ``N`` in ``mode`` on ``device``."""
    return get_method(name).build(shape, N, mode, torch.device(device))
