"""Per-token latency of cached greedy decoding: GFSA and NeuTRENO against softmax, paired.

Two families decode: our :class:`~filterformer.models.CausalLM` and a Hugging Face Llama built
from a config (``h/2`` key/value heads, SwiGLU), patched with :func:`~filterformer.patching.patch`.
For each family and prompt length N, the methods' models (one seed) are prefilled with the same
prompt; a step decodes ``tokens`` greedy tokens with the cache, cut back to the prompt before
each step. The steps alternate in rounds (:func:`~filterformer.timing.paired_step_times`): rows
``decode-{family}-{method}``, mode ``decode``, in ms per token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from ..methods import apply_method
from ..models import CausalLM, TransformerConfig
from ..patching import patch
from ..timing import paired_step_times
from .records import BenchRecord, round_records
from .step_cases import BenchShape

__all__ = ["CONTEXTS", "DECODING_METHODS", "DECODING_SHAPE", "FAMILIES", "PrefilledDecoder",
           "build_decoder_model", "decode_greedy", "measure_decoding", "prefill", "run"]

FAMILIES = ("native", "hf-llama")
#: The methods decoded; the first, softmax, is the baseline every ratio divides by.
DECODING_METHODS = ("softmax", "gfsa", "neutreno")
CONTEXTS = (256, 1024, 4096)
VOCAB_SIZE = 4096
#: A full run's models: batch 1 at GPT-2 small's width (h=12, d=64, D=768), 4 layers. The
#: smallest width of the language models people decode with; at width 256 a token is ~2 ms of
#: mostly per-operation overhead, which no method's arithmetic shows through.
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
    ``max_len``, initialised from torch's global generator (ImportError for ``hf-llama`` when
    transformers is missing)."""
    if family == "native":
        fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
                  "vocab_size": VOCAB_SIZE, "max_len": max_len, "causal": True}
        return CausalLM(TransformerConfig(**apply_method(fields, method))).eval()
    import transformers  # optional (filterformer[hf]); imported only where a Llama is built

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
                                lambda: cache.crop(context),
                                logits.argmax(-1, keepdim=True))
    out = model(input_ids=prompt, use_cache=True)
    # transformers 5.24 renamed past_key_values to cache; an output declares the name it uses.
    name = "cache" if "cache" in getattr(type(out), "__dataclass_fields__", {}) else (
        "past_key_values")
    hf_cache = out[name]

    def hf_crop() -> None:
        extra = hf_cache.get_seq_length() - context
        if extra:
            hf_cache.crop(-extra)  # transformers counts the positions to remove

    def hf_logits(ids: Tensor) -> Tensor:
        return model(input_ids=ids, use_cache=True, **{name: hf_cache}).logits[:, -1]

    return PrefilledDecoder(hf_logits, hf_crop, out.logits[:, -1].argmax(-1, keepdim=True))


def decode_greedy(decoder: PrefilledDecoder, tokens: int) -> Tensor:
    """Feed ``decoder.first``, then each greedy choice, ``tokens`` times, one token per forward
    -> the ``tokens`` choices ``(B, tokens)`` (the cache grows by ``tokens``)."""
    ids, chosen = decoder.first, []
    for _ in range(tokens):
        ids = decoder.next_logits(ids).argmax(-1, keepdim=True)
        chosen.append(ids)
    return torch.cat(chosen, dim=1)


def measure_decoding(family: str, context: int, shape: BenchShape, *, device: str = "cpu",
                     tokens: int = 16, rounds: int = 10) -> list[BenchRecord]:
    """The methods of ``family`` decoding ``tokens`` a step after the same ``context``-token
    prompt, alternated in ``rounds`` rounds (two or more) after two warm-up rounds: a record
    per method."""
    prompt = torch.randint(3, VOCAB_SIZE, (shape.batch, context),
                           generator=torch.Generator().manual_seed(0)).to(device)
    decoders = []
    for method in DECODING_METHODS:
        torch.manual_seed(0)
        model = build_decoder_model(family, method, shape, context + tokens + 1).to(device)
        with torch.inference_mode():
            decoders.append(prefill(family, model, prompt))
    steps = [torch.inference_mode()(lambda d=d: decode_greedy(d, tokens)) for d in decoders]
    times = paired_step_times(steps, rounds=rounds, warmup_steps=2,
                              prepare=lambda side, _: decoders[side].crop())
    return round_records(times, _rows(family, context, shape, device, tokens), per_step=tokens)


def _rows(family: str, context: int, shape: BenchShape, device: str,
          tokens: int) -> list[dict[str, Any]]:
    return [dict(method=f"decode-{family}-{method}", N=context, mode="decode", device=device,
                 batch=shape.batch, heads=shape.heads, dim=shape.head_dim, width=shape.width,
                 level="model", baseline=f"decode-{family}-softmax" if i else None,
                 notes=f"{'our CausalLM' if family == 'native' else 'a Hugging Face Llama'} "
                 f"({method}): {tokens} greedy tokens a step with the cache; ms per token")
            for i, method in enumerate(DECODING_METHODS)]


def run(quick: bool, device: str) -> list[BenchRecord]:
    """Both families at every prompt length of :data:`CONTEXTS` at :data:`DECODING_SHAPE` (tiny
    sizes, batch 1, with ``quick``); a family whose library is missing gives skipped records."""
    shape = replace(BenchShape.quick(), batch=1) if quick else DECODING_SHAPE
    contexts, tokens, rounds = ((64,), 4, 2) if quick else (CONTEXTS, 8, 120)
    records = []
    for family in FAMILIES:
        for context in contexts:
            try:
                records += measure_decoding(family, context, shape, device=device,
                                            tokens=tokens, rounds=rounds)
            except ImportError as err:
                records += [BenchRecord(**row, skipped=f"{family}: {err}")
                            for row in _rows(family, context, shape, device, tokens)]
    return records
