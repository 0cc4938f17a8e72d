"""The GPU targets: the shapes people train and decode at, every step eager under bf16 autocast,
judged only in a CUDA run (``--gpu-targets``; with ``--quick`` at tiny sizes on any device).

- Attention modules with their projections at BERT/GPT-2 width (D=768, h=12), 32,768 tokens a
  batch (B = 32768/N), and at an LRA model's width (D=128, h=2, B=32).
- ``gfsa`` against one ``sdpa`` call, B=4, h=16, d=64, training.
- A BERT-base-sized classifier's training step (depth 12, D=768, N=512, B=32, vocabulary 30,522,
  clipping, AdamW): rows ``bert-{method}``.
- A CausalLM (D=768, depth 12) generating 64 tokens after a 1,024-token prompt: rows
  ``generate-{method}``; its first generation at these lengths (after a 16-token one has started
  the process's GPU libraries) against warmed ones.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from ..methods import GFSA_ORDER, apply_method
from ..models import SequenceClassifier, TransformerConfig
from ..training.optimization import build_optimizer
from ..training.precision import autocast
from ..training.run_config import OptimizerConfig
from .decoding import build_decoder_model
from .method_table import BenchMethod, preset_module
from .step_cases import BenchCase, BenchShape
from .targets import Case, Target

__all__ = ["GENERATED_TOKENS", "GPU_METHODS", "GPU_TARGETS", "KERNEL_LENGTHS", "classifier_case",
           "generation_case"]

KERNEL_LENGTHS = (1024, 4096, 16384)
BERT_SHAPE, BERT_N, BERT_VOCAB = BenchShape(batch=32, heads=12, head_dim=64, depth=12), 512, 30522
DECODE_SHAPE, PROMPT, START_PROMPT = BenchShape(batch=1, heads=12, head_dim=64, depth=12), 1024, 16
GENERATED_TOKENS = 64


def classifier_case(preset: str, options: dict[str, Any]) -> Any:
    """Cases of a training step of ``preset``'s classifier (2 classes) on one random batch
    ``(B, N)``: forward, backward, clipping to norm 1, AdamW."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
                  "mlp_ratio": shape.mlp_ratio, "vocab_size": BERT_VOCAB, "max_len": N,
                  "attention_options": options}
        model = SequenceClassifier(TransformerConfig(**apply_method(fields, preset)), 2)
        model = model.to(device).train()
        generator = torch.Generator().manual_seed(0)
        inputs = {"input_ids": torch.randint(0, BERT_VOCAB, (shape.batch, N), generator=generator),
                  "padding_mask": torch.ones(shape.batch, N, dtype=torch.bool),
                  "labels": torch.randint(0, 2, (shape.batch,), generator=generator)}
        inputs = {name: t.to(device) for name, t in inputs.items()}
        optimizer, weights = build_optimizer(model, OptimizerConfig()), list(model.parameters())

        def update() -> None:
            torch.nn.utils.clip_grad_norm_(weights, 1.0)
            optimizer.step()

        return BenchCase(lambda: [model(**inputs).loss], mode="train", inputs=inputs,
                         grad_output=torch.ones((), device=device), leaves=weights,
                         module=model, update=update)

    return build


