"""The benchmarked methods: what each times, what it is compared with, and how it grows with N.

Kernels are compared with ``sdpa``, attention modules with ``softmax-module`` (same width, with
projections), models with ``model-softmax`` (and ours with x-transformers' ``Encoder``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor, nn

from ..attention import build_attention
from ..functional import attend, efficient_attention, gfsa
from ..models import Transformer, TransformerConfig
from .cases import BenchCase, kernel_case, model_case, module_case
from .config import BenchShape
from .explicit import explicit_gfsa
from .peer import xtransformers_encoder

__all__ = [
    "BENCH_METHODS",
    "GFSA_ORDER",
    "NEUTRENO_LAMBDA",
    "BenchMethod",
    "build_case",
    "get_method",
    "method_names",
]

#: GFSA's filter order K in every GFSA benchmark.
GFSA_ORDER = 3
#: NeuTRENO's λ (the paper's value for vision).
NEUTRENO_LAMBDA = 0.6

Builder = Callable[[BenchShape, int, str, torch.device], BenchCase]


@dataclass(frozen=True)
class BenchMethod:
    """One benchmarked method.

    Attributes:
        name: the name on the command line and in ``bench.json``.
        level: ``kernel``, ``module`` or ``model``.
        timed: what one step runs, for the table.
        baseline: the method it is compared against, or None.
        time_exponent: e in ``time ∝ N^e`` at large N; projects the next length's time so that
            configurations over the time budget are skipped before they run.
        memory_exponent: the same for extra memory.
        build: ``build(shape, N, mode, device)`` -> a :class:`BenchCase`.
        matrices: how many ``(B, h, N, N)`` float32 matrices any step must hold at once (0 for
            methods that form none): a floor for the memory check when nothing smaller was
            measured.
    """

    name: str
    level: str
    timed: str
    baseline: str | None
    time_exponent: float
    memory_exponent: float
    build: Builder
    matrices: int = 0

    def memory_floor_mb(self, shape: BenchShape, N: int) -> float:
        """The least extra memory (MiB) a step needs: its explicit ``N×N`` matrices."""
        return self.matrices * shape.batch * shape.heads * N * N * 4 / 2**20


def _gfsa_kernel(**options) -> Callable[..., Tensor]:
    def kernel(q, k, v, w0, w1, wK):
        return gfsa(q, k, v, w0, w1, wK, K=GFSA_ORDER, **options)

    return kernel


def _kernel(kernel: Callable[..., Tensor], coefficients: bool = False) -> Builder:
    return partial(kernel_case, kernel, coefficients=coefficients)


def _module(name: str, **options) -> Builder:
    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        module = build_attention(name, shape.width, shape.heads, **options)
        return module_case(module, shape, N, mode, device)

    return build


def _ours_forward(model: nn.Module, x: Tensor) -> Sequence[Tensor]:
    out = model(inputs_embeds=x)
    losses = [] if out.aux_loss is None else [out.aux_loss]
    return [out.last_hidden_state, *losses]


def _peer_forward(model: nn.Module, x: Tensor) -> Sequence[Tensor]:
    return [model(x)]


def _ours(attention: str = "softmax", neutreno_lambda: float = 0.0, **options) -> Builder:
    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        config = TransformerConfig(
            dim=shape.width, depth=shape.depth, num_heads=shape.heads,
            mlp_ratio=shape.mlp_ratio, qkv_bias=False, norm="pre", position="none", max_len=N,
            attention=attention, attention_options=options, neutreno_lambda=neutreno_lambda,
        )
        return model_case(Transformer(config), _ours_forward, shape, N, mode, device)

    return build


def _peer(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
    model = xtransformers_encoder(shape.width, shape.depth, shape.heads, shape.mlp_ratio)
    return model_case(model, _peer_forward, shape, N, mode, device)


def _samsa(mode: str, k: int) -> BenchMethod:
    return BenchMethod(
        f"samsa-{mode}-k{k}", "module",
        f"SAMSA module ({mode}, k={k}): projections, importance-score MLP, top-k sampling, "
        "attention of N queries to k keys",
        "softmax-module", 1, 1, _module("samsa", num_samples=k, mode=mode),
    )


_SAMSA_MODEL = {"num_samples": 256, "mode": "hard"}

BENCH_METHODS: dict[str, BenchMethod] = {
    m.name: m
    for m in (
        BenchMethod(
            "sdpa", "kernel", "attend(q, k, v): one fused scaled-dot-product attention call",
            None, 2, 1, _kernel(attend),
        ),
        BenchMethod(
            "gfsa", "kernel",
            f"gfsa(K={GFSA_ORDER}): two fused attention calls (ĀV, Ā²V) and the filter's "
            "combination; w0, w1, wK learned",
            "sdpa", 2, 1, _kernel(_gfsa_kernel(), coefficients=True),
        ),
        BenchMethod(
            "gfsa-exact", "kernel",
            f"gfsa(K={GFSA_ORDER}, exact_power=True): Ā^K V by {GFSA_ORDER} chained fused calls",
            "sdpa", 2, 1, _kernel(_gfsa_kernel(exact_power=True), coefficients=True),
        ),
        BenchMethod(
            "gfsa-efficient", "kernel",
            f"gfsa(K={GFSA_ORDER}, base='efficient'): powers of Efficient Attention, O(N·d²)",
            "sdpa", 1, 1, _kernel(_gfsa_kernel(base="efficient"), coefficients=True),
        ),
        BenchMethod(
            "gfsa-explicit", "kernel",
            "the GFSA authors' formulation: A = softmax(QKᵀ/√d) and A·A materialised, "
            "H̃ = w0·I + w1·A + wK·(A + (K−1)(A·A − A)), H̃V",
            "sdpa", 3, 2, _kernel(partial(explicit_gfsa, K=GFSA_ORDER), coefficients=True),
            matrices=2,
        ),
        BenchMethod(
            "efficient", "kernel", "efficient_attention(q, k, v): ρq(Q)(ρk(K)ᵀV), O(N·d²)",
            "sdpa", 1, 1, _kernel(efficient_attention),
        ),
        BenchMethod(
            "softmax-module", "module",
            "SoftmaxAttention: qkv projection, SDPA, output projection",
            None, 2, 1, _module("softmax"),
        ),
        BenchMethod(
            "neutreno", "module",
            f"SoftmaxAttention with neutreno_lambda={NEUTRENO_LAMBDA}: softmax-module plus "
            "λ(V⁰ − V), same context and inputs",
            "softmax-module", 2, 1, _module("softmax", neutreno_lambda=NEUTRENO_LAMBDA),
        ),
        BenchMethod(
            "agf", "module",
            "AGF module (K=5, Jacobi a=b=1): projections incl. W_Σ, (U⊙G)(VsᵀV), and the "
            "orthogonality regulariser joins the loss",
            "softmax-module", 1, 1, _module("agf"),
        ),
        _samsa("soft", 128),
        _samsa("soft", 256),
        _samsa("hard", 128),
        _samsa("hard", 256),
        BenchMethod(
            "model-softmax", "model",
            "our Transformer (softmax, pre-LN, no qkv bias, no positions) on embeddings",
            "model-xtransformers", 2, 1, _ours(),
        ),
        BenchMethod(
            "model-xtransformers", "model",
            "x-transformers Encoder of the same shape (attn_flash=True) on embeddings",
            None, 2, 1, _peer,
        ),
        BenchMethod(
            "model-gfsa", "model", f"our Transformer with GFSA (K={GFSA_ORDER}) in every block",
            "model-softmax", 2, 1, _ours("gfsa", K=GFSA_ORDER),
        ),
        BenchMethod(
            "model-neutreno", "model",
            f"our Transformer with NeuTRENO (λ={NEUTRENO_LAMBDA}) in every block",
            "model-softmax", 2, 1, _ours(neutreno_lambda=NEUTRENO_LAMBDA),
        ),
        BenchMethod(
            "model-agf", "model", "our Transformer with AGF in every block (+ its regulariser)",
            "model-softmax", 1, 1, _ours("agf"),
        ),
        BenchMethod(
            "model-samsa", "model", "our Transformer with SAMSA (hard, k=256) in every block",
            "model-softmax", 1, 1, _ours("samsa", **_SAMSA_MODEL),
        ),
    )
}


def method_names() -> tuple[str, ...]:
    """Every benchmark method, in table order."""
    return tuple(BENCH_METHODS)


def get_method(name: str) -> BenchMethod:
    """The method ``name``; ValueError listing the valid names otherwise."""
    try:
        return BENCH_METHODS[name]
    except KeyError:
        raise ValueError(
            f"unknown benchmark method {name!r}; valid choices: {', '.join(method_names())}"
        ) from None


def build_case(
    name: str, shape: BenchShape, N: int, mode: str, device: torch.device | str = "cpu"
) -> BenchCase:
    """Build the case of ``(method, N, mode)`` on ``device``."""
    return get_method(name).build(shape, N, mode, torch.device(device))
