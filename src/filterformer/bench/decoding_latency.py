"""Per-token latency of cached greedy decoding: GFSA and NeuTRENO against softmax, paired.

Two model families decode: our :class:`~filterformer.models.CausalLM`, built from the presets of
:mod:`filterformer.methods`, and a Hugging Face Llama built from a config (no download), left as
it is for softmax and patched with :func:`~filterformer.patching.patch` for the others. For each
family and context length C, every method's model is built in this one process from the same
seed and prefilled with the same C-token prompt; a timed step then decodes ``tokens`` greedy
tokens one at a time with the cache (each feeding the last chosen token), and the cache is cut
back to the prompt before every step, untimed, so every step decodes the same positions
C+1 … C+``tokens``. The methods' steps alternate in rounds
(:func:`~filterformer.timing.paired_step_times`), so a method's ratio to softmax is the median
over rounds of the ratio of their mean steps.

The Llama is grouped-query (``kv_heads`` key/value heads) with SwiGLU of width ``8/3·D``, as
Llama's; our model has learned positions and an MLP of ``4·D``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..methods import apply_method
from ..models import CausalLM, TransformerConfig
from ..patching import patch
from ..timing import paired_step_times, time_step

__all__ = [
    "BASELINE", "CONTEXTS", "DECODING_METHODS", "FAMILIES", "QUICK_CONTEXTS", "DecodingRecord",
    "DecodingSettings", "PrefilledDecoder", "build_decoder_model", "decode_greedy",
    "measure_decoding", "prefill", "run_decoding_latency",
]

#: ``native``: our CausalLM; ``hf-llama``: a Hugging Face Llama built from a config.
FAMILIES = ("native", "hf-llama")
#: The methods decoded; the first is the baseline every ratio divides by.
DECODING_METHODS = ("softmax", "gfsa", "neutreno")
BASELINE = "softmax"
CONTEXTS = (256, 1024, 4096)
QUICK_CONTEXTS = (32, 64)


@dataclass(frozen=True)
class DecodingSettings:
    """What decodes, at which sizes, timed how.

    Attributes:
        contexts: prompt lengths C.
        families, methods: of :data:`FAMILIES` and :data:`DECODING_METHODS` (softmax first).
        batch, heads, head_dim, depth, vocab_size: the models' sizes (width ``heads·head_dim``).
        kv_heads: the Llama's key/value heads (grouped-query attention).
        tokens: greedy tokens one timed step decodes.
        rounds, warmup_steps: timed rounds and untimed warm-up rounds
            (:func:`~filterformer.timing.paired_step_times`); two rounds or more.
        seed: seeds the weights (every method alike) and the prompt.
        device: ``cpu`` or ``cuda``.
    """

    contexts: tuple[int, ...] = CONTEXTS
    families: tuple[str, ...] = FAMILIES
    methods: tuple[str, ...] = DECODING_METHODS
    batch: int = 1
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    depth: int = 4
    vocab_size: int = 4096
    tokens: int = 16
    rounds: int = 10
    warmup_steps: int = 2
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.families) - set(FAMILIES))
        if unknown:
            raise ValueError(f"unknown families {unknown}; valid: {', '.join(FAMILIES)}")
        if not self.methods or self.methods[0] != BASELINE:
            raise ValueError(f"methods must start with the baseline {BASELINE!r}; "
                             f"got {self.methods}")
        unknown = sorted(set(self.methods) - set(DECODING_METHODS))
        if unknown:
            raise ValueError(f"unknown methods {unknown}; valid: {', '.join(DECODING_METHODS)}")
        if self.rounds < 2 or self.tokens < 1 or self.heads % self.kv_heads:
            raise ValueError("need rounds >= 2, tokens >= 1 and heads divisible by kv_heads; "
                             f"got {self.rounds}, {self.tokens}, {self.heads} and "
                             f"{self.kv_heads}")

    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    @classmethod
    def quick(cls, **changes: Any) -> DecodingSettings:
        """Tiny sizes for tests and ``bench --quick``: seconds in all."""
        small = dict(contexts=QUICK_CONTEXTS, heads=2, kv_heads=1, head_dim=8, depth=1,
                     vocab_size=64, tokens=4, rounds=3, warmup_steps=1)
        return cls(**{**small, **changes})


@dataclass
class DecodingRecord:
    """One method of one family at one context.

    Attributes:
        family, method, context: what decoded, after a prompt of ``context`` tokens.
        ms_per_token: the median over rounds of the round's mean step, over ``tokens``
            (None when ``skipped``).
        round_ms_per_token: that per round, in round order.
        baseline: the method the ratio divides by (None for the baseline itself).
        ratio: the median over rounds of this method's mean step over the baseline's.
        ratio_spread: the quartiles of the rounds' ratios.
        tokens: greedy tokens per timed step; steps_per_round: steps this method ran a round.
        batch, width, depth, heads, device, threads: where and at which sizes.
        skipped: why it was not measured (the family's library is missing), else None.
    """

    family: str
    method: str
    context: int
    ms_per_token: float | None
    round_ms_per_token: list[float]
    baseline: str | None
    ratio: float | None
    ratio_spread: tuple[float, float] | None
    tokens: int
    steps_per_round: int
    batch: int
    width: int
    depth: int
    heads: int
    device: str
    threads: int
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class PrefilledDecoder:
    """A model whose cache holds a prompt of ``context`` tokens.

    Attributes:
        next_logits: ``ids (B, n)`` -> the logits after the last of them ``(B, vocab)``,
            the ids appended to the cache.
        crop: cuts the cache back to the prompt.
        first: ``(B, 1)``: the greedy token after the prompt.
        context: the prompt's length.
    """

    next_logits: Callable[[Tensor], Tensor]
    crop: Callable[[], None]
    first: Tensor
    context: int


def build_decoder_model(family: str, method: str, settings: DecodingSettings,
                        max_len: int) -> nn.Module:
    """``method``'s causal LM of ``family``, in ``eval()``, for sequences up to ``max_len``;
    initialised from torch's global generator.

    Raises:
        ImportError: for ``hf-llama`` when transformers is missing.
    """
    if family == "native":
        fields = {"dim": settings.width, "depth": settings.depth, "num_heads": settings.heads,
                  "vocab_size": settings.vocab_size, "max_len": max_len, "causal": True}
        return CausalLM(TransformerConfig(**apply_method(fields, method))).eval()
    import transformers  # optional (filterformer[hf]); imported only where a Llama is built

    config = transformers.LlamaConfig(
        vocab_size=settings.vocab_size, hidden_size=settings.width,
        intermediate_size=round(8 * settings.width / 3), num_hidden_layers=settings.depth,
        num_attention_heads=settings.heads, num_key_value_heads=settings.kv_heads,
        max_position_embeddings=max_len, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    return model if method == BASELINE else patch(model, method)


def prefill(family: str, model: nn.Module, prompt: Tensor) -> PrefilledDecoder:
    """Run ``prompt`` ``(B, C)`` through ``model`` with a fresh cache (call under
    ``torch.inference_mode``)."""
    context = prompt.shape[1]
    if family == "native":
        cache = model.new_cache()
        logits = model(prompt, cache=cache).logits[:, -1]

        def native_crop() -> None:
            for layer in cache.layers:
                layer.map_tensors(lambda t: t[..., :context, :])

        return PrefilledDecoder(lambda ids: model(ids, cache=cache).logits[:, -1], native_crop,
                                logits.argmax(-1, keepdim=True), context)
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

    return PrefilledDecoder(hf_logits, hf_crop, out.logits[:, -1].argmax(-1, keepdim=True),
                            context)


def decode_greedy(decoder: PrefilledDecoder, tokens: int) -> Tensor:
    """Feed ``decoder.first``, then each greedy choice, ``tokens`` times, one token per forward
    -> the ``tokens`` choices ``(B, tokens)`` (the cache grows by ``tokens``)."""
    ids, chosen = decoder.first, []
    for _ in range(tokens):
        ids = decoder.next_logits(ids).argmax(-1, keepdim=True)
        chosen.append(ids)
    return torch.cat(chosen, dim=1)


def _decode_step(decoder: PrefilledDecoder, tokens: int) -> None:
    with torch.inference_mode():
        decode_greedy(decoder, tokens)


def measure_decoding(family: str, context: int, settings: DecodingSettings) -> list[DecodingRecord]:
    """Every method of ``family`` decoding after a ``context``-token prompt, paired (one record
    per method, in ``settings.methods`` order)."""
    device = torch.device(settings.device)
    generator = torch.Generator().manual_seed(settings.seed)
    prompt = torch.randint(3, settings.vocab_size, (settings.batch, context),
                           generator=generator).to(device)
    decoders = []
    for method in settings.methods:
        torch.manual_seed(settings.seed)
        model = build_decoder_model(family, method, settings, context + settings.tokens + 1)
        with torch.inference_mode():
            decoders.append(prefill(family, model.to(device), prompt))
    steps = [lambda d=d: _decode_step(d, settings.tokens) for d in decoders]
    times = paired_step_times(steps, rounds=settings.rounds, warmup_steps=settings.warmup_steps,
                              timer=time_step, prepare=lambda side, _: decoders[side].crop())
    per_token = [[s * 1e3 / settings.tokens for s in side] for side in times.round_step_s]
    return [
        DecodingRecord(
            family=family, method=method, context=context,
            ms_per_token=times.median_s[i] * 1e3 / settings.tokens,
            round_ms_per_token=per_token[i], baseline=BASELINE if i else None,
            ratio=times.ratio(i, 0)[0] if i else None,
            ratio_spread=times.ratio(i, 0)[1:] if i else None, tokens=settings.tokens,
            steps_per_round=times.steps_per_round[i], **_sizes(settings),
        )
        for i, method in enumerate(settings.methods)
    ]


def _sizes(settings: DecodingSettings) -> dict[str, Any]:
    return {"batch": settings.batch, "width": settings.width, "depth": settings.depth,
            "heads": settings.heads, "device": settings.device,
            "threads": torch.get_num_threads()}


def _skipped(family: str, context: int, settings: DecodingSettings,
             reason: str) -> list[DecodingRecord]:
    return [DecodingRecord(family=family, method=method, context=context, ms_per_token=None,
                           round_ms_per_token=[], baseline=BASELINE if i else None, ratio=None,
                           ratio_spread=None, tokens=settings.tokens, steps_per_round=0,
                           skipped=reason, **_sizes(settings))
            for i, method in enumerate(settings.methods)]


def run_decoding_latency(
    settings: DecodingSettings, *, log: Callable[[str], None] | None = None
) -> list[DecodingRecord]:
    """:func:`measure_decoding` for every family and context of ``settings``; a family whose
    library is missing gives skipped records."""
    records: list[DecodingRecord] = []
    for family in settings.families:
        for context in settings.contexts:
            try:
                measured = measure_decoding(family, context, settings)
            except ImportError as err:
                measured = _skipped(family, context, settings, f"{family}: {err}")
            records += measured
            if log is not None:
                log("decoding " + ", ".join(
                    f"{r.family} {r.method} C={r.context}: "
                    + (f"{r.ms_per_token:.3f} ms/token" if r.ms_per_token is not None
                       else "skipped")
                    + (f" (×{r.ratio:.3f})" if r.ratio is not None else "")
                    for r in measured))
    return records
