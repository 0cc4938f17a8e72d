"""Cases of whole language models: a classifier's training step, ``generate()``, and cached
greedy decoding by our CausalLM and a config-built Hugging Face Llama (``h/2`` key/value heads,
SwiGLU) patched with :func:`~filterformer.patching.patch`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..methods import apply_method
from ..models import CausalLM, SequenceClassifier, TransformerConfig
from ..patching import patch
from ..training.precision import autocast
from ..training.run_config import OptimizerConfig
from ..training.training_steps import TrainingStep
from .step_cases import COMPILED, BenchCase, BenchShape, CaseBuilder

__all__ = ["GENERATED_TOKENS", "TOKENS", "VOCAB_SIZE", "PrefilledDecoder", "build_decoder_model",
           "classifier_case", "decode_greedy", "decoding_case", "generation_case", "prefill"]

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


def build_decoder_model(family: str, method: str, shape: BenchShape, max_len: int) -> nn.Module:
    """``method``'s causal LM of ``family`` (``native``, ``hf-llama``) in ``eval()``."""
    if family == "native":
        fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
                  "vocab_size": VOCAB_SIZE, "max_len": max_len, "causal": True}
        return CausalLM(TransformerConfig(**apply_method(fields, method))).eval()
    import transformers  # optional (filterformer[hf])

    config = transformers.LlamaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=shape.width, num_hidden_layers=shape.depth,
        intermediate_size=round(8 * shape.width / 3), num_attention_heads=shape.heads,
        num_key_value_heads=max(1, shape.heads // 2), max_position_embeddings=max_len,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = transformers.LlamaForCausalLM(config).eval()
    return model if method == "softmax" else patch(model, method)


@dataclass
class PrefilledDecoder:
    """A model whose cache holds a prompt: ``next_logits(ids (B, n))`` appends ids to the cache
    and returns the logits after the last ``(B, vocab)``; ``crop()`` cuts the cache back to the
    prompt; ``first`` ``(B, 1)`` is the greedy token after the prompt."""

    next_logits: Callable[[Tensor], Tensor]
    crop: Callable[[], None]
    first: Tensor


def prefill(family: str, model: nn.Module, prompt: Tensor) -> PrefilledDecoder:
    """Run ``prompt`` ``(B, C)`` through ``model`` with a fresh cache (under inference mode)."""
    context = prompt.shape[1]
    if family == "native":
        cache = model.new_cache()
        logits = model(prompt, cache=cache).logits[:, -1]
        return PrefilledDecoder(lambda ids: model(ids, cache=cache).logits[:, -1],
                                lambda: cache.crop(context), logits.argmax(-1, keepdim=True))
    out = model(input_ids=prompt, use_cache=True)
    # transformers 5.24 renamed past_key_values to cache; an output declares the name it uses.
    name = "cache" if "cache" in getattr(type(out), "__dataclass_fields__", {}) else (
        "past_key_values")
    hf_cache = out[name]

    def hf_crop() -> None:
        extra = hf_cache.get_seq_length() - context
        if extra:
            hf_cache.crop(-extra)  # transformers counts the positions to remove

    return PrefilledDecoder(
        lambda ids: model(input_ids=ids, use_cache=True, **{name: hf_cache}).logits[:, -1],
        hf_crop, out.logits[:, -1].argmax(-1, keepdim=True))


def decode_greedy(decoder: PrefilledDecoder, tokens: int) -> Tensor:
    """Feed ``decoder.first``, then each greedy choice: ``tokens`` choices ``(B, tokens)``."""
    ids, chosen = decoder.first, []
    for _ in range(tokens):
        ids = decoder.next_logits(ids).argmax(-1, keepdim=True)
        chosen.append(ids)
    return torch.cat(chosen, dim=1)


def decoding_case(family: str, method: str) -> CaseBuilder:
    """Steps that cut the cache back to a prompt of N tokens, then decode :data:`TOKENS`."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        model = build_decoder_model(family, method, shape, N + TOKENS + 1).to(device)
        with torch.inference_mode():
            decoder = prefill(family, model, _prompt(shape, N, VOCAB_SIZE, device))

        @torch.inference_mode()
        def forward() -> list[Tensor]:
            decoder.crop()
            return [decode_greedy(decoder, TOKENS)]

        return BenchCase(forward, mode="inference", module=model)

    return build


def generation_case(method: str) -> CaseBuilder:
    """``generate()`` of 64 tokens after N, once a 16-token one has started the GPU libraries."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        model = build_decoder_model("native", method, shape, N + GENERATED_TOKENS + 1).to(device)
        prompt = _prompt(shape, N, VOCAB_SIZE, device)
        with torch.inference_mode(), autocast("bf16", device):
            model.generate(prompt[:, :START_PROMPT], 2)
        return BenchCase(lambda: [model.generate(prompt, GENERATED_TOKENS)], mode="inference",
                         module=model)

    return build
