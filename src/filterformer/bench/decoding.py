"""Cached greedy decoding as benchmark cases: rows ``decode-{family}-{method}``, N the prompt.

Two families decode: our :class:`~filterformer.models.CausalLM` and a Hugging Face Llama built
from a config (``h/2`` key/value heads, SwiGLU), patched with :func:`~filterformer.patching.patch`.
A case's model (seeded) is prefilled with a seeded prompt of N tokens; its step cuts the cache
back to the prompt and decodes :data:`TOKENS` greedy tokens with it, in inference mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..methods import apply_method
from ..models import CausalLM, TransformerConfig
from ..patching import patch
from .method_table import BenchMethod
from .step_cases import BenchCase, BenchShape, CaseBuilder

__all__ = ["CONTEXTS", "DECODE_METHODS", "DECODING_METHODS", "DECODING_SHAPE", "FAMILIES",
           "PrefilledDecoder", "build_decoder_model", "decode_greedy", "prefill"]

FAMILIES = ("native", "hf-llama")
#: The methods decoded; the first, softmax, is the baseline.
DECODING_METHODS = ("softmax", "gfsa", "neutreno")
CONTEXTS = (256, 1024, 4096)
VOCAB_SIZE, TOKENS = 4096, 8
#: Batch 1 at GPT-2 small's width (h=12, d=64, D=768), 4 layers: at width 256 a token is ~2 ms
#: of mostly per-operation overhead, which no method's arithmetic shows through.
DECODING_SHAPE = BenchShape(batch=1, heads=12, head_dim=64, depth=4)


@dataclass
class PrefilledDecoder:
    """A model whose cache holds a prompt: ``next_logits(ids (B, n))`` appends ids to the cache
    and returns the logits after the last ``(B, vocab)``; ``crop()`` cuts the cache back to the
    prompt; ``first`` ``(B, 1)`` is the greedy token after the prompt."""

    next_logits: Callable[[Tensor], Tensor]
    crop: Callable[[], None]
    first: Tensor


def build_decoder_model(family: str, method: str, shape: BenchShape, max_len: int) -> nn.Module:
    """``method``'s causal LM of ``family`` and ``shape``, in ``eval()``, for sequences up to
    ``max_len`` (ImportError for ``hf-llama`` when transformers is missing)."""
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


def prefill(family: str, model: nn.Module, prompt: Tensor) -> PrefilledDecoder:
    """Run ``prompt`` ``(B, C)`` through ``model`` with a fresh cache (call under
    ``torch.inference_mode``)."""
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
    """Feed ``decoder.first``, then each greedy choice, ``tokens`` times -> the choices
    ``(B, tokens)`` (the cache grows by ``tokens``)."""
    ids, chosen = decoder.first, []
    for _ in range(tokens):
        ids = decoder.next_logits(ids).argmax(-1, keepdim=True)
        chosen.append(ids)
    return torch.cat(chosen, dim=1)


def decoding_case(family: str, method: str) -> CaseBuilder:
    """Cases of ``method``'s ``family`` model decoding after a prompt of N tokens (any mode
    decodes in inference mode)."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        model = build_decoder_model(family, method, shape, N + TOKENS + 1).to(device)
        prompt = torch.randint(3, VOCAB_SIZE, (shape.batch, N),
                               generator=torch.Generator().manual_seed(0)).to(device)
        with torch.inference_mode():
            decoder = prefill(family, model, prompt)
        @torch.inference_mode()
        def forward() -> list[Tensor]:
            decoder.crop()
            return [decode_greedy(decoder, TOKENS)]

        return BenchCase(forward, mode="inference", module=model)

    return build


DECODE_METHODS = {f"decode-{family}-{method}": BenchMethod(
    name=f"decode-{family}-{method}", level="model", build=decoding_case(family, method),
    baseline=None if method == "softmax" else f"decode-{family}-softmax",
    timed=f"{'our CausalLM' if family == 'native' else 'a Hugging Face Llama'} ({method}): "
    f"the cache cut back to the prompt, then {TOKENS} greedy tokens with it")
    for family in FAMILIES for method in DECODING_METHODS}