def generation_case(method: str) -> Any:
    """Cases of ``method``'s CausalLM generating :data:`GENERATED_TOKENS` greedy tokens after a
    prompt of N tokens with the cache, started with a 16-token generation."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        model = build_decoder_model("native", method, shape, N + GENERATED_TOKENS + 1).to(device)
        prompt = torch.randint(3, 4096, (1, N), generator=torch.Generator().manual_seed(0))
        prompt = prompt.to(device)
        with torch.inference_mode(), autocast("bf16", device):
            model.generate(prompt[:, :START_PROMPT], 2)
        return BenchCase(lambda: [model.generate(prompt, GENERATED_TOKENS)], mode="inference",
                         module=model)

    return build


_BERT_SIDES = {"softmax": ("softmax", {}), "gfsa": ("gfsa", {}),
               "samsa-hard-k256": ("samsa_hard", {"num_samples": 256}), "agf": ("agf", {})}
GPU_METHODS = {
    "gfsa-module": BenchMethod(
        name="gfsa-module", level="module", baseline="softmax-module", build=preset_module("gfsa"),
        timed=f"GFSA module (K={GFSA_ORDER}): projections, two fused attention passes, the "
        "filter's combination"),
    **{f"bert-{row}": BenchMethod(
        name=f"bert-{row}", level="model", build=classifier_case(*side),
        baseline=None if row == "softmax" else "bert-softmax",
        timed=f"{side[0]} classifier: forward, backward, clipping, AdamW")
       for row, side in _BERT_SIDES.items()},
    **{f"generate-{method}": BenchMethod(
        name=f"generate-{method}", level="model", build=generation_case(method),
        baseline=None if method == "softmax" else "generate-softmax",
        timed=f"our CausalLM ({method}): generate() of {GENERATED_TOKENS} greedy tokens with "
        "the cache")
       for method in ("softmax", "gfsa")},
}

_D768 = "at D=768, h=12, 32k tokens a batch"
_gpu = partial(Target, precision="bf16", device="cuda")


def _d768(N: int) -> BenchShape:
    return BenchShape(batch=32768 // N, heads=12, head_dim=64)


#: The speeds the efficient methods' papers promise and the GPU costs their users meet.
GPU_TARGETS: tuple[Target, ...] = (
    *(_gpu(f"softmax / SAMSA hard k=256 module time (speed) {_D768} (N={N}, {mode})",
           Case("softmax-module", N, mode), Case("samsa-hard-k256", N, mode), bound, ">=",
           shape=_d768(N))
      for N, mode, bound in ((1024, "inference", 0.8), (4096, "inference", 1.6),
                             (4096, "train", 1.3))),
    _gpu("softmax / SAMSA hard k=128 module time (speed) at D=128, h=2, B=32 (N=1024)",
         Case("softmax-module", 1024, "inference"), Case("samsa-hard-k128", 1024, "inference"),
         1.6, ">=", shape=BenchShape(batch=32, heads=2, head_dim=64)),
    *(_gpu(f"softmax / AGF module time (speed) {_D768} (N={N}, {mode})",
           Case("softmax-module", N, mode), Case("agf", N, mode), bound, ">=", shape=_d768(N))
      for N, bound in ((4096, 1.0), (16384, 3.0)) for mode in ("train", "inference")),
    *(_gpu(f"GFSA / one SDPA call, kernel time, B=4, h=16, d=64 (N={N})", Case("gfsa", N, "train"),
           Case("sdpa", N, "train"), 2.2, "<=", shape=BenchShape(batch=4, heads=16, head_dim=64))
      for N in KERNEL_LENGTHS),
    *(_gpu(f"GFSA / softmax module time {_D768} (N={N})", Case("gfsa-module", N, "inference"),
           Case("softmax-module", N, "inference"), 2.2, "<=", shape=_d768(N))
      for N in KERNEL_LENGTHS),
    *(_gpu(f"{label} / softmax BERT-base-sized training step (N={BERT_N}, B={BERT_SHAPE.batch})",
           Case(f"bert-{row}", BERT_N, "train"), Case("bert-softmax", BERT_N, "train"), bound,
           "<=", shape=BERT_SHAPE)
      for row, label, bound in (("gfsa", "GFSA", 1.35), ("samsa-hard-k256", "SAMSA hard k=256",
                                                         1.3), ("agf", "AGF", 1.3))),
    _gpu(f"first / warmed cached generation, ms per token (softmax CausalLM, prompt N={PROMPT}, "
         f"{GENERATED_TOKENS} tokens)", Case("generate-softmax", PROMPT, "inference"),
         Case("generate-softmax", PROMPT, "inference"), 1.3, "<=", quantity="first",
         shape=DECODE_SHAPE),
    _gpu(f"GFSA / softmax cached generation, ms per token (warmed, prompt N={PROMPT})",
         Case("generate-gfsa", PROMPT, "inference"), Case("generate-softmax", PROMPT, "inference"),
         2.2, "<=", shape=DECODE_SHAPE),
)
