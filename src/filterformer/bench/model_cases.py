"""Cases of whole language models: a classifier's training step, and our CausalLM's
``generate()`` and cached greedy decoding."""

from __future__ import annotations

import torch
from torch import Tensor

from ..attention import DecodingCache
from ..methods import apply_method
from ..models import CausalLM, SequenceClassifier, TransformerConfig
from ..training.precision import autocast
from ..training.run_config import OptimizerConfig
from ..training.training_steps import TrainingStep
from .step_cases import COMPILED, BenchCase, BenchShape, CaseBuilder

__all__ = ["GENERATED_TOKENS", "TOKENS", "VOCAB_SIZE", "classifier_case", "decode_greedy",
           "decoder_model", "decoding_case", "generation_case"]

VOCAB_SIZE, TOKENS, GENERATED_TOKENS, START_PROMPT = 4096, 8, 64, 16


def _prompt(shape: BenchShape, N: int, high: int, device: torch.device) -> Tensor:
    return torch.randint(3, high, (shape.batch, N),
                         generator=torch.Generator().manual_seed(0)).to(device)


def classifier_case(preset: str, vocab_size: int, **options: object) -> CaseBuilder:
    """Training steps of ``preset``'s classifier on a random batch ``(B, N)``, as the trainer
    takes them (:class:`~filterformer.training.training_steps.TrainingStep`: forward, backward,
    clipping to norm 1, AdamW with the default settings); compiled in mode ``compiled``."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
                  "mlp_ratio": shape.mlp_ratio, "vocab_size": vocab_size, "max_len": N,
                  "attention_options": options}
        model = SequenceClassifier(TransformerConfig(**apply_method(fields, preset)), 2)
        ids = _prompt(shape, N, vocab_size, device)
        inputs = {"input_ids": ids, "padding_mask": torch.ones_like(ids, dtype=torch.bool),
                  "labels": ids[:, 0] % 2}
        # fp32 here: the benchmark's precision comes as autocast around the whole step.
        step = TrainingStep(model.to(device), [inputs], optimizer=OptimizerConfig(),
                            grad_clip=1.0, precision="fp32", device=device,
                            compile=mode == COMPILED)
        return BenchCase(lambda: [step.step_model(**step.inputs).loss], mode="train",
                         inputs=inputs, leaves=list(model.parameters()), module=model,
                         train_step=step.step)

    return build


def decoder_model(method: str, shape: BenchShape, max_len: int) -> CausalLM:
    """``method``'s causal LM at ``shape`` in ``eval()``."""
    fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
              "vocab_size": VOCAB_SIZE, "max_len": max_len, "causal": True}
    return CausalLM(TransformerConfig(**apply_method(fields, method))).eval()


def decode_greedy(model: CausalLM, cache: DecodingCache, first: Tensor, tokens: int) -> Tensor:
    """Feed ``first`` ``(B, 1)`` through ``cache``, then each greedy choice: ``tokens`` choices
    ``(B, tokens)``."""
    ids, chosen = first, []
    for _ in range(tokens):
        ids = model(ids, cache=cache).logits[:, -1].argmax(-1, keepdim=True)
        chosen.append(ids)
    return torch.cat(chosen, dim=1)


def decoding_case(method: str) -> CaseBuilder:
    """Steps that cut the cache back to a prompt of N tokens, then decode :data:`TOKENS`."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        model = decoder_model(method, shape, N + TOKENS + 1).to(device)
        with torch.inference_mode():
            cache = model.new_cache()
            logits = model(_prompt(shape, N, VOCAB_SIZE, device), cache=cache).logits
            first = logits[:, -1].argmax(-1, keepdim=True)

        @torch.inference_mode()
        def forward() -> list[Tensor]:
            cache.crop(N)
            return [decode_greedy(model, cache, first, TOKENS)]

        return BenchCase(forward, mode="inference", module=model)

    return build


def generation_case(method: str) -> CaseBuilder:
    """``generate()`` of 64 tokens after N, once a 16-token one has started the GPU libraries."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        model = decoder_model(method, shape, N + GENERATED_TOKENS + 1).to(device)
        prompt = _prompt(shape, N, VOCAB_SIZE, device)
        with torch.inference_mode(), autocast("bf16", device):
            model.generate(prompt[:, :START_PROMPT], 2)
        return BenchCase(lambda: [model.generate(prompt, GENERATED_TOKENS)], mode="inference",
                         module=model)

    return build
